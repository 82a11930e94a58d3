"""``runs --clean`` removes only run folders rflens wrote and judged damaged: a folder it did
not write, or a run it may not read, is listed with why and left as it is."""

from __future__ import annotations

import errno
import hashlib
import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from rflens.cli import main
from rflens.setup import settings
from rflens.store import runs
from rflens.setup import presets


def _own_run(root: Path, key: str = "0123456789abcdef", complete: bool = True) -> Path:
    """A run folder as get_run lays it out (its weights a stand-in: nothing here loads them)."""
    _, m, d, t = settings.resolve(presets.get("smoke"), "alibi", "prose", {})
    path = root / key
    path.mkdir(parents=True)
    cfg = {"key": key, "scale": "smoke", "model": m.to_dict(), "data": d.to_dict(), "train": t.to_dict(),
           "data_fingerprint": "fp", "code_version": "c", "command": "train", "created": 0.0}
    (path / "config.json").write_text(json.dumps(cfg))
    if complete:
        (path / "model.safetensors").write_bytes(b"weights" * 100)
        (path / "metrics.json").write_text(json.dumps({"val_loss": 3.0}))
        files = ("model.safetensors", "metrics.json", "config.json")
        digests = {f: hashlib.sha256((path / f).read_bytes()).hexdigest() for f in files}
        (path / "manifest.json").write_text(json.dumps({"sha256": digests}))
    return path


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_clean_leaves_model_folders_and_projects_it_did_not_write(store, capsys):
    (store / "gpt2").mkdir(parents=True)
    (store / "gpt2" / "config.json").write_text('{"model_type": "gpt2"}')
    (store / "gpt2" / "model.safetensors").write_bytes(b"x" * 64)
    (store / "bloom").mkdir()
    (store / "bloom" / "config.json").write_text('{"model_type": "bloom"}')
    (store / "myproject").mkdir()
    (store / "myproject" / "config.json").write_text("{}")
    (store / "myproject" / "main.py").write_text("print(1)\n")
    (store / "fedcba9876543210").mkdir()  # named like a run key, but its config is another's
    (store / "fedcba9876543210" / "config.json").write_text('{"key": "another"}')
    damaged = _own_run(store, complete=False)  # rflens's, died before its first checkpoint: removable
    before = {k: v for k, v in _snapshot(store).items() if not k.startswith(damaged.name)}
    assert main(["runs", "--clean"]) == 0
    out = capsys.readouterr().out
    assert "removed gpt2" not in out and "removed bloom" not in out and "removed myproject" not in out
    assert f"removed {damaged.name}" in out and not damaged.exists()
    assert _snapshot(store) == before
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "gpt2" in out and "not a run folder rflens wrote" in out


_NAMES = st.one_of(st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=12),
                   st.text("0123456789abcdef", min_size=16, max_size=16))
_FILES = st.sampled_from(["config.json", "main.py", "model.safetensors", "manifest.json", "metrics.json",
                          "failed.json", "checkpoint.json", "checkpoint-1.pt", "README.md"])
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=6)


@st.composite
def _foreign_folder(draw):
    """A folder that is not a run rflens wrote: any files, any contents, a config.json that is
    anything but an object carrying the folder's own run key and the run settings."""
    name = draw(_NAMES.filter(lambda n: n not in (".", "..") and not n.startswith(".")))
    files = {"config.json": None, **{f: None for f in draw(st.lists(_FILES, max_size=4))}}
    contents = {}
    for f in files:
        kind = draw(st.sampled_from(["json", "bytes", "runlike"]))
        if kind == "json":
            contents[f] = json.dumps(draw(_JSON)).encode()
        elif kind == "bytes":
            contents[f] = draw(st.binary(max_size=40))
        else:  # the fields of a run's config, under another key (or none)
            other = draw(st.sampled_from([None, "0123456789abcdef", name + "x"]))
            cfg = {"scale": "smoke", "model": {}, "data": {}, "train": {}, "data_fingerprint": "fp"}
            if other is not None:
                cfg["key"] = other
            contents[f] = json.dumps(cfg).encode()
    if contents["config.json"] and name == "0123456789abcdef":
        contents["config.json"] = b"{}"
    return name, contents


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(folders=st.lists(_foreign_folder(), max_size=4, unique_by=lambda f: f[0].lower()))
def test_nothing_rflens_did_not_write_is_ever_removed(folders, tmp_path_factory, monkeypatch):
    root = tmp_path_factory.mktemp("runs")
    monkeypatch.setenv("RFLENS_RUNS", str(root))
    for name, contents in folders:
        (root / name).mkdir()
        for f, data in contents.items():
            (root / name / f).write_bytes(data)
    before = _snapshot(root)
    assert runs.clean(root) == []
    rows = runs.list_runs(root)
    assert {r["key"] for r in rows} == {name for name, _ in folders}
    assert all(r["status"] == runs.NOT_A_RUN for r in rows)
    assert _snapshot(root) == before


@pytest.mark.parametrize("unreadable", ["metrics.json", "model.safetensors", "config.json", "manifest.json"])
def test_a_file_it_may_not_read_is_reported_never_removed(unreadable, store, monkeypatch, capsys):
    """``chmod 000`` on a file of a run (as a user the permission holds for) is a permission
    to give back, not damage: the run is listed as unreadable and --clean keeps it whole."""
    run = _own_run(store)
    assert {r["key"]: r["status"] for r in runs.list_runs()}[run.name] == "complete"
    before = _snapshot(store)
    blocked = run / unreadable

    def denied(real):
        def wrapper(path, *args, **kwargs):
            if Path(path).resolve() == blocked.resolve():
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real(path, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(runs, "read_json", denied(runs.read_json))
    monkeypatch.setattr(runs, "sha256_file", denied(runs.sha256_file))
    (run / runs.VERIFIED).unlink(missing_ok=True)  # no quick answer from an earlier listing
    before = {k: v for k, v in before.items() if runs.VERIFIED not in k}
    row = {r["key"]: r for r in runs.list_runs()}[run.name]
    assert row["status"] == runs.UNREADABLE and unreadable in row["error"] and "chmod" in row["error"]
    assert main(["runs", "--clean"]) == 0
    assert f"removed {run.name}" not in capsys.readouterr().out
    assert {k: v for k, v in _snapshot(store).items() if runs.VERIFIED not in k} == before


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
                    reason="a permission does not hold for root")
def test_chmod_000_on_a_file_of_a_run_is_reported_never_removed(store, capsys):
    run = _own_run(store)
    (run / "metrics.json").chmod(0)
    try:
        row = {r["key"]: r for r in runs.list_runs()}[run.name]
        assert row["status"] == runs.UNREADABLE
        assert main(["runs", "--clean"]) == 0 and (run / "model.safetensors").is_file()
    finally:
        (run / "metrics.json").chmod(0o644)
