"""A shipped model's computed results are cached by what they were computed from."""

from __future__ import annotations

from rflens import storage
from rflens.store import bundle, shipped


def test_an_edited_shipped_model_is_never_served_its_old_cached_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    run = shipped.ShippedRun(bundle.bundle_dir("long-repeated") / "nope")
    calls = []

    def compute():
        calls.append(1)
        return {"value": len(calls)}

    params = {"what": "a measurement the bundle does not hold"}
    assert run.cached("probe", params, compute) == {"value": 1}
    assert run.cached("probe", params, compute) == {"value": 1}  # the same model: served from the cache
    edited = shipped.ShippedRun(run.path)
    monkeypatch.setattr(storage, "sha256_file", lambda path, sample=False: "0" * 64)  # its files (and manifest) changed
    assert edited.cached("probe", params, compute) == {"value": 2}
