"""The paper's depth: the deep preset maps the paper's windows and slopes by L_tr alone."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from rflens import paper
from rflens.longrun import plan
from rflens.setup import presets


def test_the_deep_preset_maps_the_papers_grids_by_l_tr_alone():
    deep = presets.get("deep")
    assert deep.model.n_layer == paper.N_LAYER and deep.train.l_tr == 64
    assert deep.train.batch_size * deep.train.l_tr == presets.get("long").train.batch_size * presets.get("long").train.l_tr
    assert deep.train.steps == presets.get("long").train.steps  # the long run's sizes, for side-by-side curves
    # w x 64 / 512 for every window of the paper, none dropped
    assert deep.sweeps.window == tuple(round(w * 64 / paper.L_TR) for w in paper.WINDOW) == (5, 10, 12, 15, 20, 40)
    assert [presets.paper_value("window", w, 12, 64) for w in deep.sweeps.window] == list(paper.WINDOW)
    assert [presets.paper_value("slope_shift", d, 12, 64) for d in deep.sweeps.slope_shift] == [-3, 6, 8]


@pytest.mark.parametrize("name", ["tiny", "long", "deep", "small", "full"])
def test_paper_value_undoes_each_presets_map(name):
    sc = presets.get(name)
    back = [presets.paper_value("window", w, sc.model.n_layer, sc.train.l_tr) for w in sc.sweeps.window]
    assert set(back) <= set(paper.WINDOW)
    assert [presets.paper_value("same_slope", h, sc.model.n_layer, sc.train.l_tr) for h in sc.sweeps.same_slope] == [
        h + (9 - sc.train.l_tr.bit_length() + 1) for h in sc.sweeps.same_slope]


def test_the_deep_plan_seeds_only_the_models_that_decide_a_claim_and_says_why(monkeypatch):
    monkeypatch.setattr(plan, "_failing", lambda spec, scale: None)  # no Table 1 model has failed
    names = [m.name for m in plan.models(presets.get("deep"))]
    assert "nope" not in names and "rotary" not in names  # no claim turns on them at this depth
    seeded = {n.rsplit("_seed=", 1)[0] for n in names if "_seed=" in n}
    assert seeded == {name for name, _ in presets.get("deep").sweeps.seeded}
    assert all(f"{n}_seed={s}" in names for n in seeded for s in (1, 2))
    why = plan.reasons(presets.get("deep"))
    assert set(why) == set(names)
    assert why["window_window=12_seed=1"].endswith("claim 1: the widest window the paper counts as stable")
    assert why["window_window=15"] == "Table 1: windowed attention of size w"
    # Table 2 waits for its Table 1 model to be shipped and to fail
    assert not any("l_tr=" in n and n.startswith(("window_window=20_", "alibi_slope_shift=3_")) for n in names)


def test_a_retrained_model_at_the_papers_ratio_can_wait_for_its_failure(monkeypatch):
    monkeypatch.setattr(plan, "_failing", lambda spec, scale: 100 if spec.name == "window_window=20" else None)
    table2 = next(specs for group, specs in plan.by_experiment(presets.get("deep")).items() if group.startswith("Table 2"))
    # the ERF of 100 is covered at 2 L_tr = 128, which is also the paper's ratio: one model, not two
    assert [s.name for s in table2] == ["window_window=20_batch_size=8_l_tr=128"]
    monkeypatch.setattr(plan, "_failing", lambda spec, scale: 200 if spec.name == "window_window=20" else None)
    table2 = next(specs for group, specs in plan.by_experiment(presets.get("deep")).items() if group.startswith("Table 2"))
    assert [s.name for s in table2] == ["window_window=20_batch_size=4_l_tr=256", "window_window=20_batch_size=8_l_tr=128"]
    # a failing Δ = 6, whose ERF reaches its segment's end: at the paper's ratio (4 L_tr) alone, never at 16 L_tr
    monkeypatch.setattr(plan, "_failing", lambda spec, scale: 1014 if spec.name == "alibi_slope_shift=3" else None)
    table2 = next(specs for group, specs in plan.by_experiment(presets.get("deep")).items() if group.startswith("Table 2"))
    assert [s.name for s in table2] == ["alibi_slope_shift=3_batch_size=4_l_tr=256"]


def test_a_deep_model_at_another_l_tr_is_measured_at_its_last_size_alone():
    from rflens.setup.settings import resolve
    from rflens.store import shipped
    from rflens.training import cost
    from rflens.training.trainer import point_steps

    def train(scale, name):
        spec = plan.named(name, presets.get(scale))
        return resolve(presets.get(scale), spec.pos, spec.corpus, spec.settings()).train

    sinusoidal_128 = train("deep", "sinusoidal_batch_size=8_l_tr=128")
    assert plan.measured_steps(presets.get("deep"), sinusoidal_128) == [sinusoidal_128.steps]
    # the deep run's own L_tr, and the long run at every L_tr: every size
    for scale, name in [("deep", "sinusoidal"), ("deep", "window_window=20"), ("long", "sinusoidal_batch_size=16_l_tr=64")]:
        cfg = train(scale, name)
        assert plan.measured_steps(presets.get(scale), cfg) == point_steps(cfg) and len(point_steps(cfg)) == 7
    # and its cost is timed so: no cool-down branch, one measurement
    at = cost.Speed(1e9, 1e9, 1, "a test")
    spec = plan.named("sinusoidal_batch_size=8_l_tr=128", presets.get("deep"))
    every = at.minutes(*(lambda r: (r.model, r.train))(resolve(presets.get("deep"), spec.pos, spec.corpus, spec.settings())),
                       presets.get("deep").eval)
    assert shipped.one_core_minutes([spec], presets.get("deep"), at)[0] < every
    listed = plan.listing(presets.get("deep"))["sizes measured"]
    assert listed["sinusoidal_batch_size=8_l_tr=128"].endswith(" of 1") and listed["sinusoidal"].endswith(" of 7")


def test_two_depths_are_read_side_by_side_from_their_bundles():
    import pandas as pd

    from rflens.readings import long_runs

    dp = pd.DataFrame([
        {"the paper's": "w = 160", "layers": 4, "L_tr": 32, "tokens": 33_554_432, "finished": True, "ERF": 93,
         "ERF / w": 3.1, "ERF / w, same tokens": 2.27, "r(16 L_tr)": 1.51, "low": 1.44, "high": 1.60,
         "state": "rises"},
        {"the paper's": "w = 160", "layers": 12, "L_tr": 64, "tokens": 2_097_152, "finished": False, "ERF": 48,
         "ERF / w": 2.4, "ERF / w, same tokens": None, "r(16 L_tr)": 1.0, "low": 1.0, "high": 1.0,
         "state": "extrapolates"}])
    boards = {"long": [{"id": 1, "result": "fail", "measured": "w=15: r = 1.31 [1.25, 1.38]"}, {"id": 2, "result": "fail"},
                       {"id": 13, "result": "pass"},
                       {"id": 15, "result": "not decided"}, {"id": 4, "result": "not decided"},
                       {"id": 7, "result": "fail", "measured": "w=30: r = 1.20"}],
              "deep": [{"id": 1, "result": "pass"}, {"id": 2, "result": "not run"}, {"id": 13, "result": "pass"},
                       {"id": 15, "result": "not run"}, {"id": 4, "result": "not decided"},
                       {"id": 7, "result": "not decided", "measured": "w=20: max r = 1.00"}]}
    text = long_runs.two_depths(dp, boards)
    assert "3.1 to 3.1 at 4 layers and 2.4 to 2.4 at 12 layers (1 of its 1 windows still training)" in text
    assert "the paper's is 4.8 to 6.4 at 12 layers" in text
    # a deep model still training is set beside the shallow one at the same size too
    assert "At the sizes the 12-layer windows have reached, the same settings at 4 layers read 2.3 to 2.3." in text
    assert "w = 160: rises at 4 layers (1.51 [1.44, 1.60], ERF 93 against $L_{tr}$ = 32" in text
    assert "extrapolates at 12 layers" in text
    assert "still training" in text
    assert "Claim 1 changes with depth: fail at `long` (w=15: r = 1.31 [1.25, 1.38]); pass at `deep`." in text
    assert "The same verdict at both depths: claim 13." in text
    assert "Not yet checked at 12 layers (their models are still to be trained): claim 2." in text
    assert "Outside the `deep` run's plan (read at four layers only): claim 15." in text
    assert ("Claim 7 is decided at one depth only: fail at `long` (w=30: r = 1.20); not decided at `deep` "
            "(w=20: max r = 1.00)." in text)
    assert "Not decided at either depth: claim 4." in text
    assert long_runs.two_depths(pd.DataFrame(), {}) == "The `deep` run has no model shipped yet."
    assert long_runs.by_depth(boards) == {1: ("fail", "pass"), 13: ("pass", "pass"), 4: ("not decided", "not decided"),
                                         7: ("fail", "not decided")}  # read at both depths: not 2 and 15
    # once every model is finished, ERF / w at the same tokens is the last size's: said once
    done = long_runs.two_depths(dp.assign(finished=True), boards)
    assert "windows have reached" not in done and "3.1 to 3.1 at 4 layers and 2.4 to 2.4 at 12 layers;" in done
    peaks = pd.DataFrame([{"layers": 4, "L_tr": 32, "peak at": 30, "peak - L_tr": -2},
                          {"layers": 12, "L_tr": 64, "peak at": 41, "peak - L_tr": -23}])
    assert ("Sinusoidal's largest gradient outside the most recent tokens sits at absolute position 30 at 4 layers "
            "with $L_{tr}$ = 32 (-2) and 41 at 12 layers with $L_{tr}$ = 64 (-23); the paper finds it at $L_{tr}$."
            in long_runs.two_depths(dp, boards, peaks=peaks))
    assert "Sinusoidal" not in text


def test_sinusoidals_peak_is_read_from_each_bundle_at_its_last_size(monkeypatch):
    import numpy as np

    from rflens.longrun import compare
    from rflens.readings import long_runs
    from rflens.store import bundle

    g = np.full(1024, 1e-4)
    g[1023 - 41] = 1e-2  # normalized[i]: the token i before the last, so absolute position 41
    point = {"tokens": 2048, "lengths": [64, 128, 256], "r": [1.0, 2.0, 3.0], "r_low": [1.0, 1.5, 2.5],
             "r_high": [1.0, 2.5, 3.5], "normalized": g.tolist()}
    jump = np.full(256, 1e-3)
    jump[255 - 64:] = 5e-3  # absolute positions 0 .. 64 hold more: a step down from L_tr into the unseen ones
    unscaled = {"train": {"l_tr": 64}, "model": {"scale_embeddings": False},
                "points": [{**point, "paper_input": {"length": 256, "normalized": jump.tolist()}}]}
    results = {"sinusoidal": {"train": {"l_tr": 64}, "model": {}, "points": [{**point, "tokens": 1024}, point]},
               "sinusoidal_seed=1": {"train": {"l_tr": 64}, "model": {}, "points": [point]},
               "sinusoidal_scale_embeddings=False": unscaled}
    monkeypatch.setattr(bundle, "complete", lambda scale: list(results) if scale == "deep" else [])
    monkeypatch.setattr(bundle, "load", lambda name, scale: results[name])
    peaks = compare.sinusoidal_peaks(("long", "deep"))
    common = {"run": "deep", "layers": 12, "L_tr": 64, "tokens": 2048, "peak at": 41, "peak - L_tr": -23, "peak at L_tr": False,
              "jumps at L_tr (16 L_tr input)": False, "r(4 L_tr)": 3.0, "low": 2.5, "high": 3.5}
    assert peaks.to_dict("records") == [
        {**common, "embeddings": "scaled", "jumps at L_tr (4 L_tr input)": None},  # the model that kept no paper input
        {**common, "embeddings": "unscaled", "jumps at L_tr (4 L_tr input)": True}]
    said = str(long_runs.paper_embeddings(peaks))
    assert "At 12 layers, $L_{tr}$ = 64: unscaled, Sinusoidal peaks at position 41 (-23)" in said
    assert "jumps at $L_{tr}$ on the 4 $L_{tr}$ input" in said and "appears only without the scaling" in said
    assert said.startswith("Each model from its first seed.") and "neither embedding" not in said
    flat = peaks.assign(**{"jumps at L_tr (4 L_tr input)": [None, False]})  # no jump with either: said so
    assert "At 12 layers ($L_{tr}$ = 64) neither embedding gives the jump: the scaling is not what keeps it from " \
           "appearing there." \
           in str(long_runs.paper_embeddings(flat))  # the same r: no "breaks harder"
    assert "not shipped yet" in str(long_runs.paper_embeddings(peaks[peaks["embeddings"] == "scaled"]))
    # every seed: a row each, named; the reading counts the seeds that jump, its first-seed sentences unchanged
    every = compare.sinusoidal_peaks(("long", "deep"), seeds=True)
    assert list(zip(every["embeddings"], every["seed"])) == [("scaled", 0), ("scaled", 1), ("unscaled", 0)]
    assert every[every["seed"] == 0].drop(columns="seed").reset_index(drop=True).equals(peaks)
    said_all = str(long_runs.paper_embeddings(every))
    assert said_all.startswith(said) and said_all.endswith(
        "Over the seeds shipped: scaled at 12 layers, $L_{tr}$ = 64, 0 of its 2 seeds jump at $L_{tr}$ (peaks at "
        "positions 41 and 41).")


def test_the_plans_listing_says_each_models_state_and_why(tmp_path, monkeypatch):
    from rflens.longrun import compare

    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path))  # an empty bundle: nothing shipped or started
    table = compare.listing(presets.get("deep"))
    assert list(table.columns) == ["model", "state", "sizes measured", "why"]
    assert table.drop(columns="model").equals(plan.listing(presets.get("deep")))
    assert table.loc["alibi_slope_shift=5_seed=1", "model"] == "ALiBi Δ = 8, seed 1"  # the paper's setting
    assert table.loc["sinusoidal_scale_embeddings=False_seed=2", "model"] == "Sinusoidal embeddings unscaled, seed 2"
    assert list(table.index) == [m.name for m in plan.models(presets.get("deep"))]
    assert set(table["state"]) == {"to train"}  # the models at another L_tr are measured at their end alone
    assert {name: n for name, n in table["sizes measured"].items() if n != "0 of 7"} == {
        "sinusoidal_batch_size=8_l_tr=128": "0 of 1"}
    assert table.loc["window_window=40_seed=2", "why"] == "Seeds 1, 2: claim 2: the widest window"


def test_the_depths_table_reads_the_shallow_run_at_the_size_the_deep_run_reached(monkeypatch):
    import pandas as pd

    from rflens.longrun import compare

    def curve(key, model, erfs, tokens):
        return pd.DataFrame([{"name": key, "model": model, "label": "w = 160", "l_tr": 32, "tokens": t, "erf": e,
                              "complete": True, "r_horizon": 1.0, "r_horizon_lo": 1.0, "r_horizon_hi": 1.0}
                             for e, t in zip(erfs, tokens)])

    tables = {"long": curve("window=160", "window_window=30", [47, 54, 68, 93], [2**19, 2**20, 2**21, 2**25]),
              "deep": curve("window=160", "window_window=20", [36, 48], [2**19, 2**21]).assign(l_tr=64, complete=False)}
    monkeypatch.setattr(compare, "by_paper_setting", lambda scale: tables[scale])
    dp = compare.depths()
    shallow, deep = dp.iloc[0], dp.iloc[1]
    assert (shallow["layers"], deep["layers"]) == (4, 12)
    assert shallow["ERF / w"] == round(93 / 30, 2) and shallow["ERF / w, same tokens"] == round(68 / 30, 2)
    assert deep["ERF / w"] == 2.4 and pd.isna(deep["ERF / w, same tokens"]) and not deep["finished"]


def test_figure_7_holds_the_models_the_preset_trains_and_claim_8_reads_sinusoidal_alone():
    from rflens.claims import gather, verdicts
    from rflens.errors import UserError
    from rflens.experiments import tables as ex

    deep = presets.get("deep")
    specs = ex.figure7_models(deep)  # no Rotary at this depth; the paper's embeddings at L_tr beside the book's
    assert [(s.pos, s.settings.get("scale_embeddings", True)) for s in specs] == [
        ("sinusoidal", True), ("sinusoidal", True), ("sinusoidal", False)]
    assert [s.pos for s in ex.figure7_models(presets.get("long"))][-1] == "rotary"
    with pytest.raises(UserError, match="--scale long"):
        ex.rotary_model(deep)
    book = dataclasses.replace(deep, sweeps=dataclasses.replace(deep.sweeps, paper_embeddings_l_tr=()))
    f7 = gather.figure7_curves("deep", "prose", ex.figure7(book, progress=False, train=False))
    assert f7["scale_embeddings"].all()
    (row,) = verdicts.check({"figure7": f7, "corpus": "prose", "scale": "deep"}, [8])
    assert row["result"] in ("pass", "fail", "not decided")  # decided on the bundle, not "not run" for want of Rotary
    assert "L_tr = 64: step at L_tr" in row["measured"] and "L_tr = 128: step at L_tr" in row["measured"]
    # where a run has Sinusoidal as the paper's code trains it, claim 8 reads those models alone
    paper = f7[f7["default_l_tr"]].assign(scale_embeddings=False, label="Sinusoidal, paper's embeddings, L_tr=64")
    (row,) = verdicts.check({"figure7": pd.concat([f7, paper]), "corpus": "prose", "scale": "deep"}, [8])
    assert "L_tr = 64: step at L_tr" in row["measured"] and "L_tr = 128" not in row["measured"]


def test_the_sinusoidal_deviation_states_what_the_deep_bundle_measured():
    """The deviations table quotes claim 8's two embeddings at the paper's depth: its numbers
    are those of the shipped models (a retrained or reseeded bundle that moves them fails here)."""
    from rflens.longrun import compare
    from rflens.setup.deviations import DEVIATIONS

    (row,) = [d for d in DEVIATIONS if d.setting == "scale_embeddings"]
    peaks = compare.sinusoidal_peaks(("long", "deep"))
    for run, l_tr in (("deep", 64), ("long", 32), ("long", 64)):
        at = peaks[(peaks["run"] == run) & (peaks["L_tr"] == l_tr)].set_index("embeddings")
        for kind in ("unscaled", "scaled"):
            r = at.loc[kind]
            assert f"{r['r(4 L_tr)']:.3g} [{r['low']:.3g}, {r['high']:.3g}]" in row.why, (run, kind)
            assert not r["jumps at L_tr (16 L_tr input)"]
        assert f"positions {at.loc['unscaled', 'peak at']} and {at.loc['scaled', 'peak at']}" in row.why, run
        assert at.loc["unscaled", "jumps at L_tr (4 L_tr input)"] is False
        # the peak at L_tr: the unscaled model's alone at 4 layers, neither's at 12
        assert (at.loc["unscaled", "peak at L_tr"], at.loc["scaled", "peak at L_tr"]) == (run == "long", False)
    # the further seeds of the unscaled model at 12 layers, as the row quotes them: none jumps
    seeds = compare.sinusoidal_peaks(("deep",), seeds=True)
    further = seeds[(seeds["embeddings"] == "unscaled") & (seeds["seed"] > 0)].sort_values("seed")
    assert list(further["seed"]) == [1, 2]
    assert f"positions {' and '.join(str(p) for p in further['peak at'])}" in row.why
    for _, r in further.iterrows():
        assert f"{r['r(4 L_tr)']:.3g} [{r['low']:.3g}, {r['high']:.3g}]" in row.why
        assert not r["jumps at L_tr (16 L_tr input)"] and not r["jumps at L_tr (4 L_tr input)"]


def test_claim7_is_read_in_both_protocols_with_every_document_where_the_bundle_holds_it():
    import pandas as pd

    from rflens.longrun import compare
    from rflens.readings import table2_protocols

    tp = compare.table2_protocols("deep")
    row = tp.set_index("retrained").loc["ALiBi Δ = 6, L_tr = 256"]
    assert row["Table 1 ERF (16 L_tr input)"].startswith("≥") and row["L"] == 1024 and row["L_tr"] == 256
    assert row["r low"] <= row["r"] <= row["r high"]
    every = {"retrained": row.name, **row.to_dict()} | {"r, every document": 1.05, "low, every document": 1.04, "high, every document": 1.06,
                             "documents, every": 308, "Table 1 ERF (4 L_tr input)": "≥ 256"}
    text = str(table2_protocols(pd.DataFrame([every])))
    assert "on the paper's input of 4 $L_{tr}$" in text and "≥ 256 on the paper's input" in text
    assert "on every one of its 308 test documents, r = 1.050 [1.040, 1.060]" in text
    capped = str(table2_protocols(pd.DataFrame([{**every, "ERF (4 L_tr input)": "≥ 977"}])))
    uncapped = str(table2_protocols(pd.DataFrame([{**every, "ERF (4 L_tr input)": "200"}])))
    assert "reaches the start of the paper's input" in capped and "reaches the start" not in uncapped
    assert "not measured" in str(table2_protocols(tp.iloc[[0]]))  # a model trained before the bundle kept it
    # the paper's rule in its own protocol: a Table 1 field that fills the 4 L_tr input asks for L_tr = 4 x its own
    assert "fills the paper's input" in text and "4 $L_{tr}$ = 256: the $L_{tr}$ of this retraining" in text
    shorter = str(table2_protocols(pd.DataFrame([{**every, "L_tr": 128}])))
    assert "4 $L_{tr}$ = 256: this retraining used 128" in shorter
    assert "fills" not in str(table2_protocols(pd.DataFrame([{**every, "Table 1 ERF (4 L_tr input)": "120"}])))
    # the shipped bundle: the original Δ = 6 measured on the paper's input, its field filling it
    assert row["Table 1 ERF (4 L_tr input)"].startswith("≥")


def test_the_table2_sample_deviation_states_what_the_deep_bundle_scored():
    import json

    from rflens.setup.deviations import DEVIATIONS
    from rflens.store import bundle

    (row,) = [d for d in DEVIATIONS if d.what == "Table 2's evaluation sample"]
    result = bundle.read_result(bundle.entries("deep")["alibi_slope_shift=3_batch_size=4_l_tr=256"])
    corpora = json.loads((bundle.bundle_dir("deep") / bundle.CORPORA).read_text())["corpora"]["prose"]
    scored, total = len(set(result["segment_docs"])), corpora["documents"]["test"]
    assert f"{scored} of prose-wide's {total} for {result['eval']['n_segments']} segments" in row.why
    from rflens.longrun import compare

    r = compare.table2_protocols("deep").set_index("retrained").loc["ALiBi Δ = 6, L_tr = 256"]
    assert (f"r({r['L']}) = {r['r']:.3f} [{r['r low']:.3f}, {r['r high']:.3f}] on the uniform draw's {r['documents']} "
            f"documents and {r['r, every document']:.3f} [{r['low, every document']:.3f}, "
            f"{r['high, every document']:.3f}] on all {int(r['documents, every'])}.") in " ".join(row.why.split())
