"""Every fix a message of the long preset names is one that works: the command it advises
is one that does what it says (checked against the shipped bundle)."""

from __future__ import annotations

import re

from rflens import scales
from rflens.cli import main


def test_chapters_the_bundle_cannot_build_are_sent_to_a_preset_that_trains(capsys):
    assert main(["reproduce", "--scale", "long-repeated", "--plan"]) == 0
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if "left unexecuted" in ln]
    assert "emergence" not in line, line  # every model of the long run's plan is shipped: it trains nothing
    [(scale, chapters)] = re.findall(r"reproduce --scale (\w+) --chapters ([\d,]+)", line)
    assert not scales.get(scale).shipped and chapters == "08,11"


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
