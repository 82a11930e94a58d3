"""``python -m rflens data``: build (or check) corpora and print what the manifests hold."""

from __future__ import annotations

import json
import time

from rflens.cli.common import emit
from rflens.data import prepare
from rflens.errors import UserError
from rflens.setup import presets
from rflens.setup.config import CORPORA, DataConfig, WIDE_CORPORA


def _configs_for(args) -> list[DataConfig]:
    """The data settings the arguments ask for: one per corpus (``--corpus all``: the three
    embedded corpora; ``--corpus wide``: the three wide ones, which are built by name only).

    ``--scale`` takes a preset's settings (vocabulary, slice, source); otherwise they come
    from ``--vocab-size`` (and ``--max-bytes`` / ``--split-seed`` where the parser offers
    them: :func:`rflens.data.rebuild_command` names them for a variant that has them).
    """
    source = getattr(args, "source", "embedded") or "embedded"
    corpus = getattr(args, "corpus", "all") or "all"
    files = tuple(getattr(args, "files", None) or ())
    if source == "files":
        names = ["files"] if corpus == "all" else [corpus]
    else:
        names = list(CORPORA) if corpus == "all" else list(WIDE_CORPORA) if corpus == "wide" else [corpus]
    for name in names:
        if source != "files" and name not in CORPORA + WIDE_CORPORA:
            raise UserError(f"unknown corpus {name!r}: choose {', '.join(CORPORA + WIDE_CORPORA)}, all or wide")
        if source == "hub" and name in WIDE_CORPORA:
            raise UserError(f"{name} is built from the package registries, not the hub: drop --source hub")
    if getattr(args, "scale", None):
        base = presets.get(args.scale).data
        # the preset's source (e.g. the Pile for "full") unless --source asks for another one
        src = base.source if source == "embedded" else source
        if src == "files" and not files:
            raise UserError(f"the {args.scale} preset reads local files: give them with --files PATH ...")
        if src == "files" and corpus == "all":
            names = ["files"]
        return [base.replace(corpus=n, source=src, files=files) for n in names]
    slice_ = {"max_bytes": getattr(args, "max_bytes", None), "split_seed": getattr(args, "split_seed", None) or 0}
    return [DataConfig(corpus=n, source=source, vocab_size=args.vocab_size, files=files, **slice_) for n in names]


def run(args) -> int:
    """Prepare each corpus (repairing what is damaged) and print one row per corpus, or JSON."""
    quiet = bool(getattr(args, "quiet", False))
    rows = []
    for cfg in _configs_for(args):
        t0 = time.time()
        corpus = prepare(cfg, progress=not quiet, repair=True)
        rows.append({**corpus.summary(), "seconds": round(time.time() - t0, 2)})
    if getattr(args, "json", False):
        emit(json.dumps(rows, indent=1))
        return 0
    lines = [f"{'corpus':10} {'docs tr/va/te':>16} {'tokens train':>13} {'validation':>11} {'test':>9} "
             f"{'bytes/tok':>9} {'vocab':>6} {'s':>6}"]
    for r in rows:
        d, t = r["documents"], r["tokens"]
        lines.append(f"{r['corpus']:10} {d['train']:>7}/{d['validation']}/{d['test']:<4} {t['train']:>13,} "
                     f"{t['validation']:>11,} {t['test']:>9,} {r['bytes_per_token']:>9.2f} {r['vocab_size']:>6} "
                     f"{r['seconds']:>6.1f}")
    for r in rows:
        src = ", ".join(k if k.count("=") or "@" in k[1:] else f"{k}=={v}"
                        for k, v in sorted(r["sources"].items()) if isinstance(v, str) and k != "docs_sha256")
        lines.append(f"{r['corpus']}: {r['path']}  [{src}]  fingerprint {r['fingerprint'][:12]}")
    emit("\n".join(lines))
    return 0
