"""Every setting of every settings class, given wrong types, non-finite, negative, zero and
huge values through ``--set``, to train, evaluate, erf and bias at the smoke scale: each
command either succeeds or answers with one line and exit 2, never a traceback."""

from __future__ import annotations

import contextlib
import dataclasses
import io

import pytest

from rflens.cli import main
from rflens.setup.config import SETTINGS

VALUES = ("abc", "nan", "-1", "0", "1000000000")
COMMANDS = {
    "train": ["train", "--scale", "smoke", "--quiet", "--set", "steps=2"],
    "evaluate": ["evaluate", "--scale", "smoke", "--quiet", "--set", "steps=2", "--lengths", "16", "--n", "2"],
    "erf": ["erf", "--scale", "smoke", "--quiet", "--set", "steps=2", "--length", "32", "--n", "2"],
    "bias": ["bias", "--pos", "alibi", "--length", "8"],
}


def pairs():
    for section, cls in SETTINGS.items():
        for f in dataclasses.fields(cls):
            for value in VALUES:
                if f.name in ("steps", "max_bytes") and value == VALUES[-1]:
                    continue  # valid settings that only take long (a billion steps; the whole corpus)
                yield f"{section}.{f.name}={value}"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One run store for the four commands: a model that a valid value trains for one
    command is found stored by the next, so each is trained once."""
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_setting_value_gives_a_traceback(command, store, monkeypatch):
    monkeypatch.setenv("RFLENS_RUNS", str(store / "runs"))
    monkeypatch.setenv("RFLENS_DATA", str(store / "data"))
    tried, bad = 0, []
    for pair in pairs():
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = main([*COMMANDS[command], "--set", pair])
            except BaseException as exc:  # noqa: BLE001 - the point is that nothing escapes
                bad.append((pair, repr(exc)[:200]))
                continue
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        tried += 1
        if code not in (0, 2) or (code == 2 and (len(lines) != 1 or not lines[0].startswith("error:"))):
            bad.append((pair, code, lines[-2:]))
    assert tried > 250 and not bad, bad
