"""What would decide a claim left undecided: the intervals that straddle their thresholds
(rflens.claims.verdicts.check's ``straddling``), rflens.claims.verdicts.cost_to_decide and its reading."""

from __future__ import annotations

import math

import pytest

from rflens.claims import verdicts
from rflens.experiments.speed import speed_ratio
from rflens.readings.claim_verdicts import to_decide


def _speed(t5: list[float]) -> dict:
    return {"speed_record": {"tokens_per_s": {"t5": t5, "sandwich": [100.0] * len(t5)}, "machine": "m", "recorded": "r"}}


def _interval(est, lo, hi, threshold=1.0, above=True):
    return {"estimate": est, "low": lo, "high": hi, "threshold": threshold, "above": above}


def test_an_undecided_check_gives_the_interval_that_straddles_its_threshold():
    t5 = [96.0, 104.0, 99.0, 102.0]
    row, = verdicts.check(_speed(t5), [16])
    assert row["result"] == "not decided"
    ratio, lo, hi = speed_ratio(t5, [100.0] * 4)
    assert row["straddling"] == [_interval(ratio, lo, hi, above=False)]  # T5 must be slower: below 1
    decided, = verdicts.check(_speed([80.0, 81.0, 79.0]), [16])
    assert decided["result"] == "pass" and decided["straddling"] == [] and verdicts.cost_to_decide(decided) is None


def test_the_cost_is_the_squared_ratio_of_the_interval_s_reach_to_its_distance_on_the_log_scale():
    row = {"id": 2, "straddling": [_interval(1.9, 1.6, 2.4, threshold=2.0)]}
    cost = verdicts.cost_to_decide(row)
    expected = ((math.log(2.4) - math.log(1.9)) / (math.log(2.0) - math.log(1.9))) ** 2
    assert cost["factor"] == pytest.approx(expected) and cost["result"] == "fail"
    assert f"fail with about {expected:.0f} times as many test documents" in to_decide(row)  # about 21


def test_a_claim_fails_at_its_cheapest_failing_interval_and_holds_only_when_all_clear():
    near_fail, far_fail = _interval(0.97, 0.9, 1.05), _interval(0.99, 0.8, 1.2)
    near_pass, far_pass = _interval(1.05, 0.95, 1.15), _interval(1.01, 0.9, 1.1)
    cost = verdicts.cost_to_decide({"id": 14, "straddling": [near_pass, far_fail, near_fail]})
    assert cost["result"] == "fail" and cost["interval"]["estimate"] == 0.97
    cost = verdicts.cost_to_decide({"id": 14, "straddling": [near_pass, far_pass]})
    assert cost["result"] == "pass" and cost["interval"]["estimate"] == 1.01
    below = verdicts.cost_to_decide({"id": 15, "straddling": [_interval(0.95, 0.9, 1.05, above=False)]})
    assert below["result"] == "pass"  # a criterion that asks for a value below its threshold


def test_an_estimate_on_its_threshold_cannot_be_decided_by_more_documents():
    row = {"id": 16, "straddling": [_interval(1.0, 0.9, 1.1)]}
    assert math.isinf(verdicts.cost_to_decide(row)["factor"])
    assert "more rounds would not decide it" in to_decide(row)


def test_seeds_that_disagree_are_said_to_need_seeds_not_documents():
    row = {"id": 4, "measured": "the seeds disagree: ...", "seeds": {0: "pass", 1: "fail", 2: "pass"},
           "straddling": []}
    text = to_decide(row)
    assert "seed 0 pass, seed 1 fail, seed 2 pass" in text and "depends on the training seed" in text
