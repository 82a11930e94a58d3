"""pytest set-up shared by tests/ and the book's chapters (collected by nbval).

The chapters in book/ run as notebook tests (``--nbval-lax``: every cell must run without
error). They are stored without outputs, so nbval has nothing to compare a cell's output
with: a cell whose printed values must stay the same is tagged ``values-tested`` and
compared by tests/test_chapter_values.py (which fails for a tagged cell it does not
compare, and for an ``nbval-check-output`` tag nbval would skip). They run at the ``smoke`` scale, with their models in their own run store, so that the tests
never mix with the models of the book a user builds.
"""

from __future__ import annotations

import importlib.util
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
    # the chapters first: the browser test builds the book from the notebooks they execute
    items.sort(key=lambda item: item.path.suffix != ".ipynb")


# The chapters and the browser test run in one process, the chapters first (with xdist, one
# work unit; without it, the order above): each chapter whose every cell passed is written as
# the executed notebook ``reproduce`` would write (rflens.publish.executed), so the browser
# test's ``reproduce --scale smoke`` keeps it and executes nothing twice.
BOOK_UNIT = ("book/", "tests/test_browser.py")

if importlib.util.find_spec("xdist"):
    def pytest_xdist_make_scheduler(config, log):
        if config.getoption("dist") != "loadfile":
            return None
        from xdist.scheduler import LoadFileScheduling

        class BookTogether(LoadFileScheduling):
            def _split_scope(self, nodeid):
                scope = super()._split_scope(nodeid)
                return "book" if scope.startswith(BOOK_UNIT) else scope

        return BookTogether(config, log)


_EXECUTED: dict = {}  # chapter path -> the outputs of its cells so far (None once one did not pass)


def _chapter_cell(item) -> bool:
    return item.path.suffix == ".ipynb" and hasattr(item, "cell_num")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    """A chapter's first cell starts its kernel: the kernel reproduce starts (progress bars as
    text on stderr), told where to write the chapter's tables (its old ones removed); this
    process's environment is restored once the kernel has started."""
    if not _chapter_cell(item) or item.cell_num != 0:
        yield
        return
    from rflens.publish import reproduce
    from rflens.publish.csv_files import CHAPTER_ENV, TABLES_ENV

    tables = reproduce.notebooks_dir(os.environ["RFLENS_SCALE"]) / "tables"
    for old in tables.glob(f"{item.path.stem}-table*.csv"):
        old.unlink()
    saved = dict(os.environ)
    os.environ.update(reproduce.kernel_env())
    os.environ[TABLES_ENV], os.environ[CHAPTER_ENV] = str(tables), item.path.stem
    _EXECUTED[item.path] = []
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not _chapter_cell(item) or report.when != "call" or _EXECUTED.get(item.path) is None:
        return
    if not report.passed:
        _EXECUTED[item.path] = None
        return
    outputs = _EXECUTED[item.path]
    outputs.append(item.test_outputs or [])
    if len(outputs) == sum(c.cell_type == "code" for c in item.parent.nb.cells):
        from rflens.publish import executed, reproduce

        scale = os.environ["RFLENS_SCALE"]
        key = reproduce.chapter_key(item.path)
        _, params = reproduce.request(scale, key)["chapters"][key]
        folder = reproduce.notebooks_dir(scale)
        del _EXECUTED[item.path]
        try:
            executed.write_from_cells(item.path, outputs, params, scale, folder, folder / "tables")
        except Exception as err:  # the cell passed; writing its chapter did not
            report.outcome, report.longrepr = "failed", f"writing the executed chapter failed: {err!r}"


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
