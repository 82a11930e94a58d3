"""The paper's experiments as tables, and the figures built from them.

Fast tests use synthetic tables; the slow ones train a handful of smoke-scale models in a
temporary run store (Table 1, Figure 7, Table 3 and the protocols of Chi et al., ACL 2023)
and check that a second call is served from the store.
"""

import dataclasses
import json
import time

import numpy as np
import pandas as pd
import pytest

from rflens.claims import scoreboard
from rflens.experiments import book_models, speed, tables as ex
from rflens.figures import results as fr
from rflens.longrun import emergence, plan
from rflens.measure import columns, receptive
from rflens.readings import pilot
from rflens.setup import presets, settings
from rflens.setup.config import ModelConfig
from rflens.store import shipped
from rflens.training import cost

LENGTHS = [16, 32, 64, 128, 256]


def wide(label, ppl, *, l_tr=16, **extra):
    out = {"label": label, "l_tr": l_tr, **extra}
    return columns.add_ppl_columns(out, {"lengths": LENGTHS, "ppl": ppl, "ci_low": [p - 1 for p in ppl],
                                    "ci_high": [p + 1 for p in ppl]}, l_tr)


def synthetic_t1():
    rows = [wide("Δ=-3", [10, 10, 10, 10, 10], family="slope_shift", value=-3),
            wide("Δ=6", [10, 20, 40, 80, 160], family="slope_shift", value=6),
            wide("h=0", [12, 12, 12, 12, 12], family="same_slope", value=0),
            wide("w=4", [15, 15, 15, 15, 15], family="window", value=4),
            wide("w=16", [10, 11, 30, 60, 90], family="window", value=16)]
    for r, erf in zip(rows, (10, 60, 5, 7, 50)):
        r.update(erf=erf, share_in_ltr=0.9, theoretical=None, pos="alibi")
    return pd.DataFrame(rows)


def synthetic_curves(labels=("a", "b", "c"), length=64):
    out = {}
    for i, lab in enumerate(labels):
        g = np.exp(-np.arange(length) / (3 + 5 * i))
        g /= g.sum()
        out[lab] = {"normalized": g.tolist(), "cumulative": np.cumsum(g).tolist(), "erf": 10 + i, "l_tr": 16,
                    "threshold": 0.99, "share_in_ltr": 0.9, "theoretical": 8 if i == 0 else None, "length": length}
    return out


# ----------------------------------------------------------------------------- table helpers
def test_ratio_columns_and_lengths_round_trip():
    t1 = synthetic_t1()
    assert columns.lengths_of(t1) == LENGTHS and columns.lengths_of(t1, "r") == LENGTHS
    assert t1.loc[1, "r@256"] == 16 and t1.loc[1, "max_r"] == 16 and t1.loc[0, "extrapolates"]
    assert list(t1["extrapolates"]) == [True, False, True, True, False]
    long = columns.long_form(t1)
    assert len(long) == len(t1) * len(LENGTHS) and {"l_ex", "ppl", "r", "ci_low"} <= set(long.columns)
    view = columns.display_table(t1, "r", extra=["extrapolates"])
    assert list(view.columns) == [str(L) for L in LENGTHS] + ["extrapolates"]


def test_ints_from_sweeps_become_the_settings_types():
    spec = ex.make_spec("Δ=0", "alibi", slope_shift=np.int64(0), window=np.float64(8.0))
    s = ModelConfig(pos=spec.pos, **spec.settings)
    assert type(s.slope_shift) is float and type(s.window) is int
    # so that the run key of Table 1's Delta = 0 equals the default ALiBi's (same JSON)
    assert json.dumps(s.slope_shift) == "0.0"


def test_table2_plan_retrains_only_listed_failures():
    smoke = presets.get("smoke")
    sc = dataclasses.replace(smoke, sweeps=dataclasses.replace(smoke.sweeps, table2=[
        presets.Retrain("window", 16, l_tr=64, batch_size=2),
        presets.Retrain("slope_shift", 6, l_tr_mult=4),
        presets.Retrain("slope_shift", -3, l_tr=64),  # extrapolates already: skipped
        presets.Retrain("window", 99, l_tr=64),  # not in this Table 1
    ]))
    pairs = ex._table2_plan(sc, synthetic_t1())
    assert [(old["label"], over) for old, over in pairs] == [
        ("w=16", {"l_tr": 64, "batch_size": 2}), ("Δ=6", {"l_tr": 64})]


def test_table2_entries_that_come_to_the_same_model_give_one_pair():
    smoke = presets.get("smoke")
    batch = smoke.train.batch_size
    sc = dataclasses.replace(smoke, sweeps=dataclasses.replace(smoke.sweeps, table2=[
        presets.Retrain("window", 16),  # the L_tr that covers its ERF (50): 4 x 16 = 64
        presets.Retrain("window", 16, l_tr_mult=4, batch_size=max(1, batch // 4)),  # the same model
        presets.Retrain("window", 16, l_tr_mult=8, batch_size=max(1, batch // 8)),  # another one
    ]))
    t1 = synthetic_t1().assign(l_tr=16)
    pairs = ex._table2_plan(sc, t1)
    assert [over for _, over in pairs] == [{"l_tr": 64, "batch_size": max(1, batch // 4)},
                                          {"l_tr": 128, "batch_size": max(1, batch // 8)}]


# ----------------------------------------------------------------------------- figures
def _menus_use_title_text(fig):
    for menu in list(fig.layout.updatemenus) + list(fig.layout.sliders):
        items = menu.buttons if hasattr(menu, "buttons") and menu.buttons else menu.steps
        for item in items:
            layout_args = item.args[1] if len(item.args) > 1 else {}
            assert "title" not in layout_args, "a bare 'title' erases the title in plotly.js >= 3"
            assert "title.text" in layout_args
            assert len(item.args[0]["visible"]) == len(fig.data)


def test_ppl_curves_has_one_menu_entry_per_family():
    fig = fr.ppl_curves(synthetic_t1())
    assert len(fig.data) == 2 * 5  # perplexity and r(L) of each model
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == [ex.FAMILY_TITLES[f] for f in
                                                                   ("slope_shift", "same_slope", "window")]
    assert sum(bool(t.visible) for t in fig.data) == 2 * 2  # the first family only
    _menus_use_title_text(fig)


def test_ratio_heatmap_and_table2_figure():
    t1 = synthetic_t1()
    fig = fr.ratio_heatmap(t1)
    assert len(fig.data) == 2 and fig.data[0].z.shape == (5, 5)
    _menus_use_title_text(fig)
    t2 = pd.DataFrame([wide("w=16, L_tr=64", [11, 10, 10, 10, 10], l_tr=64, family="window", value=16)])
    fig = fr.table2_figure(t1, t2)
    assert len(fig.data) == 2 * 2 and fig.data[2].line.dash == "dash"  # perplexity and r(L) of each model


def test_erf_explorer_switches_models_and_marks_l_tr_and_erf():
    curves = synthetic_curves()
    fig = fr.erf_figure(curves)
    assert len(fig.data) == 6  # normalised + cumulative per model
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["a", "b", "c", "all"]
    # "all" draws both panels of every model, with a legend entry each (their first trace)
    assert all(buttons[-1].args[0]["visible"]) and all(fig.data[2 * i].showlegend is not False for i in range(3))
    _menus_use_title_text(fig)
    shapes = buttons[1].args[1]["shapes"]
    assert {s["x0"] for s in shapes if s.get("xref") == "x"} >= {16, 11}  # L_tr and ERF of "b"
    assert any(s["label"]["text"].startswith("R·w") for s in buttons[0].args[1]["shapes"])


def test_gradient_jump_table3_and_protocol_figures():
    curves = synthetic_curves(("Sinusoidal, L_tr=8", "Sinusoidal, L_tr=16"))
    f7 = pd.DataFrame([{"label": lab, "l_tr": l_tr, **receptive.gradient_jump(curves[lab]["normalized"], l_tr)}
                       for lab, l_tr in zip(curves, (8, 16))])
    fig = fr.gradient_jump_figure(curves, f7)
    assert len(fig.data) == 4 and len(fig.layout.updatemenus[0].buttons) == 2
    _menus_use_title_text(fig)

    t3 = pd.DataFrame([wide(p, [10, 10, 11, 12, 13], pos=p, corpus=c, learnable=p == "t5", tokens_per_s=1000.0)
                       for c in ("prose", "code") for p in ("alibi", "sandwich", "t5")])
    fig = fr.table3_figure(t3)
    assert len(fig.data) == 2 * (2 * 3 + 1) and [b.label for b in fig.layout.updatemenus[0].buttons] == ["prose", "code"]
    _menus_use_title_text(fig)

    pr = pd.DataFrame([{"label": m, "protocol": p, "l_tr": 16, "l_ex": L, "ppl": 10.0, "ci_low": 9.0, "ci_high": 11.0}
                       for m in ("ALiBi", "Sandwich") for p in ex.PROTOCOLS for L in LENGTHS])
    fig = fr.protocol_figure(pr)
    assert len(fig.data) == 2 * 6 and len(fig.layout.updatemenus[0].buttons) == 2
    _menus_use_title_text(fig)


def test_erf_widget_recomputes_the_erf_with_the_threshold():
    from rflens.widgets.results import erf_explorer, erf_table

    curves = synthetic_curves()
    assert erf_table(curves, ["a"], 0.5)[0]["erf"] < erf_table(curves, ["a"], 0.99)[0]["erf"]
    box = erf_explorer(curves, selected=["a", "b"])
    slider = box.children[0].children[1].children[0]
    before = box.children[2].value
    slider.value = 0.6
    assert box.children[2].value != before
    (shown,) = box.children[1].outputs  # the figure in the Output: 2 curves for each of 2 models
    assert len(shown["data"]["application/vnd.plotly.v1+json"]["data"]) == 4
    assert "ERF explorer" in repr(box)


# ----------------------------------------------------------------------------- smoke scale, real models
@pytest.fixture(scope="module")
def smoke_store(tmp_path_factory):
    """A smoke preset with one point per sweep, a fresh run store and data folder."""
    root = tmp_path_factory.mktemp("store")
    base = presets.get("smoke")
    small = dataclasses.replace(base, sweeps=dataclasses.replace(
        base.sweeps, slope_shift=[0], same_slope=[], window=[4], sinusoidal_l_tr=[16],
        table3_pos=["alibi"], corpora=["prose"]))
    real_get = presets.get
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RFLENS_RUNS", str(root / "runs"))
        mp.setenv("RFLENS_DATA", str(root / "data"))
        mp.setattr(presets, "get", lambda name: small if name == "smoke" else real_get(name))
        ex._RUNS.clear()
        yield root
        ex._RUNS.clear()


@pytest.mark.slow
def test_smoke_experiments_train_once_and_reuse_the_store(smoke_store):
    t1 = ex.table1(presets.get("smoke"), progress=False)
    # named by the paper's setting (Δ = 0 trained at L_tr = 16 is the paper's 5); no paper's w maps to w = 4 here
    assert list(t1["label"]) == ["Δ = 5", "w = 4 (unmapped)"] and list(t1["value"]) == [0, 4]
    assert columns.lengths_of(t1) == [16, 32, 64, 128, 256]
    assert t1["erf"].between(1, 64).all() and (t1["r@16"] == 1).all()
    assert t1.loc[t1.label == "w = 4 (unmapped)", "theoretical"].item() == 8  # R * w = 2 * 4

    t3 = ex.table3(presets.get("smoke"), progress=False)
    # ALiBi with Delta = 0 is one model: the Table 1 row and the Table 3 entry share the run
    assert t3["run_key"].item() == t1.loc[t1.label == "Δ = 5", "run_key"].item()
    assert np.isfinite(t3["tokens_per_s"].item())

    f7 = ex.figure7(presets.get("smoke"), progress=False)
    assert list(f7["pos"]) == ["sinusoidal", "rotary"] and f7["default_l_tr"].all()
    assert (f7["erf_length"] == 64).all() and f7["jump_abs_pos"].notna().all()

    pr = ex.protocols(presets.get("smoke"), positions=("alibi",), progress=False)
    assert set(pr["protocol"]) == set(ex.PROTOCOLS) and len(pr) == 3 * 5

    n_runs = len(list((smoke_store / "runs").glob("*/manifest.json")))
    assert n_runs == 4  # Δ=0 (= ALiBi), w=4, Sinusoidal, Rotary

    ex._RUNS.clear()
    start = time.perf_counter()
    again = ex.table1(presets.get("smoke"), progress=False)
    assert time.perf_counter() - start < 10
    pd.testing.assert_frame_equal(again, t1)

    # nothing is trained without compute: Figure 11's models are missing, so its claim is "not run"
    board = {c["id"]: c for c in scoreboard.scoreboard("smoke", compute=False, progress=False)}
    assert len(list((smoke_store / "runs").glob("*/manifest.json"))) == n_runs
    assert board[11]["result"] == "not run" and board[1]["result"] != "not run"
    assert (smoke_store / "runs" / "scoreboard-smoke.json").is_file()


def test_training_speed_is_measured_side_by_side_and_cached(store):
    first = speed.training_speed(presets.get("smoke"), ["alibi", "t5"], rounds=2, steps=1, progress=False)
    assert set(first) == {"alibi", "t5"} and all(len(v) == 2 and min(v) > 0 for v in first.values())
    assert speed.training_speed(presets.get("smoke"), ["alibi", "t5"], rounds=2, steps=1, progress=False) == first
    assert len(list((store / "speed").glob("smoke-*.json"))) == 1


def test_the_plans_cost_times_each_model_by_its_flops_at_the_shipped_models_speed(store, reference, monkeypatch):
    """One shipped model sets the speed: timed at it, that model's own spec takes its own
    wall time; a longer L_tr costs more than its tokens, through the quadratic measurement."""
    from rflens.setup.config import EvalConfig
    from rflens.store import bundle

    spec = plan.LongModel("alibi", (("schedule", "wsd"), ("warmup", 2), ("steps", 8)))
    assert shipped.one_core_speed("smoke") is None and "not timed" in shipped.one_core_cost([spec], presets.get("smoke"))
    assert shipped.one_core_cost([], presets.get("smoke")) == "nothing: no model is left to train"  # a plan fully shipped
    emergence.run(spec, presets.get("smoke"), progress=False)
    result = bundle.load(spec.name, "smoke")
    # wall times fixed, as the run's own (rounded to 0.1 s) can read 0.0 s of measuring
    timed = {**result, "train_seconds": 90.0, "points": [{**p, "measure_seconds": 2.5} for p in result["points"]]}
    monkeypatch.setattr(bundle, "load", lambda name, scale: timed)
    at = shipped.one_core_speed("smoke")
    assert at.models == 1 and at.where.endswith("like this one") and at.measure != at.train
    assert shipped.one_core_minutes([spec], presets.get("smoke"), at)[0] == pytest.approx(1.5, rel=1e-9)
    _, model_cfg, _, train_cfg = settings.resolve(presets.get("smoke"), "alibi", "prose", dict(spec.overrides))
    ev = EvalConfig.from_dict(result["eval"])
    train, measure = cost.run_flops(model_cfg, train_cfg, ev)
    longer = train_cfg.replace(l_tr=4 * train_cfg.l_tr, batch_size=train_cfg.batch_size)
    train4, measure4 = cost.run_flops(model_cfg, longer, ev)
    assert train4 > 4 * train and measure4 > 4 * measure  # 4x the tokens, and longer attention
    # a model whose measurements took no measurable time is timed at the training speed
    monkeypatch.setattr(bundle, "load", lambda name, scale: {**result, "points": [
        {**p, "measure_seconds": 0.0} for p in result["points"]]})
    flat = shipped.one_core_speed("smoke")
    assert flat.measure == flat.train
    # a model trained on a GPU says nothing of a core's speed
    monkeypatch.setattr(bundle, "load", lambda name, scale: {**timed, "device": "NVIDIA H200"})
    assert shipped.one_core_speed("smoke") is None


def test_the_cost_of_a_stopped_model_is_what_is_left_of_it_from_its_kept_state(store):
    """A model a sitting stopped costs the steps after its kept checkpoint and the sizes it has
    not measured: nothing once every step and size is done, the whole run with no state (or a
    damaged one), and the full cost whenever ``resumed`` is not asked for."""
    from rflens import storage
    from rflens.store.bundle import emergence_state

    spec = plan.LongModel("alibi", (("schedule", "wsd"), ("warmup", 2), ("steps", 8)))
    at = cost.Speed(1e9, 2e9, 1, "a test")
    full = shipped.one_core_minutes([spec], presets.get("smoke"), at)[0]
    assert shipped.one_core_minutes([spec], presets.get("smoke"), at, resumed=True)[0] == full  # nothing kept
    work = emergence_state("smoke", spec.name)
    _, model_cfg, _, train_cfg = settings.resolve(presets.get("smoke"), "alibi", "prose", dict(spec.overrides))
    sizes = plan.measured_steps(presets.get("smoke"), train_cfg)
    work.mkdir(parents=True)
    storage.write_json(work / "checkpoint.json", {"step": train_cfg.steps})
    storage.write_json(work / "points.json", [{"steps": s} for s in sizes])
    assert shipped.one_core_minutes([spec], presets.get("smoke"), at, resumed=True) == [0.0]
    storage.write_json(work / "checkpoint.json", {"step": train_cfg.steps // 2})
    storage.write_json(work / "points.json", [{"steps": s} for s in sizes[:-1]])
    assert 0 < shipped.one_core_minutes([spec], presets.get("smoke"), at, resumed=True)[0] < full
    assert shipped.one_core_minutes([spec], presets.get("smoke"), at)[0] == full
    (work / "points.json").write_text("{not json")
    assert shipped.one_core_minutes([spec], presets.get("smoke"), at, resumed=True)[0] == full


@pytest.mark.parametrize("name", ["tiny", "full"])
def test_model_plan_lists_every_model_of_the_book_once(name):
    """Chapter 11's plan comes from the experiments' own model lists: a model two experiments
    share (ALiBi at Delta = 0 is a Table 1 row and a Table 3 entry) is trained once."""
    plan = book_models.model_plan(presets.get(name))
    keys = [(m["pos"], m["corpus"], tuple(sorted(m["overrides"].items()))) for m in plan]
    assert len(keys) == len(set(keys))
    sc = presets.get(name)
    t1 = len(sc.sweeps.slope_shift) + len(sc.sweeps.same_slope) + len(sc.sweeps.window)
    # on prose, Delta = 0 is Table 3's ALiBi, and Figure 7's Sinusoidal (at the scale's L_tr) and
    # Rotary are Table 3's: listed under the experiment that comes first
    shared = int(0 in sc.sweeps.slope_shift) + int(sc.train.l_tr in sc.sweeps.sinusoidal_l_tr) + 1
    assert sum(m["experiment"] == "Table 1" for m in plan) == t1
    assert sum(m["experiment"] == "Table 3" for m in plan) == len(sc.sweeps.table3_pos) * len(sc.sweeps.corpora) - shared
    # Chapter 12 adds FIRE on every corpus, its threshold started at L_tr
    beyond = [m for m in plan if m["experiment"] == "Beyond the paper"]
    assert [m["pos"] for m in beyond] == ["fire"] * len(sc.sweeps.corpora)
    assert all(m["overrides"].get("max_distance") == sc.train.l_tr for m in beyond)
    rows = book_models.training_cost(presets.get(name))
    assert len(rows) == len(plan) and all(c["gpu_hours"] > 0 for c in rows)


def _pilot_json(tmp_path, r16_fail, r_stable):
    def model(spec, r16, pos):
        r = [1.0, 1.0, 1.0, 1.0, r16]
        return {"R": 6, "d": 128, "l_tr": 32, "tokens_label": "3M", "spec": spec, "pos": pos, "ppl": [50.0] * 5,
                "lengths": [32, 64, 128, 256, 512], "r": r, "r_lo": [x * 0.95 for x in r],
                "r_hi": [x * 1.02 for x in r], "erf": 100, "train_minutes": 3.0}
    models = {s: model(s, r16_fail, "window") for s in pilot.PILOT_FAILING}
    models |= {s: model(s, r_stable, "window") for s in pilot.PILOT_STABLE}
    path = tmp_path / "phenomena.json"
    path.write_text(json.dumps({"meta": {}, "models": models}))
    return path


@pytest.mark.parametrize("r16_fail, r_stable, qualifies", [(2.5, 1.0, True), (2.0, 1.0, False), (2.5, 1.09, False)])
def test_the_pilot_rule(tmp_path, r16_fail, r_stable, qualifies):
    """A configuration qualifies when the failing side's lower bounds reach 2 and the stable
    side's upper bounds stay within 1.10 (2.0 x 0.95 misses; 1.09 x 1.02 rises too much)."""
    summary = pilot.pilot_summary(pilot.pilot_table(_pilot_json(tmp_path, r16_fail, r_stable)))
    assert len(summary) == 1 and bool(summary["qualifies"].item()) is qualifies
    assert pilot.pilot_table(tmp_path / "missing.json").empty


def test_chapter_experiments_match_what_the_chapters_call():
    """reproduce --plan lists a chapter's models from CHAPTER_EXPERIMENTS: it must name the
    experiments whose functions the chapter's notebook calls."""
    import re
    from pathlib import Path

    calls = {"table1": {"Table 1"}, "table2": {"Table 2"}, "figure7": {"Figure 7"}, "table3": {"Table 3"},
             "figure11": {"Figure 11"}, "protocols": {"Protocols"}, "rope_stretching": {"Figure 7"},
             "fire_table": {"Table 3", "Beyond the paper"}}
    book = Path(__file__).resolve().parents[1] / "book"
    for chapter, named in book_models.CHAPTER_EXPERIMENTS.items():
        if chapter == "09":  # the scoreboard reads every experiment through the claims
            continue
        text = next(book.glob(f"{chapter}_*.ipynb")).read_text()
        used = {e for f in re.findall(r"(?:ex|beyond)\.(\w+)\(", text) if f in calls for e in calls[f]}
        assert used == set(named), chapter


def test_the_seed_spread_says_when_its_verdicts_were_checked_under_another_criterion(tmp_path):
    from rflens import storage
    from rflens.claims import statements
    from rflens.readings import pilot

    record = {"scale": "tiny", "seeds": [0, 1], "claims": {"14": {"0": {"result": "fail", "measured": "m"}}},
              "table1": [{"label": "w=30", "seed": 0, "r_top": 1.3, "r_lo": 1.2, "r_hi": 1.4}],
              "table3": [{"seed": 0, "corpus": "prose", "pos": "alibi", "label": "ALiBi", "ppl_l_tr": 9.0, "ppl_top": 9.5}]}
    storage.write_json(tmp_path / "old.json", record)
    old = pilot.seed_spread(tmp_path / "old.json")["claims"].iloc[0]
    # not shown as a verdict (the board's may differ), with what it read under the earlier criterion
    assert old["result"] == "not decided again" and old["criterion"].startswith("an earlier one, under which it read fail")
    storage.write_json(tmp_path / "new.json", {**record, "criteria": {"14": statements.BY_ID[14].criterion}})
    new = pilot.seed_spread(tmp_path / "new.json")["claims"]
    assert list(new["criterion"]) == ["today's"] and list(new["result"]) == ["fail"]
