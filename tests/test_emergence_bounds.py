"""The long run's commands are bounded, say their cost before starting, and lock their models."""

from __future__ import annotations

import pytest

from rflens import emergence, reproduction
from rflens.cli import main
from rflens.errors import UserError

from test_emergence import WSD


@pytest.fixture
def no_training(monkeypatch, tmp_path):
    """Record what would be trained or checked instead of doing it."""
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    calls = []
    monkeypatch.setattr(reproduction, "check", lambda names, scale="long", **kw: calls.append(("check", names, kw)) or [])
    monkeypatch.setattr(emergence, "run", lambda spec, scale="long", **kw: calls.append(("run", spec.name, kw)) or "x")
    return calls


@pytest.mark.parametrize("argv", [["--check", "999"], ["--check", "41"], ["--check", "0"],
                                  ["--check", "1", "--minutes", "-5"], ["--check", "1", "--minutes", "nan"],
                                  ["--check", "1", "--minutes", "inf"], ["--minutes", "nan"], ["--minutes", "0"],
                                  ["--only", "nope", "--check", "2"]])
def test_check_and_minutes_out_of_bounds_start_nothing(no_training, capsys, argv):
    assert main(["emergence", "--scale", "long-repeated", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("--check" in err or "--minutes" in err), err
    assert no_training == []


def test_check_says_its_cost_first_and_honours_minutes(no_training, capsys):
    assert main(["emergence", "--scale", "long-repeated", "--only", "nope", "--check", "1", "--minutes", "3"]) == 0
    out = capsys.readouterr().out
    assert "hours on one core" in out.splitlines()[0]
    [(kind, names, kw)] = no_training
    assert kind == "check" and names == ["nope"] and kw["deadline"] is not None


def test_a_model_another_process_trains_is_one_line_and_not_trained_twice(tmp_path, monkeypatch, capsys):
    import subprocess
    import sys

    from rflens import data

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setattr(data, "prepare", lambda *a, **k: None)
    monkeypatch.setattr(emergence, "train", lambda *a, **k: pytest.fail("trained a model another process holds"))
    spec = emergence.LongModel("alibi", WSD)
    name = spec.name
    lock = tmp_path / "runs" / "emergence" / "smoke" / f".{name}.lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from filelock import FileLock\n"
                               f"with FileLock({str(lock)!r}):\n print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError) as err:
            emergence.run(spec, "smoke", progress=False)
    finally:
        holder.kill()
        holder.wait()
    line = str(err.value)
    assert len(line.splitlines()) == 1 and "another process" in line and name in line, line


@pytest.mark.parametrize("damage", ["checkpoint", "points.npz", "points.json"])
def test_a_damaged_emergence_state_names_a_fix_that_works(store, reference, monkeypatch, damage):
    import shutil

    from rflens import bundle, storage
    from rflens import train as training
    from rflens.train import OutOfTime

    spec = emergence.LongModel("alibi", WSD)
    checks = iter(range(100))
    monkeypatch.setattr(training, "_past", lambda deadline: deadline is not None and next(checks) >= 4)
    with pytest.raises(OutOfTime):
        emergence.run(spec, "smoke", progress=False, deadline=1.0)
    monkeypatch.setattr(training, "_past", lambda deadline: False)
    work = storage.runs_dir() / "emergence" / "smoke" / spec.name
    if damage == "checkpoint":
        target = work / training.read_checkpoint_pointer(work)["file"]
    else:
        target = work / damage
    target.write_bytes(b"\0" + target.read_bytes()[1:])
    with pytest.raises(UserError) as err:
        emergence.run(spec, "smoke", progress=False)
    line = str(err.value)
    assert len(line.splitlines()) == 1 and "--retrain" not in line and f"remove {work}" in line, line
    shutil.rmtree(work)  # what it advises
    emergence.run(spec, "smoke", progress=False)
    assert spec.name in bundle.complete("smoke")
