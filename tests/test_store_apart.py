"""A run store inside the shipped bundles' folder (or one holding it) is refused in one line,
before any command writes a run where a bundle's manifest would no longer vouch for it."""

from __future__ import annotations

import pytest

from rflens import storage
from rflens.cli import main
from rflens.errors import UserError


def _files(top):
    return sorted(p.relative_to(top) for p in top.rglob("*"))


@pytest.fixture
def bundles(reference):
    """The test's own bundles' folder ($RFLENS_REFERENCE) with a bundle in it."""
    (reference / "long" / "alibi").mkdir(parents=True)
    (reference / "long" / "alibi" / "result.json").write_text("{}\n")
    return reference


@pytest.mark.parametrize("command", [["train", "--scale", "smoke", "--pos", "alibi"],
                                     ["evaluate", "--scale", "smoke", "--pos", "alibi"],
                                     ["runs"], ["runs", "--clean"]])
@pytest.mark.parametrize("where", ["long", "long/alibi", ".", ".."])
def test_a_run_store_and_the_bundles_one_inside_the_other_is_one_line_and_writes_nothing(
        bundles, monkeypatch, capsys, command, where):
    runs = bundles / where
    monkeypatch.setenv("RFLENS_RUNS", str(runs))
    before = _files(bundles)
    assert main(command) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"RFLENS_RUNS={runs}" in err[0] and "point RFLENS_RUNS at a folder apart" in err[0], err
    assert _files(bundles) == before


def test_the_repositorys_own_bundles_are_kept_apart_too(reference, monkeypatch):
    """Whatever RFLENS_REFERENCE says, the repository's reference/ is shipped: no run store in it."""
    monkeypatch.setenv("RFLENS_RUNS", str(storage.project_dir() / "reference" / "long"))
    with pytest.raises(UserError, match="inside the shipped bundles' folder"):
        storage.runs_dir()
    monkeypatch.setenv("RFLENS_RUNS", "~/../../../")  # a store holding every folder
    with pytest.raises(UserError, match="is inside the run store"):
        storage.runs_dir()


def test_a_store_beside_the_bundles_is_served(tmp_path, reference, monkeypatch):
    for name in ("runs", "reference-runs", "referenced"):  # a sibling, even one whose name begins alike
        monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / name))
        assert storage.runs_dir() == (tmp_path / name).resolve()
