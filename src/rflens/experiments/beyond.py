"""Beyond the paper (Chapter 12): the rotary model stretched at inference (position
interpolation, NTK-aware base, YaRN) and FIRE, a scheme of one's own, under the same lens."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rflens.setup import presets
from rflens.experiments.tables import (Spec, measure_erf, progress_bar, rotary_model, run_of, table3,
    table3_models)
from rflens.measure.columns import add_erf_columns, add_ppl_columns
from rflens.measure.criterion import erf_within_l_tr

BEYOND_POS = ("fire", "sandwich", "kerple_log", "t5")  # FIRE beside the learnable log-like biases
ROPE_METHODS = ("plain", "pi", "ntk", "yarn")  # rflens.model.positional.rope_frequencies
ROPE_TITLES = {"plain": "plain", "pi": "position interpolation", "ntk": "NTK-aware base", "yarn": "YaRN"}


def beyond_models(preset: presets.Preset, corpora=None) -> list[Spec]:
    """The models Chapter 12 trains that no other chapter does: FIRE on every corpus (the
    stretched rotary model is Figure 7's, the other schemes Table 3's)."""
    return table3_models(preset, corpora, positions=("fire",))


def fire_table(preset: presets.Preset, corpora=None, *, progress: bool = True,
               train: bool = True) -> pd.DataFrame:
    """FIRE next to Sandwich, KERPLE and T5, in Table 3's format (:func:`table3`), with each
    model's receptive-field numbers beside it (ERF, share in L_tr, ``erf_within_l_tr``)."""
    df = table3(preset, corpora, progress=progress, train=train, positions=BEYOND_POS)
    for i, spec in enumerate(table3_models(preset, corpora, positions=BEYOND_POS)):
        row = add_erf_columns({}, measure_erf(run_of(preset, spec, train=train, progress=progress)))
        for k, v in row.items():
            df.loc[i, k] = v
    df["erf_within_l_tr"] = erf_within_l_tr(df)
    return df


def rope_stretching(preset: presets.Preset, corpus: str = "prose", *, progress: bool = True,
                    train: bool = True) -> pd.DataFrame:
    """Figure 7's rotary model evaluated plain and with each stretching method, no retraining:
    one row per method with Table 1's columns (ppl, paired r and its interval, extrapolates,
    ERF on segments of erf_length_mult x L_tr, share in L_tr), the ratio of each method's
    perplexity to plain rotary's on the same tokens at the longest length (``vs_plain``,
    paired interval ``vs_plain_lo`` / ``vs_plain_hi``), and whether the ERF fits in L_tr.
    The factor of a method at length L_ex is L_ex / L_tr (rflens.setup.config.EvalConfig.rope_for)."""
    from rflens.measure.intervals import paired_interval
    from rflens.measure.perplexity import eval_config, perplexity
    from rflens.measure.receptive import receptive_field

    spec = rotary_model(preset, corpus)
    run = run_of(preset, spec, train=train, progress=progress)
    l_tr, ev = int(run.train_cfg.l_tr), eval_config(run)
    rows, plain = [], None
    for method in progress_bar(ROPE_METHODS, "rotary stretching", progress):
        e = ev.replace(rope_scaling=None if method == "plain" else method)
        res = perplexity(run, progress=False, eval_cfg=e)
        nll = np.asarray(res["nll_per_segment"])
        plain = nll if plain is None else plain
        row = {"label": "Rotary" if method == "plain" else f"Rotary + {ROPE_TITLES[method]}", "method": method,
               "corpus": corpus, "l_tr": l_tr, "run_key": run.key}
        add_ppl_columns(row, res, l_tr)
        add_erf_columns(row, receptive_field(run, progress=False, eval_cfg=e))
        r, lo, hi = paired_interval(np.stack([plain[-1], nll[-1]]), seed=ev.seed,
                                    docs=res.get("segment_docs"))  # the same segments for every method
        row.update(vs_plain=float(r[1]), vs_plain_lo=float(lo[1]), vs_plain_hi=float(hi[1]))
        rows.append(row)
    df = pd.DataFrame(rows)
    df["erf_within_l_tr"] = erf_within_l_tr(df)
    return df


def rope_curves(preset: presets.Preset, corpus: str = "prose", *, train: bool = True) -> dict[str, dict]:
    """{label: receptive-field result} of the rotary model under each stretching method
    (for :func:`rflens.figures.results.erf_figure`; cached, so fast after :func:`rope_stretching`)."""
    from rflens.measure.perplexity import eval_config
    from rflens.measure.receptive import receptive_field

    spec = rotary_model(preset, corpus)
    run = run_of(preset, spec, train=train)
    out = {}
    for method in ROPE_METHODS:
        label = "Rotary" if method == "plain" else f"Rotary + {ROPE_TITLES[method]}"
        e = eval_config(run).replace(rope_scaling=None if method == "plain" else method)
        out[label] = {**receptive_field(run, progress=False, eval_cfg=e), "label": label}
    return out

