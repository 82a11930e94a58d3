"""The long run's branches, bundle and command (rflens.longrun.plan), at the smoke preset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rflens import storage
from rflens.errors import UserError
from rflens.longrun import emergence, plan
from rflens.setup import presets, settings
from rflens.setup.config import DataConfig
from rflens.store import bundle, runs
from rflens.training import machine, trainer as training
from rflens.training.trainer import OutOfTime, point_steps

WSD = (("schedule", "wsd"), ("warmup", 2), ("steps", 32), ("ckpt_interval", 8))
CONTROL = "long-repeated"  # the first long run: a complete, read-only bundle in the repository
SHIPPED_NAMES = set(bundle.entries(CONTROL))


@pytest.fixture
def stores(store, reference):
    """An empty run store and an empty bundle folder, side by side; their parent."""
    return store.parent


def test_the_wsd_schedule_is_a_longer_runs_schedule_up_to_its_cooldown():
    from rflens.training.trainer import lr_at

    cfg = settings.resolve(presets.get("smoke"), "alibi", "prose", dict(WSD))[3]
    short = cfg.replace(steps=16)
    assert [lr_at(s, short) for s in range(13)] == [lr_at(s, cfg) for s in range(13)]  # cool-down of 16: steps 13-15
    assert lr_at(12, short) == cfg.lr and lr_at(15, short) == pytest.approx(cfg.lr / 3)
    assert point_steps(cfg) == [4, 8, 16, 32]  # a point's cool-down starts after the warm-up


def test_a_branch_is_the_finished_shorter_run(stores):
    """The point at 16 steps, cooled down from the 32-step run, is the 16-step wsd run
    trained on its own: the same NLLs to the bit."""
    spec = plan.LongModel("alibi", WSD)
    out = emergence.run(spec, presets.get("smoke"), progress=False)
    shipped = bundle.load(spec.name, "smoke")
    assert [p["steps"] for p in shipped["points"]] == [4, 8, 16, 32]
    alone = runs.get_run(presets.get("smoke"), "alibi", "prose", {**dict(WSD), "steps": 16}, progress=False)
    from rflens.setup.presets import get

    m = emergence.measure(alone.load_model(), alone.corpus(), get("smoke").eval, 16)
    point = next(p for p in shipped["points"] if p["steps"] == 16)
    assert np.array_equal(m["nll"].astype(np.float32), point["nll"].astype(np.float32))
    # each segment's normalised gradient is kept at every size, their mean the stored curve
    grads = bundle.point_gradients(out)
    assert sorted(grads) == [4, 8, 16, 32] and grads[16].shape == (m["per_segment"].shape)
    np.testing.assert_allclose(grads[16], m["per_segment"], rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(grads[16].mean(0), point["normalized"], rtol=5e-3, atol=1e-5)
    # and the ERF gets an interval over those segments at every size
    from rflens.longrun import compare

    ei = compare.erf_intervals("smoke")
    assert sorted(ei["tokens"]) == [p["tokens"] for p in shipped["points"]]
    assert ((ei["erf_low"] <= ei["erf"]) & (ei["erf"] <= ei["erf_high"])).all()
    assert list(ei["erf"]) == [p["erf"] for p in shipped["points"]]
    # where the ERF's input is not the paper's (4 L_tr), the gradient on the paper's is measured beside it
    assert "paper_input" not in m and "paper_input" not in point
    wide = emergence.measure(alone.load_model(), alone.corpus(), get("smoke").eval.replace(erf_length_mult=8), 16)
    assert wide["per_segment"].shape[1] == 8 * 16 and wide["paper_input"]["length"] == 4 * 16
    assert len(wide["paper_input"]["normalized"]) == 64 and wide["paper_input"]["normalized"].sum() == pytest.approx(1)
    assert json.loads((out / "manifest.json").read_text())["sha256"].keys() == {"result.json", "nll.npz"}
    assert not bundle.emergence_state("smoke", spec.name).exists()  # the work folder is gone


def test_a_stopped_run_ships_its_points_and_resumes_to_the_same_result(stores, monkeypatch):
    spec = plan.LongModel("alibi", WSD)
    emergence.run(spec, presets.get("smoke"), progress=False)
    first = bundle.load(spec.name, "smoke")
    assert first["complete"] and first["stopped_at_step"] is None
    (storage.reference_dir() / "smoke" / spec.name / "manifest.json").unlink()
    checks = iter(range(100))
    monkeypatch.setattr(training, "_past", lambda deadline: deadline is not None and next(checks) >= 4)
    monkeypatch.setattr(training, "_late", lambda deadline: False)  # the checkpoints alone decide here
    with pytest.raises(OutOfTime):
        emergence.run(spec, presets.get("smoke"), progress=False, deadline=1.0)
    partial = bundle.load(spec.name, "smoke")  # the points measured so far, marked incomplete
    assert not partial["complete"] and 0 < len(partial["points"]) < 4
    assert partial["stopped_at_step"] < 32 and spec.name not in bundle.complete("smoke")
    monkeypatch.undo()
    monkeypatch.setenv("RFLENS_RUNS", str(stores / "runs"))
    monkeypatch.setenv("RFLENS_REFERENCE", str(stores / "reference"))
    emergence.run(spec, presets.get("smoke"), progress=False)  # resumes from the kept state
    again = bundle.load(spec.name, "smoke")
    assert again["complete"] and spec.name in bundle.complete("smoke")
    for a, b in zip(first["points"], again["points"], strict=True):
        assert np.array_equal(a["nll"], b["nll"]) and a["erf"] == b["erf"]


def test_a_damaged_bundle_is_one_line_naming_the_fix(stores):
    spec = plan.LongModel("alibi", WSD)
    out = emergence.run(spec, presets.get("smoke"), progress=False)
    with pytest.raises(UserError, match="holds no model .* --list. shows what it holds"):
        bundle.load("nope", "smoke")
    (out / "nll.npz").write_bytes(b"damaged")
    with pytest.raises(UserError, match="nll.npz does not match its sha256.*git checkout -- reference"):
        bundle.load(spec.name, "smoke")


def _damage(top, how: str) -> None:
    """One change a bundle's writer did not make."""
    import shutil

    if how == "model folder deleted":
        shutil.rmtree(top / "nope")
    elif how == "schedule check edited":
        check = json.loads((top / bundle.SCHEDULE_CHECK).read_text())
        check["ratio"][-1] = 1.0
        (top / bundle.SCHEDULE_CHECK).write_text(json.dumps(check, indent=1, sort_keys=True) + "\n")
    elif how == "model manifest emptied":  # with edited numbers behind it
        (top / "nope" / "manifest.json").write_text(json.dumps({"version": 1, "sha256": {}}))
    elif how == "file added":
        (top / "nope" / "extra.json").write_text("{}")
    elif how == "manifest deleted":
        (top / "manifest.json").unlink()


DAMAGE = ["model folder deleted", "schedule check edited", "model manifest emptied", "file added", "manifest deleted"]


@pytest.fixture
def shipped_copy(tmp_path, monkeypatch):
    """A copy of the repository's long-run bundle (models without their weights), read as the bundle."""
    import shutil

    top = tmp_path / "reference" / CONTROL
    shutil.copytree(bundle.bundle_dir(CONTROL), top, ignore=shutil.ignore_patterns(bundle.WEIGHTS))
    for d in top.iterdir():  # the copy leaves the weights out: each manifest and the bundle's say so
        if d.is_dir():
            man = json.loads((d / "manifest.json").read_text())
            man["sha256"].pop(bundle.WEIGHTS, None)
            (d / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    bundle.seal(CONTROL, tmp_path / "reference")
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    return top


@pytest.mark.skipif("nope" not in SHIPPED_NAMES, reason="no long-run bundle in this checkout")
@pytest.mark.parametrize("how", DAMAGE)
def test_a_change_the_writer_did_not_make_stops_every_reader_in_one_line(shipped_copy, capsys, how):
    from rflens.cli import main

    assert main(["emergence", "--scale", CONTROL, "--list"]) == 0  # the copy itself is whole
    capsys.readouterr()
    _damage(shipped_copy, how)
    for argv in (["emergence", "--scale", CONTROL, "--list"], ["reproduce", "--scale", CONTROL, "--plan"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "damaged" in err[0] and str(shipped_copy) in err[0], (argv, err)


@pytest.mark.skipif("nope" not in SHIPPED_NAMES, reason="no long-run bundle in this checkout")
@pytest.mark.parametrize("text", ["{not json", json.dumps({"name": "nope"})])
def test_a_result_that_is_not_one_is_one_line_naming_its_file(shipped_copy, capsys, text):
    """Even with its checksums made to match, a result.json that is not JSON or lacks the
    format's keys is reported, never a traceback."""
    from rflens import storage as st

    path = shipped_copy / "nope"
    (path / "result.json").write_text(text)
    man = json.loads((path / "manifest.json").read_text())
    man["sha256"]["result.json"] = st.sha256_file(path / "result.json")
    (path / "manifest.json").write_text(json.dumps(man))
    bundle.seal(CONTROL, shipped_copy.parent)
    for argv in (["emergence", "--scale", CONTROL, "--list"], ["reproduce", "--scale", CONTROL, "--plan"]):
        assert main_exit(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(path / "result.json") in err[0], (argv, err)


def main_exit(argv) -> int:
    from rflens.cli import main

    return main(argv)


def test_the_plan_starts_with_the_thesis_models():
    names = [s.name for s in plan.models(presets.get("long"))]
    assert names[:4] == ["alibi_slope_shift=4", "window_window=30", "alibi_same_slope=4", "nope"]
    assert len(names) == len(set(names))
    families = plan.by_experiment(presets.get("long"))
    assert {s.name for specs in families.values() for s in specs} == set(names)  # every model answers a family
    assert [s.name for s in families["Table 3 on code"]] == [n for n in names if n.endswith("_code")]
    with pytest.raises(UserError, match="choose from"):
        plan.named("alibi_slope_shift=99", presets.get("long"))
    title, delta = plan.sweep(presets.get("long"))  # the key figure's models: ALiBi's Δ sweep, flattest last
    assert title.startswith("Table 1: ALiBi") and delta == [s.name for s in families[title]]
    assert delta[-1] == "alibi_slope_shift=4" and all(n.startswith("alibi_slope_shift=") for n in delta)


def test_the_second_run_trains_table2_as_designed_and_the_deciding_models_from_three_seeds():
    names = [s.name for s in plan.models(presets.get("long"))]
    # the paper's Delta = 6 at 4 L_tr and w = 160 at 2 L_tr, mapped to L_tr = 32, each with 1024 tokens a step,
    # planned whatever the Table 1 model does, right after the thesis models with their Table 1 partners
    assert names[4:7] == ["alibi_slope_shift=2_batch_size=8_l_tr=128", "alibi_slope_shift=2",
                          "window_window=30_batch_size=16_l_tr=64"]
    assert "sinusoidal_batch_size=16_l_tr=64" in names  # Figure 7's two L_tr on the same tokens
    # and Sinusoidal as the paper's code trains it (embeddings unscaled) at both, from three seeds, with weights
    paper = ["sinusoidal_scale_embeddings=False", "sinusoidal_batch_size=16_l_tr=64_scale_embeddings=False"]
    assert set(paper) <= set(names) and {f"{n}_seed=2" for n in paper} <= set(names)
    table2 = ["alibi_slope_shift=2_batch_size=8_l_tr=128", "window_window=30_batch_size=16_l_tr=64"]
    # weights: the drift models, Table 2's models and the Table 1 models they retrain (w = 160 is also the failing end)
    assert [n for n in names if plan.keeps_weights(presets.get("long"), plan.named(n, presets.get("long")))] == [
        "alibi_slope_shift=4", "window_window=30", "nope", table2[0], "alibi_slope_shift=2", table2[1], *paper,
        *(f"{n}_seed={k}" for t in (table2, paper) for n in t for k in (1, 2))]
    seeded = [n for n in names if "_seed=" in n]
    assert len(seeded) == 2 * 13 and set(plan.seeded("alibi_slope_shift=-7", presets.get("long"))) <= set(names)
    assert plan.seeded("rotary", presets.get("long")) == ["rotary", "rotary_seed=1", "rotary_seed=2"]
    r = settings.resolve(presets.get("long"), "alibi", "math", {"seed": 2})
    assert r.data.corpus == "math-tex" and r.train.seed == 2 and r.preset.eval.n_segments == 1024
    assert settings.resolve(presets.get(CONTROL), "alibi", "math").data.corpus == "math"  # the control keeps its corpora
    assert presets.get(CONTROL).read_only and not presets.get("long").read_only


def test_the_control_bundle_is_never_trained_into(stores):
    with pytest.raises(UserError, match="read-only control"):
        emergence.run(plan.LongModel("nope"), presets.get(CONTROL), progress=False)


# every shipped model of the repository's long runs (the deep run's unfinished ones too), as (preset, name)
RUNS = (CONTROL, "long", "deep")
SHIPPED = {(sc, name): path for sc in RUNS for name, path in bundle.entries(sc).items()}
DRIFT_SEGMENTS = 128  # segments a drift test re-measures (of 1024): any change of meaning moves them all


def _shipped(names) -> list:
    return [pytest.param(*key, id="/".join(key)) for key in sorted(names)] or [pytest.param(None, marks=pytest.mark.skip(reason="no long-run model is shipped"))]


@pytest.mark.skipif(not SHIPPED_NAMES, reason="no long-run bundle in this checkout")
def test_the_shipped_bundle_holds_exactly_what_its_manifest_lists():
    for scale in RUNS:
        top = bundle.bundle_dir(scale)
        if not top.is_dir():
            continue
        listed = json.loads((top / "manifest.json").read_text())["sha256"]
        assert set(listed) == {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()} - {"manifest.json"}
        assert {rel.split("/")[0] for rel in listed if "/" in rel} == set(bundle.entries(scale))
        bundle.check(scale)


@pytest.mark.parametrize("scale, name", _shipped(SHIPPED))
def test_every_shipped_result_matches_its_checksums_and_its_settings(scale, name):
    result = bundle.load(name, scale)  # verifies every sha256 first
    spec = plan.named(name, presets.get(scale))
    _, model_cfg, data_cfg, train_cfg = settings.resolve(presets.get(scale), spec.pos, spec.corpus, spec.settings())
    assert result["scale"] == scale and DataConfig.from_dict(result["data"]) == data_cfg
    assert result["model"] == model_cfg.to_dict() and result["train"] == train_cfg.to_dict()
    steps = [p["steps"] for p in result["points"]]
    planned = plan.measured_steps(presets.get(scale), train_cfg)  # every size, or the last alone at another L_tr (deep)
    assert steps == sorted(steps) and set(steps) <= set(planned) <= set(point_steps(train_cfg))
    assert result["complete"] == (steps == planned)
    for p in result["points"]:
        assert p["lengths"] == [train_cfg.l_tr * m for m in result["eval"]["length_mults"]]
        assert "erf_capped" not in p  # a rule's verdict is derived when read (bundle.table), never stored
        assert p["nll"].shape == (len(result["eval"]["length_mults"]), result["eval"]["n_segments"])
        assert p["tokens"] == p["steps"] * train_cfg.batch_size * train_cfg.l_tr
        assert np.isfinite(p["nll"]).all() and sum(p["normalized"]) == pytest.approx(1, abs=1e-3)
    if scale != CONTROL:  # the later runs record the document of each segment, for their intervals
        assert len(result["segment_docs"]) == result["eval"]["n_segments"]
    for path in SHIPPED[scale, name].iterdir():  # a 12-layer model's weights in float16 (bundle.FILE_LINE)
        assert path.stat().st_size < bundle.FILE_LINE, f"{path} is over 2 MB"
    kept, wanted = (SHIPPED[scale, name] / bundle.WEIGHTS).is_file(), plan.keeps_weights(presets.get(scale), spec)
    if wanted and not kept:  # shipped before the rule kept them: a Table 2 model without every document's NLLs,
        last = result["points"][-1]  # or a Table 1 model it retrains without its field on the paper's input
        if plan.every_document_lengths(presets.get(scale), spec):
            assert "every_document" not in last
        else:
            assert name in plan.table2_partners(presets.get(scale)) and "paper_input" not in last
    else:
        assert kept == wanted, "weights are shipped for the models that keep them alone"


@pytest.mark.slow
@pytest.mark.parametrize("scale, name", _shipped(key for key in SHIPPED if key[1] in presets.get(key[0]).drift_models))
def test_a_shipped_model_gives_its_stored_nlls_under_the_current_code(scale, name):
    """The drift test: a shipped model re-measured by today's evaluation code gives the NLLs
    of its last point to 1e-5 on a machine like the one that measured it (the same torch and
    vector unit), to 1e-4 on another. When it fails, the evaluation changed meaning and the
    bundle's numbers (not the models) are stale."""
    from safetensors.torch import load_model

    from rflens import data
    from rflens.model.transformer import TransformerLM
    from rflens.setup.config import DataConfig, EvalConfig, ModelConfig

    from rflens.measure.perplexity import last_token_nll

    result = bundle.load(name, scale)
    model = TransformerLM(ModelConfig.from_dict(result["model"])).eval()
    load_model(model, str(SHIPPED[scale, name] / bundle.WEIGHTS))
    corpus = data.prepare(DataConfig.from_dict(result["data"]), progress=False)
    assert corpus.fingerprint == result["data_fingerprint"], "the corpus changed: the shipped results are stale"
    ev = EvalConfig.from_dict(result["eval"])
    lengths = [result["train"]["l_tr"] * m for m in ev.length_mults]
    # the first DRIFT_SEGMENTS segments: whole batches of the measurement, so the same forward passes
    assert DRIFT_SEGMENTS % ev.batch_size == 0
    segments = corpus.eval_segments(ev.n_segments, max(lengths) + 1, ev.seed)[:DRIFT_SEGMENTS]
    now = last_token_nll(model, segments, lengths, batch_size=ev.batch_size, progress=False)
    diff = np.abs(now - result["points"][-1]["nll"][:, :DRIFT_SEGMENTS]).max(axis=1)
    tol = emergence.drift_tolerance(result)
    stale = [L for L, d in zip(lengths, diff) if d > tol]
    assert not stale, f"{name}: the NLLs at L = {stale} moved by up to {diff.max():.2e} (> {tol:g}): the bundle is stale"


def test_the_command_lists_the_plan_and_refuses_bad_input(stores, capsys, monkeypatch, smoke_long_run):
    from rflens.cli import main

    assert main(["emergence", "--list"]) == 0
    out = capsys.readouterr().out
    # each model with why the plan trains it: the experiments it answers
    assert out.splitlines()[0] == "to train  alibi_slope_shift=4  (Table 1: ALiBi, slope exponents shifted by Δ)"
    assert "no finished model shipped yet" in out
    # a model a sitting stopped says where the next one resumes it
    work = bundle.emergence_state("long", "alibi_slope_shift=4")
    work.mkdir(parents=True)
    storage.write_json(work / "checkpoint.json", {"step": 1200})
    storage.write_json(work / "points.json", [{"steps": 512}, {"steps": 1024}])
    assert main(["emergence", "--list"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == ("to train  alibi_slope_shift=4  resumes at step 1,200, 2 size(s) "
                                                       "measured  (Table 1: ALiBi, slope exponents shifted by Δ)")
    assert main(["emergence", "--scale", "tiny", "--list"]) == 2  # a size preset is not a long run
    assert "tiny is a size preset, not a long run" in capsys.readouterr().err
    out = emergence.run(plan.LongModel("alibi", (("schedule", "wsd"), ("warmup", 2), ("steps", 8))),
                        presets.get("smoke"), progress=False)
    # a speed needs training time beyond the measuring: an 8-step model's wall times are too short to be sure of it
    result = bundle.read_result(out)
    bundle.rewrite_result("smoke", out.name, {**result, "train_seconds": 10.0 + sum(
        p["measure_seconds"] for p in result["points"])})
    monkeypatch.setattr(machine, "cpu_capability", lambda: "ANOTHER")
    assert main(["emergence", "--scale", "smoke", "--list"]) == 0
    out = capsys.readouterr().out
    assert "hours on one core" in out and "1 shipped model(s) trained on other machines" in out
    shipped = plan.LongModel("alibi", (("schedule", "wsd"), ("warmup", 2), ("steps", 8)))
    monkeypatch.setattr(plan, "models", lambda scale="long": [shipped])
    assert main(["emergence", "--scale", "smoke", "--list"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "nothing to train: the bundle holds every model of the plan (1)"
    assert main(["emergence", "--minutes", "-1"]) == 2
    assert main(["emergence", "--only", "nonsense"]) == 2
    assert main(["emergence", "--check", "1"]) == 2
    assert "error:" in capsys.readouterr().err


def _synthetic(r16: list[tuple[float, float, float]], complete: bool = True, erf: int = 100):
    import pandas as pd

    rows = []
    for i, (r, lo, hi) in enumerate(r16):
        rows.append({"name": "m", "label": "ALiBi Δ=4", "pos": "alibi", "l_tr": 32, "tokens": 2**19 * 2**i,
                     "complete": complete, "erf": erf, "erf_length": 512, "erf_capped": erf >= 512,
                     "r@32": 1.0, "r_lo@32": 1.0, "r_hi@32": 1.0, "r@512": r, "r_lo@512": lo, "r_hi@512": hi,
                     "r_horizon": r, "r_horizon_lo": lo, "r_horizon_hi": hi, "ppl_l_tr": 30.0, "val_loss": 3.4})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("points, words", [
    ([(1.1, 1.05, 1.15), (1.9, 1.7, 2.1), (2.4, 2.1, 2.7)], "1 breaks (the lower end reaches 2): ALiBi Δ=4 "
                                                           "(at 2.1M tokens, its last size)"),
    ([(1.1, 1.05, 1.15), (1.9, 1.7, 2.1)], "1 rises without breaking: ALiBi Δ=4"),
    ([(1.0, 0.98, 1.02), (1.01, 0.99, 1.03)], "1 stays within 1.10 at every size"),
])
def test_the_emergence_reading_decides_on_the_intervals(points, words):
    from rflens import readings

    text = readings.emergence(_synthetic(points))
    assert words in text and "r(16 $L_{tr}$)" in text


def test_the_emergence_reading_flags_a_capped_erf_and_an_unfinished_run():
    from rflens import readings

    text = readings.emergence(_synthetic([(1.1, 1.0, 1.2)], complete=False, erf=512))
    assert "a lower bound" in text and "stopped part-way" in text and "beyond $L_{tr}$" in text
    assert "No long-run model" in readings.emergence(_synthetic([])[:0])


def test_the_emergence_figure_has_both_views_and_a_range_that_shows_the_break_line():
    from rflens.figures import results as fr

    fig = fr.emergence_figure(_synthetic([(1.1, 1.05, 1.15), (1.9, 1.7, 2.1)]))
    assert len(fig.data) == 2 and [t.visible for t in fig.data] == [None, False]
    assert 10 ** fig.layout.yaxis.range[1] > 2.0 and fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    assert fig.data[0].line.dash == "dot" and "star" not in fig.data[0].marker.symbol  # it never breaks
    broke = fr.emergence_figure(_synthetic([(1.1, 1.05, 1.15), (2.4, 2.1, 2.7), (3.0, 2.5, 3.5)])).data[0]
    assert broke.line.dash == "solid" and list(broke.marker.symbol) == ["circle", "star", "circle"]
    labels = [b.label for b in fig.layout.updatemenus[0].buttons]
    assert labels == ["r(16 L_tr)", "ERF"]


def test_the_emergence_figure_reads_each_model_at_16_times_its_own_l_tr():
    import pandas as pd

    from rflens.figures import results as fr

    short = _synthetic([(1.1, 1.05, 1.15), (1.3, 1.2, 1.4)])
    long_ = short.assign(name="l", label="ALiBi Δ=4 L_tr=512", l_tr=512, erf=6000, erf_length=8192,
                         r_horizon=[1.0, 1.07], r_horizon_lo=[0.99, 1.03], r_horizon_hi=[1.01, 1.11])
    fig = fr.emergence_figure(pd.concat([short, long_], ignore_index=True), ["l", "m"], title="Table 2")
    r_traces = [t for t in fig.data if t.visible is None]
    assert [t.name for t in r_traces] == ["ALiBi Δ=4 L_tr=512", "ALiBi Δ=4"]  # the order asked for
    assert list(r_traces[0].y) == [1.0, 1.07] and list(r_traces[1].y) == [1.1, 1.3]
    erf = [t for t in fig.data if t.visible is False]
    assert list(erf[0].y) == [6000 / 512] * 2 and list(erf[1].y) == [100 / 32] * 2  # in units of L_tr
    assert fig.layout.title.text.startswith("Table 2")


def test_every_model_of_the_long_run_has_a_colour_of_its_own():
    import pandas as pd

    from rflens.figures import results as fr

    one = _synthetic([(1.1, 1.05, 1.15)])
    many = pd.concat([one.assign(name=f"m{i}", label=f"model {i}") for i in range(40)], ignore_index=True)
    colours = [t.line.color for t in fr.emergence_figure(many).data if t.visible is None]
    assert len(colours) == 40 and len(set(colours)) == 40


def test_a_shipped_failure_puts_its_table2_retraining_in_the_plan(stores, monkeypatch):
    flattest = plan.LongModel("alibi", (("slope_shift", max(presets.get(CONTROL).sweeps.slope_shift)),))
    monkeypatch.setattr(bundle, "complete", lambda scale="long": set())
    assert not any("l_tr=" in s.name for s in plan.models(presets.get(CONTROL)) if s.pos == "alibi")
    monkeypatch.setattr(bundle, "complete", lambda scale="long": {flattest.name})
    point = {"ppl": [50.0, 60.0, 80.0, 90.0, 100.0], "r_high": [1.0, 1.3, 1.7, 1.9, 2.1], "erf": 300,
             "lengths": [32, 64, 128, 256, 512]}
    monkeypatch.setattr(bundle, "load", lambda name, scale="long": {"points": [point], "train": {"l_tr": 32}})
    names = [s.name for s in plan.models(presets.get(CONTROL))]
    assert "alibi_slope_shift=4_batch_size=2_l_tr=512" in names  # 32 x 2^4 = 512 covers the ERF of 300
    assert names.index("alibi_slope_shift=4_batch_size=2_l_tr=512") < names.index("sinusoidal")


def test_the_tables_read_only_what_is_asked_and_say_where_it_came_from(stores):
    spec = plan.LongModel("alibi", WSD)
    emergence.run(spec, presets.get("smoke"), progress=False)
    assert bundle.table("smoke", names=[]).empty and len(bundle.table("smoke")) == 4
    em = bundle.table("smoke")
    l_tr = int(em["l_tr"].iloc[0])
    assert em["r_horizon"].tolist() == em[f"r@{16 * l_tr}"].tolist()
    assert em["ppl_l_tr"].tolist() == em[f"ppl@{l_tr}"].tolist()
    prov = bundle.provenance("smoke")
    assert list(prov["finished"]) == [True] and prov["points"].iloc[0] == 4 and prov["threads"].iloc[0] >= 1
    assert list(prov["device"]) == [machine.device_name(machine.device())]  # "cpu" here
    assert plan.table1_names(presets.get("long")) == []  # nothing shipped in this store


def test_the_drift_tolerance_is_tight_only_on_a_machine_that_computes_alike():
    import torch

    here = {"torch": torch.__version__, "cpu": machine.cpu_capability(), "cpu_features": machine.cpu_features()}
    expected = emergence.DRIFT_TOLERANCE if here["cpu_features"] else emergence.DRIFT_TOLERANCE_ELSEWHERE
    assert emergence.drift_tolerance(here) == expected
    assert emergence.drift_tolerance({**here, "cpu": "ANOTHER"}) == emergence.DRIFT_TOLERANCE_ELSEWHERE
    assert emergence.drift_tolerance({**here, "cpu_features": "avx2 fma"}) == emergence.DRIFT_TOLERANCE_ELSEWHERE
    assert emergence.drift_tolerance({k: here[k] for k in ("torch", "cpu")}) == emergence.DRIFT_TOLERANCE_ELSEWHERE
    assert emergence.drift_tolerance({"torch": torch.__version__}) == emergence.DRIFT_TOLERANCE_ELSEWHERE
    assert emergence.drift_tolerance({**here, "device": "NVIDIA H200"}) == emergence.DRIFT_TOLERANCE_ELSEWHERE
    assert emergence.drift_tolerance({**here, "device": "cpu"}) == expected
    from rflens.longrun.recheck import FALLBACK_BOUND  # re-measuring a model moves it less than retraining it

    assert emergence.DRIFT_TOLERANCE < emergence.DRIFT_TOLERANCE_ELSEWHERE < FALLBACK_BOUND


def test_the_last_sizes_give_each_shipped_model_once_at_its_largest_size():
    import pandas as pd

    em = pd.concat([_synthetic([(1.1, 1.05, 1.15), (1.3, 1.2, 1.4)]).assign(name=name, label=name)
                    for name in ("sinusoidal", "nope")], ignore_index=True)
    last = plan.last_sizes(em, presets.get("long"))
    # Sinusoidal answers Figure 7 and Table 3: one row (a count of rows is a count of models), under both
    assert list(last.index) == [("NoPE and Figure 7: no bias, absolute positions", "nope"),
                                ("NoPE and Figure 7: no bias, absolute positions and Table 3 on prose", "sinusoidal")]
    assert last["r_horizon"].tolist() == [1.3] * 2 and last["tokens"].tolist() == [2**20] * 2
    assert plan.last_sizes(em.iloc[:0], presets.get("long")).empty


def test_the_bundles_files_and_the_training_state_each_have_one_reader():
    """Only rflens.store.bundle names the bundle's files; only rflens.training.trainer loads a training state."""
    from pathlib import Path

    import rflens

    owners = {'"result.json"': {"bundle.py"}, '"nll.npz"': {"bundle.py"}, '"schedule_check.json"': {"bundle.py"},
              "torch.load(": {"trainer.py"}}
    for path in Path(rflens.__file__).parent.rglob("*.py"):
        text = path.read_text()
        for needle, homes in owners.items():
            assert needle not in text or path.name in homes, f"{path.name} uses {needle}"


def test_weights_that_would_pass_a_bundles_file_line_are_shipped_in_float16(stores, monkeypatch):
    from safetensors import safe_open

    spec = plan.LongModel("alibi", WSD)
    for line, dtype in ((bundle.FILE_LINE, "F32"), (1, "F16")):  # the smoke model's weights are far under 2 MB
        monkeypatch.setattr(bundle, "FILE_LINE", line)
        out = emergence.run(spec, presets.get("smoke"), progress=False, keep_weights=True)
        with safe_open(str(out / bundle.WEIGHTS), "pt") as f:
            assert {f.get_slice(k).get_dtype() for k in f.keys()} == {dtype}
        bundle.verify(out)
        assert bundle.load(spec.name, "smoke")["points"]  # and the bundle reads as before
