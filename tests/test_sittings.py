"""A sitting of ``--minutes`` ends at the step its time runs out in (checkpointed there, so
the run resumes), and a check that did not finish never exits 0; ``--keep DIR`` refuses,
before any training, a folder whose files it would overwrite or seal, or cannot write."""

from __future__ import annotations

import os
import time

import pytest

from rflens.cli import main
from rflens.longrun import emergence, plan, recheck
from rflens.setup import settings
from rflens.store import bundle
from rflens.training import trainer as training
from rflens.training.trainer import OutOfTime
from rflens.setup import presets

CONTROL = "long-repeated"


def test_the_sittings_end_is_met_at_the_step_it_falls_in(store, tmp_path, monkeypatch):
    """No checkpoint falls before the end of training: the clock is still read after each step."""
    _, m, d, t = settings.resolve(presets.get("smoke"), "alibi", "prose", {"steps": 60, "ckpt_interval": 0, "eval_interval": 0})
    out = tmp_path / "run"
    clock = iter(range(10_000))
    monkeypatch.setattr(training, "_late", lambda deadline: deadline is not None and next(clock) >= 5)
    with pytest.raises(OutOfTime) as stop:
        training.train(m, d, t, out_dir=out, progress=False, deadline=time.time() + 3600)
    assert stop.value.step == 6  # the sixth step read a clock that had run out
    again = training.train(m, d, t, out_dir=out, progress=False)  # resumed from the step it stopped at
    assert again["resumed_from"] == 6 and again["steps"] == 60 and len(again["train_loss"]) == 60


def test_the_default_clock_is_the_wall_clock():
    assert not training._late(None) and not training._late(time.time() + 60) and training._late(time.time() - 1)


@pytest.fixture
def no_check(monkeypatch):
    calls = []
    monkeypatch.setattr(recheck, "check", lambda names, scale, **kw: calls.append(kw) or pytest.fail("checked"))
    return calls


def test_a_check_that_runs_out_of_time_does_not_exit_0(monkeypatch, capsys):
    def out_of_time(names, scale, **kw):
        raise OutOfTime(1024, None)

    monkeypatch.setattr(recheck, "check", out_of_time)
    code = main(["emergence", "--scale", CONTROL, "--check", "1", "--minutes", "0.2", "--quiet"])
    out = capsys.readouterr().out
    assert code == 3 and "not finished" in out, out


@pytest.mark.parametrize("keep", ["", "   "])
def test_an_empty_keep_is_not_the_current_folder(keep, no_check, capsys):
    assert main(["emergence", "--scale", CONTROL, "--check", "1", "--keep", keep]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--keep" in err[0], err


@pytest.mark.parametrize("user_file", ["notes.txt", "alibi_slope_shift=4/result.json", "nope/model.safetensors"])
def test_keep_never_overwrites_or_seals_a_users_files(user_file, tmp_path, no_check, capsys):
    mine = tmp_path / "kept" / CONTROL / user_file
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    assert main(["emergence", "--scale", CONTROL, "--check", "1", "--keep", str(tmp_path / "kept")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "new or empty folder" in err[0], err
    assert mine.read_text() == "mine" and not (tmp_path / "kept" / CONTROL / bundle.MANIFEST).exists()


def test_keep_into_a_folder_it_cannot_write_is_refused_before_training(tmp_path, no_check, monkeypatch, capsys):
    locked = tmp_path / "ro"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if os.fspath(p) == str(locked) else real(p, mode))
    assert main(["emergence", "--scale", CONTROL, "--check", "1", "--keep", str(locked / "kept")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be written" in err[0], err


def test_keep_into_an_earlier_checks_kept_bundle_goes_on(tmp_path, monkeypatch, capsys):
    kept = tmp_path / "kept"
    bundle.write_file(CONTROL, "corpora.json", {"scale": CONTROL}, root=kept)  # a whole, sealed kept bundle
    monkeypatch.setattr(recheck, "check", lambda names, scale, **kw: [])
    assert main(["emergence", "--scale", CONTROL, "--check", "1", "--keep", str(kept), "--quiet"]) == 0


@pytest.mark.parametrize("points", ['[{"steps": "x"}]', '[{"steps": null}]', '[{"steps": true}]', '[{}]', '{"steps": 4}'])
def test_a_kept_state_whose_points_are_not_points_is_one_line(points, store, reference, monkeypatch):
    from rflens.errors import UserError
    from rflens.store import shipped

    spec = plan.LongModel("alibi", (("schedule", "wsd"), ("warmup", 2), ("steps", 32), ("ckpt_interval", 8)))
    work = bundle.emergence_state("smoke", spec.name)
    work.mkdir(parents=True)
    (work / "points.json").write_text(points)
    assert shipped.kept("smoke", spec.name)[0] == 0  # timing it (`emergence --list`) does not fail on it
    monkeypatch.setattr(emergence, "train", lambda *a, **k: pytest.fail("trained on a damaged state"))
    with pytest.raises(UserError, match=f"damaged.*remove {work}"):
        emergence.run(spec, presets.get("smoke"), progress=False)
