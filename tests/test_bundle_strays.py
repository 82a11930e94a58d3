"""Nothing is written into the shipped bundles' folder by a command that exports, and what
a killed writer left there (a hidden ``.NAME.adopting/``) is not the bundle's; a file no
writer made is named, with the fix that removes it."""

from __future__ import annotations

import pytest

from rflens import storage
from rflens.cli import main
from rflens.errors import UserError
from rflens.store import bundle


@pytest.fixture
def sealed(tmp_path, monkeypatch):
    """A ``long`` bundle of this test's own, holding one sealed file."""
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    bundle.write_file("long", "corpora.json", {"scale": "long"})
    bundle.check("long")
    return bundle.bundle_dir("long")


@pytest.mark.parametrize("where", ["long", ".", "long/tables"])
def test_export_into_the_bundles_folder_is_refused(where, sealed, capsys):
    target = storage.reference_dir() / where
    before = sorted(p for p in storage.reference_dir().rglob("*"))
    assert main(["runs", "--export", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "outside" in err[0], err
    assert sorted(p for p in storage.reference_dir().rglob("*")) == before
    bundle.check("long")


def test_export_into_the_repositorys_reference_folder_is_refused(sealed, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(storage, "project_dir", lambda: tmp_path / "project")  # never the real one, even on failure
    target = storage.project_dir() / "reference" / "long" / "tables"
    assert main(["runs", "--export", str(target)]) == 2
    assert not target.exists() and "outside" in capsys.readouterr().err


@pytest.mark.parametrize("leftover", [".alibi.adopting/result.json", ".x.adopting/sub/nll.npz", ".notes.tmp"])
def test_a_killed_writers_hidden_leftover_is_not_the_bundles(leftover, sealed):
    path = sealed / leftover
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("left by a killed writer")
    bundle.check("long")  # not damaged
    bundle.seal("long")  # and never vouched for
    assert leftover not in storage.read_json(sealed / bundle.MANIFEST)["sha256"]


@pytest.mark.parametrize("stray", ["notes.txt", "tables/runs.csv", "alibi/extra.json"])
def test_a_file_no_writer_made_is_named_with_the_fix_that_removes_it(stray, sealed):
    path = sealed / stray
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    with pytest.raises(UserError) as err:
        bundle.check("long")
    line = str(err.value)
    assert str(path) in line and "remove" in line and len(line.splitlines()) == 1, line
