"""Parallel training: worker processes store exactly what a sequential run at the same thread
count stores, and the book's plan trains in two rounds (Table 2 after Table 1)."""

import pytest

from rflens import parallel, runs
from rflens.errors import UserError
from rflens.storage import sha256_file

ITEMS = [{"pos": "alibi", "corpus": "prose", "overrides": {}},
         {"pos": "window", "corpus": "prose", "overrides": {"window": 4}}]


def _store(monkeypatch, root):
    monkeypatch.setenv("RFLENS_RUNS", str(root / "runs"))
    monkeypatch.setenv("RFLENS_DATA", str(root.parent / "data"))  # one data folder for both stores


@pytest.mark.slow
def test_workers_store_bitwise_what_a_sequential_run_stores(tmp_path, monkeypatch):
    stored = {}
    for name, workers in (("sequential", 1), ("parallel", 2)):
        _store(monkeypatch, tmp_path / name)
        done = parallel.run_items("smoke", ITEMS, workers=workers, threads=1, progress=False)
        assert sorted(d["pos"] for d in done) == ["alibi", "window"] and all(d["trained"] for d in done)
        stored[name] = {}
        for it in ITEMS:
            run = runs.get_run("smoke", it["pos"], it["corpus"], it["overrides"], train=False, progress=False)
            assert run.metrics["threads"] == 1
            from rflens import experiments as ex

            stored[name][run.key] = (sha256_file(run.path / "model.safetensors"), ex.measure_ppl(run)["nll"])
    assert stored["sequential"] == stored["parallel"]
    # a second call finds everything stored and trains nothing
    assert not any(d["trained"] for d in parallel.run_items("smoke", ITEMS, workers=2, progress=False))


def test_bad_worker_counts_are_one_line_errors():
    with pytest.raises(UserError, match="at least 1"):
        parallel.run_items("smoke", ITEMS, workers=0, progress=False)
