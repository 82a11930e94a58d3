"""The positional schemes, one row each: the single list every other module derives from.

A row gives what the rest of rflens needs to know about a scheme without building it (and
without importing torch): where it acts on the model (``kind``), whether it has learnable
parameters, its title in tables and figures, and whether it is one of the seven schemes
of Table 3 of Chi et al. (ACL 2023). The implementation is a class in
:mod:`rflens.positional` registered under the same name.

Adding a scheme takes that class and one row here; the settings check, the command line,
the experiments, the figures and the claims all read the lists below.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("none", "absolute", "rotary", "relative")


@dataclass(frozen=True)
class SchemeInfo:
    name: str
    kind: str  # none: no position at all; absolute: added to the input embeddings;
    #            rotary: rotates q and k; relative: an additive bias on the attention logits
    learnable: bool  # the positional scheme has trained parameters
    title: str  # as tables and figures print it
    table3: bool = False  # one of the seven schemes of the paper's Table 3 (Section 6)


# In the order of the paper's Table 3 for its schemes; Table 3 itself is the subset marked.
TABLE: dict[str, SchemeInfo] = {s.name: s for s in (
    SchemeInfo("nope", "none", False, "NoPE"),
    SchemeInfo("sinusoidal", "absolute", False, "Sinusoidal", table3=True),
    SchemeInfo("rotary", "rotary", False, "Rotary", table3=True),
    SchemeInfo("alibi", "relative", False, "ALiBi", table3=True),
    SchemeInfo("window", "relative", False, "Windowed"),  # Eq. (3): a mask, no bias
    SchemeInfo("sandwich", "relative", False, "Sandwich", table3=True),  # Eq. (5)-(6)
    SchemeInfo("sandwich_learned", "relative", True, "Sandwich (learned h_c)"),
    SchemeInfo("smoothed", "relative", False, "Smoothed Sandwich", table3=True),  # a log(1 + k) + b
    SchemeInfo("kerple_log", "relative", True, "KERPLE (log)", table3=True),  # -r1 log(1 + r2 k)
    SchemeInfo("kerple_power", "relative", True, "KERPLE (power)"),  # -r1 k^r2
    SchemeInfo("t5", "relative", True, "T5", table3=True),  # learned log-binned buckets
)}

NAMES: tuple[str, ...] = tuple(TABLE)
RELATIVE: tuple[str, ...] = tuple(n for n, s in TABLE.items() if s.kind == "relative")
LEARNABLE: tuple[str, ...] = tuple(n for n, s in TABLE.items() if s.learnable)
TABLE3: tuple[str, ...] = tuple(n for n, s in TABLE.items() if s.table3)
# Table 3's two groups, as the paper compares them (claim 15)
TABLE3_PARAMETER_FREE: tuple[str, ...] = tuple(n for n in TABLE3 if not TABLE[n].learnable)
TABLE3_LEARNABLE: tuple[str, ...] = tuple(n for n in TABLE3 if TABLE[n].learnable)


def title(name: str) -> str:
    """The printed name of a scheme (the name itself for one the table does not know)."""
    info = TABLE.get(name)
    return info.title if info else name
