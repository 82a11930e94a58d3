"""Chapter 12's table of Hugging Face models: the models (the tiny random ones, and any
named in ``RFLENS_HF_MODELS`` where the book is built), the lengths and sample counts at each
scale, and :func:`lens_table`, one row per model with its perplexities, r(L) and ERF.
"""

from __future__ import annotations

import os

import numpy as np

from rflens.hf.measure import hf_perplexity, hf_receptive_field
from rflens.hf.tiny import tiny_random_models

MODELS_ENV = "RFLENS_HF_MODELS"  # comma-separated folders or hub names the book measures too
FAMILY_TITLES = {"gpt2": "GPT-2, learned absolute", "gpt_neox": "GPT-NeoX, rotary", "bloom": "BLOOM, ALiBi"}


def book_models(folder) -> dict[str, str]:
    """{label: folder or name} of the models the book measures: the three tiny random ones
    (:func:`tiny_random_models` in ``folder``, labelled as untrained) and any named in
    ``RFLENS_HF_MODELS`` where the book is built."""
    models = {f"tiny random {FAMILY_TITLES[f]} (untrained)": str(p) for f, p in tiny_random_models(folder).items()}
    for name in (x.strip() for x in os.environ.get(MODELS_ENV, "").split(",")):
        if name:
            models[name] = name
    return models


def book_settings(scale: str) -> dict:
    """The lengths and sample counts of Chapter 12's measurements at a scale: small at the
    smoke scale (the notebook tests), L_ex = 64..512 and 64 segments otherwise."""
    if scale == "smoke":
        return {"lengths": [16, 32, 64], "n": 8, "erf_length": 64, "erf_n": 4}
    return {"lengths": [64, 128, 256, 512], "n": 64, "erf_length": 512, "erf_n": 32}


def lens_table(models: dict[str, str], *, corpus: str = "prose", scale: str | None = None, lengths=None,
               n: int | None = None, erf_length: int | None = None, erf_n: int | None = None,
               progress: bool = False):
    """One row per model: its family, L_tr (from its config, None if it names none), the
    last-token perplexity at each length with its interval, r(L) against the shortest
    length, the ERF on segments of ``erf_length`` and the share of the gradient in L_tr, and
    the seconds each measurement took when it was computed."""
    import pandas as pd

    rows = []
    for label, model in models.items():
        ppl = hf_perplexity(model, corpus=corpus, scale=scale, lengths=lengths, n=n, progress=progress)
        rf = hf_receptive_field(model, corpus=corpus, scale=scale, length=erf_length, n=erf_n, progress=progress)
        row = {"label": label, "model_type": ppl["model_type"], "l_tr": ppl["l_tr"]}
        base = ppl["nll"][0]
        for i, L in enumerate(ppl["lengths"]):
            row[f"ppl@{L}"], row[f"ci_low@{L}"], row[f"ci_high@{L}"] = ppl["ppl"][i], ppl["ci_low"][i], ppl["ci_high"][i]
            row[f"r@{L}"] = float(np.exp(ppl["nll"][i] - base))
        row.update(erf=rf["erf"], erf_capped=rf["capped"], erf_length=rf["length"], share_in_ltr=rf["share_in_ltr"],
                   ppl_seconds=ppl["seconds"], erf_seconds=rf["seconds"])
        rows.append(row)
    return pd.DataFrame(rows)
