"""Readings of the book's own checks beyond the paper's tables (chapters 8, 10 and 12).

The evaluation protocols side by side (chapter 8), the long run's models as they grow
and the check of its learning-rate schedule (chapter 10), and the paper's thesis on the
released models of chapter 12.
"""

from __future__ import annotations

import pandas as pd

from ..results import BREAKS, lengths_of
from ..results import EXTRAPOLATION_TOLERANCE as TOL
from .notation import Prose, _bullets, _erf, _label, _mult, _num, _r, _tokens, _top, tex


# --------------------------------------------------------------------------------------
# chapter 8: protocols
# --------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------
# the long run (chapter 10)
# --------------------------------------------------------------------------------------
def emergence(em: pd.DataFrame) -> Prose:
    """Per long-run model: r(16 L_tr) at its first and last measured size, whether and from
    which size it breaks (the lower end of the paired interval >= 2) or extrapolates (the
    upper end <= 1.10), and its ERF against L_tr; an unfinished run says how far it got."""
    if em.empty:
        return Prose("No long-run model is shipped yet (`python -m rflens emergence --list`).")
    out = []
    for name in dict.fromkeys(em["name"]):
        d = em[em["name"] == name].sort_values("tokens")
        first, last = d.iloc[0], d.iloc[-1]
        l_tr = int(last["l_tr"])
        top = _top(em, last)
        broke = d[d[f"r_lo@{top}"] >= BREAKS]
        flat = d[d[f"r_hi@{top}"] <= TOL]
        where = _mult(top, l_tr)
        s = (f"{_label(last)}: r({where}) = {_r(first, top)} at {_tokens(first['tokens'])} tokens, "
             f"{_r(last, top)} at {_tokens(last['tokens'])}; ")
        if len(broke):
            s += f"it breaks from {_tokens(broke.iloc[0]['tokens'])} tokens on"
        elif len(flat) == len(d):
            s += f"it stays within {TOL:.2f} at every size"
        elif _num(last[f"r_hi@{top}"]) <= TOL:
            s += f"it stays within {TOL:.2f} from {_tokens(flat.iloc[0]['tokens'])} tokens on"
        else:
            s += f"it has not broken by {_tokens(last['tokens'])} tokens"
        side = "inside" if int(last["erf"]) <= l_tr else "beyond"
        capped = f" (a lower bound: the {int(last['erf_length'])}-token segment capped it)" if bool(last["erf_capped"]) else ""
        s += f"; its ERF is {_erf(last)} tokens{capped}, {side} $L_{{tr}}$ = {l_tr}"
        if not bool(last["complete"]):
            s += f" (the run stopped part-way; its last measured size is {_tokens(last['tokens'])})"
        out.append(s + ".")
    return _bullets(out)


def two_runs(sbs: pd.DataFrame, shipped: int, planned: int, cost: str, new: str = "long",
             old: str = "long-repeated") -> Prose:
    """The second long run against the first: how many of its models are shipped, and for
    each thesis model shipped in both, what it does on text it does not repeat against text
    it repeats (rows of :func:`rflens.long_runs.side_by_side`)."""
    head = f"The second long run holds {shipped} of its {planned} models" + (
        "." if shipped == planned else f"; the rest need {cost}.")
    if sbs is None or sbs.empty or new not in sbs.columns.get_level_values(0):
        return Prose(head + " None of its thesis models is shipped yet: the comparison appears as they are.")
    out = []
    for name, row in sbs.iterrows():
        if pd.isna(row.get((new, "state"))) or pd.isna(row.get((old, "state"))):
            continue
        parts = []
        for run, words in ((new, "on new text"), (old, "on repeated text")):
            r, lo, hi = row[(run, "r(16 L_tr)")], row[(run, "low")], row[(run, "high")]
            broke = row[(run, "breaks from")]
            when = f", breaking from {_tokens(broke)} tokens" if not pd.isna(broke) else ""
            parts.append(f"{words} r(16 $L_{{tr}}$) = {r:.2f} [{lo:.2f}, {hi:.2f}] at {_tokens(row[(run, 'tokens')])} "
                         f"tokens ({row[(run, 'state')]}{when})")
        same = "the same state" if row[(new, "state")] == row[(old, "state")] else "**a different state**"
        out.append(f"{tex(row[('', 'model')])}: " + "; ".join(parts) + f": {same}.")
    if not out:
        return Prose(head + " None of its shipped models is in both runs yet.")
    return Prose(head + " Each model shipped in both runs:\n\n" + "\n".join(f"- {line}" for line in out))


def early_warning(counts: pd.DataFrame) -> Prose:
    """How well an ERF beyond L_tr at the first measured size foretold a break by the last
    (rows of :func:`rflens.long_runs.warning_counts`), per run."""
    if counts is None or counts.empty:
        return Prose("No finished long-run model to test the early warning on.")
    out, missed, false = [], 0, 0
    for run in dict.fromkeys(counts.index.get_level_values("run")):
        c = counts.loc[run]
        get = lambda flagged, col: int(c.loc[flagged, col]) if flagged in c.index and col in c.columns else 0
        tp, fp, fn, tn = get(True, "broke"), get(True, "did not break"), get(False, "broke"), get(False, "did not break")
        broke, missed, false = tp + fn, missed + fn, false + fp
        out.append(f"- `{run}`: of the {broke} models that broke, {tp} had an ERF beyond $L_{{tr}}$ at the first size; "
                   f"of the {fp + tn} that did not, {fp} had one too. The warning "
                   + ("missed no break" if fn == 0 else f"missed {fn} break{'s' * (fn != 1)}")
                   + f", and {fp / max(fp + tp, 1):.0%} of the models it flagged did not break.")
    verdict = ("No model whose early ERF stayed inside $L_{tr}$ broke" if not missed else
               f"{missed} model{'s' * (missed != 1)} broke with an early ERF inside $L_{{tr}}$")
    verdict += (", but a wide early ERF does not mean a break: the warning is a screen, not a forecast."
                if false else ", and every flagged model broke.")
    return Prose("An ERF beyond $L_{tr}$ at the first measured size (0.5M tokens), read as a warning that the model "
                 "will break by its last size:\n\n" + "\n".join(out) + "\n\n" + verdict)


def schedule_check(sc: pd.DataFrame | None) -> Prose:
    """Whether a cooled-down point of the long run agrees with a cosine run of its size, at
    the longest length: the paired interval of the ratio of their r(L)."""
    if sc is None or sc.empty:
        return Prose("The schedule check has not been run (`rflens.emergence.schedule_check`).")
    row = sc.iloc[-1]
    agree = row["low"] <= 1 <= row["high"]
    return Prose(
        f"At {_tokens(row['tokens'])} tokens, r({int(row['L'])}) of the cooled-down point is "
        f"{row['r wsd']:.3f} [{row['r wsd low']:.3f}, {row['r wsd high']:.3f}] and that of a cosine run of the same "
        f"size {row['r cosine']:.3f} [{row['r cosine low']:.3f}, {row['r cosine high']:.3f}]; their ratio over the same "
        f"segments is {row['wsd / cosine']:.4f} [{row['low']:.4f}, {row['high']:.4f}], "
        + ("an interval that holds 1: the two schedules agree at this size." if agree else
           "an interval that excludes 1: the schedules differ at this size, and the curves are read as the "
           "warmup-stable-decay runs they are."))


# --------------------------------------------------------------------------------------
# chapter 12
# --------------------------------------------------------------------------------------
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
