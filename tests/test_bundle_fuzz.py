"""A property-based fuzz (hypothesis) of a tampered copy of the shipped control bundle
(reference/long-repeated): one file (or folder) of it is drawn and damaged in a drawn way,
behind the writer's back, and the commands that read the bundle run on the copy. Each of
them stops with exit 2 and one line on stderr naming what was damaged; none answers with
numbers of its own (exit 0) or a traceback.

The damages: a bit flip at a drawn offset, a truncation, a deletion, bytes appended, a value
of a JSON file edited with the model's manifest made to match (the bundle's manifest not),
the file replaced by a symlink to an identical copy or by a FIFO (which a reader that opened
it would wait on for ever), a folder replaced by a symlink to another, and a file added (in the bundle's folder, in a model's, or in a new one).
Hidden files (a dot first) are left out: the bundle's readers skip them, as they skip the
temporary files a killed writer leaves.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from rflens import storage
from rflens.cli import main
from rflens.store import bundle

CONTROL = "long-repeated"
READERS = (["emergence", "--scale", CONTROL, "--list"], ["reproduce", "--scale", CONTROL, "--plan"],
           ["claims", "--scale", CONTROL])
DAMAGES = ("flip", "truncate", "delete", "append", "edit json", "symlink", "folder symlink", "add file", "fifo")
EXAMPLES = 12  # each one: a copy of the bundle (hard links) and the three readers on it

pytestmark = pytest.mark.skipif(not bundle.entries(CONTROL), reason="no shipped control bundle in this checkout")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A copy of the shipped bundle that no example changes (each example links to it)."""
    top = tmp_path_factory.mktemp("pristine") / CONTROL
    shutil.copytree(bundle.bundle_dir(CONTROL), top)
    return top


def _copy(pristine: Path, dest: Path) -> Path:
    """The bundle at ``dest`` by hard links: quick; a file is copied before it is changed (:func:`_own`)."""
    shutil.copytree(pristine, dest, copy_function=os.link)
    return dest


def _own(path: Path) -> None:
    """Make ``path`` a file of this copy only, so that changing it leaves the pristine copy be."""
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)


def _edit_json(doc, where: list[int], value):
    """``doc`` with the value at a path drawn by ``where`` (indices, taken modulo each level's
    size, or keys) replaced by ``value``; the path, for the message of a failing example."""
    node, path = doc, []
    for i in where:
        keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
        if not keys:
            break
        key = i if isinstance(i, str) else keys[i % len(keys)]
        path.append(key)
        if not isinstance(node[key], (dict, list)) or not node[key]:
            node[key] = value if node[key] != value else [value]
            return path
        node = node[key]
    return path


def _damage(top: Path, rel: str, how: str, data) -> set[str]:
    """Damage the file ``rel`` of the bundle at ``top`` (``data``: the drawn details); the
    paths (inside the bundle) of what was changed, one of which the error must name."""
    path = top / rel
    if how == "folder symlink":
        folder = path.parent if path.parent != top else top / "nope"
        other = top / ("alibi" if folder.name != "alibi" else "nope")
        shutil.rmtree(folder)
        folder.symlink_to(other, target_is_directory=True)
        return {folder.relative_to(top).as_posix()}
    if how == "add file":
        where = [top, top / "nope", top / "extra"][data["at"] % 3]
        where.mkdir(exist_ok=True)
        new = where / data["name"]
        new.unlink(missing_ok=True)  # a linked file of the same name: the pristine copy's
        new.write_bytes(data["bytes"])
        return {new.relative_to(top).as_posix()}
    if how == "delete":
        path.unlink()
        return {rel}
    if how == "fifo":
        path.unlink()
        os.mkfifo(path)
        return {rel}
    _own(path)
    raw = path.read_bytes()
    if how == "flip":
        i = data["at"] % len(raw)
        path.write_bytes(raw[:i] + bytes([raw[i] ^ data["mask"]]) + raw[i + 1:])
    elif how == "truncate":
        path.write_bytes(raw[:data["at"] % len(raw)])
    elif how == "append":
        path.write_bytes(raw + data["bytes"])
    elif how == "symlink":
        twin = top.parent / f"twin-{path.name}"
        twin.write_bytes(raw)
        path.unlink()
        path.symlink_to(twin)
    elif how == "edit json":
        doc = json.loads(raw)
        _edit_json(doc, data["where"], data["value"])
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        manifest = path.parent / bundle.MANIFEST
        if path.parent != top and path != manifest:  # the model's manifest made to match; the bundle's not
            _own(manifest)
            man = json.loads(manifest.read_text())
            man["sha256"][path.name] = storage.sha256_file(path)
            manifest.write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
            return {rel, (path.parent / bundle.MANIFEST).relative_to(top).as_posix()}
    return {rel}


@contextlib.contextmanager
def _hang_is_a_failure(*what, seconds: int = 60):
    """A reader that blocks (on a FIFO, say) fails the example instead of hanging the tests."""
    import signal

    def hung(signum, frame):
        raise AssertionError(f"no answer in {seconds} s: {what}")

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def _names(line: str, top: Path, rel: str) -> bool:
    """Whether the error names the bundle file ``rel``: by its path inside the bundle or its
    absolute path (not as the tail of another path: a model's manifest.json is not the
    bundle's), or by its folder and its name."""
    import re

    def named(text: str) -> bool:
        return re.search(rf"(?<![\w/.=-]){re.escape(text)}(?![\w/.-])", line) is not None

    folder, _, name = rel.rpartition("/")
    return named(rel) or str(top / rel) in line or (bool(folder) and str(top / folder) in line and named(name))


def _strategy(files: list[str]):
    from hypothesis import strategies as st

    json_files = [f for f in files if f.endswith(".json")]
    details = st.fixed_dictionaries({
        "at": st.integers(0, 2 ** 31), "mask": st.integers(1, 255),
        "bytes": st.binary(min_size=1, max_size=16),
        "name": st.sampled_from(["extra.json", "result.json.bak", "model.safetensors", "notes.txt", "a b", "é.json"]),
        "where": st.lists(st.integers(0, 1000), min_size=1, max_size=6),
        "value": st.one_of(st.none(), st.booleans(), st.integers(-5, 10 ** 6), st.floats(allow_nan=True),
                           st.text(max_size=8), st.just([]), st.just({})),
    })
    damage = st.sampled_from(DAMAGES)
    return damage.flatmap(lambda how: st.tuples(
        st.sampled_from(json_files if how == "edit json" else files), st.just(how), details))


def test_every_damage_to_the_shipped_bundle_stops_its_readers_in_one_line_naming_it(pristine, tmp_path, monkeypatch):
    from hypothesis import HealthCheck, Phase, example, given, settings

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    files = ["manifest.json", *bundle._files(pristine)]
    count = [0]
    no_details = {"at": 7, "mask": 1, "bytes": b"x", "name": "extra.json", "where": [0], "value": 1}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, print_blob=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])  # no shrinking: slow
    @given(case=_strategy(files))
    @example(case=("alibi_slope_shift=4/nll.npz", "flip", no_details))  # claim 3 read another model
    @example(case=("nope/result.json", "edit json", {**no_details, "where": ["complete"], "value": False}))  # "complete"
    @example(case=("manifest.json", "edit json", {**no_details, "where": ["sha256", 3], "value": "0" * 64}))
    @example(case=("manifest.json", "edit json", {**no_details, "where": ["version"], "value": 2}))
    @example(case=("manifest.json", "append", {**no_details, "bytes": b"\n"}))  # still the same JSON
    @example(case=("manifest.json", "symlink", no_details))
    @example(case=("nope/model.safetensors", "symlink", no_details))
    @example(case=("schedule_check.json", "truncate", {**no_details, "at": 100}))
    @example(case=("nope/nll.npz", "folder symlink", no_details))
    @example(case=("nope/nll.npz", "add file", {**no_details, "at": 1, "name": "extra.json"}))
    @example(case=("nope/nll.npz", "add file", {**no_details, "at": 2, "name": "manifest.json"}))  # a model of its own
    @example(case=("manifest.json", "fifo", no_details))
    @example(case=("nope/result.json", "fifo", no_details))
    @example(case=("alibi/manifest.json", "fifo", no_details))
    def property_(case):
        rel, how, data = case
        count[0] += 1
        top = _copy(pristine, tmp_path / f"ex{count[0]}" / CONTROL)
        changed = _damage(top, rel, how, data)
        monkeypatch.setenv("RFLENS_REFERENCE", str(top.parent))
        for argv in READERS:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _hang_is_a_failure(argv, rel, how):
                code = main(argv)
            lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
            assert code == 2, (argv, rel, how, code, out.getvalue()[-300:])
            assert len(lines) == 1 and lines[0].startswith("error:"), (argv, lines)
            assert any(_names(lines[0], top, c) for c in changed), (argv, sorted(changed), lines[0])
        shutil.rmtree(top.parent.parent)

    property_()
    monkeypatch.delenv("RFLENS_REFERENCE")
    assert (pristine / bundle.MANIFEST).read_bytes() == (bundle.bundle_dir(CONTROL) / bundle.MANIFEST).read_bytes()
    bundle.check(CONTROL, pristine.parent)  # no example changed the pristine copy
