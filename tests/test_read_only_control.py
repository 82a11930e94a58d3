"""The read-only control bundle is never written by a command: ``claims --record-speed`` at
its scale is one line, and its files (the speed record among them) stay as shipped."""

from __future__ import annotations

import shutil

import pytest

from rflens.cli import main
from rflens.experiments import speed
from rflens.store import bundle

CONTROL = "long-repeated"


def test_record_speed_never_rewrites_the_controls_record(tmp_path, monkeypatch, capsys):
    shutil.copytree(bundle.bundle_dir(CONTROL), tmp_path / "reference" / CONTROL,
                    ignore=shutil.ignore_patterns(bundle.WEIGHTS))
    top = tmp_path / "reference" / CONTROL
    for d in top.iterdir():  # the copy leaves the weights out: its manifests say so
        if d.is_dir() and (d / bundle.MANIFEST).is_file():
            from rflens import storage

            man = storage.read_json(d / bundle.MANIFEST)
            man["sha256"].pop(bundle.WEIGHTS, None)
            storage.write_json(d / bundle.MANIFEST, man, newline=True)
    bundle.seal(CONTROL, tmp_path / "reference")
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(speed, "time_steps", lambda *a, **k: pytest.fail("timed a read-only control"))
    before = {p: p.read_bytes() for p in top.rglob("*") if p.is_file()}
    assert main(["claims", "--scale", CONTROL, "--record-speed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "read-only" in err[0], err
    assert {p: p.read_bytes() for p in top.rglob("*") if p.is_file()} == before
