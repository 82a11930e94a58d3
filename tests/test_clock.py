"""What sets the clock of failure: the width ladder's predictions, read from the 12-layer
run's shipped curves, and the sealed rule that reads its outcome."""

import math
import shutil

import numpy as np
import pandas as pd
import pytest

from rflens import storage
from rflens.errors import UserError
from rflens.longrun import clock, forecast, plan
from rflens.measure import intervals
from rflens.store import bundle
from rflens.setup import presets

LADDER = "deep-d128"


@pytest.fixture(scope="module")
def predicted():
    return clock.predict(presets.get(LADDER), n_boot=200)


def test_a_wider_model_has_fewer_tokens_per_parameter_at_the_same_tokens(predicted):
    n = predicted["parameters"]
    assert n[LADDER] > 3 * n["deep"]  # d = 128 against d = 64 at 12 layers
    assert 4 < predicted["paper_tokens_per_parameter"] < 7  # 819.2M tokens over the full preset's parameters


def test_the_tokens_clock_reads_the_base_curve_at_the_same_tokens(predicted):
    name = "window_window=40"
    seeds = predicted["models"][name]["base_seeds"]
    assert seeds == ["window_window=40", "window_window=40_seed=1", "window_window=40_seed=2"]
    for tokens, cell in predicted["models"][name]["sizes"].items():
        measured = []
        for s in seeds:
            t, r, _ = forecast.curve(bundle.load(s, "deep"))
            measured.append(float(r[list(t).index(int(tokens))]))
        assert cell["tokens"]["by_seed"] == pytest.approx(measured, abs=1e-4)
        lo, hi = cell["tokens"]["range"]
        assert lo <= min(measured) and max(measured) <= hi  # the range holds every seed's point


def test_the_tokens_per_parameter_clock_reads_the_base_curve_earlier(predicted):
    n = predicted["parameters"]
    for tokens, cell in predicted["models"]["alibi_same_slope=5"]["sizes"].items():
        eq = cell["tokens per parameter"]["base_tokens"]
        assert eq == round(int(tokens) * n["deep"] / n[LADDER])
        assert cell["tokens per parameter"]["before_first_size"] == (eq < min(plan.sizes(presets.get("deep"))))
    # a rising curve read earlier reads lower: the two clocks part where the base model rises
    last = predicted["models"]["alibi_same_slope=5"]["sizes"][str(max(plan.sizes(presets.get(LADDER))))]
    assert last["tokens per parameter"]["range"][1] < last["tokens"]["range"][0]
    assert last["decides"]


def test_a_flat_model_decides_nothing(predicted):
    cells = predicted["models"]["window_window=10"]["sizes"].values()
    assert not any(c["decides"] for c in cells)


def test_interpolation_is_linear_in_log_tokens_and_held_outside():
    xs = np.log2([2.0 ** 20, 2.0 ** 21])
    values = np.array([1.0, 2.0])
    assert clock._at(20.5, xs, values)[0] == pytest.approx(1.5)
    assert clock._at(19.0, xs, values)[0] == 1.0 and clock._at(22.0, xs, values)[0] == 2.0


def test_predictions_are_sealed_once(reference, monkeypatch):
    monkeypatch.setattr(intervals, "N_BOOTSTRAP", 20)  # the sealing is under test here, not the ranges
    shutil.copytree(storage.package_repo() / "reference" / "deep", reference / "deep")
    out = clock.seal(presets.get(LADDER))
    assert clock.read(presets.get(LADDER))["models"].keys() == out["models"].keys()
    bundle.check(LADDER)
    with pytest.raises(UserError, match="never rewritten"):
        clock.seal(presets.get(LADDER))


def test_the_sealed_rule_names_the_clock_the_deciding_cells_agree_with(monkeypatch):
    cells = {"decides": [True, True, True, False], "measured": [1.2, 1.3, 2.5, 1.0],
             "agrees with": ["tokens per parameter", "tokens per parameter", "tokens", "tokens, tokens per parameter"]}
    monkeypatch.setattr(clock, "read", lambda ladder: {"clocks": ["tokens", "tokens per parameter"], "min_deciding": 3,
                                                       "win_share": 2 / 3})
    monkeypatch.setattr(clock, "outcome", lambda ladder: pd.DataFrame(cells))
    v = clock.verdict(presets.get(LADDER))
    assert v == {"deciding": 3, "agree": {"tokens": 1, "tokens per parameter": 2}, "holds": "tokens per parameter",
                 "min_deciding": 3, "win_share": 2 / 3}
    cells["agrees with"][1] = "neither"
    assert clock.verdict(presets.get(LADDER))["holds"] is None  # 1 of 3 each: not decided
    cells["measured"][2] = math.nan  # a size not measured yet does not count
    assert clock.verdict(presets.get(LADDER))["deciding"] == 2


@pytest.mark.parametrize("ladder", list(clock.LADDERS))
def test_the_sealed_predictions_are_what_the_code_computes_from_the_shipped_curves(ladder, monkeypatch):
    sealed = clock.read(presets.get(ladder))
    if sealed is None:
        pytest.skip(f"{ladder} has no sealed predictions")
    if "unique_tokens" in sealed:  # the corpora's sizes: tests/test_data_subsets.py checks them against the data
        monkeypatch.setattr(clock, "unique_tokens", lambda run: sealed["unique_tokens"][run.name])
    assert sealed == clock.predict(presets.get(ladder), n_boot=sealed["n_boot"])


UNIQUE = {"long": 12_301_027, "long-3m": 3_036_826, "long-sotu": 3_002_583}  # prose-wide and two cuts of it


@pytest.fixture(scope="module")
def by_passes():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(clock, "unique_tokens", lambda run: UNIQUE[run.name])
        return {name: clock.predict(presets.get(name), n_boot=50) for name in ("long-3m", "long-sotu")}


def test_the_passes_clock_reads_the_base_curve_at_the_same_passes_past_its_last_size(by_passes):
    p = by_passes["long-3m"]
    assert p["clocks"] == ["tokens", "passes"] and p["unique_tokens"] == {"long": UNIQUE["long"], "long-3m": UNIQUE["long-3m"]}
    cells = p["models"]["alibi_slope_shift=4"]["sizes"]
    for tokens, cell in cells.items():
        assert cell["passes"]["base_tokens"] == round(int(tokens) * UNIQUE["long"] / UNIQUE["long-3m"])
        assert cell["text_passes"] == round(int(tokens) / UNIQUE["long-3m"], 3) <= 4  # the run's own cap
    # its last size maps past the long run's last (33.6M): read from the run that trained it further
    last = cells[str(max(plan.sizes(presets.get("long-3m"))))]["passes"]
    assert last["base_tokens"] > 2**25 and "after_last_size" not in last
    at_end = [forecast.curve(bundle.load(n, run))[1][-1] for n in p["models"]["alibi_slope_shift=4"]["base_seeds"]
              for run in ("long", "long-extended")]
    assert min(at_end) <= min(last["by_seed"]) and max(last["by_seed"]) <= max(at_end)
    # a model the longer run did not train is held at its last size, and marked
    flat = p["models"]["window_window=8"]["sizes"][str(max(plan.sizes(presets.get("long-3m"))))]["passes"]
    assert flat["after_last_size"] is True


def test_the_one_source_run_is_set_beside_the_stratified_run_of_its_size(by_passes):
    assert by_passes["long-sotu"]["diversity"]["stratified"] == "long-3m"
    assert "diversity" not in by_passes["long-3m"]


def test_a_pass_needs_the_runs_corpus_built(own_data):
    with pytest.raises(UserError, match="prose-wide-3m corpus is not built: build it with `python -m rflens data"):
        clock.unique_tokens(presets.get("long-3m"))


def test_the_command_seals_once_and_refuses_a_run_that_is_no_ladder(reference, capsys, monkeypatch):
    from rflens.cli import main

    monkeypatch.setattr(intervals, "N_BOOTSTRAP", 20)
    shutil.copytree(storage.package_repo() / "reference" / "deep", reference / "deep")
    assert main(["emergence", "--scale", LADDER, "--predict"]) == 0
    assert "sealed 8 models' predictions at 7 sizes" in capsys.readouterr().out
    assert main(["emergence", "--scale", LADDER, "--predict"]) == 2
    assert main(["emergence", "--scale", "deep", "--predict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "never rewritten" in err[0] and "'deep' is not a ladder" in err[1], err


@pytest.mark.parametrize("differs, matters", [((True, True, True), True), ((True, True, False), True),
                                              ((True, False, False), False), ((True, True), None)])
def test_diversity_is_read_by_the_rule_sealed_with_the_one_source_run(monkeypatch, differs, matters):
    sealed = {"models": {"nope": {"base": "nope"}}, "min_deciding": 3, "win_share": 2 / 3,
              "diversity": {"stratified": "long-3m", "rise": 1.0}}
    monkeypatch.setattr(clock, "read", lambda ladder: sealed)
    sizes = [2**20 * (i + 1) for i in range(len(differs))]
    ranges = {"long-3m": {t: (1.10, 1.20) for t in sizes},
              "long-sotu": {t: (1.30, 1.40) if d else (1.15, 1.25) for t, d in zip(sizes, differs)}}
    ranges["long-3m"][2**30] = (1.0, 1.0)  # measured in one run alone: not compared
    monkeypatch.setattr(clock, "_ranges", lambda run, setting, n_boot: ranges[run.name])
    out = clock.diversity(presets.get("long-sotu"), n_boot=10)
    assert out["compared"] == len(differs) and out["differ"] == sum(differs) and out["matters"] is matters


def test_a_flat_pair_is_not_compared(monkeypatch):
    sealed = {"models": {"window_window=8": {"base": "window_window=8"}}, "min_deciding": 3, "win_share": 2 / 3,
              "diversity": {"stratified": "long-3m", "rise": 1.0}}
    monkeypatch.setattr(clock, "read", lambda ladder: sealed)
    monkeypatch.setattr(clock, "_ranges", lambda run, setting, n_boot: {2**20: (1.0, 1.0), 2**21: (0.99, 1.0)})
    assert clock.diversity(presets.get("long-sotu"), n_boot=10)["compared"] == 0


def test_the_curves_put_each_ladder_size_at_the_base_tokens_each_clock_reads_it_at(monkeypatch):
    run = presets.get(LADDER)
    factor = clock.maps(run)
    sealed = clock.read(run)
    n = sealed["parameters"]
    assert factor == {"tokens": 1.0, "tokens per parameter": n["deep"] / n[LADDER]}
    curves = clock.curves(run)
    base = curves[curves["run"] == "deep"]
    assert set(base["model"]) == {m["base"] for m in sealed["models"].values()}
    assert (base["tokens per parameter"] == base["tokens"]).all()  # the base at its own tokens
    mine = curves[curves["run"] == LADDER]
    assert (abs(mine["tokens per parameter"] - mine["tokens"] * factor["tokens per parameter"]) < 1e-6).all()


def test_the_figure_draws_each_curve_in_both_panels_and_names_each_model_once():
    from rflens.figures import results as fr

    curves = pd.DataFrame([{"run": run, "model": "nope", "seed": seed, "tokens": t, "r": 1.1, "r low": 1.0,
                            "passes": t * (4 if run == "long-3m" else 1)}
                           for run, seeds in (("long", (0, 1)), ("long-3m", (0,))) for seed in seeds
                           for t in (2**20, 2**21)])
    fig = fr.clock_figure(curves, "long-3m", "long", ["tokens", "passes"])
    assert len(fig.data) == 2 * 3  # three curves, each in both panels
    assert [t.name for t in fig.data if t.showlegend] == ["nope"]  # one entry a setting: both runs, one colour
    named = fr.clock_figure(curves.assign(label="NoPE"), "long-3m", "long", ["tokens", "passes"])
    assert [t.name for t in named.data if t.showlegend] == ["NoPE"]  # by the paper's name where the rows give it
    right = [t for t in fig.data if t.xaxis == "x2" and t.line.dash == "solid"]
    assert list(right[0].x) == [2**22, 2**23]


def test_the_reading_states_each_ladders_standing_by_its_sealed_rule():
    from rflens.readings import long_runs

    table = pd.DataFrame([{"ladder": "deep-d128", "set beside": "deep", "clocks": "tokens against tokens per parameter",
                           "models": 8, "finished": 2, "measured": 3},
                          {"ladder": "long-3m", "set beside": "long", "clocks": "tokens against passes",
                           "models": 10, "finished": 0, "measured": 0}]).set_index("ladder")
    verdicts = {"deep-d128": {"deciding": 4, "agree": {"tokens": 3, "tokens per parameter": 0}, "holds": "tokens",
                              "min_deciding": 3, "win_share": 2 / 3},
                "long-3m": {"deciding": 0, "agree": {"tokens": 0, "passes": 0}, "holds": None,
                            "min_deciding": 3, "win_share": 2 / 3}}
    text = long_runs.clock_outcome(table, verdicts)
    assert "3 of its 8 models measured (2 finished)" in text and "3 with tokens and 0 with tokens per parameter" in text
    assert "**tokens** holds" in text and "no measured size decides between tokens and passes yet" in text
    verdicts["deep-d128"]["holds"] = None
    assert "needs at least 3 deciding cells, 67% of them" in long_runs.clock_outcome(table, verdicts)
    # the one-source ladder against the stratified run of its size, model by model (said with no deciding cell too)
    cells = [{"label": label, "differs": k < apart} for label, apart in (("ALiBi Δ = 8", 1), ("NoPE", 0)) for k in range(2)]
    diverse = {"long-3m": {"cells": cells, "compared": 4, "differ": 1, "matters": None, "stratified": "long-6m"}}
    said = long_runs.clock_outcome(table, verdicts, diverse)
    assert ("Against `long-6m`, the stratified run of its size (the same tokens, every source in proportion), 1 of the "
            "4 cells (model, size) where either rises have 95% ranges apart (ALiBi Δ = 8: 1 of 2 and NoPE: 0 of 2): the "
            "sealed rule does not decide whether diversity matters.") in said
    diverse["long-3m"]["matters"] = False
    assert "by the sealed rule, diversity **does not matter** at this size." in long_runs.clock_outcome(table, verdicts, diverse)
    assert "Against" not in long_runs.clock_outcome(table, verdicts)


def test_each_run_is_read_at_the_size_nearest_the_papers_tokens_per_parameter(monkeypatch):
    from rflens.claims import scoreboard, verdicts
    from rflens.readings import at_paper_ratio
    from rflens.store import shipped

    sizes = {}

    def board(scale, corpus="prose"):  # the size being read, as the board a size gives
        size = shipped.served_size()
        sizes.setdefault(scale, []).append(size)
        return [{"id": cid, "result": "fail" if size is not None and cid in (2, 5) else "pass"} for cid in range(1, 17)]

    monkeypatch.setattr(verdicts, "check_shipped", board)
    monkeypatch.setattr(scoreboard, "shipped_board", board)
    pr = scoreboard.at_paper_ratio(("deep",))
    ratio = clock.paper_tokens_per_parameter()
    n = clock.parameters(presets.get("deep"))
    near = pr["tokens there"].iloc[0]
    assert all(abs(math.log(near / n / ratio)) <= abs(math.log(t / n / ratio)) for t in plan.sizes(presets.get("deep")))
    assert sizes["deep"] == [None, near]  # the full budget's board, then the one at that size
    assert list(pr["claim"]) == list(presets.get("deep").decides)
    assert set(pr.loc[pr["claim"].isin([2, 5]), "at the paper's ratio"]) == {"fail"}
    assert set(pr["at the full budget"]) == {"pass"}
    text = str(at_paper_ratio(pr))
    assert "`deep` (12 layers, d = 64) at 4.2M tokens (4.9 a parameter): holds claims 1, 4, 6, 7 and 8; fails " \
           "claims 2 and 5. At its full budget (38.9 a parameter): holds claims 1, 2, 4, 5, 6, 7 and 8." in text
