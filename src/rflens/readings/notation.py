"""The notation and the number formats every reading shares.

:class:`Prose` is the Markdown text a notebook displays formatted; :func:`tex` typesets
the plain notation of the tables and the command line (``L_tr``, ``L_ex``, ``d_bar``,
``<=``) as the book writes it; the helpers below join lists into sentences and write a
row's r(L) with its paired interval, its ERF, its longest measured length and token
counts the same way in every chapter.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from rflens.measure.columns import lengths_of, token_count
from rflens.measure.criterion import erf_text, EXTRAPOLATION_HORIZON as HORIZON


class Prose(str):
    """Markdown text that a notebook displays formatted."""

    def _repr_markdown_(self) -> str:
        return str(self)


# --------------------------------------------------------------------------------------
# notation: the plain-text names of the tables and the command line, typeset for the book
# --------------------------------------------------------------------------------------
_NOTATION = [(re.compile(r"\bL_tr\b"), r"$L_{tr}$"), (re.compile(r"\bL_ex\b"), r"$L_{ex}$"),
             (re.compile(r"\bd_bar\b"), r"$\\bar d$"), (re.compile(r"<="), "≤"), (re.compile(r">="), "≥")]


def tex(text: str) -> str:
    """Plain notation (``L_tr``, ``L_ex``, ``d_bar``, ``<=``) as the book typesets it; text
    in backticks is left as it is."""
    parts = re.split(r"(`[^`]*`)", str(text))
    for i in range(0, len(parts), 2):
        for pattern, repl in _NOTATION:
            parts[i] = pattern.sub(repl, parts[i])
    return "".join(parts)


def _join(items: list[str], word: str = "and") -> str:
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


def _erf(row, column: str = "erf") -> str:
    """A row's ERF as the book prints it, "≥ N" where the segment capped it."""
    return erf_text(int(row[column]), row.get(f"{column}_capped"))


def _bullets(sentences: list[str]) -> Prose:
    return Prose("\n".join(f"- {s}" for s in sentences))


def _num(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def _r(row, L: int) -> str:
    """r(L) of a row with its paired 95% interval, as text."""
    v, lo, hi = _num(row.get(f"r@{L}")), _num(row.get(f"r_lo@{L}")), _num(row.get(f"r_hi@{L}"))
    if math.isnan(v):
        return "not measured"
    if math.isnan(lo) or math.isnan(hi):
        return f"{v:.3f}"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def _label(row) -> str:
    return tex(str(row["label"]))


def _top(df: pd.DataFrame, row) -> int:
    """The longest measured length of a row, at most HORIZON L_tr."""
    l_tr = int(row["l_tr"])
    lengths = [L for L in lengths_of(df, "r") if L <= HORIZON * l_tr and not math.isnan(_num(row.get(f"r@{L}")))]
    return max(lengths) if lengths else l_tr


def _mult(L: int, l_tr: int) -> str:
    return f"{L // l_tr} $L_{{tr}}$" if L % l_tr == 0 else f"$L$ = {L}"


_tokens = token_count
