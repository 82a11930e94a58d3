"""A shipped long-run model retrained and judged (rflens.longrun.recheck), at the smoke preset:
bitwise on a machine like the bundle's, by the book's verdicts and the NLL differences on
another."""

from __future__ import annotations

import numpy as np
import pytest

from rflens import storage
from rflens.cli import main
from rflens.longrun import emergence, plan, recheck
from rflens.store import bundle

from test_emergence import WSD, stores  # noqa: F401 (stores: a fixture)
from rflens.setup import presets

SPEC = plan.LongModel("alibi", WSD)


@pytest.fixture
def shipped(stores, monkeypatch, smoke_long_run):  # noqa: F811
    """SPEC trained and shipped in this test's own bundle, the smoke preset's only model."""
    monkeypatch.setattr(plan, "models", lambda scale="long": [SPEC])
    emergence.run(SPEC, presets.get("smoke"), progress=False)
    return bundle.load(SPEC.name, "smoke")


def _reship(result: dict, shift=None, **fields) -> None:
    """Ship ``result`` again through the bundle's writer (manifests consistent), with the
    recorded ``fields`` replaced and the NLLs of each point passed through ``shift``."""
    arrays = {f"steps_{p['steps']}": (p["nll"] if shift is None else shift(p["nll"])).astype(np.float32)
              for p in result["points"]}
    out = {**result, **fields, "points": [{k: v for k, v in p.items() if k != "nll"} for p in result["points"]]}
    for p in out["points"]:  # the perplexities of the NLLs shipped, as a writer gives them
        p["ppl"] = np.exp(arrays[f"steps_{p['steps']}"].astype(np.float64).mean(axis=1)).round(4).tolist()
    bundle.write_model("smoke", result["name"], out, arrays)


def _another_machine(result: dict) -> dict:
    """The recorded machine of ``result`` made unlike this one (its vector unit and extensions)."""
    return {"cpu": "ANOTHER", "cpu_features": "avx2 fma" if result["cpu_features"] != "avx2 fma" else "avx512f"}


def _flipped(nll: np.ndarray, was: str) -> np.ndarray:
    """NLLs whose verdict is not ``was``: every length beyond L_tr made 2 nats worse than L_tr
    (r = e^2: it breaks), or, for a model that breaks, equal to L_tr (r = 1: it extrapolates)."""
    out = np.repeat(nll[:1], len(nll), axis=0)
    if was != "breaks":
        out[1:] += 2.0
    return out


def test_a_check_on_a_machine_like_the_bundles_is_bitwise(shipped):
    [row] = recheck.check([SPEC.name], presets.get("smoke"), progress=False)
    assert row["like_machine"] == recheck.like_machine(shipped)
    assert row["bitwise"] and row["max_abs_diff"] == 0.0 and row["reproduced"] and not row["why"]
    assert len(row["sizes"]) == 4 and all(e["same_verdict"] and e["diff_l_tr"][0] == 0.0 for e in row["sizes"])
    assert set(bundle.entries("smoke")) == {SPEC.name}  # the check wrote nothing into the bundle
    assert "reproduced" in recheck.render(row).splitlines()[0]


def test_on_a_like_machine_a_difference_far_below_any_bound_is_not_bitwise(shipped, monkeypatch):
    monkeypatch.setattr(recheck, "like_machine", lambda result: True)
    _reship(shipped, lambda nll: nll + 1e-3)
    [row] = recheck.check([SPEC.name], presets.get("smoke"), progress=False)
    assert not row["bitwise"] and not row["reproduced"] and row["max_abs_diff"] == pytest.approx(1e-3, rel=1e-2)
    assert all(e["same_verdict"] and e["within"] for e in row["sizes"])  # only the rule of a like machine fails it
    assert row["why"][0].startswith("not bitwise")


def test_a_check_on_another_machine_passes_on_equal_verdicts(shipped):
    _reship(shipped, **_another_machine(shipped))
    assert not recheck.like_machine(bundle.load(SPEC.name, "smoke"))
    [row] = recheck.check([SPEC.name], presets.get("smoke"), progress=False)
    assert not row["like_machine"] and row["rule"].startswith("the verdicts") and row["reproduced"], row["why"]
    assert all(e["bound"] == (recheck.FALLBACK_BOUND,) * 2 and e["bound_from"] == "fallback" for e in row["sizes"])
    assert "fallback" in row["bound"] and "fallback" in recheck.render(row)


def test_a_check_on_another_machine_fails_on_a_changed_verdict(shipped, monkeypatch):
    """However wide the bound on the NLL differences, a verdict that changes fails the check."""
    monkeypatch.setattr(recheck, "FALLBACK_BOUND", 100.0)
    last = shipped["points"][-1]
    was = recheck._side(shipped, last, shipped.get("segment_docs"))["verdict"]
    _reship(shipped, lambda nll: _flipped(nll, was) if nll is last["nll"] else nll, **_another_machine(shipped))
    [row] = recheck.check([SPEC.name], presets.get("smoke"), progress=False)
    assert not row["reproduced"]
    assert [e["same_verdict"] for e in row["sizes"]] == [True, True, True, False]
    assert all(e["within"] for e in row["sizes"])
    assert row["sizes"][-1]["retrained"]["verdict"] == was and "the verdict differs" in row["why"][0]


def test_a_check_on_another_machine_fails_on_nll_differences_beyond_the_bound(shipped):
    """A shift of every NLL keeps each r(L), so each verdict, but not the NLLs themselves."""
    _reship(shipped, lambda nll: nll + 0.05, **_another_machine(shipped))
    [row] = recheck.check([SPEC.name], presets.get("smoke"), progress=False)
    assert not row["reproduced"] and all(e["same_verdict"] and not e["within"] for e in row["sizes"])
    assert row["sizes"][0]["diff_l_tr"][0] == pytest.approx(-0.05, abs=1e-4)
    assert "beyond the fallback bound" in row["why"][0]


def test_two_shipped_seeds_give_the_bound(shipped, monkeypatch):
    seeds = plan.with_seeds(SPEC, [1, 2])
    monkeypatch.setattr(plan, "models", lambda scale="long": [SPEC, *seeds])
    for spec, shift in zip(seeds, (0.01, -0.02)):  # seed 1 and 2 as seed 0 moved by 0.01 and -0.02 nats
        seed = spec.settings()["seed"]  # each copy says it is the seed its name stands for
        _reship({**shipped, "name": spec.name, "settings": {**shipped["settings"], "seed": seed},
                 "train": {**shipped["train"], "seed": seed}}, lambda nll, s=shift: nll + s)
    spread = recheck.seed_spread(presets.get("smoke"))
    assert len(spread["pairs"]) == 3 and set(spread["sizes"]) == {p["tokens"] for p in shipped["points"]}
    for at_l_tr, at_horizon in spread["sizes"].values():  # the widest pair: seed 1 against seed 2
        assert at_l_tr == pytest.approx(0.03, abs=1e-4) and at_horizon == pytest.approx(0.03, abs=1e-4)
    _reship(shipped, lambda nll: nll + 0.02, **_another_machine(shipped))  # beyond the fallback, within the seeds
    [row] = recheck.check([SPEC.name], presets.get("smoke"), progress=False)
    assert row["reproduced"] and {e["bound_from"] for e in row["sizes"]} == {"seeds"}, row["why"]
    assert "3 pair(s)" in row["bound"]


def test_keep_keeps_the_retrained_bundle_outside_the_shipped_one(shipped, tmp_path, capsys):
    kept = tmp_path / "kept"
    assert main(["emergence", "--scale", "smoke", "--check", "1", "--keep", str(kept), "--quiet"]) == 0
    out = capsys.readouterr().out
    folder = kept / "smoke" / SPEC.name
    assert f"kept in {folder}" in out and "reproduced" in out
    bundle.verify(folder)  # a whole bundle of its own, with its weights
    assert (folder / bundle.WEIGHTS).is_file()
    assert set(bundle.entries("smoke")) == {SPEC.name}


def test_keep_inside_the_shipped_bundles_folder_is_refused(shipped, capsys, monkeypatch):
    monkeypatch.setattr(emergence, "run", lambda *a, **k: pytest.fail("trained although --keep was refused"))
    ref = storage.reference_dir()
    for inside in (ref / "kept", ref, storage.project_dir() / "reference" / "x"):  # this test's bundles, the repository's
        assert main(["emergence", "--scale", "smoke", "--check", "1", "--keep", str(inside)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--keep" in err[0] and "outside" in err[0], err
    assert main(["emergence", "--scale", "smoke", "--keep", "elsewhere"]) == 2  # --keep without --check
    assert "--check" in capsys.readouterr().err


def test_the_command_exits_1_when_a_model_is_not_reproduced(shipped, capsys):
    _reship(shipped, lambda nll: nll + 0.05, **_another_machine(shipped))
    assert main(["emergence", "--scale", "smoke", "--check", "1", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "not reproduced" in out and "why:" in out


def test_the_mean_difference_interval_resamples_documents():
    rng = np.random.default_rng(0)
    docs = np.repeat(np.arange(40), 5)  # 40 documents of 5 segments, each document moved as one
    diff = np.repeat(rng.normal(0, 0.05, 40), 5) + rng.normal(0, 0.001, 200)
    m, lo, hi = recheck.mean_difference(diff, docs)
    _, slo, shi = recheck.mean_difference(diff)
    assert lo < m < hi and m == pytest.approx(diff.mean())
    assert hi - lo > 1.5 * (shi - slo)  # segments of one document are not independent
