"""The two long runs read side by side (rflens.longrun.compare), on the shipped control bundle and
on second-run bundles made from its models."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from rflens import readings as rd, storage
from rflens.longrun import compare as lr, plan
from rflens.store import bundle
from rflens.setup import presets

CONTROL = lr.CONTROL
REPO_CONTROL = bundle.bundle_dir(CONTROL)  # the repository's, before a test points $RFLENS_REFERENCE elsewhere
pytestmark = pytest.mark.skipif("nope" not in bundle.entries(CONTROL), reason="no control bundle in this checkout")


def _as_second_run(reference, models: dict[str, str]) -> None:
    """A ``long`` bundle in ``reference`` holding copies of control models under other names,
    each with the settings its name stands for in the long plan (a shipped model contradicting
    its name is damage: rflens.longrun.plan.check_shipped)."""
    from rflens.setup.settings import resolve

    run = presets.long_run("long")
    specs = {spec.name: spec for spec in plan.models(run)}
    for name, source in models.items():
        target = bundle.bundle_dir("long") / name
        shutil.copytree(bundle.bundle_dir(CONTROL) / source, target,
                        ignore=shutil.ignore_patterns(bundle.WEIGHTS))
        man = storage.read_json(target / bundle.MANIFEST)
        man["sha256"].pop(bundle.WEIGHTS, None)
        storage.write_json(target / bundle.MANIFEST, man)
        result = bundle.read_result(target)
        spec = specs[name]
        planned = resolve(run, spec.pos, spec.corpus, spec.settings())
        bundle.rewrite_result("long", name, {**result, "name": name, "scale": "long", "pos": spec.pos,
                                             "corpus": spec.corpus, "settings": spec.settings(),
                                             "model": planned.model.to_dict(), "data": planned.data.to_dict(),
                                             "train": planned.train.to_dict()})


@pytest.fixture
def control_beside(reference, monkeypatch):
    """The repository's control bundle copied beside an empty ``long`` bundle of this test's own."""
    shutil.copytree(REPO_CONTROL, reference / CONTROL)
    return reference


def test_a_state_reads_the_lower_end_for_a_break_and_the_upper_for_extrapolating():
    assert lr.state({"r_horizon_lo": 2.0, "r_horizon_hi": 3.0}) == "breaks"
    assert lr.state({"r_horizon_lo": 1.9, "r_horizon_hi": 3.0}) == "rises"
    assert lr.state({"r_horizon_lo": 0.9, "r_horizon_hi": 1.10}) == "extrapolates"
    assert lr.state({"r_horizon_lo": 0.9, "r_horizon_hi": 1.11}) == "rises"


def test_side_by_side_pairs_a_model_of_both_runs_by_name(control_beside):
    _as_second_run(control_beside, {"window_window=30": "window_window=8", "nope": "nope"})
    sbs = lr.side_by_side()
    assert set(sbs.columns.get_level_values(0)) == {"", "long", CONTROL}
    assert sbs.loc["nope", ("long", "state")] == sbs.loc["nope", (CONTROL, "state")] == "breaks"
    # the copy of w=8 stands in the second run for w=30: a different state, said so
    assert sbs.loc["window_window=30", ("long", "state")] == "extrapolates"
    assert sbs.loc["window_window=30", (CONTROL, "state")] == "rises"
    assert pd.isna(sbs.loc["rotary", ("long", "state")])  # only in the control
    text = rd.two_runs(sbs, 2, 62, "some hours")
    assert "holds 2 of its 62 models; the rest need some hours" in text
    # the experiments named are those of the models shipped in both (w = 30: Table 1; NoPE), not every thesis one
    assert "Of the 2 thesis models (Table 1; NoPE and Figure 7) shipped in both, 1 end in the same state" in text
    assert "(rises on repeated text, extrapolates on new) ends in another" in text
    assert "NoPE (from 8.4M tokens on new text, 8.4M on repeated) breaks in both runs." in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and "model" not in ln]
    assert len(rows) == 2 and "| extrapolates | 1.96 [1.68, 2.20] | rises |" in rows[0] and "| breaks from" in rows[1]


def test_the_seeds_agree_only_when_every_shipped_seed_gives_the_same_state(control_beside):
    _as_second_run(control_beside, {"rotary": "rotary", "rotary_seed=1": "sinusoidal", "window_window=8": "window_window=8",
                                    "window_window=8_seed=1": "window_window=8", "window_window=8_seed=2": "window_window=30"})
    spread = lr.seed_spread("long")
    assert spread.loc["rotary", "same state"] and spread.loc["rotary", "seeds shipped"] == 2
    agree = spread.loc["window_window=8", "same state"]
    assert agree is not None and not agree  # seed 2 rises where seeds 0 and 1 extrapolate
    assert spread.loc["window_window=8", "seeds shipped"] == 3 and "rises" in spread.loc["window_window=8", "seed 2"]
    assert pd.isna(spread.loc["sinusoidal", "same state"])  # none shipped


def test_the_early_warning_flags_an_early_erf_beyond_l_tr_and_counts_what_followed():
    ew = lr.early_warning((CONTROL,))
    assert len(ew) == len(bundle.complete(CONTROL))
    assert (ew["flagged"] == (ew["ERF / L_tr first"] > 1)).all()
    counts = lr.warning_counts(ew)
    assert counts.values.sum() == len(ew)
    broke = ew[ew["breaks"]]
    missed = int((~broke["flagged"]).sum())
    text = rd.early_warning(counts)
    assert (f"missed {missed} break" in text) if missed else ("missed no break" in text)
    assert "screen, not a forecast" in text or "every flagged model broke" in text


def test_table2_pairs_compare_on_the_same_tokens_at_the_same_absolute_lengths(monkeypatch):
    import rflens.longrun.plan as mod
    from rflens.longrun.plan import LongModel

    retrained = LongModel("alibi", (("slope_shift", 4), ("batch_size", 2), ("l_tr", 512)))
    monkeypatch.setattr(mod, "by_experiment", lambda run: {"Table 2: retrained": [retrained]})
    t2 = lr.table2_pairs(CONTROL)
    assert list(t2["L"]) == [512, 1024, 2048, 4096, 8192]
    new, old = bundle.load(retrained.name, CONTROL), bundle.load("alibi_slope_shift=4", CONTROL)
    want = np.exp(np.mean(new["points"][-1]["nll"][0] - old["points"][-1]["nll"][4]))  # both at L = 512
    row = t2.iloc[0]
    assert row["retrained / Table 1"] == pytest.approx(want) and row["low"] < want < row["high"]
    assert t2["retrained / Table 1"].iloc[1:].isna().all()  # Table 1 is not measured beyond its horizon



def test_table2_as_designed_reads_each_retrained_model_against_the_paper_and_the_receptive_field(monkeypatch):
    import rflens.longrun.plan as mod
    from rflens.longrun.plan import LongModel

    retrained = LongModel("alibi", (("slope_shift", 4), ("batch_size", 2), ("l_tr", 512)))
    monkeypatch.setattr(mod, "by_experiment", lambda run: {"Table 2: retrained": [retrained]})
    t2, em = lr.table2_pairs(CONTROL), bundle.table(CONTROL)
    last = em[em["name"] == retrained.name].sort_values("tokens").iloc[-1]
    assert lr.state(last) == "rises" and last["erf"] > last["l_tr"]  # the control's: it rises, its ERF beyond 512
    text = rd.table2_designed(t2, em)
    assert f"{t2['retrained / Table 1'].iloc[0]:.3f}" in text and "at $L$ = 512" in text
    assert "rises without breaking" in text and "beyond its $L_{tr}$ = 512" in text
    assert "0 of these 1 do" in text and "it is right for 1 of 1" in text
    inside = em.copy()
    inside.loc[inside["name"] == retrained.name, ["erf", "erf_capped"]] = [100, False]  # an ERF within L_tr
    wrong = rd.table2_designed(t2, inside)
    assert "within its $L_{tr}$ = 512" in wrong and "it is right for 0 of 1" in wrong
    assert "No retrained model" in rd.table2_designed(t2.iloc[0:0], em)
    unpaired = rd.table2_designed(t2.assign(**{"retrained / Table 1": np.nan}), em)  # no length both measured
    assert "times its Table 1 model's" not in unpaired and "rises without breaking" in unpaired

def test_the_corpora_record_says_how_often_the_budget_repeats_the_text(reference):
    record = lr.record_corpora("smoke")
    c = record["corpora"]["prose"]
    assert c["epochs"] == pytest.approx(record["budget_tokens"] / c["tokens"]["train"], abs=0.01)
    assert 0 < c["test_documents_scored"] <= c["documents"]["test"]
    table = lr.corpora_table("smoke")
    assert list(table.index) == ["OpenWebText2"] and table.loc["OpenWebText2", "corpus"] == "prose"
    assert lr.corpora_table("long") is None  # nothing recorded in this test's bundle


def test_the_two_runs_figure_gives_each_model_one_colour_and_one_legend_entry(control_beside):
    from rflens.figures import results as fr

    _as_second_run(control_beside, {"nope": "window_window=8"})
    fig = fr.emergence_pair(bundle.table("long"), bundle.table(CONTROL), ["nope", "rotary"])
    assert [(t.legendgroup, t.line.dash, t.showlegend) for t in fig.data] == [
        ("nope", "solid", True), ("nope", "dash", False), ("rotary", "dash", True)]
    assert fig.data[0].line.color == fig.data[1].line.color != fig.data[2].line.color
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"


def test_the_early_warning_figure_marks_the_breaks_in_colours_of_their_own():
    from rflens.figures import results as fr

    ew = lr.early_warning((CONTROL,))
    fig = fr.early_warning_figure(ew)
    colours = [t.marker.color for t in fig.data]
    assert len(colours) == len(set(colours)) == 2
    assert [t.name.rsplit(": ", 1)[1] for t in fig.data] == ["broke", "did not break"]
    # an ERF the segment capped is drawn open: as many open markers as capped models
    assert sum(s.endswith("-open") for t in fig.data for s in t.marker.symbol) == int(ew["capped first"].sum())


def test_overfitting_reads_each_models_validation_loss_from_its_lowest_to_its_last_size():
    over = lr.overfitting(CONTROL)
    table = bundle.table(CONTROL)
    assert len(over) == table["name"].nunique()
    nope = table[table["name"] == "nope"].sort_values("tokens")
    row = over.loc["NoPE"]
    assert row["lowest"] == nope["val_loss"].min() and row["last"] == nope["val_loss"].iloc[-1]
    assert row["rise"] == pytest.approx(row["last"] - row["lowest"]) and (over["rise"] >= 0).all()
    assert set(over["corpus"]) <= {"prose", "code", "math"}


def test_the_long_run_tables_chapter_10_shows_read_in_words():
    from rflens.measure import columns
    from test_tables import _no_code_names

    _no_code_names(columns.readable(bundle.provenance(CONTROL)))
    sc = lr.schedule(CONTROL)
    if sc is not None:
        view = columns.readable(sc, digits=3)
        _no_code_names(view)
        assert view.index.names == ["model", "L"]
        assert "r(L), warmup-stable-decay" in view.columns
        assert "interval that" in rd.schedule_check(sc)
    em = bundle.table(CONTROL)
    _no_code_names(columns.readable(plan.last_sizes(em, presets.get(CONTROL)), digits=3))


def test_the_long_table_of_table_1_comes_by_family_then_sweep_value():
    from rflens.setup import presets

    t1 = bundle.table(CONTROL, names=plan.table1_names(presets.get(CONTROL)))
    last = plan.last_sizes(t1, presets.get(CONTROL))
    families = list(dict.fromkeys(last.index.get_level_values("family")))
    assert families == [f"Table 1: {f.title}" for f in presets.FAMILIES.values()][:len(families)]
    for family in families:
        names = t1.drop_duplicates("name").set_index("label").loc[list(last.loc[family].index), "name"]
        values = [float(n.split("=")[-1]) for n in names]
        assert values == sorted(values), (family, list(names))



def test_the_rank_correlation_ranks_ties_at_their_mean_and_is_nan_for_a_constant_side():
    import numpy as np

    from rflens.longrun.compare import _spearman

    assert _spearman(np.array([1.0, 2, 3, 4]), np.array([10.0, 20, 30, 40])) == pytest.approx(1)
    assert _spearman(np.array([1.0, 2, 3, 4]), np.array([4.0, 1, 1, 0])) == pytest.approx(-0.9486833, abs=1e-6)
    assert np.isnan(_spearman(np.array([1.0, 1, 1]), np.array([1.0, 2, 3])))


def test_the_share_within_l_tr_against_r_is_read_at_each_depth_with_an_interval_over_models():
    from rflens.longrun import compare as lr
    from rflens.readings import share_and_r

    sr = lr.share_against_r(("long", "deep"), n_boot=200)
    assert list(sr["run"]) == ["long", "deep"] and list(sr["layers"]) == [4, 12]
    for _, row in sr.iterrows():
        assert -1 <= row["low"] <= row["rank correlation"] <= row["high"] <= 1
        em = lr.by_paper_setting(row["run"])
        assert row["cells"] == len(em.dropna(subset=["share_in_ltr", "r_horizon"]))
        assert row["models"] == em["model"].nunique()
    assert sr.equals(lr.share_against_r(("long", "deep"), n_boot=200))  # the same replicates each time
    text = str(share_and_r(sr))
    assert "12 layers: ρ = " in text and "resamples models" in text
    assert "h = 0" in text and "sits on claim 6's cut" in text  # the deep run's flat miss, 98% within L_tr
    assert "not shown as a trend" in str(share_and_r(sr.assign(high=0.1)))
    assert "holds as a trend" in str(share_and_r(sr.assign(high=-0.1)))


def test_claim_6_read_at_every_size_gives_the_boards_count_at_the_last():
    """The count at each size is claim 6's own: at the last size, the board's k/n."""
    from rflens.claims import verdicts

    ag = lr.erf_agreement_by_size(("deep",))
    assert list(ag["tokens"]) == sorted(ag["tokens"]) and (ag["agree"] <= ag["models"]).all()
    assert list(ag["meets 80%"]) == [a / n >= 0.8 for a, n in zip(ag["agree"], ag["models"])]
    (c6,) = [c for c in verdicts.check_shipped("deep", "prose") if int(c["id"]) == 6]
    last = ag.iloc[-1]
    assert c6["measured"].startswith(f"{last['agree']}/{last['models']} models")
    said = str(rd.agreement_by_size(ag))
    assert f"{last['agree']} of {last['models']} at 33.6M" in said and said.startswith("Read at each size")

