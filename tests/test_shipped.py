"""The shipped bundle as a read-only layer of the run store (rflens.store.shipped, rflens.experiments.from_bundle), at the smoke preset."""

from __future__ import annotations


import numpy as np
import pytest

from rflens import storage
from rflens.errors import UserError
from rflens.experiments import from_bundle
from rflens.longrun import emergence, plan
from rflens.measure.perplexity import perplexity
from rflens.measure.receptive import receptive_field
from rflens.publish import reproduce
from rflens.setup import settings
from rflens.store import bundle, runs, shipped as shipped_runs
from rflens.store.shipped import at_size, ShippedRun
from rflens.setup import presets

WSD = (("schedule", "wsd"), ("warmup", 2), ("steps", 32), ("ckpt_interval", 8))
SPEC = plan.LongModel("alibi", WSD)


@pytest.fixture
def one_shipped(tmp_path, monkeypatch):
    """One finished smoke model in a bundle, and an empty run store beside it."""
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "train-store"))
    emergence.run(SPEC, presets.get("smoke"), progress=False)
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    return tmp_path


def _get(train: bool = False):
    return runs.get_run(presets.get("smoke"), "alibi", "prose", dict(WSD), train=train, progress=False)


def test_a_shipped_model_is_served_with_the_measurements_of_the_same_model_trained_here(one_shipped, monkeypatch):
    served = _get()
    assert isinstance(served, ShippedRun) and served.name == SPEC.name
    assert not any(storage.runs_dir().glob("*/manifest.json"))  # nothing was trained
    ppl, erf = perplexity(served, progress=False), receptive_field(served, progress=False)
    monkeypatch.setenv("RFLENS_RUNS", str(one_shipped / "local"))
    monkeypatch.setenv("RFLENS_REFERENCE", str(one_shipped / "no-bundle"))
    local = _get(train=True)  # the plain wsd run of the same settings: the shipped run's last point
    monkeypatch.setenv("RFLENS_REFERENCE", str(one_shipped / "reference"))
    assert isinstance(local, runs.Run)
    mine = perplexity(local, progress=False)
    assert mine["lengths"] == ppl["lengths"] and mine["n"] == ppl["n"]
    np.testing.assert_allclose(ppl["ppl"], mine["ppl"], rtol=1e-6)
    np.testing.assert_allclose(ppl["ci_low"], mine["ci_low"], rtol=1e-5)
    np.testing.assert_allclose(ppl["nll_per_segment"], mine["nll_per_segment"], atol=1e-6)
    assert receptive_field(local, progress=False)["erf"] == erf["erf"]
    # any of its measured lengths is served (the same last tokens at every length); others are not measured
    some = ppl["lengths"][1::2]
    assert served.measurable([1, *some]) == some and local.measurable([1, *some]) == [1, *some]
    np.testing.assert_allclose(perplexity(served, lengths=some, progress=False)["ppl"],
                               perplexity(local, lengths=some, progress=False)["ppl"], rtol=1e-6)
    assert _get() is not None and isinstance(_get(), runs.Run)  # the local store comes first


def test_a_shipped_model_is_read_without_building_its_corpus_and_measured_only_on_its_own_data(one_shipped, monkeypatch):
    empty = one_shipped / "no-data"
    monkeypatch.setenv("RFLENS_DATA", str(empty))
    served = _get()
    assert isinstance(served, ShippedRun) and served.name == SPEC.name
    assert perplexity(served, progress=False)["ppl"]  # from the bundle
    assert not any(empty.rglob("manifest.json"))  # nothing was built to read it
    other = ShippedRun(served.path)  # a bundle measured on other data than the corpus built here
    other.data_fingerprint = "0" * 64
    with pytest.raises(UserError, match="measured on prose data with fingerprint 000000000000.*rflens data --corpus prose"):
        other.corpus()
    assert served.corpus().fingerprint == served.data_fingerprint  # built when a measurement needs it
    assert any(empty.rglob("manifest.json"))


def test_a_shipped_model_is_served_at_each_of_its_measured_sizes(one_shipped):
    points = bundle.load(SPEC.name, "smoke")["points"]
    first = points[0]
    with at_size(first["tokens"]):
        ppl = perplexity(_get(), progress=False)
        assert receptive_field(_get(), progress=False)["erf"] in (first["erf"] - 1, first["erf"], first["erf"] + 1)
    np.testing.assert_allclose(ppl["ppl"], first["ppl"], rtol=1e-4)  # the point's, not the finished model's
    assert not np.allclose(ppl["ppl"], points[-1]["ppl"], rtol=1e-4)
    with at_size(first["tokens"] + 1), pytest.raises(UserError, match="at .* tokens"):
        perplexity(_get(), progress=False)  # no such size: not served, and not measured on the final weights
    np.testing.assert_allclose(perplexity(_get(), progress=False)["ppl"], points[-1]["ppl"], rtol=1e-4)


def test_a_shipped_model_is_served_after_the_code_changes(one_shipped, monkeypatch):
    monkeypatch.setattr(runs, "_code_version_cache", "0" * 16)
    served = _get()
    assert isinstance(served, ShippedRun)
    assert served.provenance["code_version"] != runs.code_version()


def test_what_the_bundle_lacks_needs_the_weights_and_says_how_to_get_them(one_shipped):
    served = _get()
    with pytest.raises(UserError, match="carries no weights.*train --scale smoke --pos alibi .*--retrain"):
        perplexity(served, protocol="sliding", progress=False)
    with pytest.raises(UserError, match="carries no weights"):
        perplexity(served, lengths=[16, 24], progress=False)
    # a receptive field is read on the segment it was measured on, whatever length is asked
    stored = served.eval_cfg.erf_length_mult * served.l_tr
    assert served.erf_segment(stored + 8) == stored
    assert receptive_field(served, length=served.erf_segment(stored + 8), progress=False)["length"] == stored
    with pytest.raises(UserError, match="carries no weights"):
        receptive_field(served, length=stored + 8, progress=False)


def test_a_model_shipped_with_weights_measures_anything(one_shipped):
    emergence.run(SPEC, presets.get("smoke"), progress=False, keep_weights=True)
    served = _get()
    assert served.has_weights and served.erf_segment(40) == 40
    sliding = perplexity(served, protocol="sliding", progress=False)
    assert len(sliding["ppl"]) == len(sliding["lengths"])
    assert list((storage.runs_dir() / "shipped" / "smoke" / SPEC.name).glob("perplexity_sliding-*.json"))


def test_an_unfinished_model_is_not_served_and_an_edited_one_is_damaged(one_shipped):
    path = bundle.bundle_dir("smoke") / SPEC.name
    result = bundle.read_result(path)
    with np.load(path / bundle.NLL) as z:
        arrays = {k: z[k] for k in z.files}
    storage.write_json(path / bundle.RESULT, {**result, "complete": False}, newline=True)  # behind the writer's back
    with pytest.raises(UserError, match="damaged.*result.json"):
        _get()
    bundle.write_model("smoke", SPEC.name, {**result, "complete": False}, arrays)  # as a stopped run ships it
    with pytest.raises(UserError, match="no stored model"):
        _get()
    bundle.write_model("smoke", SPEC.name, result, arrays)
    assert isinstance(_get(), ShippedRun)
    (path / bundle.NLL).write_bytes(b"damaged")
    with pytest.raises(UserError, match="damaged.*git checkout -- reference"):
        _get()


def test_a_shipped_preset_names_the_command_that_trains_a_missing_model():
    cfgs = settings.resolve(presets.get("long"), "alibi", "prose", {"slope_shift": -7})[1:]
    assert plan.command_for(presets.get("long"), *cfgs) == "python -m rflens emergence --scale long --only alibi_slope_shift=-7"
    # a model outside the plan, or any model of a read-only control, is trained by `train` (into the run store,
    # which is read before the bundle): the command resolves to the very settings asked for
    from rflens.cli import build_parser
    from rflens.setup.config import parse_overrides

    for scale, overrides in (("long", {"slope_shift": 3}), ("long-repeated", {"slope_shift": 3}),
                             ("long-repeated", {"slope_shift": -7})):
        other = settings.resolve(presets.get(scale), "alibi", "prose", overrides)[1:]
        command = plan.command_for(presets.get(scale), *other)
        assert command.startswith("python -m rflens train "), command
        args = build_parser().parse_args(command.split()[3:])
        assert settings.resolve(presets.get(args.scale), args.pos, args.corpus, parse_overrides(args.overrides))[1:] == other


def test_reproduce_builds_only_the_chapters_the_bundle_holds(one_shipped):
    ready, skipped = reproduce.shipped_chapters("smoke", ["01", "03", "08", "09"], named=False)
    assert ready == ["01", "09"]
    assert set(skipped) == {"03", "08"} and "weights" in skipped["08"][0]
    assert len(skipped["03"]) == len(from_bundle.missing(presets.get("smoke"), ["Table 1"])) > 0
    with pytest.raises(UserError, match="chapter 03 at the smoke preset needs .* emergence --scale smoke"):
        reproduce.shipped_chapters("smoke", ["03"], named=True)
    assert from_bundle.missing(presets.get("smoke"), ["Table 2"]) == ["Table 2 (it follows from Table 1's shipped results)"]


@pytest.fixture
def shipped_smoke(tmp_path, monkeypatch):
    """The smoke preset as a shipped long-run preset (warmup-stable-decay), its Table 1 in a bundle."""
    from rflens.setup import presets

    def smoke():
        sc = base()
        return presets.LongRun.of(sc, train=sc.train.replace(schedule="wsd", warmup=2, steps=32))

    base = presets._BUILDERS["smoke"]
    monkeypatch.setitem(presets._BUILDERS, "smoke", smoke)
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "train-store"))
    from rflens.experiments import tables as ex

    for spec in ex.table1_models(presets.get("smoke")):
        emergence.run(plan.LongModel(spec.pos, tuple(spec.settings.items())), presets.get("smoke"), progress=False)
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    return tmp_path


@pytest.mark.slow
def test_a_shipped_preset_reads_its_experiments_and_claims_from_the_bundle(shipped_smoke):
    from rflens.claims import gather, verdicts
    from rflens.experiments import tables as ex

    t1, lacking = from_bundle.experiment("table1", presets.get("smoke"))
    assert lacking == [] and len(t1) == len(ex.table1_models(presets.get("smoke")))
    assert not any(storage.runs_dir().glob("*/manifest.json"))  # read, not trained
    for _, row in t1.iterrows():  # each row is the last point of the shipped run
        name = next(n for n, s in shipped_runs.index("smoke").items() if s[0].pos == row["pos"] and _setting(s, row))
        last = bundle.load(name, "smoke")["points"][-1]
        assert row["erf"] == last["erf"] or abs(row["erf"] - last["erf"]) <= 1  # the shipped gradient has 4 digits
        np.testing.assert_allclose(row[f"ppl@{16}"], last["ppl"][0], rtol=1e-4)
    rows = verdicts.check({"table1": t1, "corpus": "prose"}, [1, 2, 3, 4, 5])
    assert sum(r["result"] in ("pass", "fail") for r in rows) >= 3, rows  # decided on the shipped table
    f7, lacking = from_bundle.experiment("figure7", presets.get("smoke"))  # not shipped: nothing is trained
    assert f7 is None and lacking
    board = verdicts.check(gather.gather("smoke", compute=True, progress=False))
    assert [c["result"] for c in board[:5]] == [r["result"] for r in rows]
    assert board[7]["result"] == "not run" and not any(storage.runs_dir().glob("*/manifest.json"))
    with pytest.raises(UserError, match="unknown shipped experiment"):
        from_bundle.experiment("table9", presets.get("smoke"))
    # the board as training grows: one column a measured size, the last the finished models' board
    from rflens.claims import scoreboard

    grown = scoreboard.by_size("smoke")
    assert list(grown.columns) == plan.sizes(presets.get("smoke")) and list(grown.index) == [c["id"] for c in board]
    assert list(grown.iloc[:, -1]) == [c["result"] for c in board]
    assert not any(storage.runs_dir().glob("*/manifest.json"))


def _setting(settings, row) -> bool:
    from rflens.setup.presets import FAMILIES

    fam = FAMILIES[row["family"]]
    cfg = settings[0]
    return float(getattr(cfg, fam.setting)) == float(row["value"])


@pytest.mark.skipif("alibi" not in bundle.entries("long-repeated"), reason="no long-run bundle in this checkout")
def test_train_on_a_shipped_model_reports_it(store, capsys):
    """``train`` at a shipped preset answers with the bundle's model: what it holds of its
    training, its parameter count, and no throughput it did not record."""
    from rflens.cli import main
    from rflens.model.transformer import TransformerLM
    from rflens.setup import presets

    params = TransformerLM(presets.get("long-repeated").model.replace(pos="alibi")).num_params(non_embedding=False)
    assert main(["train", "--scale", "long-repeated", "--pos", "alibi", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "reused the stored run" in out and f"{params:,} parameters" in out and "tokens/s" not in out
