"""``$RFLENS_REFERENCE`` that names a file, or a folder that does not exist, is one line
naming the path, before any work: never an empty bundle read as "nothing shipped"."""

from __future__ import annotations

import pytest

from rflens import data
from rflens.cli import main
from rflens.longrun import emergence

READERS = [
    ["emergence", "--scale", "long", "--list"],
    ["emergence", "--scale", "long", "--check", "1"],
    ["claims", "--scale", "long"],
    ["reproduce", "--scale", "long", "--plan"],
    ["evaluate", "--scale", "long", "--pos", "nope"],
    ["train", "--scale", "long-repeated", "--pos", "alibi"],
    ["runs"],
]


def _bad(tmp_path, kind):
    if kind == "missing":
        return tmp_path / "no-such-folder"
    if kind == "missing-below-missing":
        return tmp_path / "a" / "b"
    (tmp_path / "afile").write_text("x")
    return tmp_path / "afile" if kind == "file" else tmp_path / "afile" / "below"


@pytest.mark.parametrize("kind", ["missing", "missing-below-missing", "file", "below-a-file"])
@pytest.mark.parametrize("argv", READERS, ids=lambda a: " ".join(a))
def test_a_bad_reference_folder_is_one_line_naming_it(argv, kind, tmp_path, monkeypatch, capsys):
    bad = _bad(tmp_path, kind)
    monkeypatch.setenv("RFLENS_REFERENCE", str(bad))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(data, "prepare", lambda *a, **k: pytest.fail("built a corpus for an empty bundle"))
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "RFLENS_REFERENCE" in lines[0] and str(bad) in lines[0], (out, err)
    assert not (tmp_path / "runs").exists()  # nothing was stored or built
    assert bad.is_file() if kind == "file" else not bad.exists()


def test_a_workers_new_folder_is_still_made_by_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "w0"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    trained = []
    monkeypatch.setattr(emergence, "run", lambda spec, scale="long", **kw: trained.append(spec.name) or tmp_path)
    assert main(["emergence", "--scale", "long", "--only", "nope", "--quiet"]) == 0, capsys.readouterr()
    assert trained == ["nope"]
