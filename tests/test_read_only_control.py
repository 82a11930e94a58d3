"""The read-only control bundle is never written by a command: ``claims --record-speed`` at
its scale is one line, and its files (the speed record among them) stay as shipped."""

from __future__ import annotations


import pytest

from rflens.cli import main
from rflens.experiments import speed

CONTROL = "long-repeated"


def test_record_speed_never_rewrites_the_controls_record(bundle_copy, monkeypatch, capsys):
    top = bundle_copy(CONTROL)
    monkeypatch.setattr(speed, "time_steps", lambda *a, **k: pytest.fail("timed a read-only control"))
    before = {p: p.read_bytes() for p in top.rglob("*") if p.is_file()}
    assert main(["claims", "--scale", CONTROL, "--record-speed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "read-only" in err[0], err
    assert {p: p.read_bytes() for p in top.rglob("*") if p.is_file()} == before
