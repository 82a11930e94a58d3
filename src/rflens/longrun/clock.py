"""What sets the clock of failure: predictions for a ladder of runs, sealed before it trains.

The 12-layer run (``deep``) reads the paper's thesis as the paper does, but only late in
training: its failing models break at 16.8M-33.6M tokens, 20-39 tokens per parameter, where
the paper trained at about 6.6. Whether a model's failure follows the tokens it has seen,
its tokens per parameter or its passes over the text decides whether those verdicts transfer
to the paper's regime. A ladder trains the same models with one thing changed, and this
module states, before any of its models trains past its pilot, what each clock predicts for
r(16 L_tr) at every measured size:

- the width ladder (``deep-d128``: d = 128, 3.4 times the parameters of ``deep``);
- the diversity ladder (``long-6m``, ``long-3m``, ``long-sotu``: the 4-layer run on half,
  a quarter and one source of its text, :mod:`rflens.data.subsets`).

Each clock reads the base run's model of the same setting at the tokens it maps a size to:

- ``tokens``: at D tokens, what the base model read at D tokens;
- ``tokens per parameter``: what it read at D x N_base / N_ladder tokens (N counts every
  parameter, embeddings included);
- ``passes``: what it read at D x U_base / U_ladder tokens, U the unique training tokens
  (the same passes over the text).

A base curve is read between its measured sizes by linear interpolation in log2(tokens)
(before its first size, the first size's value; after its last, the last's: such cells are
marked), and past the base run's last size from the run that trains its models further
(``long-extended``) where it holds the model. Each range holds the evaluation's noise and
the training's: every document-bootstrap replicate of every seed of the base setting is a
whole curve (:func:`rflens.longrun.forecast.replicate_r`), and the range runs from the
lowest seed's 2.5% quantile to the highest seed's 97.5%.

The rule that reads the outcome is sealed with the ranges (:data:`RULE`): a cell (model,
size) decides between the clocks when their ranges do not overlap; the measured r agrees
with a clock when it lies inside that clock's range; a clock holds when it agrees with at
least :data:`WIN_SHARE` of the deciding cells (and there are at least :data:`MIN_DECIDING`);
otherwise the ladder leaves the question not decided. The one-source run is also set beside
the stratified run of its size (:data:`DIVERSITY_RULE`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rflens.errors import UserError
from rflens.longrun import forecast, plan
from rflens.setup import presets
from rflens.setup.presets import LongRun, Preset
from rflens.store import bundle

if TYPE_CHECKING:  # pandas is imported where a table is built
    import pandas as pd

PREDICTIONS = "predictions.json"  # in the ladder's bundle, written once, before its models train
LEVEL = 0.95
WIN_SHARE = 2 / 3
MIN_DECIDING = 3


@dataclass(frozen=True)
class Ladder:
    """How a ladder is read: the run it is set beside, the clocks it decides between, and a
    run that trains the base run's models further (read past the base's last size)."""

    base: str
    clocks: tuple[str, ...]
    extension: str = ""
    stratified: str = ""  # for a run on one source: the stratified run of its size


LADDERS = {"deep-d128": Ladder("deep", ("tokens", "tokens per parameter")),
           "long-6m": Ladder("long", ("tokens", "passes"), "long-extended"),
           "long-3m": Ladder("long", ("tokens", "passes"), "long-extended"),
           "long-sotu": Ladder("long", ("tokens", "passes"), "long-extended", stratified="long-3m")}
RULE = (f"a cell (model, size) decides when the clocks' {LEVEL:.0%} ranges do not overlap; the measured "
        f"r(16 L_tr) agrees with a clock when it lies inside that clock's range; a clock holds when it agrees "
        f"with at least {WIN_SHARE:.0%} of the deciding cells, of which there are at least {MIN_DECIDING}; "
        "otherwise not decided")
RISE = 1.0  # a cell compares two runs where either's range lies wholly above this (a rise under way)
DIVERSITY_RULE = (f"each model and size measured in both the one-source run and the stratified run of its size is "
                  f"compared where either's {LEVEL:.0%} range (every document-bootstrap replicate of every seed, as the "
                  f"predictions' ranges) lies wholly above {RISE}; the cell differs when the two ranges do not overlap; "
                  f"diversity matters when at least {WIN_SHARE:.0%} of at least {MIN_DECIDING} compared cells differ, "
                  f"does not when at most {1 - WIN_SHARE:.0%} differ; otherwise not decided")


def parameters(preset: Preset) -> int:
    """Every parameter of the preset's model (embeddings and LM head included), counted on
    the meta device."""
    from rflens.training.cost import meta_model

    return meta_model(preset.model).num_params(non_embedding=False)


def paper_tokens_per_parameter() -> float:
    """The paper's tokens per parameter: the ``full`` preset's tokens over its parameters."""
    full = presets.get("full")
    t = full.train
    return t.steps * t.batch_size * t.l_tr / parameters(full)


def ladder_of(run: LongRun) -> Ladder:
    """How ``run`` is read as a ladder; a one-line error for a run that is no ladder."""
    if run.name not in LADDERS:
        raise UserError(f"{run.name!r} is not a ladder: choose one of {', '.join(LADDERS)}")
    return LADDERS[run.name]


def base_of(ladder: LongRun) -> LongRun:
    """The run a ladder is read against; a one-line error for a run that is no ladder."""
    return presets.long_run(ladder_of(ladder).base)


def unique_tokens(run: LongRun) -> int:
    """The training tokens of the run's text (its prose): what a pass over the text is;
    a one-line error naming the command while the corpus is not built."""
    from rflens import data
    from rflens.setup.settings import resolve

    cfg = resolve(run, "nope", "prose")[2]
    n = data.train_tokens(cfg)
    if n is None:
        raise UserError(f"the {cfg.corpus} corpus is not built: build it with `{data.rebuild_command(cfg, run.name)}`")
    return n


def _equivalent(clock: str, tokens: int, base: LongRun, ladder: LongRun) -> float:
    """The base run's tokens at which ``clock`` reads a ladder model's ``tokens``."""
    if clock == "tokens":
        return float(tokens)
    if clock == "tokens per parameter":
        return tokens * parameters(base) / parameters(ladder)
    if clock == "passes":
        return tokens * unique_tokens(base) / unique_tokens(ladder)
    raise ValueError(f"unknown clock {clock!r}")


def _seeds_of(setting: str, run: LongRun) -> list[str]:
    """The shipped, finished models of ``run`` with the setting ``setting`` (every seed)."""
    done = bundle.complete(run.name)
    return [n for n in sorted(done) if n == setting or n.startswith(setting + "_seed=")]


_CURVES: dict[tuple, tuple] = {}  # (model, its bundle's and the extension's stamps, n_boot) -> _curves' arrays


def _curves(name: str, run: LongRun, n_boot: int, extension: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log2 tokens, point r, replicate r (sizes, n_boot)) of a shipped model at 16 L_tr,
    with the sizes past its last that the run ``extension`` measured, where it holds the
    model finished (one draw of documents serves both: the same test segments). Computed
    once a process while neither bundle changes (the ladders of one base share it)."""
    key = (name, bundle.stamp(run.name), bundle.stamp(extension) if extension else None, n_boot)
    if key not in _CURVES:
        _CURVES[key] = _computed_curves(name, run, n_boot, extension)
    return _CURVES[key]


def _computed_curves(name: str, run: LongRun, n_boot: int, extension: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    path = bundle.entries(run.name)[name]
    result = bundle.read_result(path)
    tokens, r, _ = forecast.curve(result)
    reps = forecast.replicate_r(result, bundle.point_nlls(path), n_boot)
    if extension and name in bundle.complete(extension):
        far = bundle.entries(extension)[name]
        more = bundle.read_result(far)
        t2, r2, _ = forecast.curve(more)
        reps2 = forecast.replicate_r(more, bundle.point_nlls(far), n_boot)
        past = t2 > tokens[-1]
        tokens, r, reps = np.concatenate([tokens, t2[past]]), np.concatenate([r, r2[past]]), np.vstack([reps, reps2[past]])
    return np.log2(tokens), r, reps


def _at(x: float, xs: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` (sizes, ...) read at log2 tokens ``x``: linear in log2 tokens between sizes,
    the first size's value before it, the last's after it."""
    v = values.reshape(len(xs), -1)
    return np.array([np.interp(x, xs, v[:, j]) for j in range(v.shape[1])])


def predict(ladder: LongRun, n_boot: int | None = None) -> dict:
    """Each clock's r(16 L_tr) range at every measured size of every model of the ladder's
    plan, read from the base run's shipped models of the same setting (every seed)."""
    from rflens.measure.intervals import N_BOOTSTRAP

    n_boot = N_BOOTSTRAP if n_boot is None else n_boot
    how = ladder_of(ladder)
    base = base_of(ladder)
    n_base, n_ladder = parameters(base), parameters(ladder)
    sizes = plan.sizes(ladder)
    models: dict[str, dict] = {}
    cache: dict[str, tuple] = {}
    for spec in plan.models(ladder):
        setting = spec.name.rsplit("_seed=", 1)[0]
        seeds = _seeds_of(setting, base)
        if not seeds:
            raise UserError(f"{setting} is not shipped finished in {base.name}: the ladder is read against it")
        for s in seeds:
            if s not in cache:
                cache[s] = _curves(s, base, n_boot, how.extension)
        first, last = 2 ** min(cache[s][0][0] for s in seeds), 2 ** max(cache[s][0][-1] for s in seeds)
        cells = {}
        for tokens in sizes:
            cell = {"tokens_per_parameter": round(tokens / n_ladder, 3)}
            if "passes" in how.clocks:
                cell["text_passes"] = round(tokens / unique_tokens(ladder), 3)
            for clock in how.clocks:
                eq = _equivalent(clock, tokens, base, ladder)
                x = math.log2(eq)
                lows, highs, points = [], [], []
                for s in seeds:
                    xs, r, reps = cache[s]
                    boot = _at(x, xs, reps)
                    lo, hi = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], method="inverted_cdf")
                    lows.append(float(lo))
                    highs.append(float(hi))
                    points.append(float(_at(x, xs, r)[0]))
                cell[clock] = {"base_tokens": int(round(eq)), "before_first_size": bool(eq < first),
                               "range": [round(min(lows), 4), round(max(highs), 4)],
                               "by_seed": [round(p, 4) for p in points]}
                if eq > last * (1 + 1e-9):
                    cell[clock]["after_last_size"] = True
            cell["decides"] = _disjoint(*(cell[c]["range"] for c in how.clocks))
            cells[str(tokens)] = cell
        models[spec.name] = {"base": setting, "base_seeds": seeds, "sizes": cells}
    out = {"ladder": ladder.name, "base": base.name, "parameters": {base.name: n_base, ladder.name: n_ladder},
           "paper_tokens_per_parameter": round(paper_tokens_per_parameter(), 3), "horizon": "16 L_tr",
           "level": LEVEL, "n_boot": n_boot, "clocks": list(how.clocks), "rule": RULE,
           "win_share": WIN_SHARE, "min_deciding": MIN_DECIDING, "models": models}
    if how.extension:
        out["extension"] = how.extension
    if "passes" in how.clocks:
        out["unique_tokens"] = {base.name: unique_tokens(base), ladder.name: unique_tokens(ladder)}
    if how.stratified:
        out["diversity"] = {"stratified": how.stratified, "rise": RISE, "rule": DIVERSITY_RULE}
    return out


def _disjoint(a, b) -> bool:
    return a[1] < b[0] or b[1] < a[0]


def seal(ladder: LongRun) -> dict:
    """Write the predictions into the ladder's bundle (:data:`PREDICTIONS`); refused once
    they are written (sealed predictions are never rewritten) or once a model of the ladder
    is measured past the sizes a pilot reaches."""
    if read(ladder) is not None:
        raise UserError(f"the {ladder.name} predictions are sealed already ({bundle.bundle_dir(ladder.name) / PREDICTIONS}): "
                        "they are never rewritten")
    out = predict(ladder)
    bundle.write_file(ladder.name, PREDICTIONS, out)
    return out


def read(ladder: LongRun) -> dict | None:
    """The sealed predictions of ``ladder``, or None."""
    return bundle.read_file(ladder.name, PREDICTIONS)


def outcome(ladder: LongRun) -> "pd.DataFrame":
    """One row a model and size of the sealed predictions, the model named by the paper's
    setting (:func:`rflens.longrun.compare.paper_label`): each clock's range, whether the
    cell decides, the r(16 L_tr) measured (NaN while the size is not measured) and the
    clocks it agrees with."""
    import pandas as pd

    from rflens.longrun.compare import paper_label

    p = read(ladder)
    if p is None:
        return pd.DataFrame()
    have = bundle.entries(ladder.name)
    rows = []
    for name, m in p["models"].items():
        measured = {}
        if name in have:
            tokens, r, _ = forecast.curve(bundle.read_result(have[name]))
            measured = {int(t): float(v) for t, v in zip(tokens, r)}
        for t, cell in sorted(m["sizes"].items(), key=lambda kv: int(kv[0])):
            r = measured.get(int(t), math.nan)
            row = {"model": paper_label(name, ladder.name), "tokens": int(t),
                   "tokens per parameter": cell["tokens_per_parameter"]}
            for c in p["clocks"]:
                row[f"{c}: range"] = tuple(cell[c]["range"])
            row["decides"] = cell["decides"]
            row["measured"] = r
            row["agrees with"] = ", ".join(c for c in p["clocks"] if not math.isnan(r)
                                           and cell[c]["range"][0] <= r <= cell[c]["range"][1]) or (
                "" if math.isnan(r) else "neither")
            rows.append(row)
    return pd.DataFrame(rows)


def verdict(ladder: LongRun) -> dict:
    """The sealed rule applied to what is measured: per clock, the deciding cells measured
    and how many agree; the clock that holds, or None (not decided)."""
    p = read(ladder)
    if p is None:
        raise UserError(f"{ladder.name} has no sealed predictions")
    t = outcome(ladder)
    deciding = t[t["decides"] & t["measured"].notna()] if len(t) else t
    agree = {c: int(sum(c in a.split(", ") for a in deciding["agrees with"])) for c in p["clocks"]}
    n = len(deciding)
    holds = [c for c, k in agree.items() if n >= p["min_deciding"] and k >= p["win_share"] * n]
    return {"deciding": n, "agree": agree, "holds": holds[0] if len(holds) == 1 else None,
            "min_deciding": p["min_deciding"], "win_share": p["win_share"]}


def _ranges(run: LongRun, setting: str, n_boot: int) -> dict[int, tuple[float, float]]:
    """{tokens: (low, high)} of r(16 L_tr) of ``setting`` in ``run`` at each size measured:
    the :data:`LEVEL` range over every document-bootstrap replicate of every seed measured
    there (the lowest seed's low quantile to the highest seed's high one), as the
    predictions' ranges are taken."""
    out: dict[int, tuple[float, float]] = {}
    for name, path in bundle.entries(run.name).items():
        if name != setting and not name.startswith(setting + "_seed="):
            continue
        if not bundle.read_result(path)["points"]:
            continue
        xs, _, reps = _curves(name, run, n_boot)  # the replicates the predictions and curves read
        for t, row in zip(np.rint(np.exp2(xs)), reps):
            lo, hi = np.quantile(row, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], method="inverted_cdf")
            old = out.get(int(t), (math.inf, -math.inf))
            out[int(t)] = (min(old[0], float(lo)), max(old[1], float(hi)))
    return out


def diversity(ladder: LongRun, n_boot: int | None = None) -> dict | None:
    """The one-source run set beside the stratified run of its size by the rule sealed with
    its predictions (:data:`DIVERSITY_RULE`): the compared cells (model, size; ``label``: the
    paper's setting), how many differ, and whether diversity matters (True, False, or None:
    not decided), with the ``stratified`` run's name. None for a ladder with no such
    comparison sealed."""
    from rflens.longrun.compare import paper_label
    from rflens.measure.intervals import N_BOOTSTRAP

    p = read(ladder)
    if p is None or "diversity" not in p:
        return None
    n_boot = N_BOOTSTRAP if n_boot is None else n_boot
    other, rise = presets.long_run(p["diversity"]["stratified"]), p["diversity"]["rise"]
    cells = []
    for setting in dict.fromkeys(m["base"] for m in p["models"].values()):
        mine, theirs = _ranges(ladder, setting, n_boot), _ranges(other, setting, n_boot)
        for t in sorted(set(mine) & set(theirs)):
            if mine[t][0] > rise or theirs[t][0] > rise:
                cells.append({"model": setting, "label": paper_label(setting, ladder.name), "tokens": t,
                              ladder.name: mine[t], other.name: theirs[t],
                              "differs": _disjoint(mine[t], theirs[t])})
    n, k = len(cells), sum(c["differs"] for c in cells)
    matters = None
    if n >= p["min_deciding"]:
        matters = True if k >= p["win_share"] * n else False if k <= (1 - p["win_share"]) * n else None
    return {"cells": cells, "compared": n, "differ": k, "matters": matters, "stratified": other.name}


def maps(ladder: LongRun) -> dict[str, float] | None:
    """{clock: the factor it multiplies a ladder model's tokens by to read the base run},
    from the sealed predictions (their parameter counts and unique tokens); None while the
    ladder has none."""
    p = read(ladder)
    if p is None:
        return None
    n, u = p["parameters"], p.get("unique_tokens", {})
    factor = {"tokens": 1.0, "tokens per parameter": n[p["base"]] / n[p["ladder"]]}
    if u:
        factor["passes"] = u[p["base"]] / u[p["ladder"]]
    return {c: factor[c] for c in p["clocks"]}


def curves(ladder: LongRun) -> "pd.DataFrame":
    """r(16 L_tr) of the ladder's measured models and of the base models they are read
    against (every shipped seed, with the sizes the base's extension measured past its
    last), one row a (run, model, seed, size); a column per clock gives the base tokens it
    reads a size at (the base's own sizes at their tokens), ``label`` the paper's setting
    (:func:`rflens.longrun.compare.paper_label`). Empty while nothing is sealed."""
    import pandas as pd

    from rflens.longrun.compare import paper_label

    factor = maps(ladder)
    if factor is None:
        return pd.DataFrame()
    how, base = ladder_of(ladder), base_of(ladder)
    settings = list(dict.fromkeys(spec.name.rsplit("_seed=", 1)[0] for spec in plan.models(ladder)))
    rows = []

    def add(run: str, name: str, result: dict, scale: dict, after: float = 0.0) -> float:
        tokens, r, lo = forecast.curve(result)
        setting, _, seed = name.partition("_seed=")
        for t, v, low in zip(tokens, r, lo):
            if t > after:
                rows.append({"run": run, "model": setting, "label": paper_label(setting, ladder.name),
                             "seed": int(seed or 0), "tokens": int(t), "r": float(v),
                             "r low": float(low), **{c: float(t) * f for c, f in scale.items()}})
        return float(tokens[-1]) if len(tokens) else after

    same = {c: 1.0 for c in factor}
    for setting in settings:
        for name in _seeds_of(setting, base):
            last = add(base.name, name, bundle.load(name, base.name), same)
            if how.extension and name in bundle.complete(how.extension):
                add(base.name, name, bundle.load(name, how.extension), same, after=last)
    for name, path in bundle.entries(ladder.name).items():
        result = bundle.read_result(path)
        if result["points"]:
            add(ladder.name, name, result, factor)
    return pd.DataFrame(rows)


def ladders() -> "pd.DataFrame":
    """One row a ladder: the run it is set beside, what it changes, its models shipped and
    measured, and whether its predictions are sealed."""
    import pandas as pd

    rows = []
    for name, how in LADDERS.items():
        run = presets.long_run(name)
        p = read(run)
        entries = bundle.entries(name)
        rows.append({"ladder": name, "set beside": how.base, "clocks": " against ".join(how.clocks),
                     "last size (tokens)": max(plan.sizes(run)),
                     "tokens per parameter there": f"{max(plan.sizes(run)) / p['parameters'][name]:.1f}" if p else "",
                     "passes there": f"{max(plan.sizes(run)) / p['unique_tokens'][name]:.2f}"
                     if p and "unique_tokens" in p else "",  # a width ladder keeps its text
                     "models": len(plan.models(run)), "finished": len(bundle.complete(name)),
                     "measured": sum(bool(bundle.read_result(path)["points"]) for path in entries.values()),
                     "sealed": p is not None})
    return pd.DataFrame(rows).set_index("ladder")

