"""What a preset's corpora hold, one row a corpus (chapters 1 and 10, ``data --json``)."""

from __future__ import annotations

from rflens.setup import presets
from rflens.setup.settings import resolve


def corpora_table(scale: str):
    """The corpora the preset ``scale`` trains on, one row a corpus: the Pile subset it stands
    in for, what it holds, its documents per split, its training tokens and how many times a
    model's budget passes over them (blank where the corpus is not built yet)."""
    import pandas as pd

    from rflens import data

    sc = presets.get(scale)
    budget = sc.train.steps * sc.train.batch_size * sc.train.l_tr
    rows = []
    for role in sc.sweeps.corpora:
        cfg = resolve(presets.get(scale), "alibi", role)[2]
        built = data.built(cfg)
        m = built.manifest if built is not None else None
        rows.append({"corpus": cfg.corpus, "stands in for": data.STANDS_IN_FOR.get(cfg.corpus, ""),
                     "text": data.ABOUT.get(cfg.corpus, ""),
                     "documents (train / validation / test)": " / ".join(f"{m['documents'][s]:,}" for s in data.SPLITS)
                     if m else "not built",
                     "train tokens": f"{m['tokens']['train']:,}" if m else "",
                     "passes at the budget": f"{budget / m['tokens']['train']:.1f}" if m else ""})
    return pd.DataFrame(rows).set_index("corpus")
