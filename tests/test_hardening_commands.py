"""Commands that refuse, in one line naming what was typed and the real fix, what they
cannot do: a shipped bundle's speed record is never rewritten, a run without Table 3 has no
speed to record, a setting that cannot be evaluated is refused when set, and the messages
of the commands say what the user typed."""

from __future__ import annotations

import shutil

import pytest

from rflens import storage
from rflens.cli import main
from rflens.experiments import speed
from rflens.store import bundle


def _copy_bundle(name, tmp_path, monkeypatch):
    """The shipped bundle ``name`` without its weights, resealed, as this test's own $RFLENS_REFERENCE."""
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


def _files(top):
    return {p: p.read_bytes() for p in top.rglob("*") if p.is_file()}


def test_record_speed_never_rewrites_a_shipped_record(tmp_path, monkeypatch, capsys):
    """Item 1: `claims --scale long --record-speed` kept the shipped record, resealed, in place."""
    top = _copy_bundle("long", tmp_path, monkeypatch)
    assert (top / speed.RECORD_FILE).is_file()
    monkeypatch.setattr(speed, "time_steps", lambda *a, **k: pytest.fail("timed a shipped bundle's models"))
    before = _files(top)
    assert main(["claims", "--scale", "long", "--record-speed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "never replaced" in err[0] and "--scale smoke" in err[0], err
    assert _files(top) == before


def test_record_speed_without_table3_is_one_line(tmp_path, monkeypatch, capsys):
    """Item 7: deep trains no Table 3 models: --record-speed is one line, not min() of nothing."""
    top = _copy_bundle("deep", tmp_path, monkeypatch)
    before = _files(top)
    assert main(["claims", "--scale", "deep", "--record-speed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no Table 3" in err[0] and "--record-speed" in err[0], err
    assert _files(top) == before


@pytest.mark.parametrize("l_tr", ["1"])
def test_an_l_tr_too_short_to_evaluate_is_refused_when_set(tmp_path, monkeypatch, capsys, l_tr):
    """Item 10: `train --set train.l_tr=1` trained a model no evaluation could read."""
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    assert main(["train", "--scale", "smoke", "--set", f"train.l_tr={l_tr}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"l_tr={l_tr}" in err[0] and "train.l_tr=2" in err[0], err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("result.json"))
