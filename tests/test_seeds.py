"""Verdicts over training seeds: the bundle served at one seed (rflens.store.shipped.at_seed)
and the rule that a claim holds when every seed gives it (rflens.claims.verdicts.check_seeds)."""

from __future__ import annotations

import dataclasses

import pytest

from rflens.claims import verdicts
from rflens.experiments import from_bundle
from rflens.longrun import emergence, plan
from rflens.setup.settings import resolve
from rflens.store.shipped import at_seed, served_seed
from rflens.setup import presets

WSD = (("schedule", "wsd"), ("warmup", 2), ("steps", 32), ("ckpt_interval", 8))
SPEC = plan.LongModel("alibi", WSD)


def _settings(seed: int) -> tuple:
    r = resolve(presets.get("smoke"), "alibi", "prose", dict(WSD))
    return r.model, r.data, dataclasses.replace(r.train, seed=seed)


@pytest.fixture
def two_seeds(tmp_path, monkeypatch):
    """A smoke bundle holding one model from seeds 0 and 1, with seeds 1 and 2 in its plan."""
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "train-store"))
    for spec in (SPEC, *plan.with_seeds(SPEC, [1])):
        emergence.run(spec, presets.get("smoke"), progress=False)
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(plan, "_seeded", lambda scale: frozenset({_settings(1), _settings(2)}))


def _served() -> str | None:
    return from_bundle.shipped_name(presets.get("smoke"), "alibi", "prose", dict(WSD))


def test_a_seeded_model_is_served_from_the_seed_asked_for_and_the_others_from_their_own(two_seeds, monkeypatch):
    assert _served() == SPEC.name and served_seed() == 0
    with at_seed(1):
        assert served_seed() == 1 and _served() == f"{SPEC.name}_seed=1"
    assert _served() == SPEC.name
    with at_seed(2):  # planned, not shipped: never seed 0 instead
        assert _served() is None
    monkeypatch.setattr(plan, "_seeded", lambda scale: frozenset())
    with at_seed(1):  # a model the plan trains from one seed only is that seed's at every seed
        assert _served() == SPEC.name


def test_the_long_plan_seeds_the_models_that_decide_claims():
    seeded = plan._seeded(presets.get("long"))
    deciding = [s for s in plan.by_experiment(presets.get("long")) if s.startswith("Seeds")]
    assert deciding and len(seeded) == len(plan.by_experiment(presets.get("long"))[deciding[0]]) == 26
    r = resolve(presets.get("long"), "alibi", "prose", {"slope_shift": 4, "seed": 2})
    assert (r.model, r.data, r.train) in seeded
    r = resolve(presets.get("long"), "alibi", "prose", {"slope_shift": -1, "seed": 1})  # inside the sweep: one seed
    assert (r.model, r.data, r.train) not in seeded


def _record(ratios: dict[int, float]):
    """A build of the results claim 16 reads: T5 / Sandwich speed ratios at each served seed."""
    def build():
        ratio = ratios[served_seed()]
        return {"speed_record": {"tokens_per_s": {"t5": [ratio * 100, ratio * 101, ratio * 99],
                                                  "sandwich": [100, 101, 99]}, "machine": "m", "recorded": "r"}}
    return build


@pytest.mark.parametrize("ratios, result", [
    ({0: 0.8, 1: 0.85, 2: 0.9}, "pass"),
    ({0: 1.2, 1: 1.3, 2: 1.25}, "fail"),
    ({0: 0.8, 1: 1.2, 2: 0.9}, "not decided"),
])
def test_a_claim_that_reads_seeded_models_holds_only_when_every_seed_gives_it(ratios, result):
    row, = verdicts.check_seeds("long", _record(ratios), [16])
    assert row["result"] == result and row["seeds"] == {s: "pass" if r < 1 else "fail" for s, r in ratios.items()}
    assert row["measured"].startswith("the seeds disagree" if result == "not decided" else "every seed agrees")
    assert all(f"seed {s} " in row["measured"] for s in ratios)
    assert row["comparisons"] == 3  # one interval at each seed
    assert "passed" not in row  # the verdict is said once, as its result


def test_a_claim_reads_as_the_first_seed_where_the_seed_changes_nothing():
    row, = verdicts.check_seeds("long", _record({0: 0.8, 1: 0.8, 2: 0.8}), [16])
    assert row == verdicts.check(_record({0: 0.8})(), [16])[0] and "seeds" not in row


def test_a_seed_not_shipped_leaves_the_claim_not_run_and_says_which():
    def build():
        if served_seed() == 2:
            return {}
        return _record({0: 0.8, 1: 0.85})()
    row, = verdicts.check_seeds("long", build, [16])
    assert row["result"] == "not run" and row["measured"].startswith("not run: seed 2 not shipped yet")
    assert row["seeds"] == {0: "pass", 1: "pass", 2: "not run"}


def test_without_further_seeds_a_preset_is_checked_once():
    calls = []
    verdicts.check_seeds("smoke", lambda: calls.append(served_seed()) or {}, [16])
    assert calls == [0]
