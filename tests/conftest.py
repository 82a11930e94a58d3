"""Fixtures the test files share: stores of a test's own, so that no test sees another's models."""

from __future__ import annotations

import os
import shutil

import pytest


def pytest_configure(config):
    """Under pytest-xdist, each worker gets its share of the cores (one thread each on two
    cores): torch's default of every core per process would put two threads on each core,
    and the workers would slow each other. Subprocesses (chapters, the CLI) inherit it."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    threads = str(max(1, len(os.sched_getaffinity(0)) // int(workers)))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, threads)
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An empty run store of this test's own (``$RFLENS_RUNS``); the corpora stay shared."""
    path = tmp_path / "runs"
    monkeypatch.setenv("RFLENS_RUNS", str(path))
    return path


@pytest.fixture
def own_data(tmp_path, monkeypatch):
    """A data folder of this test's own (``$RFLENS_DATA``): the corpora it needs are built in it."""
    path = tmp_path / "data"
    monkeypatch.setenv("RFLENS_DATA", str(path))
    return path


@pytest.fixture(scope="session")
def smoke_prose(tmp_path_factory):
    """A data folder holding the smoke preset's prose corpus, built once a test process."""
    from rflens.data.build import prepare
    from rflens.setup import presets, settings

    root = tmp_path_factory.mktemp("smoke-prose")
    prepare(settings.resolve(presets.get("smoke"), "alibi", "prose").data, root=root, progress=False)
    return root


@pytest.fixture
def own_smoke_prose(own_data, smoke_prose):
    """A data folder of this test's own (``$RFLENS_DATA``) that already holds the smoke prose
    corpus, a copy of the one built once (a test that damages it damages its copy)."""
    shutil.copytree(smoke_prose, own_data)
    return own_data


@pytest.fixture
def reference(tmp_path, monkeypatch):
    """An empty folder of shipped long-run results of this test's own (``$RFLENS_REFERENCE``)."""
    path = tmp_path / "reference"
    path.mkdir()
    monkeypatch.setenv("RFLENS_REFERENCE", str(path))
    return path


@pytest.fixture
def smoke_long_run(monkeypatch):
    """The smoke preset's models as a long run (``emergence --scale smoke``): the long-run
    commands at the size whose models train in a second."""
    from rflens.setup import presets

    base = presets._BUILDERS["smoke"]
    monkeypatch.setitem(presets._BUILDERS, "smoke", lambda: presets.LongRun.of(base()))


@pytest.fixture
def bundle_copy(tmp_path, monkeypatch):
    """A function: the shipped bundle ``name`` without its weights, resealed, as this test's own
    ``$RFLENS_REFERENCE`` (with a run store of its own); returns the copy's folder."""
    from rflens import storage
    from rflens.store import bundle

    def copy(name):
        top = tmp_path / "reference" / name
        shutil.copytree(bundle.bundle_dir(name), top, ignore=shutil.ignore_patterns(bundle.WEIGHTS))
        for d in top.iterdir():  # the copy leaves the weights out: its manifests say so
            if d.is_dir() and (d / bundle.MANIFEST).is_file():
                man = storage.read_json(d / bundle.MANIFEST)
                man["sha256"].pop(bundle.WEIGHTS, None)
                storage.write_json(d / bundle.MANIFEST, man, newline=True)
        bundle.seal(name, tmp_path / "reference")
        monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
        monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
        return top

    return copy
