"""Parallel training: worker processes store exactly what a sequential run at the same thread
count stores, and the book's plan trains in two rounds (Table 2 after Table 1)."""

import pytest

from rflens.errors import UserError
from rflens.terminal import Log
from rflens.publish import parallel
from rflens.storage import sha256_file
from rflens.store import runs
from rflens.setup import presets

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
        with Log(tmp_path / f"{name}.log", quiet=True) as log:
            done = parallel.run_items("smoke", ITEMS, workers=workers, threads=1, progress=False, log=log)
        assert sorted(d["pos"] for d in done) == ["alibi", "window"] and all(d["trained"] for d in done)
        # every model's progress reached the log, from the workers too: its training bar to the
        # last step with tokens/s, its measurements, and where it came from
        lines = (tmp_path / f"{name}.log").read_text().splitlines()
        for label in ("alibi on prose: ", "window on prose (window=4): "):
            mine = [ln for ln in lines if label in ln]
            assert any("30/30" in ln and "tok_s=" in ln for ln in mine), (name, mine)
            assert any("last-token NLL" in ln for ln in mine) and any("input gradients" in ln for ln in mine)
            assert any(ln.endswith(")") and "trained (" in ln for ln in mine) and "done in" in mine[-1]
        stored[name] = {}
        for it in ITEMS:
            run = runs.get_run(presets.get("smoke"), it["pos"], it["corpus"], it["overrides"], train=False, progress=False)
            assert run.metrics["threads"] == 1
            from rflens.experiments import tables as ex

            stored[name][run.key] = (sha256_file(run.path / "model.safetensors"), ex.measure_ppl(run)["nll"])
    assert stored["sequential"] == stored["parallel"]
    # a second call finds everything stored and trains nothing, and says so
    with Log(tmp_path / "again.log", quiet=True) as log:
        assert not any(d["trained"] for d in parallel.run_items("smoke", ITEMS, workers=2, progress=False, log=log))
    assert (tmp_path / "again.log").read_text().count("found in the run store") == 2


def test_bad_worker_counts_are_one_line_errors():
    with pytest.raises(UserError, match="at least 1"):
        parallel.run_items("smoke", ITEMS, workers=0, progress=False)


@pytest.mark.slow
def test_submitit_local_executor_round_trip(tmp_path, monkeypatch):
    """The cluster path through submitit's local executor: real job processes, pickled
    function and results, and a stored run the same as one trained here."""
    _store(monkeypatch, tmp_path / "jobs-store")
    cluster = parallel.Cluster("local", tmp_path / "jobs", time_min=10)
    done = parallel.run_items("smoke", ITEMS[:1], workers=1, threads=1, progress=False, cluster=cluster)
    assert [d["pos"] for d in done] == ["alibi"] and done[0]["trained"]
    assert list((tmp_path / "jobs").glob("*/*_result.pkl"))  # submitit's own pickle of the result
    run = runs.get_run(presets.get("smoke"), "alibi", "prose", {}, train=False, progress=False)
    assert run.key == done[0]["key"] and run.metrics["threads"] == 1
    weights = sha256_file(run.path / "model.safetensors")
    _store(monkeypatch, tmp_path / "here-store")
    parallel.run_items("smoke", ITEMS[:1], workers=1, threads=1, progress=False)
    here = runs.get_run(presets.get("smoke"), "alibi", "prose", {}, train=False, progress=False)
    assert here.key == run.key and sha256_file(here.path / "model.safetensors") == weights


@pytest.mark.slow
def test_a_failing_job_is_one_line_naming_its_log(tmp_path, monkeypatch):
    _store(monkeypatch, tmp_path / "store")
    bad = [{"pos": "alibi", "corpus": "prose", "overrides": {"lr": float("nan")}}]
    with pytest.raises(UserError, match=r"job .* \(alibi, prose\) failed: invalid lr=nan: must be a finite "
                                        r"number; its log: .*\.err") as err:
        parallel.run_items("smoke", bad, workers=1, progress=False,
                           cluster=parallel.Cluster("local", tmp_path / "jobs", time_min=10))
    assert "\n" not in str(err.value)


def test_cluster_options_are_checked():
    with pytest.raises(UserError, match="unknown executor"):
        parallel.Cluster("pbs", "jobs")
    with pytest.raises(UserError, match="--time-limit"):
        parallel.Cluster("slurm", "jobs", time_min=0)


@pytest.mark.slow
def test_plan_lists_what_is_stored_and_times_the_rest(tmp_path, monkeypatch, capsys):
    from rflens.cli import main

    _store(monkeypatch, tmp_path / "plan-store")
    plan = parallel.training_estimate("smoke", ["03"], workers=2)
    rows = plan["rows"]
    assert rows and {r["experiment"] for r in rows} == {"Table 1"} and not any(r["stored"] for r in rows)
    assert plan["timed"] and all(r["seconds"] > 0 for r in rows) and plan["wall_s"] >= max(r["seconds"] for r in rows)
    first = rows[0]
    parallel.run_items("smoke", [first], workers=1, measure=False, progress=False)
    again = parallel.training_estimate("smoke", ["03"], workers=2)["rows"]
    assert [r["stored"] for r in again] == [True] + [False] * (len(rows) - 1)
    assert main(["reproduce", "--scale", "smoke", "--chapters", "03", "--plan"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"plan for the smoke book: {len(rows)} models, 1 stored") and "estimate:" in out
    assert not list((tmp_path / "plan-store" / "runs").glob("*/manifest.json"))[1:]  # the plan trained nothing


def test_train_book_trains_only_what_the_chosen_chapters_read(tmp_path, monkeypatch):
    _store(monkeypatch, tmp_path / "chapters-store")
    asked = []
    monkeypatch.setattr(parallel, "run_items", lambda scale, items, **kw: asked.append(items) or [])
    assert parallel.train_book("smoke", workers=2, progress=False, chapters=["01", "02", "10"]) == []
    assert asked == [[]]  # chapters without experiments: nothing to train, no Table 2 round
    asked.clear()
    parallel.train_book("smoke", workers=2, progress=False, chapters=["05"])
    assert len(asked) == 1 and asked[0] and {it["pos"] for it in asked[0]} <= {"sinusoidal", "rotary"}


def test_a_plan_builds_no_data_and_says_which_it_would_build(store, own_data, tmp_path, monkeypatch, capsys):
    from rflens.cli import main

    plan = parallel.training_estimate("smoke", ["03"], workers=1, timed_steps=1)
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("manifest.json"))
    assert plan["rows"] and not any(r["stored"] for r in plan["rows"])
    assert plan.get("to_build") and all(c.startswith("python -m rflens data --corpus") for c in plan["to_build"])
    assert main(["reproduce", "--scale", "smoke", "--chapters", "03", "--plan", "--workers", "1"]) == 0
    assert "data to build first" in capsys.readouterr().out
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("manifest.json"))
