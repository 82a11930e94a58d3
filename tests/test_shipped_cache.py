"""A shipped model's computed results are cached by what they were computed from."""

from __future__ import annotations

import dataclasses

import pytest

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


def test_a_shipped_board_is_read_from_the_cache_until_anything_it_reads_changes(tmp_path, monkeypatch):
    from rflens.claims import scoreboard, verdicts
    from rflens.measure.criterion import levels

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    reference = tmp_path / "reference"
    reference.mkdir()
    for run in ("long", "long-repeated"):  # the real bundles, behind a folder this test may add to
        (reference / run).symlink_to(bundle.bundle_dir(run), target_is_directory=True)
    monkeypatch.setenv("RFLENS_REFERENCE", str(reference))
    calls = []

    def check_shipped(scale, corpus="prose"):
        calls.append(scale)
        return [{"id": 1, "result": "pass", "seeds": {0: "pass", 1: "fail"}}]

    monkeypatch.setattr(verdicts, "check_shipped", check_shipped)
    first = scoreboard.shipped_board("long")
    assert first == [{"id": 1, "result": "pass", "seeds": {0: "pass", 1: "fail"}}]  # seeds stay numbers
    assert scoreboard.shipped_board("long") == first and len(calls) == 1
    with levels(breaks=3.0):
        scoreboard.shipped_board("long")
    assert len(calls) == 2  # another level: another board
    with shipped.at_size(2**20):
        scoreboard.shipped_board("long")
        scoreboard.shipped_board("long")
    assert len(calls) == 4  # a size is computed each time, never cached
    (reference / "another").mkdir()
    storage.write_json(reference / "another" / "manifest.json", {"models": {}})
    scoreboard.shipped_board("long")
    assert len(calls) == 5  # a bundle changed
    scoreboard.shipped_board("long-repeated")
    assert len(calls) == 6


def test_a_cached_board_is_the_board_computed_afresh(tmp_path, monkeypatch):
    from rflens.claims import scoreboard, verdicts

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    computed = verdicts.check_shipped("long-repeated")
    scoreboard.shipped_board("long-repeated")
    monkeypatch.setattr(verdicts, "check_shipped", lambda *a, **k: 1 / 0)  # from here on, only the cache serves
    assert scoreboard.shipped_board("long-repeated") == computed



def test_the_board_by_size_is_cached_and_is_the_board_computed_afresh(tmp_path, monkeypatch):
    from rflens.claims import scoreboard, verdicts
    from rflens.longrun.plan import sizes
    from rflens.setup import presets

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    grown = scoreboard.by_size("long-repeated")
    assert list(grown.columns) == sizes(presets.get("long-repeated"))
    monkeypatch.setattr(verdicts, "check_shipped", lambda *a, **k: 1 / 0)  # from here on, only the cache serves
    assert scoreboard.by_size("long-repeated").equals(grown)
    base = presets._BUILDERS["long-repeated"]
    monkeypatch.setitem(presets._BUILDERS, "long-repeated", lambda: dataclasses.replace(base(), title="another"))
    with pytest.raises(ZeroDivisionError):  # another preset of the same name is computed again
        scoreboard.by_size("long-repeated")


def test_a_shipped_presets_level_sensitivity_is_cached_and_is_the_table_computed_afresh(tmp_path, monkeypatch):
    from rflens.claims import scoreboard, verdicts

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    computed = verdicts.sensitivity("long-repeated", "tol")
    assert scoreboard.sensitivity("long-repeated", "tol").equals(computed)
    monkeypatch.setattr(verdicts, "sensitivity", lambda *a, **k: 1 / 0)  # from here on, only the cache serves
    assert scoreboard.sensitivity("long-repeated", "tol").equals(computed)
    with pytest.raises(ZeroDivisionError):  # another level: computed
        scoreboard.sensitivity("long-repeated", "breaks")
