"""Chapter 12's reading: the paper's thesis on models it did not train.

Whether each model stays flat up to the longest length, its ERF against L_tr, and for how
many the thesis holds (flat exactly when the ERF fits in L_tr).
"""

from __future__ import annotations

import pandas as pd

from rflens.measure.columns import lengths_of
from rflens.readings.notation import _erf


def thesis_verdict(df: pd.DataFrame) -> str:
    """Computed sentences (Markdown) on rows with Table 1's columns and an ERF: whether each
    model stays flat up to the longest length (the paired interval of r within 1.10), its
    ERF against L_tr, and for how many rows the paper's thesis holds (flat exactly when the
    ERF fits in L_tr)."""
    if df is None or df.empty:
        return "Nothing was measured."
    longest = max(lengths_of(df))
    parts, agree = [], 0
    for _, row in df.iterrows():
        l_tr = int(row["l_tr"])
        flat, fits = bool(row["extrapolates"]), int(row["erf"]) <= l_tr
        agree += flat == fits
        where = f" ({row['corpus']})" if df["corpus"].nunique() > 1 else ""
        parts.append(f"- **{row['label']}**{where}: r({longest // l_tr} L<sub>tr</sub>) = {row[f'r@{longest}']:.2f} "
                     f"[{row[f'r_lo@{longest}']:.2f}, {row[f'r_hi@{longest}']:.2f}], "
                     f"{'flat' if flat else 'not flat'}; ERF {_erf(row)} tokens, "
                     f"{'inside' if fits else 'beyond'} L<sub>tr</sub> = {l_tr}.")
    return "\n".join(parts) + (f"\n\nThe thesis (flat exactly when the ERF fits in L<sub>tr</sub>) describes "
                               f"{agree} of these {len(df)} models.")
