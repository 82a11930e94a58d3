"""`python -m rflens bias`: the printed values are the paper's equations; mistakes give one
line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest


def rflens(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rflens", *args], capture_output=True, text=True, timeout=120)


def test_sandwich_json_is_eq_5_6():
    r = rflens("bias", "--pos", "sandwich", "--heads", "12", "--length", "8192", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["pos"] == "sandwich" and out["length"] == 8192 and set(out["bias"]) == {str(h) for h in range(12)}
    for h in (0, 5, 11):
        row = out["bias"][str(h)]
        assert len(row) == 8192 and row[0] == 0
        for k in (1, 100, 8191):
            dot = sum(math.cos(k / 10000 ** (2 * i / 128)) for i in range(64))
            assert row[k] == pytest.approx((dot - 64) / ((h + 1) * 8 / 12), rel=1e-5, abs=1e-4)


def test_alibi_table_and_window_in_json():
    r = rflens("bias", "--pos", "alibi", "--heads", "4", "--length", "40", "--set", "slope_shift=-1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2 + 4 and "k=39" in lines[1] and "..." in lines[1]  # long L: first and last distances
    assert lines[2].split()[:3] == ["0", "0", "-0.5"]  # head 0: slope 1/2^(2 - 1)

    r = rflens("bias", "--pos", "alibi", "--heads", "2", "--length", "6", "--set", "window=3", "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)["bias"]["1"]
    assert row[:3] == [0.0, -2.0**-8, -2 * 2.0**-8] and row[3:] == ["-inf"] * 3


MISTAKES = [
    (["--pos", "rotary"], "no relative bias"),
    (["--pos", "sinusoidal", "--json"], "no relative bias"),
    (["--pos", "bogus"], "pos"),
    (["--pos", "alibi", "--set", "nonsense=1"], "nonsense"),
    (["--pos", "sandwich", "--set", "d_bar=7"], "d_bar"),
    (["--pos", "alibi", "--set", "slope_shift=abc"], "slope_shift"),
    (["--pos", "alibi", "--heads", "0"], "heads"),
    (["--pos", "alibi", "--length", "0"], "length"),
]


@pytest.mark.parametrize("args,needle", MISTAKES[::3])  # a real process for a few (each costs a torch import)
def test_mistakes_give_one_line_and_exit_2(args, needle):
    r = rflens("bias", *args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
    assert r.stdout == ""


@pytest.mark.parametrize("args,needle", MISTAKES)
def test_mistakes_in_process(args, needle, capsys):
    from rflens.cli import main

    assert main(["bias", *args]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]


def test_help_lists_the_bias_command():
    r = rflens("--help")
    assert r.returncode == 0 and "bias" in r.stdout
