"""Commands that refuse, in one line naming what was typed and the real fix, what they
cannot do: a shipped bundle's speed record is never rewritten, a run without Table 3 has no
speed to record, a setting that cannot be evaluated is refused when set, and the messages
of the commands say what the user typed."""

from __future__ import annotations


import pytest

from rflens.cli import main
from rflens.experiments import speed


def _files(top):
    return {p: p.read_bytes() for p in top.rglob("*") if p.is_file()}


def test_record_speed_never_rewrites_a_shipped_record(bundle_copy, monkeypatch, capsys):
    """`claims --scale long --record-speed` kept the shipped record, resealed, in place."""
    top = bundle_copy("long")
    assert (top / speed.RECORD_FILE).is_file()
    monkeypatch.setattr(speed, "time_steps", lambda *a, **k: pytest.fail("timed a shipped bundle's models"))
    before = _files(top)
    assert main(["claims", "--scale", "long", "--record-speed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "never replaced" in err[0] and "--scale smoke" in err[0], err
    assert _files(top) == before


def test_record_speed_without_table3_is_one_line(bundle_copy, monkeypatch, capsys):
    """Deep trains no Table 3 models: --record-speed is one line, not min() of nothing."""
    top = bundle_copy("deep")
    before = _files(top)
    assert main(["claims", "--scale", "deep", "--record-speed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no Table 3" in err[0] and "--record-speed" in err[0], err
    assert _files(top) == before


@pytest.mark.parametrize("l_tr", ["1"])
def test_an_l_tr_too_short_to_evaluate_is_refused_when_set(tmp_path, monkeypatch, capsys, l_tr):
    """`train --set train.l_tr=1` trained a model no evaluation could read."""
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    assert main(["train", "--scale", "smoke", "--set", f"train.l_tr={l_tr}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"l_tr={l_tr}" in err[0] and "train.l_tr=2" in err[0], err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("result.json"))


def _one_line(capsys, *argv) -> str:
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


def test_explore_on_a_port_in_use_names_that_port(capsys):
    """Voilà served N+1 while explore printed N."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        err = _one_line(capsys, "explore", "--scale", "smoke", "--port", str(port), "--no-browser")
    assert f"--port {port} is in use" in err and f"--port {port + 1}" in err, err


def test_export_to_a_tilde_folder_writes_into_home(tmp_path, monkeypatch, store, capsys):
    """`runs --export=~/tt` (no shell expansion after =) made a folder named ~."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main(["runs", "--export=~/tt"]) == 0
    assert not (tmp_path / "~").exists()
    assert (tmp_path / "home" / "tt" / "runs.csv").is_file()
    assert str(tmp_path / "home" / "tt") in capsys.readouterr().out


def test_a_length_longer_than_the_test_split_names_the_length_typed(store, capsys):
    """`evaluate --lengths 100000` said "length=100001"."""
    assert main(["train", "--scale", "smoke", "--set", "steps=4", "--quiet"]) == 0
    capsys.readouterr()
    err = _one_line(capsys, "evaluate", "--scale", "smoke", "--set", "steps=4", "--lengths", "100000", "--quiet")
    assert "evaluation length 100000 " in err and "length=100001" not in err and "--lengths" in err, err


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_scheme_file_that_is_not_a_file_says_what_it_is(tmp_path, capsys, kind):
    """`--schemes DIR` said "not found"."""
    import os

    path = tmp_path / "schemes"
    path.mkdir() if kind == "folder" else os.mkfifo(path)
    err = _one_line(capsys, "--schemes", str(path), "bias", "--pos", "alibi")
    assert "not found" not in err and str(path) in err and ("folder" if kind == "folder" else "not a regular") in err


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_data_files_that_are_not_files_say_what_they_are(tmp_path, monkeypatch, capsys, kind):
    """`--files` with a FIFO or a folder said "no such file"."""
    import os

    monkeypatch.setenv("RFLENS_DATA", str(tmp_path / "data"))
    path = tmp_path / "corpus.txt"
    path.mkdir() if kind == "folder" else os.mkfifo(path)
    err = _one_line(capsys, "data", "--source", "files", "--files", str(path), "--quiet")
    assert "no such file" not in err and str(path) in err and ("folder" if kind == "folder" else "not a regular") in err


def test_a_bias_of_too_many_heads_names_heads(capsys):
    """`bias --heads 1000000000` advised only a shorter --length."""
    err = _one_line(capsys, "bias", "--pos", "alibi", "--heads", "1000000000")
    assert "--heads 1,000,000,000" in err and "fewer heads" in err, err


def test_claims_at_the_full_preset_on_a_cpu_is_refused_naming_a_preset_that_fits(store, monkeypatch, capsys):
    """`claims --scale full` on a CPU printed "about 145121 hours on one core" and went on."""
    import torch

    from rflens.claims import scoreboard

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(scoreboard, "scoreboard", lambda *a, **k: pytest.fail("started the board"))
    err = _one_line(capsys, "claims", "--scale", "full")
    assert "no GPU" in err and "--scale small" in err and "hours on one core" in err, err
    # the preset it names is accepted: its estimate stays under the limit
    from rflens.cli.claims import _refuse_beyond_a_cpu
    from rflens.setup import presets

    _refuse_beyond_a_cpu(presets.get("small"))


def test_reproduce_at_an_extending_run_advises_what_builds_its_chapters(store, capsys):
    """`reproduce --scale long-extended --chapters 03 --plan` advised `emergence --scale
    long-extended`, which answers "nothing to train"; the advice it gives now is accepted."""
    err = _one_line(capsys, "reproduce", "--scale", "long-extended", "--chapters", "03", "--plan")
    assert "emergence --scale long-extended" not in err and "reproduce --scale long --chapters 03" in err, err
    assert main(["reproduce", "--scale", "long", "--chapters", "03", "--plan"]) == 0


def test_the_hub_advice_names_flags_that_train_accepts(store, monkeypatch, capsys):
    """The hub's advice `--source embedded` is rejected by `train`: the advice names
    the form each command takes, and train accepts its own."""
    import re

    from rflens.data.sources import HUB_FIX

    assert "--source embedded" in HUB_FIX  # the data command's own flag
    sets = re.findall(r"--set source=\w+", HUB_FIX)
    assert sets == ["--set source=embedded", "--set source=files"], HUB_FIX
    assert main(["train", "--scale", "smoke", "--set", "steps=2", "--quiet", *sets[0].split()]) == 0


def test_a_run_without_table3_is_not_sent_to_record_a_speed_it_cannot_time():
    from rflens.claims import statements
    from rflens.claims.outcomes import Missing

    check = statements.BY_ID[16].check
    with pytest.raises(Missing, match="the deep run trains no Table 3 model"):
        check({"scale": "deep"})
    with pytest.raises(Missing, match="--scale long --record-speed"):
        check({"scale": "long"})
