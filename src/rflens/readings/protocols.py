"""Chapter 8's reading: the evaluation protocols side by side.

Whether the non-overlapping and sliding perplexities sit above the last-token one at
L_ex = L_tr (the early-token curse), and how the non-overlapping value moves with L_ex.
"""

from __future__ import annotations

import pandas as pd

from rflens.readings.notation import Prose, tex


def protocols(pr: pd.DataFrame, *, brief: bool = False) -> Prose:
    """Per model: the non-overlapping and sliding perplexity against the last-token one at
    L_ex = L_tr, and how the non-overlapping value moves from L_tr to the longest chunk.
    ``brief``: the first sentence only (for a summary)."""
    if pr is None or pr.empty:
        return Prose("No protocol comparison was run at this scale.")
    out, higher, n = [], 0, 0
    for label in dict.fromkeys(pr["label"]):
        sub = pr[pr["label"] == label]
        l_tr = int(sub["l_tr"].iloc[0])
        at = sub[sub["l_ex"] == l_tr].set_index("protocol")["ppl"]
        if "last_token" not in at or "non_overlapping" not in at:
            continue
        n += 1
        gap = at["non_overlapping"] / at["last_token"] - 1
        higher += gap > 0
        non = sub[sub["protocol"] == "non_overlapping"].sort_values("l_ex")
        first, last = non.iloc[0], non.iloc[-1]
        move = last["ppl"] / first["ppl"] - 1
        overlap = last["ci_low"] <= first["ci_high"] and first["ci_low"] <= last["ci_high"]
        text = (f"{tex(label)}: at $L_{{ex}}$ = $L_{{tr}}$ the non-overlapping perplexity is {gap:+.1%} against the "
                f"last-token one")
        if "sliding" in at:
            text += f" (sliding {at['sliding'] / at['last_token'] - 1:+.1%})"
        text += (f"; from $L_{{ex}}$ = {int(first['l_ex'])} to {int(last['l_ex'])} it {'falls' if move < 0 else 'rises'} "
                 f"by {abs(move):.1%}" + (", within the overlap of the two 95% intervals" if overlap else
                                         ", beyond the overlap of the two 95% intervals"))
        out.append("- " + text + ".")
    if not n:
        return Prose("The comparison lacks the last-token or non-overlapping numbers.")
    head = (f"The non-overlapping perplexity at $L_{{tr}}$ is above the last-token one for {higher} of {n} models"
            + (" (the early-token curse shows for every model):" if higher == n else
               " (the early-token curse does not show for every model):"))
    if brief:
        return Prose("- " + head[:-1] + ".")
    return Prose("\n".join([head, ""] + out))
