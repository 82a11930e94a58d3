"""pytest set-up shared by tests/ and the book's chapters (collected by nbval).

The chapters in book/ run as notebook tests (``--nbval-lax``: every cell must run without
error). They are stored without outputs, so nbval has nothing to compare a cell's output
with: a cell whose printed values must stay the same is tagged ``values-tested`` and
compared by tests/test_chapter_values.py (which fails for a tagged cell it does not
compare, and for an ``nbval-check-output`` tag nbval would skip). They run at the ``smoke`` scale, with their models in their own run store, so that the tests
never mix with the models of the book a user builds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def pytest_configure(config):
    # One thread a test process when xdist runs one per core: torch would otherwise run every
    # process (and the kernels and command lines it starts) on every core, each slowing the
    # others down.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
    # The chapters' kernels inherit this process's environment.
    os.environ["RFLENS_SCALE"] = "smoke"
    if "RFLENS_TEST_RUNS" in os.environ:
        os.environ["RFLENS_RUNS"] = os.environ["RFLENS_TEST_RUNS"]
    else:
        os.environ["RFLENS_RUNS"] = str(ROOT / "_build" / "test-runs")
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)


@pytest.fixture
def registry(monkeypatch):
    """The scheme table, the implementations and the loaded files as they were, afterwards
    (for tests that register schemes of their own)."""
    from rflens.model import positional
    from rflens.setup import schemes

    table, impls, loaded = dict(schemes.TABLE), dict(positional.REGISTRY), dict(schemes._LOADED)
    monkeypatch.delenv(schemes.ENV, raising=False)
    monkeypatch.setattr(schemes, "_SEEN_ENV", "")
    yield
    for target, saved in ((schemes.TABLE, table), (positional.REGISTRY, impls), (schemes._LOADED, loaded)):
        target.clear()
        target.update(saved)
