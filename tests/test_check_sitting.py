"""A sitting of ``emergence --check`` whose time runs out before it trains a step (its setup
alone takes longer than ``--minutes``) says so in one line, instead of "run the same command to
resume", which would stop at the same step every time; one that moved on stops to be resumed."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, HealthCheck, settings, strategies as st

from rflens import storage
from rflens.errors import UserError
from rflens.longrun import emergence, recheck
from rflens.setup import presets
from rflens.store import bundle
from rflens.training.trainer import CHECKPOINT_POINTER, OutOfTime

SCALE = "deep"


@pytest.fixture
def sitting(store, monkeypatch):
    """A check of one shipped model whose retraining stops at a step the test chooses."""
    names = sorted(bundle.complete(SCALE))
    if not names:
        pytest.skip("no shipped deep bundle in this checkout")
    monkeypatch.setattr(recheck, "seed_spread", lambda run: {})
    stops = []

    def stopped(spec, run, **kw):
        raise OutOfTime(stops[-1], None)

    monkeypatch.setattr(emergence, "run", stopped)

    def check(before: int | None, stop: int, deadline: float | None = 6.0):
        work = bundle.emergence_state(SCALE, names[0]).with_name(f"{names[0]}.check")
        (work / CHECKPOINT_POINTER).unlink(missing_ok=True)
        if before is not None:  # a state kept by an earlier sitting
            work.mkdir(parents=True, exist_ok=True)
            storage.write_json(work / CHECKPOINT_POINTER, {"step": before, "file": "checkpoint-1.pt", "sha256": "0"})
        stops.append(stop)
        return recheck.check(names[:1], presets.long_run(SCALE), progress=False,
                             deadline=None if deadline is None else time.time() + deadline)

    return check


@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.none() | st.integers(0, 5000), moved=st.integers(0, 3))
def test_a_sitting_that_trained_no_step_is_one_line_and_one_that_moved_on_resumes(sitting, before, moved):
    start = before or 0
    if moved:
        with pytest.raises(OutOfTime):
            sitting(before, start + moved)
        return
    with pytest.raises(UserError) as err:
        sitting(before, start)
    line = str(err.value)
    assert len(line.splitlines()) == 1 and f"past step {start:,}" in line and "--minutes" in line, line


def test_without_a_deadline_a_stop_is_left_as_it_is(sitting):
    with pytest.raises(OutOfTime):
        sitting(40, 40, deadline=None)
