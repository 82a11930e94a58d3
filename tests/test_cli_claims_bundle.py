"""``claims`` at a shipped preset stops on a damaged bundle with one line naming the file."""

from __future__ import annotations

import shutil

import pytest

from rflens.cli import main
from rflens.store import bundle


@pytest.mark.parametrize("target", ["alibi_slope_shift=4/nll.npz", "nope/result.json"])
def test_claims_on_a_damaged_bundle_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys, target):
    shutil.copytree(bundle.bundle_dir("long-repeated"), tmp_path / "reference" / "long-repeated")
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    path = tmp_path / "reference" / "long-repeated" / target
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    assert main(["claims", "--scale", "long-repeated"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and target.split("/")[-1] in err, err
