"""Readers of what the book states about itself, each against the thing it states it of: a
run's state words against its bundle, a claim's label against the rows it reads, a CSV's
header against the data its rows come from, and a pointer to a page against that page. Each
returns the contradictions it finds (empty: none); the tests plant one of each."""

from __future__ import annotations

import re
from pathlib import Path

# ----------------------------------------------------------------------------- status words
# "`deep` reads none of these claims yet: its models are still training", "The claims of
# `long-6m` wait for models still training", "(3 still training)" after a run's name
STILL_TRAINING = re.compile(r"`([\w-]+)`[^.;]*?\bstill training\b")


def finished_runs() -> set[str]:
    """The shipped long runs whose bundle holds every model of their plan, finished."""
    from rflens.longrun import plan
    from rflens.setup import presets
    from rflens.store import bundle

    done = set()
    for name in presets.NAMES:
        preset = presets.get(name)
        if not preset.shipped or not isinstance(preset, presets.LongRun):
            continue
        if {spec.name for spec in plan.models(preset)} <= set(bundle.complete(name)):
            done.add(name)
    return done


def status_contradictions(text: str, finished: set[str]) -> list[str]:
    """Each run a sentence of ``text`` says is still training while its bundle is complete."""
    return sorted({m[1] for m in STILL_TRAINING.finditer(text) if m[1] in finished})


# ----------------------------------------------------------------------------- labels
SETTING = re.compile(r"(?<![\w])([wΔh]) = (-?\d+)(?!\d)")


def label_contradictions(boards: dict[str, list[dict]], shorts: dict[int, str]) -> list[tuple]:
    """(scale, claim, setting) for each paper setting a claim's short label names that the
    rows it read at that scale do not hold (its measured text names the rows by the paper's
    setting): a label must describe what the board decided, at every scale it was read."""
    out = []
    for scale, board in boards.items():
        for row in board:
            if row.get("result") not in ("pass", "fail", "not decided"):
                continue
            for symbol, value in SETTING.findall(shorts.get(row["id"], "")):
                if not re.search(rf"(?<![\w]){symbol} = {value}(?!\d)", str(row.get("measured", ""))):
                    out.append((scale, row["id"], f"{symbol} = {value}"))
    return out


# ----------------------------------------------------------------------------- CSV headers
def header_of(text: str) -> dict[str, str]:
    """The ``# key: value`` lines that open a CSV of the book."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(": ")
        out[key] = value
    return out


def expected_fingerprints(scale: str) -> dict[str, set[str]]:
    """{corpus: fingerprints} the rows of ``scale`` can come from: a shipped run's, those its
    bundle's models were trained on (read from each model's result); another preset's, the
    corpora built for it here (read from each corpus's manifest)."""
    import json

    from rflens.data.build import built_path
    from rflens.setup import presets
    from rflens.setup.settings import resolve
    from rflens.store import bundle

    out: dict[str, set[str]] = {}
    if presets.get(scale).shipped and bundle.entries(scale):
        for path in bundle.entries(scale).values():
            result = json.loads((path / bundle.RESULT).read_text())
            out.setdefault(result.get("corpus", "prose"), set()).add(result["data_fingerprint"])
        return {corpus: {",".join(sorted(fps))} | fps for corpus, fps in out.items()}
    for corpus in presets.get(scale).sweeps.corpora:
        manifest = built_path(resolve(presets.get(scale), "alibi", corpus).data) / "manifest.json"
        if manifest.is_file():
            out[corpus] = {json.loads(manifest.read_text())["fingerprint"]}
    return out


def provenance_contradictions(text: str, fingerprints) -> list[str]:
    """Each ``data_<corpus>`` line of a CSV's header whose fingerprint is not one of the
    corpora of the preset the header names (``fingerprints(scale)``: {corpus: {fingerprint}})."""
    head = header_of(text)
    scale = head.get("scale", "")
    if not scale:
        return []
    allowed = fingerprints(scale)
    return [f"{key}: {value} is not a corpus of {scale}" for key, value in head.items()
            if key.startswith("data_") and value not in allowed.get(key.removeprefix("data_"), set())]


# ----------------------------------------------------------------------------- pointers
# A sentence that tells the reader what another page shows, and what that page must hold for
# it to be true: (the pointer as it is written, the page it points to, what that page holds).
POINTERS = [
    (re.compile(r"the front page says how"), "index", re.compile(r"git clone")),
    (re.compile(r"chapter 12[^.]*Hugging Face", re.I), "12_beyond_the_paper", re.compile(r"Hugging Face")),
    (re.compile(r"chapter 9 reads[^.]*validation loss", re.I), "09_claims", re.compile(r"validation loss")),
    (re.compile(r"Cameron(?: et al\.|, Gelbach)"), "references", re.compile(r"Cameron")),
    (re.compile(r"the scoreboard \(chapter 9\)|chapter 9['’]s scoreboard", re.I), "09_claims", re.compile(r"scoreboard", re.I)),
]


def pointer_contradictions(pages: dict[str, str]) -> list[tuple]:
    """(page, pointer, target) for each pointer of :data:`POINTERS` a page makes whose target
    page does not hold what it points to."""
    out = []
    for page, text in pages.items():
        for pointer, target, holds in POINTERS:
            for m in pointer.finditer(text):
                if target in pages and not holds.search(pages[target]):
                    out.append((page, m[0], target))
    return out


def csv_files(html: Path) -> list[Path]:
    return sorted(Path(html).rglob("*.csv"))
