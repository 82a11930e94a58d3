"""A plain sitting of ``emergence --minutes`` (not ``--check``) whose time runs out before it
moves its model on (no step past the kept state, no size measured: setting the sitting up took
all its time) says so in one line, instead of "run the same command to resume", which would
stop at the same step every time; a sitting that moved on, by a step or by a measured size,
stops to be resumed."""

from __future__ import annotations

import pytest

from rflens.cli import main
from rflens.setup import presets
from rflens.store import bundle
from rflens.store.shipped import kept
from rflens.training import trainer as training

NAME = "alibi_slope_shift=3"  # the run's first model: 32 steps, sizes at 4, 8, 16, 32 (branched at 3, 6, 13, 26)
# shorter than the setup: its clock, read first where the kept state is loaded, finds the time gone
# (the tests say so to the clock: a fast machine sets up within 6 ms)
SHORT = ["emergence", "--scale", "smoke", "--only", NAME, "--minutes", "0.0001", "--quiet"]
LONG = ["emergence", "--scale", "smoke", "--only", NAME, "--minutes", "60", "--quiet"]


@pytest.fixture
def sitting(store, reference, monkeypatch, capsys):
    """Run ``argv`` at the smoke preset's models as a long run of 32 wsd steps; its time runs
    out after ``steps`` training steps, or at the ``checks``-th check of the clock at a
    checkpoint (None: the clock's)."""
    base = presets._BUILDERS["smoke"]
    monkeypatch.setitem(presets._BUILDERS, "smoke", lambda: presets.LongRun.of(base(), train=base().train.replace(
        schedule="wsd", warmup=2, steps=32, ckpt_interval=8)))

    def run(argv, steps=None, checks=None):
        with pytest.MonkeyPatch.context() as patch:  # this sitting's stop alone
            if steps is not None:
                clock = iter(range(10_000))
                patch.setattr(training, "_late", lambda deadline: deadline is not None and next(clock) >= steps - 1)
            if checks is not None:
                calls = iter(range(10_000))
                patch.setattr(training, "_past", lambda deadline: deadline is not None and next(calls) >= checks)
            code = main(argv)
        out = capsys.readouterr()
        return code, out.out + out.err

    return run


def test_a_sitting_shorter_than_its_setup_is_one_line_every_time(sitting, capsys):
    for _ in range(2):  # the same command again: the same line, never a loop of "resume"
        code, text = sitting(SHORT, checks=0)
        err = capsys.readouterr().err
        assert code == 2, text
        line = text.strip().splitlines()[-1]
        assert line.startswith("error: ") and "past step 0" in line and "--minutes" in line, text
        assert "resume" not in line.split("(")[0], line
    assert kept("smoke", NAME) == (0, frozenset()) and not err


def test_a_sitting_that_moved_on_resumes_and_one_that_did_not_is_one_line(sitting):
    code, text = sitting(LONG, steps=5)
    assert code == 0 and "run the same command to resume" in text, text
    step, measured = kept("smoke", NAME)
    assert step > 0 and measured, (step, measured)
    code, text = sitting(SHORT, checks=0)  # its setup takes longer than the sitting: it would stop at the same step again
    assert code == 2 and f"past step {step}" in text and "--minutes" in text, text
    assert len(text.strip().splitlines()) == 2, text  # the plan's line, and the error's
    assert kept("smoke", NAME)[0] == step
    code, text = sitting(LONG, steps=9)  # more time: it goes on
    assert code == 0 and "run the same command to resume" in text and kept("smoke", NAME)[0] > step, text


def test_a_sitting_that_measured_a_size_at_the_step_it_resumed_from_moved_on(sitting):
    """Stopped at a size's branch before measuring it: the next sitting measures it and stops at
    the same step, with one size more: that is progress, to be resumed."""
    code, text = sitting(LONG, checks=1)  # stops at the checkpoint before the branch at step 3
    assert code == 0 and "resume" in text, text
    assert kept("smoke", NAME) == (3, frozenset()), kept("smoke", NAME)
    code, text = sitting(LONG, checks=1)  # measures the size of 4 steps, then stops at step 3 again
    assert code == 0 and "run the same command to resume" in text, text
    assert kept("smoke", NAME) == (3, frozenset({4})), kept("smoke", NAME)
    assert NAME in bundle.entries("smoke") and NAME not in bundle.complete("smoke")
