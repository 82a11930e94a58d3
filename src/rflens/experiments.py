"""The paper's experiments as functions of a scale, each returning a pandas DataFrame.

Chi, Fan, Rudnicky and Ramadge (ACL 2023), *Dissecting Transformer Length Extrapolation via
the Lens of Receptive Field Analysis*:

- :func:`table1`   Section 3, Table 1: ALiBi with shifted slopes (Delta), one slope for every
  head, and explicit windowed attention (w); last-token perplexity at L_ex = L_tr x (1..16),
  with the receptive-field numbers of Section 4 beside each model.
- :func:`table2`   Section 4, Table 2: the failing Table 1 models retrained with an L_tr
  that covers their ERF, measured at the same absolute L_ex.
- :func:`figure7`  Section 5, Figure 7: Sinusoidal at two L_tr and Rotary; where the
  normalised gradient of Sinusoidal jumps.
- :func:`table3`   Section 6, Table 3: seven positional schemes on the three corpora, with
  the training speed beside them.
- :func:`figure11` Section 6, Figure 11: the receptive fields of Sandwich, KERPLE and T5.
- :func:`protocols` footnote 2 / Figure 3: last-token vs non-overlapping vs sliding window.

Every model comes from the run store (:func:`rflens.runs.get_run`: trained once, then
loaded) and every measurement is cached there (``run.cached``), so a second call of any
function here only reads JSON. Two experiments that need the same configuration share the
model: ALiBi with Delta = 0 on prose is the Table 1 row, the Table 3 entry and the
protocol-comparison model at once.

Wide tables: one row per model, with ``ppl@L`` (perplexity), ``ci_low@L`` / ``ci_high@L``
(its confidence interval) and ``r@L`` (= ppl(L) / ppl(L_tr)) columns for every evaluation
length L. :func:`lengths_of` reads the lengths back from the column names and
:func:`long_form` turns a wide table into one row per (model, L).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd
from tqdm import tqdm

from .errors import UserError

# "extrapolates" (issue 6): r(L) = ppl(L) / ppl(L_tr) <= 1.10 for every L up to 16 L_tr.
EXTRAPOLATION_TOLERANCE = 1.10
EXTRAPOLATION_HORIZON = 16  # in units of L_tr

# Table 3 in the paper's order: parameter-free schemes, then learnable ones.
TABLE3_POS = ("sinusoidal", "rotary", "alibi", "sandwich", "smoothed", "kerple_log", "t5")
LEARNABLE = {"kerple_log", "kerple_power", "t5", "sandwich_learned"}
FIGURE11_POS = ("sandwich", "kerple_log", "t5")
PROTOCOL_POS = ("alibi", "sandwich", "sinusoidal")
PROTOCOLS = ("last_token", "non_overlapping", "sliding")

FAMILIES = {
    # family: (positional scheme, setting swept, label maker)
    "slope_shift": ("alibi", "slope_shift", lambda v: f"Δ={_num(v)}"),
    "same_slope": ("alibi", "same_slope", lambda v: f"h={_num(v)}"),
    "window": ("window", "window", lambda v: f"w={_num(v)}"),
}
FAMILY_TITLES = {
    "slope_shift": "ALiBi, slope exponents shifted by Δ",
    "same_slope": "ALiBi, one slope 1/2^h for every head",
    "window": "windowed attention of size w",
}
POS_TITLES = {
    "sinusoidal": "Sinusoidal", "rotary": "Rotary", "alibi": "ALiBi", "sandwich": "Sandwich",
    "smoothed": "Smoothed Sandwich", "kerple_log": "KERPLE (log)", "kerple_power": "KERPLE (power)",
    "t5": "T5", "window": "Windowed", "nope": "NoPE", "sandwich_learned": "Sandwich (learned h_c)",
}
# ModelConfig fields that are floats: an int from a sweep list must become a float, or the
# run key (a hash of the settings as JSON: "0" vs "0.0") would differ from the default run's.
_FLOAT_FIELDS = {"slope_shift", "same_slope", "smooth_a", "smooth_b", "kerple_r1", "kerple_r2", "rotary_base"}
_INT_FIELDS = {"window", "d_bar", "l_tr", "num_buckets", "max_distance", "steps", "batch_size"}


def _num(v) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


# --------------------------------------------------------------------------------------
# models: what to train, and the run store
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """One model of an experiment: a positional scheme, a corpus and setting overrides."""

    label: str
    pos: str
    corpus: str = "prose"
    overrides: tuple = ()  # sorted (name, value) pairs, hashable
    family: str = ""
    value: Any = None

    @property
    def settings(self) -> dict:
        return dict(self.overrides)


def make_spec(label: str, pos: str, corpus: str = "prose", *, family: str = "", value: Any = None, **overrides) -> Spec:
    clean = {k: _plain(v, k) for k, v in overrides.items()}
    return Spec(label, pos, corpus, tuple(sorted(clean.items())), family, _plain(value))


def _plain(v, name: str = ""):
    """A numpy scalar (e.g. from a DataFrame cell) as a Python number of the field's type."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if name in _FLOAT_FIELDS:
        return float(v)
    if name in _INT_FIELDS or (isinstance(v, float) and v.is_integer() and not name):
        return int(v)
    return v


_RUNS: dict = {}  # (scale, pos, corpus, overrides) -> Run, so one process asks the store once


def get_scale(scale):
    """The preset object for a scale name (or the object itself)."""
    from . import scales

    return scales.get(scale) if isinstance(scale, str) else scale


def run_of(scale: str, spec: Spec, *, train: bool = True, progress: bool = False):
    """The run of ``spec`` at ``scale``: trained on first use, loaded afterwards."""
    from .runs import get_run

    key = (scale, spec.pos, spec.corpus, spec.overrides, train)
    if key not in _RUNS:
        _RUNS[key] = get_run(scale, spec.pos, spec.corpus, train=train, progress=progress, **spec.settings)
    return _RUNS[key]


def _bar(items, desc: str, progress: bool):
    items = list(items)
    return tqdm(items, desc=desc, disable=not progress or not items, leave=False, unit="model")


def _sweep(sc, name: str, default):
    values = sc.sweeps.get(name) if isinstance(sc.sweeps, dict) else None
    return list(values) if values is not None else list(default)


def _l_tr(run) -> int:
    return int(run.train_cfg.l_tr)


def default_lengths(scale, l_tr: int | None = None) -> list[int]:
    sc = get_scale(scale)
    l_tr = l_tr or sc.train.l_tr
    return [l_tr * m for m in sc.eval.length_mults]


# --------------------------------------------------------------------------------------
# measurements (cached in the run store by rflens.evaluate / rflens.receptive)
# --------------------------------------------------------------------------------------
def measure_ppl(run, *, lengths=None, protocol: str = "last_token", n=None) -> dict:
    from .evaluate import perplexity

    return perplexity(run, protocol=protocol, lengths=lengths, n=n, progress=False)


def measure_erf(run, *, length=None, threshold=None) -> dict:
    from .receptive import receptive_field

    return receptive_field(run, length=length, threshold=threshold, progress=False)


def ratio(ppl: dict, l_tr: int) -> dict[int, float]:
    """r(L) = ppl(L) / ppl(L_tr) for every measured L; empty when ppl(L_tr) was not measured."""
    base = ppl.get(l_tr)
    if base is None or not np.isfinite(base) or base <= 0:
        return {}
    return {L: (p / base if np.isfinite(p) else math.inf) for L, p in ppl.items()}


def extrapolates(ppl: dict, l_tr: int, *, tol: float = EXTRAPOLATION_TOLERANCE,
                 horizon: int = EXTRAPOLATION_HORIZON) -> bool | None:
    """Issue 6's criterion: r(L) <= tol for every measured L_tr < L <= horizon * L_tr.

    ``ppl`` maps L_ex -> perplexity. None when ppl(L_tr) or every longer length is missing.
    A non-finite perplexity (a diverged model) counts as a failure.
    """
    r = ratio(ppl, l_tr)
    beyond = {L: v for L, v in r.items() if l_tr < L <= horizon * l_tr}
    if not beyond:
        return None
    return bool(all(np.isfinite(v) and v <= tol + 1e-12 for v in beyond.values()))  # 1e-12: binary rounding


def add_ppl_columns(row: dict, res: dict, l_tr: int) -> dict:
    """Add ppl@L, ci_low@L, ci_high@L, r@L, extrapolates, max_r to a table row."""
    ppl = {int(L): float(p) for L, p in zip(res["lengths"], res["ppl"])}
    for L, lo, hi in zip(res["lengths"], res.get("ci_low") or [math.nan] * len(ppl), res.get("ci_high") or [math.nan] * len(ppl)):
        row[f"ppl@{int(L)}"] = ppl[int(L)]
        row[f"ci_low@{int(L)}"] = float(lo)
        row[f"ci_high@{int(L)}"] = float(hi)
    r = ratio(ppl, l_tr)
    for L in ppl:
        row[f"r@{L}"] = r.get(L, math.nan)
    row["extrapolates"] = extrapolates(ppl, l_tr)
    beyond = [v for L, v in r.items() if L > l_tr]
    row["max_r"] = max(beyond) if beyond else math.nan
    return row


def add_erf_columns(row: dict, rf: dict) -> dict:
    row["erf"] = int(rf["erf"])
    row["share_in_ltr"] = float(rf["share_in_ltr"])
    row["theoretical"] = rf.get("theoretical")
    row["erf_length"] = int(rf["length"])
    return row


# --------------------------------------------------------------------------------------
# helpers on wide tables
# --------------------------------------------------------------------------------------
_COL = re.compile(r"^(ppl|r|ci_low|ci_high)@(\d+)$")


def lengths_of(df: pd.DataFrame, kind: str = "ppl") -> list[int]:
    """The evaluation lengths of a wide table, read from its ``ppl@L`` columns."""
    return sorted({int(m.group(2)) for c in df.columns if (m := _COL.match(str(c))) and m.group(1) == kind})


def row_ppl(row) -> dict[int, float]:
    """{L: ppl} of one row of a wide table (NaN entries dropped)."""
    out = {}
    for c, v in dict(row).items():
        m = _COL.match(str(c))
        if m and m.group(1) == "ppl" and v is not None and not (isinstance(v, float) and math.isnan(v)):
            out[int(m.group(2))] = float(v)
    return out


def long_form(df: pd.DataFrame, id_cols: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per (model, L_ex): columns ``l_ex, ppl, ci_low, ci_high, r`` plus the ids."""
    id_cols = [c for c in (id_cols or df.columns) if not _COL.match(str(c))]
    rows = []
    for _, rec in df.iterrows():
        base = {c: rec[c] for c in id_cols}
        for L in lengths_of(df):
            rows.append({**base, "l_ex": L, "ppl": rec.get(f"ppl@{L}"), "ci_low": rec.get(f"ci_low@{L}"),
                         "ci_high": rec.get(f"ci_high@{L}"), "r": rec.get(f"r@{L}")})
    return pd.DataFrame(rows)


def display_table(df: pd.DataFrame, what: str = "ppl", extra: Iterable[str] = (), index: str | list = "label",
                  digits: int = 2) -> pd.DataFrame:
    """The paper-style view of a wide table: ``what`` ("ppl" or "r") at each L_ex as columns
    named by L_ex, then the ``extra`` columns, rounded."""
    cols = [f"{what}@{L}" for L in lengths_of(df, what)]
    out = df.set_index(index)[cols + [c for c in extra if c in df.columns]].copy()
    out = out.rename(columns={f"{what}@{L}": f"{L}" for L in lengths_of(df, what)})
    out.columns.name = f"{what} at L_ex" if what == "ppl" else "r(L) at L_ex"
    return out.round(digits)


# --------------------------------------------------------------------------------------
# Table 1 (Section 3) with the receptive-field numbers of Section 4
# --------------------------------------------------------------------------------------
def table1_models(scale, corpus: str = "prose") -> list[Spec]:
    sc = get_scale(scale)
    defaults = {"slope_shift": [-3, 0, 3, 6], "same_slope": [0, 2, 4, 8], "window": [8, 16, 32, 64]}
    specs = []
    for family, (pos, setting, label) in FAMILIES.items():
        for v in _sweep(sc, family, defaults[family]):
            specs.append(make_spec(label(v), pos, corpus, family=family, value=v, **{setting: v}))
    return specs


def table1(scale: str = "tiny", corpus: str = "prose", *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Table 1: one row per model (family, value, label, ppl@L, r@L, extrapolates, erf,
    share_in_ltr, theoretical), last-token perplexity at L_ex = L_tr x length_mults."""
    rows = []
    for spec in _bar(table1_models(scale, corpus), "Table 1", progress):
        run = run_of(scale, spec, train=train)
        row = {"family": spec.family, "value": spec.value, "label": spec.label, "pos": spec.pos,
               "corpus": corpus, "l_tr": _l_tr(run), "run_key": run.key}
        add_ppl_columns(row, measure_ppl(run), _l_tr(run))
        add_erf_columns(row, measure_erf(run))
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# Table 2 (Section 4): retrain the failures with an L_tr that covers their ERF
# --------------------------------------------------------------------------------------
def _table2_plan(sc, t1: pd.DataFrame) -> list[tuple[dict, dict]]:
    """Pairs (failing Table 1 row, overrides of the retrained model) from ``sweeps["table2"]``.

    Each entry of the sweep names one Table 1 model by its scheme and swept setting, with
    the longer training length (and, e.g., a smaller batch that keeps the tokens a step),
    as the paper does for w = 160 and Delta = 6: ``{"pos": "window", "window": 64,
    "l_tr": 256, "batch_size": 4}``. Only models that fail in Table 1 at this scale are
    retrained: a model that already extrapolates has nothing to fix. Entries may also give
    ``l_tr_mult`` instead of ``l_tr``.
    """
    plan = []
    for entry in _sweep(sc, "table2", []):
        entry = dict(entry)
        entry.pop("pos", None)
        family = next((f for f in FAMILIES if f in entry), None)
        if family is None:
            raise UserError(f"sweeps['table2'] entry {entry} names no Table 1 setting "
                            f"({', '.join(FAMILIES)})")
        value = entry.pop(family)
        match = t1[(t1["family"] == family) & (t1["value"].astype(float) == float(value))]
        if match.empty:
            continue  # not in this scale's Table 1 sweep
        row = dict(match.iloc[0])
        ext = row["extrapolates"]
        if ext is None or (isinstance(ext, float) and math.isnan(ext)) or bool(ext):
            continue  # extrapolates already (or was not measured): nothing to fix
        if "l_tr_mult" in entry:
            entry["l_tr"] = int(row["l_tr"]) * int(entry.pop("l_tr_mult"))
        plan.append((row, entry))
    return plan


def table2_skipped(scale, t1: pd.DataFrame) -> list[str]:
    """Labels of the Table 1 models of ``sweeps["table2"]`` that were not retrained
    because they already extrapolate."""
    sc = get_scale(scale)
    planned = {row["label"] for row, _ in _table2_plan(sc, t1)}
    out = []
    for entry in _sweep(sc, "table2", []):
        family = next((f for f in FAMILIES if f in entry), None)
        if family is None:
            continue
        match = t1[(t1["family"] == family) & (t1["value"].astype(float) == float(entry[family]))]
        out += [lab for lab in match["label"] if lab not in planned]
    return out


def table2(scale: str = "tiny", corpus: str = "prose", *, t1: pd.DataFrame | None = None,
           progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Table 2: the failing Table 1 models retrained with a longer L_tr (``sweeps["table2"]``),
    measured at the same absolute L_ex as Table 1. r(L) is taken against ppl at the new
    L_tr; "extrapolates" looks at new L_tr < L <= 16 x (Table 1's L_tr), the same absolute
    horizon as Table 1. Empty when no Table 1 model fails."""
    sc = get_scale(scale)
    t1 = table1(scale, corpus, progress=progress, train=train) if t1 is None else t1
    cols = ["family", "value", "label", "pos", "corpus", "old_l_tr", "old_erf", "l_tr", "covers_erf", "run_key"]
    rows = []
    for old, over in _bar(_table2_plan(sc, t1), "Table 2", progress):
        fam_pos, setting, _ = FAMILIES[old["family"]]
        spec = make_spec(f'{old["label"]}, L_tr={over.get("l_tr", old["l_tr"])}', fam_pos, corpus,
                         family=old["family"], value=old["value"], **{setting: old["value"]}, **over)
        run = run_of(scale, spec, train=train)
        l_tr, old_l_tr = _l_tr(run), int(old["l_tr"])
        lengths = sorted(set(lengths_of(t1)) | {l_tr})  # same absolute L_ex, plus the new L_tr
        row = {"family": old["family"], "value": old["value"], "label": spec.label, "pos": fam_pos,
               "corpus": corpus, "old_l_tr": old_l_tr, "old_erf": int(old["erf"]), "l_tr": l_tr,
               "covers_erf": bool(l_tr >= int(old["erf"])), "run_key": run.key}
        res = measure_ppl(run, lengths=lengths)
        ppl = {int(L): float(p) for L, p in zip(res["lengths"], res["ppl"])}
        add_ppl_columns(row, res, l_tr)
        # the same absolute horizon as Table 1: 16 x the old L_tr, i.e. a smaller multiple of the new one
        row["extrapolates"] = extrapolates(ppl, l_tr, horizon=max(1, EXTRAPOLATION_HORIZON * old_l_tr // l_tr))
        add_erf_columns(row, measure_erf(run))
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else cols)


# --------------------------------------------------------------------------------------
# Figure 7 (Section 5): Sinusoidal at two L_tr, and Rotary
# --------------------------------------------------------------------------------------
def figure7_models(scale, corpus: str = "prose") -> list[Spec]:
    sc = get_scale(scale)
    base = sc.train.l_tr
    specs = []
    for l_tr in _sweep(sc, "sinusoidal_l_tr", [base // 2, base]):
        # the default L_tr gets no override, so it is the very run of Table 3
        over = {} if int(l_tr) == base else {"l_tr": int(l_tr)}
        specs.append(make_spec(f"Sinusoidal, L_tr={int(l_tr)}", "sinusoidal", corpus, family="sinusoidal",
                               value=int(l_tr), **over))
    specs.append(make_spec(f"Rotary, L_tr={base}", "rotary", corpus, family="rotary", value=base))
    return specs


def few_recent(length: int) -> int:
    """How many of the most recent tokens to skip when looking for the gradient jump.

    The last few tokens always carry most of the gradient (local context); the jump of
    Figure 7 is a second peak far from them. "Few" = 2% of the segment, at least 4 tokens.
    """
    return max(4, math.ceil(0.02 * length))


def gradient_jump(normalized, l_tr: int) -> dict:
    """Where the normalised gradient peaks outside the most recent few tokens (Figure 7).

    ``normalized[i]`` belongs to the token i positions before the last one, so in a segment
    of length L its absolute (0-based) position is ``abs_pos = L - 1 - i``. The paper reads
    the peak as "the L_tr-th token"; we call it close when ``|abs_pos - L_tr| <= 5% of
    L_tr``, with at least one position of slack so that the 1-based reading (0-based
    L_tr - 1) is also inside the window at small L_tr.
    """
    g = np.asarray(normalized, dtype=float)
    L = len(g)
    skip = few_recent(L)
    if L <= skip:
        return {"jump_index": None, "jump_abs_pos": None, "jump_ok": None, "jump_tolerance": None, "few": skip}
    i = int(skip + np.argmax(g[skip:]))
    abs_pos = L - 1 - i
    tol = max(1.0, 0.05 * l_tr)
    return {"jump_index": i, "jump_abs_pos": abs_pos, "jump_ok": bool(abs(abs_pos - l_tr) <= tol),
            "jump_tolerance": tol, "few": skip, "jump_share": float(g[i])}


def figure7(scale: str = "tiny", corpus: str = "prose", *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Figure 7: one row per model (Sinusoidal at each L_tr of the sweep, Rotary): perplexity
    at its own L_tr x length_mults, ERF numbers on segments of 4 x (the scale's L_tr) for
    every model (the same last token, as in the paper), and the gradient jump."""
    sc = get_scale(scale)
    length = sc.train.l_tr * sc.eval.erf_length_mult
    rows = []
    for spec in _bar(figure7_models(scale, corpus), "Figure 7", progress):
        run = run_of(scale, spec, train=train)
        l_tr = _l_tr(run)
        row = {"label": spec.label, "pos": spec.pos, "corpus": corpus, "l_tr": l_tr,
               "default_l_tr": l_tr == sc.train.l_tr, "run_key": run.key}
        add_ppl_columns(row, measure_ppl(run), l_tr)
        rf = measure_erf(run, length=length)
        add_erf_columns(row, rf)
        row.update(gradient_jump(rf["normalized"], l_tr))
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# Table 3 and Figure 11 (Section 6)
# --------------------------------------------------------------------------------------
def corpora_of(scale, corpora=None) -> list[str]:
    sc = get_scale(scale)
    if corpora is None:
        return [str(c) for c in _sweep(sc, "corpora", ["prose", "code", "math"])]
    return [corpora] if isinstance(corpora, str) else list(corpora)


def table3_models(scale, corpora=None) -> list[Spec]:
    sc = get_scale(scale)
    return [make_spec(POS_TITLES.get(p, p), p, c, family="table3", value=p)
            for c in corpora_of(sc, corpora) for p in _sweep(sc, "table3_pos", TABLE3_POS)]


def tokens_per_s(run) -> float:
    """Training speed of a run, from its training metrics (NaN when not recorded).

    Runs are trained one after the other on a machine whose load changes, so these
    numbers do not compare schemes fairly; :func:`training_speed` does."""
    m = run.metrics or {}
    value = m.get("tokens_per_s")
    return math.nan if value is None else float(value)


SPEED_ROUNDS = 5  # interleaved rounds of training_speed; the median over rounds is kept
SPEED_STEPS = 3  # timed training steps per scheme and round


def training_speed(scale, positions=TABLE3_POS, *, rounds: int = SPEED_ROUNDS, steps: int = SPEED_STEPS,
                   progress: bool = True, refresh: bool = False) -> dict[str, float]:
    """Training tokens/s of each scheme at this scale's model size, measured in one process.

    Table 3 of the paper puts the training speed beside the perplexities. The speed of a
    stored run depends on what else the machine was doing while it trained, so the schemes
    are timed here side by side: each round runs a few full training steps (forward,
    backward, AdamW) of every scheme, in a different order each round, on random tokens
    of the preset's batch shape; the median over rounds is reported. The result is cached
    in the run store (``speed/``) by scale, schemes and code version.
    """
    import hashlib
    import json
    import statistics
    import time

    import torch

    from . import runs
    from .model import TransformerLM

    sc = get_scale(scale)
    positions = [str(p) for p in positions]
    params = {"scale": sc.name, "positions": positions, "rounds": rounds, "steps": steps,
              "code": runs.code_version(), "threads": torch.get_num_threads()}
    key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
    path = runs.runs_dir() / "speed" / f"{sc.name}-{key}.json"
    if path.is_file() and not refresh:
        return json.loads(path.read_text())["tokens_per_s"]
    b, l_tr = sc.train.batch_size, sc.train.l_tr
    gen = torch.Generator().manual_seed(0)
    batch = torch.randint(0, sc.model.vocab_size, (b, l_tr + 1), generator=gen)
    cases = {}
    for pos in positions:
        torch.manual_seed(0)
        model = TransformerLM(sc.model.replace(pos=pos)).train()
        opt = torch.optim.AdamW(model.parameters(), lr=sc.train.lr)
        cases[pos] = (model, opt)

    def step(pos):
        model, opt = cases[pos]
        loss = model.loss(batch[:, :-1], batch[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), sc.train.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for pos in positions:  # warm-up: first calls allocate and build caches
        step(pos)
    times = {pos: [] for pos in positions}
    for r in tqdm(range(rounds), desc="training speed", disable=not progress, leave=False):
        order = positions[r % len(positions):] + positions[:r % len(positions)]  # a different order each round
        for pos in order:
            t0 = time.perf_counter()
            for _ in range(steps):
                step(pos)
            times[pos].append((time.perf_counter() - t0) / steps)
    result = {pos: b * l_tr / statistics.median(ts) for pos, ts in times.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    runs.write_json(path, {"params": params, "tokens_per_s": result})
    return result


def table3(scale: str = "tiny", corpora=None, *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Table 3: one row per (corpus, scheme): perplexity at L_tr x length_mults, r(L),
    extrapolates, learnable or not, and training tokens/s (:func:`training_speed`)."""
    rows = []
    speed = training_speed(scale, list(dict.fromkeys(s.pos for s in table3_models(scale, corpora))), progress=progress)
    for spec in _bar(table3_models(scale, corpora), "Table 3", progress):
        run = run_of(scale, spec, train=train)
        row = {"corpus": spec.corpus, "pos": spec.pos, "label": spec.label,
               "learnable": spec.pos in LEARNABLE, "l_tr": _l_tr(run), "run_key": run.key}
        add_ppl_columns(row, measure_ppl(run), _l_tr(run))
        row["tokens_per_s"] = speed[spec.pos]  # measured side by side (training_speed)
        rows.append(row)
    return pd.DataFrame(rows)


def figure11(scale: str = "tiny", corpus: str = "prose", *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Figure 11: ERF, share of the gradient in the last L_tr tokens for Sandwich, KERPLE, T5."""
    rows = []
    for pos in _bar(FIGURE11_POS, "Figure 11", progress):
        spec = make_spec(POS_TITLES[pos], pos, corpus, family="figure11", value=pos)
        run = run_of(scale, spec, train=train)
        row = {"label": spec.label, "pos": pos, "corpus": corpus, "l_tr": _l_tr(run), "run_key": run.key}
        add_erf_columns(row, measure_erf(run))
        rows.append(row)
    return pd.DataFrame(rows)


def d_bar_values(scale) -> list[int]:
    return [int(v) for v in _sweep(get_scale(scale), "d_bar", [32, 64, 128, 256])]


# --------------------------------------------------------------------------------------
# Evaluation protocols (footnote 2, Figure 3)
# --------------------------------------------------------------------------------------
def protocols(scale: str = "tiny", corpus: str = "prose", positions: Iterable[str] = PROTOCOL_POS, *,
              progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Perplexity of the same models under the three protocols at L_tr x length_mults:
    one row per (model, protocol, L_ex)."""
    rows = []
    specs = [make_spec(POS_TITLES.get(p, p), p, corpus, family="protocols", value=p) for p in positions]
    for spec in _bar(specs, "protocols", progress):
        run = run_of(scale, spec, train=train)
        for proto in PROTOCOLS:
            res = measure_ppl(run, protocol=proto)
            for i, L in enumerate(res["lengths"]):
                rows.append({"label": spec.label, "pos": spec.pos, "corpus": corpus, "protocol": proto,
                             "l_tr": _l_tr(run), "l_ex": int(L), "ppl": float(res["ppl"][i]),
                             "ci_low": float((res.get("ci_low") or [math.nan] * (i + 1))[i]),
                             "ci_high": float((res.get("ci_high") or [math.nan] * (i + 1))[i])})
    return pd.DataFrame(rows)


def protocol_verdict(df: pd.DataFrame) -> str:
    """One computed sentence on the early-token curse: at L_ex = L_tr, how much higher the
    non-overlapping perplexity is than the last-token one, per model."""
    if df is None or df.empty:
        return "No protocol comparison was run."
    parts, higher = [], 0
    at = df[df["l_ex"] == df["l_tr"]]
    labels = list(dict.fromkeys(at["label"]))
    for label in labels:
        sub = at[at["label"] == label].set_index("protocol")["ppl"]
        if "last_token" in sub and "non_overlapping" in sub:
            gap = sub["non_overlapping"] / sub["last_token"] - 1
            higher += gap > 0
            parts.append(f"{label} {gap:+.0%}")
    if not parts:
        return "The comparison lacks the last-token or non-overlapping numbers."
    return (f"At L_ex = L_tr the non-overlapping perplexity differs from the last-token one by "
            f"{', '.join(parts)}; it is higher for {higher} of {len(parts)} models "
            f"({'the early-token curse shows' if higher == len(parts) else 'the early-token curse does not show everywhere'}).")


# --------------------------------------------------------------------------------------
# receptive-field curves for the explorers
# --------------------------------------------------------------------------------------
def models_of(scale, experiment: str, corpus: str = "prose") -> list[Spec]:
    if experiment == "table1":
        return table1_models(scale, corpus)
    if experiment == "figure7":
        return figure7_models(scale, corpus)
    if experiment == "figure11":
        return [make_spec(POS_TITLES[p], p, corpus, family="figure11", value=p) for p in FIGURE11_POS]
    if experiment == "table3":
        return table3_models(scale, corpus)
    if experiment == "protocols":
        return [make_spec(POS_TITLES.get(p, p), p, corpus, family="protocols", value=p) for p in PROTOCOL_POS]
    raise UserError(f"unknown experiment {experiment!r}: use table1, figure7, figure11, table3 or protocols")


def erf_curves(scale: str, models, corpus: str = "prose", *, length: int | None = None,
               progress: bool = False, train: bool = True) -> dict[str, dict]:
    """{label: receptive-field result} (normalized, cumulative, erf, share_in_ltr, l_tr, ...)
    for an experiment's models (``models`` = "table1", "figure7", ... or a list of Spec).
    Cached in the run store, so this is fast once the experiment has run."""
    sc = get_scale(scale)
    specs = models_of(scale, models, corpus) if isinstance(models, str) else list(models)
    if length is None and isinstance(models, str) and models == "figure7":
        length = sc.train.l_tr * sc.eval.erf_length_mult
    out = {}
    for spec in _bar(specs, "receptive fields", progress):
        run = run_of(scale, spec, train=train)
        rf = dict(measure_erf(run, length=length))
        rf.setdefault("l_tr", _l_tr(run))
        rf["label"] = spec.label
        out[spec.label] = rf
    return out


def table2_curves(scale: str, t2: pd.DataFrame, corpus: str = "prose") -> dict[str, dict]:
    """Receptive-field curves of the retrained Table 2 models."""
    specs = []
    for _, row in t2.iterrows():
        pos, setting, _ = FAMILIES[row["family"]]
        specs.append(make_spec(row["label"], pos, corpus, family=row["family"], value=row["value"],
                               **{setting: row["value"], "l_tr": int(row["l_tr"])}))
    return erf_curves(scale, specs, corpus)
