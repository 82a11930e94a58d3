"""Every fix a message of the long preset names is one that works: the command it advises
is one that does what it says (checked against the shipped bundle)."""

from __future__ import annotations

import re

import pytest

from rflens.cli import main
from rflens.setup import presets, settings


def test_chapters_the_bundle_cannot_build_are_sent_to_a_preset_that_trains(capsys):
    import os

    before = dict(os.environ)
    assert main(["reproduce", "--scale", "long-repeated", "--plan"]) == 0
    assert dict(os.environ) == before  # the chapters' scale does not leak into the caller (a test's later kernels)
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if "left unexecuted" in ln]
    assert "emergence" not in line, line  # every model of the long run's plan is shipped: it trains nothing
    [(scale, chapters)] = re.findall(r"reproduce --scale (\w+) --chapters ([\d,]+)", line)
    assert not presets.get(scale).shipped and chapters == "08,12"


def test_a_shipped_model_without_weights_names_the_command_that_trains_a_copy(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    assert main(["evaluate", "--scale", "long-repeated", "--pos", "alibi", "--lengths", "48"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "emergence" not in err, err
    [command] = re.findall(r"`python -m rflens ([^`]+)`", err)
    assert command.split()[:5] == ["train", "--scale", "long-repeated", "--pos", "alibi"] and "--retrain" in command
    # without --retrain, train hands back the shipped model (no weights); --retrain trains into the run store
    assert main(["train", "--scale", "long-repeated", "--pos", "alibi"]) == 0
    assert "--retrain trains it again" in capsys.readouterr().out


def _fake_training(monkeypatch, capsys):
    """rflens.training.trainer.train replaced: it records its settings and what stderr held when it was
    called, then stops the command (nothing is trained)."""
    from rflens.errors import UserError
    from rflens.training import trainer as training

    started = []

    def fake(model_cfg, data_cfg, train_cfg, **kw):
        started.append(((model_cfg, data_cfg, train_cfg), capsys.readouterr().err))
        raise UserError("stopped before training")

    monkeypatch.setattr(training, "train", fake)
    return started


def test_a_long_preset_model_the_store_lacks_is_not_trained_by_a_measuring_command(capsys, tmp_path, monkeypatch):
    """evaluate and erf at a long preset name `train` and its hours instead of starting a
    2^15-step training; the named command says the cost before it trains those settings."""
    from rflens.setup import settings
    from rflens.setup.config import parse_overrides

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    started = _fake_training(monkeypatch, capsys)
    for command in (["evaluate", "--lengths", "48"], ["erf"]):
        assert main([*command, "--scale", "long-repeated", "--pos", "alibi", "--set", "slope_shift=3"]) == 2
        err = capsys.readouterr().err.strip()
        assert started == [] and len(err.splitlines()) == 1 and "hours on one core" in err, err
    [advised] = re.findall(r"`python -m rflens ([^`]+)`", err)
    assert advised.split()[:3] == ["train", "--scale", "long-repeated"], advised
    assert main(advised.split()) == 2  # the fake stops it
    [(cfgs, before)] = started
    assert "hours on one core" in before, before  # said before it started
    assert cfgs == tuple(settings.resolve(presets.get("long-repeated"), "alibi", "prose", parse_overrides(["slope_shift=3"]))[1:])


def test_workers_at_a_shipped_preset_names_a_fix_that_works(capsys):
    assert main(["reproduce", "--scale", "long-repeated", "--plan", "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "emergence" not in err and "drop --workers" in err, err
    assert main(["reproduce", "--scale", "long-repeated", "--plan"]) == 0  # what it advises


def test_a_read_only_control_that_lacks_models_is_sent_to_restore_it_not_to_train_it(capsys, tmp_path, monkeypatch):
    """The control's bundle is complete in the repository and nothing trains into it: where
    its folder lacks models, every command says to restore it (emergence refuses to train)."""
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    (tmp_path / "reference").mkdir()
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    assert main(["reproduce", "--scale", "long-repeated", "--plan"]) == 0
    [line] = [ln for ln in capsys.readouterr().out.splitlines() if "left unexecuted" in ln]
    assert "emergence" not in line and "git checkout -- reference" in line, line
    assert main(["emergence", "--scale", "long-repeated", "--list"]) == 0
    out = capsys.readouterr().out
    assert "to train" not in out and "git checkout -- reference" in out.splitlines()[-1], out[-500:]
    assert main(["emergence", "--scale", "long-repeated"]) == 2
    out, err = capsys.readouterr()
    assert "training" not in out and len(err.strip().splitlines()) == 1, (out, err)
    assert "--check" not in err and "git checkout -- reference" in err, err


def test_a_training_of_minutes_or_more_says_its_hours_before_it_starts_at_any_preset(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    started = _fake_training(monkeypatch, capsys)
    assert main(["train", "--scale", "tiny", "--pos", "alibi", "--set", "steps=100000"]) == 2
    assert main(["train", "--scale", "smoke", "--pos", "alibi", "--set", "steps=2"]) == 2
    [(_, long_before), (_, short_before)] = started
    assert "100,000 steps, about" in long_before and "hours on one core" in long_before, long_before
    assert "hours" not in short_before, short_before  # seconds of training: nothing to say


def test_on_a_gpu_the_announced_training_gives_no_one_core_hours(monkeypatch):
    from rflens.store import runs

    _, model_cfg, _, train_cfg = settings.resolve(presets.get("tiny"), "alibi", "prose", {"steps": 100000})
    monkeypatch.setattr(runs, "cuda_available", lambda: True)
    assert runs.hours_to_train("tiny", model_cfg, train_cfg) == "100,000 steps on the GPU"


@pytest.mark.parametrize("command", [["evaluate", "--lengths", "16", "--n", "2"], ["erf", "--n", "1"]])
def test_a_damaged_checkpoint_met_by_a_measuring_command_names_the_train_command_that_starts_over(
        capsys, tmp_path, monkeypatch, command):
    """evaluate and erf have no --retrain: the fix they name is the train command with it."""
    from rflens import data
    from rflens.store import runs

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    _, model_cfg, data_cfg, train_cfg = settings.resolve(presets.get("smoke"), "alibi", "prose", {})
    path = runs.runs_dir() / runs.run_key(model_cfg, data_cfg, train_cfg, data.prepare(data_cfg, progress=False).fingerprint)
    path.mkdir(parents=True)
    (path / "checkpoint.json").write_text("{")
    assert main([*command, "--scale", "smoke", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "corrupted" in err, err
    [advised] = re.findall(r"`python -m rflens ([^`]+)`", err)
    assert advised.split()[0] == "train" and "--retrain" in advised, advised
    assert main([*advised.split(), "--quiet"]) == 0  # what it advises: trains it from the start
    assert main([*command, "--scale", "smoke", "--quiet"]) == 0


def test_claims_says_what_it_trains_first_before_it_starts(capsys, tmp_path, monkeypatch):
    """The board at a preset that trains: the models the run store lacks, and their hours on
    one core, said before the first is trained (nothing at all when they take seconds)."""
    from rflens.claims import scoreboard

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    seen = []

    def board(scale, corpus, **kw):
        seen.append(capsys.readouterr().err)
        raise KeyboardInterrupt  # stops the command: nothing is trained

    monkeypatch.setattr(scoreboard, "scoreboard", board)
    for scale in ("tiny", "smoke"):
        assert main(["claims", "--scale", scale]) == 130
    tiny, smoke = seen
    assert re.search(r"\d+ model\(s\) the run store lacks are trained first: about [\d.]+ hours on one core", tiny), tiny
    assert "reproduce --scale tiny --plan" in tiny and "hours" not in smoke, (tiny, smoke)


def test_reproduce_says_what_it_trains_first_before_it_starts(capsys, tmp_path, monkeypatch):
    import os

    from rflens.publish import reproduce

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(os, "environ", os.environ.copy())  # reproduce sets the kernel's variables
    monkeypatch.setattr(reproduce, "log_path", lambda scale: tmp_path / "reproduce.log")
    seen = []

    def execute(key, path, params, scale, log=None, rerun=False):
        seen.append("".join(capsys.readouterr()))
        raise KeyboardInterrupt  # stops the command: nothing is trained

    monkeypatch.setattr(reproduce, "execute", execute)
    assert main(["reproduce", "--scale", "tiny", "--chapters", "03", "--no-build"]) == 130
    [before] = seen
    assert re.search(r"model\(s\) the run store lacks are trained first: about [\d.]+ hours on one core", before), before
