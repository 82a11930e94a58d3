"""Every command that reads a shipped bundle leaves its files as they were: the same bytes in
every file, no file or folder added or removed. Only ``emergence --adopt`` (and the sealing of
a ladder's predictions, once) writes a shipped bundle; each command here, run against a copy
of a bundle (``bundle_copy``), must not, whether it succeeds or refuses.

Nothing here trains: the cases that reach training do so with a sitting shorter than their
setup (``--minutes 0.0001``), and any training step taken fails the test."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from rflens.cli import main
from rflens.store import bundle

# (bundle, command line, the exit codes it may end with); BUNDLE is the copy's folder
CASES = [
    ("long", "emergence --scale long --list", {0}),
    ("long", "emergence --scale long --only alibi window_window=8 --quiet", {0}),  # shipped: nothing to train
    ("long", "emergence --scale long --predict", {2}),  # no ladder
    ("long", "emergence --scale long --adopt REFERENCE", {0}),  # the bundles' own folder: nothing to join
    ("long", "claims --scale long", {0}),
    ("long", "claims --scale long --json --record-speed", {2}),  # the shipped speed record is never replaced
    ("long", "evaluate --scale long --pos alibi --quiet", {0}),  # the bundle's cached measurements
    ("long", "evaluate --scale long --pos alibi --lengths 100 --quiet", {2}),  # needs the weights the copy lacks
    ("long", "erf --scale long --pos alibi --json --quiet", {0}),
    ("long", "runs --export BUNDLE/tables", {2}),  # an export into the bundle is refused
    ("deep", "emergence --scale deep --list", {0}),
    ("deep", "emergence --scale deep --only window_window=5 --quiet", {0}),
    ("deep", "emergence --scale deep --check 1 --keep BUNDLE/kept --quiet", {2}),  # a keep inside it: refused
    ("deep", "claims --scale deep --record-speed", {2}),
    ("deep", "evaluate --scale deep --pos sinusoidal --corpus prose-wide --json --quiet", {0}),
    ("deep-d128", "emergence --scale deep-d128 --list", {0}),
    ("deep-d128", "emergence --scale deep-d128 --predict", {2}),  # sealed once, never again
    ("long-sotu", "emergence --scale long-sotu --only nope --minutes 0.0001 --quiet", {0}),  # shipped: nothing to do
    ("deep-d128", "claims --scale deep-d128 --json", {0}),
    ("deep-d128", "reproduce --scale deep-d128 --plan --chapters 10", {0}),
    ("long-3m", "emergence --scale long-3m --list", {0}),
    ("long-3m", "emergence --scale long-3m --check 1 --minutes 0.0001 --quiet", {2, 3}),  # retrains elsewhere
    ("long-3m", "claims --scale long-3m", {0}),
    ("long-3m", "reproduce --scale long-3m --plan", {0}),
    ("long-3m", "runs --json", {0}),
    ("long-3m", "runs --clean", {0}),
    ("long-3m", "runs --export EXPORT", {0}),
]


def by_state(scale: str) -> list[tuple[str, str, set[int]]]:
    """A case for the first planned model of ``scale`` in each state the checkout's bundle has:
    finished (nothing to do: 0), joined unfinished and not trained yet (the sitting ends before
    its setup does: one line, nothing written, 2). They follow the bundle as models finish."""
    from rflens.longrun import plan
    from rflens.setup import presets

    if not (bundle.bundle_dir(scale) / bundle.MANIFEST).is_file():
        return []
    found, done = bundle.entries(scale), bundle.complete(scale)
    names = [spec.name for spec in plan.models(presets.long_run(scale))]
    states = [(done, {0}), (set(found) - done, {2}), (set(names) - set(found), {2})]
    cases = []
    for members, codes in states:
        first = next((n for n in names if n in members), None)
        if first is not None:
            cases.append((scale, f"emergence --scale {scale} --only {first} --minutes 0.0001 --quiet", codes))
    return cases


CASES += by_state("deep-d128")


def snapshot(top: Path) -> dict[str, str | None]:
    """Every file of ``top`` by its sha256, every folder (hidden ones too) as None."""
    return {str(p.relative_to(top)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
            for p in sorted(top.rglob("*"))}


@pytest.fixture(autouse=True)
def no_training(monkeypatch):
    """A command here that would train fails the test at its first step, instead of training."""
    from rflens.training import trainer

    def trained(*args, **kwargs):
        raise AssertionError("a command that reads a shipped bundle trained a step")

    monkeypatch.setattr(trainer, "train_step", trained)


def run_against_copy(bundle_copy, tmp_path, name: str, line: str, capsys):
    """Run ``line`` against a copy of the bundle ``name``: (exit code, files before, files
    after, what it printed)."""
    top = bundle_copy(name)
    words = [w.replace("BUNDLE", str(top)).replace("REFERENCE", str(top.parent))
             .replace("EXPORT", str(tmp_path / "export")) for w in line.split()]
    before = snapshot(top)
    code = main(words)
    out = capsys.readouterr()
    return code, before, snapshot(top), out


@pytest.mark.parametrize("name, line, codes", CASES, ids=[line for _, line, _ in CASES])
def test_a_command_leaves_every_file_of_the_shipped_bundle_as_it_was(bundle_copy, tmp_path, capsys, name, line,
                                                                      codes):
    if not (bundle.bundle_dir(name) / bundle.MANIFEST).is_file():
        pytest.skip(f"no shipped {name} bundle in this checkout")
    code, before, after, out = run_against_copy(bundle_copy, tmp_path, name, line, capsys)
    assert code in codes, (code, out.err[-2000:])
    if code == 2:  # a refusal is one line
        assert len(out.err.strip().splitlines()) == 1, out.err
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k, "absent") != after.get(k, "absent"))
    assert not changed, f"{line} changed the bundle's files: {changed}"
