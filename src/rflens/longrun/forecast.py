"""Forecast, then test: when does a long-run model that still rises reach r = 2?

At the long run's last size most of the paper's failing side is still rising: r(16 L_tr) is
above 1 and climbing, but below the level at which the book calls a model broken
(:data:`rflens.measure.criterion.BREAKS`, r = 2). This module forecasts, from the shipped curves alone,
the training tokens at which each rising model reaches that level, and what r it will
read at the sizes a later, longer run measures. The forecast is written into the bundle
(``forecast.json``) before that run trains, so the test cannot see its outcome first.

Two models of the curve, both fitted to log(r - 1) against log2(tokens) over the last
:data:`FIT_SIZES` measured sizes (the curve's present regime; earlier sizes sit at r = 1
within noise, where log(r - 1) says nothing):

- ``power``: log(r - 1) linear in log2 tokens (least squares): (r - 1) keeps growing by the
  same factor every doubling of tokens.
- ``decelerating``: the growth per doubling shrinks geometrically at the rate of the last
  two doublings (q = g2 / g1, clipped to [0, 1]); log(r - 1) then approaches
  y_last + g2 q / (1 - q), which may stay below log(2 - 1) = 0: the model never breaks.
  Where the last doubling grew faster than the one before (q >= 1), it is the power law
  through the last two sizes.

Uncertainty: each replicate of the document bootstrap (:func:`rflens.measure.intervals.cluster_bootstrap_sums`,
the same documents at every size, so a replicate is a whole curve) is fitted on its own,
and a range is the replicates' 2.5%-97.5% quantiles; each seed is forecast on its own and a
model's range over seeds spans its seeds' ranges. The bootstrap holds the evaluation's noise,
the seeds the training's; neither holds the error of the curve's model, which is why two are
given.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import numpy as np

from rflens.errors import UserError
from rflens.measure.criterion import BREAKS
from rflens.measure.intervals import cluster_bootstrap_sums, N_BOOTSTRAP
from rflens.store import bundle

if TYPE_CHECKING:  # pandas is imported where a table is built
    import pandas as pd

FIT_SIZES = 3  # the last measured sizes a fit reads
HORIZON_MULT = 16  # r is read at 16 L_tr, the longest evaluation
LEVEL = 0.95
FORECAST = "forecast.json"  # beside the models of the bundle it forecasts
MODELS = ("power", "decelerating")


# ----------------------------------------------------------------------------- which models

def curve(result: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens, r, r_low) of a shipped result at 16 L_tr, one entry per measured size."""
    horizon = HORIZON_MULT * result["train"]["l_tr"]
    pts = sorted(result["points"], key=lambda p: p["tokens"])
    i = pts[-1]["lengths"].index(horizon)
    return (np.array([p["tokens"] for p in pts], dtype=np.float64), np.array([p["r"][i] for p in pts]),
            np.array([p["r_low"][i] for p in pts]))


def is_rising(result: dict) -> bool:
    """Still rising at its last size: the interval of r(16 L_tr) lies above 1, its lower end
    is below the break level (not yet decided broken), and r grew over the last doubling."""
    _, r, lo = curve(result)
    return bool(len(r) >= FIT_SIZES and 1.0 < lo[-1] < BREAKS and r[-1] > r[-2])


def rising(scale: str = "long") -> list[str]:
    """The shipped models of ``scale`` that are still rising (:func:`is_rising`), by name."""
    return [name for name, path in bundle.entries(scale).items() if is_rising(bundle.read_result(path))]


# ----------------------------------------------------------------------------- the two curve models

def fit(tokens: np.ndarray, r: np.ndarray) -> dict[str, np.ndarray]:
    """Both models fitted to the last FIT_SIZES sizes. ``r``: (sizes,) or (sizes, replicates).
    x = log2(tokens / last tokens), so x = 0 is the last measured size. Returns the parameters
    of each model, arrays over replicates (NaN where r - 1 <= 0 at a fitted size)."""
    x = np.log2(tokens[-FIT_SIZES:] / tokens[-1])
    r = np.asarray(r, dtype=np.float64)
    r = r[-FIT_SIZES:].reshape(FIT_SIZES, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(r > 1, np.log(r - 1), np.nan)  # (FIT_SIZES, reps)
    xc = x - x.mean()
    slope = (xc[:, None] * (y - y.mean(0))).sum(0) / (xc ** 2).sum()
    intercept = y.mean(0) - slope * x.mean()  # log(r - 1) at x = 0
    g1, g2 = y[-2] - y[-3], y[-1] - y[-2]
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(g1 > 0, np.clip(g2 / g1, 0.0, 1.0), 1.0)
    q = np.where(np.isnan(g2), np.nan, q)
    return {"power": np.stack([intercept, slope]), "decelerating": np.stack([y[-1], g2, q])}


def _gain(g2, q, x):
    """Growth of log(r - 1) over x doublings past the last size, under the decelerating model."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        geometric = g2 * q * (1 - q ** x) / (1 - q)
    return np.where(q >= 1, g2 * x, geometric)


def predict(params: dict[str, np.ndarray], x) -> dict[str, np.ndarray]:
    """r at x doublings past the last size under each model."""
    a, b = params["power"]
    y_last, g2, q = params["decelerating"]
    with np.errstate(over="ignore"):
        return {"power": 1 + np.exp(a + b * x), "decelerating": 1 + np.exp(y_last + _gain(g2, q, x))}


def doublings_to(params: dict[str, np.ndarray], level: float = BREAKS) -> dict[str, np.ndarray]:
    """Doublings of tokens past the last size until r reaches ``level`` (inf: never; 0:
    already there), under each model."""
    target = math.log(level - 1)
    a, b = params["power"]
    y_last, g2, q = params["decelerating"]
    with np.errstate(invalid="ignore", divide="ignore"):
        power = np.where(b > 0, (target - a) / b, np.where(a >= target, 0.0, np.inf))
        need = target - y_last
        # decelerating: g2 q (1 - q^x) / (1 - q) = need  <=>  q^x = 1 - need (1 - q) / (g2 q)
        inner = 1 - need * (1 - q) / (g2 * q)
        geometric = np.where((g2 > 0) & (q > 0) & (inner > 0), np.log(inner) / np.log(q), np.inf)
        decel = np.where(need <= 0, 0.0, np.where(q >= 1, np.where(g2 > 0, need / g2, np.inf), geometric))
    nan = np.isnan(a) | np.isnan(b)
    return {"power": np.where(nan, np.nan, np.maximum(power, 0.0)),
            "decelerating": np.where(np.isnan(y_last) | np.isnan(g2), np.nan, decel)}


# ----------------------------------------------------------------------------- one model, all replicates

def replicate_r(result: dict, nlls: dict[int, np.ndarray], n_boot: int = N_BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """(sizes, n_boot) r(16 L_tr) of each document-bootstrap replicate: one draw of documents
    serves every size, so a replicate is a whole curve."""
    horizon = HORIZON_MULT * result["train"]["l_tr"]
    pts = sorted(result["points"], key=lambda p: p["tokens"])
    lengths = pts[-1]["lengths"]
    i, base = lengths.index(horizon), lengths.index(result["train"]["l_tr"])
    diff = np.stack([nlls[p["steps"]][i] - nlls[p["steps"]][base] for p in pts])  # (sizes, N)
    sums = cluster_bootstrap_sums(np.concatenate([diff, np.ones((1, diff.shape[1]))]), result["segment_docs"],
                                  seed, n_boot)
    return np.exp(sums[:-1] / sums[-1])


def _quantiles(v: np.ndarray) -> list:
    """The LEVEL range of replicates' values (inf allowed: never), without interpolating."""
    v = v[~np.isnan(v)]
    if v.size == 0:
        return [None, None]
    lo, hi = np.quantile(v, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], method="inverted_cdf")
    return [_num(lo), _num(hi)]


def _num(v):
    v = float(v)
    if math.isnan(v):
        return None
    return "never" if math.isinf(v) and v > 0 else round(v, 4)


def _tokens(last: float, doublings):
    """Tokens after ``doublings`` past ``last`` (JSON: a whole number, "never" or None)."""
    if doublings is None or doublings == "never":
        return doublings
    return int(round(last * 2.0 ** max(0.0, doublings)))


def forecast_one(result: dict, nlls: dict[int, np.ndarray], test_tokens: list[int],
                 n_boot: int = N_BOOTSTRAP) -> dict:
    """The forecast of one shipped model (one seed): tokens to r = 2 and r at each test size,
    point and range under each curve model, and tokens until the interval's lower end
    reaches 2 (the same models fitted to the shipped lower ends)."""
    tokens, r, lo = curve(result)
    boot = replicate_r(result, nlls, n_boot)
    point, reps, low = fit(tokens, r), fit(tokens, boot), fit(tokens, lo)
    out = {"fit_tokens": [int(t) for t in tokens[-FIT_SIZES:]], "fit_r": [round(float(v), 4) for v in r[-FIT_SIZES:]],
           "last_r": round(float(r[-1]), 4), "last_r_low": round(float(lo[-1]), 4)}
    to_break, reps_to_break, low_to_break = doublings_to(point), doublings_to(reps), doublings_to(low)
    for m in MODELS:
        d_point = _num(to_break[m][0])
        d_range = _quantiles(reps_to_break[m])
        out[m] = {
            "tokens_to_break": _tokens(tokens[-1], d_point),
            "tokens_to_break_range": [_tokens(tokens[-1], d) for d in d_range],
            "tokens_to_lower_end_break": _tokens(tokens[-1], _num(low_to_break[m][0])),
            "at": {},
        }
        for t in test_tokens:
            x = math.log2(t / tokens[-1])
            p, b = predict(point, x)[m][0], predict(reps, x)[m]
            out[m]["at"][str(int(t))] = {"r": _num(p), "range": _quantiles(b)}
    return out


# ----------------------------------------------------------------------------- the forecast of a run

def forecast(scale: str = "long", test_tokens: list[int] | None = None, names: list[str] | None = None,
             n_boot: int = N_BOOTSTRAP) -> dict:
    """The forecast of every rising model of ``scale`` (or of ``names``), each seed on its
    own, grouped by model (its name without ``_seed=k``), with the range over its seeds."""
    entries = bundle.entries(scale)
    names = rising(scale) if names is None else names
    unknown = [n for n in names if n not in entries]
    if unknown:
        raise UserError(f"no shipped model {', '.join(unknown)} in {scale}: see `python -m rflens emergence "
                        f"--scale {scale} --list`")
    test_tokens = sorted(int(t) for t in (test_tokens or []))
    models: dict[str, dict] = {}
    for name in names:
        path = entries[name]
        result = bundle.read_result(path)
        if "segment_docs" not in result:
            raise UserError(f"{name} of {scale} has no document of each segment: run "
                            f"`python -m rflens emergence --scale {scale} --document-intervals` first")
        base, _, seed = name.partition("_seed=")
        one = forecast_one(result, bundle.point_nlls(path), test_tokens, n_boot)
        models.setdefault(base, {"seeds": {}})["seeds"][seed or str(result["train"]["seed"])] = one
    for m in models.values():
        m["over_seeds"] = _over_seeds(m["seeds"], test_tokens)
    return {"scale": scale, "level": BREAKS, "horizon": f"{HORIZON_MULT} L_tr", "fit_sizes": FIT_SIZES,
            "interval": LEVEL, "n_boot": n_boot, "test_tokens": test_tokens, "models": models}


def _order(v):
    return math.inf if v == "never" else v


def _over_seeds(seeds: dict, test_tokens: list[int]) -> dict:
    """Per curve model: the lowest and highest end of the seeds' ranges."""
    out = {}
    for m in MODELS:
        lows = [s[m]["tokens_to_break_range"][0] for s in seeds.values() if s[m]["tokens_to_break_range"][0] is not None]
        highs = [s[m]["tokens_to_break_range"][1] for s in seeds.values() if s[m]["tokens_to_break_range"][1] is not None]
        at = {}
        for t in map(str, test_tokens):
            lo = [s[m]["at"][t]["range"][0] for s in seeds.values() if s[m]["at"][t]["range"][0] is not None]
            hi = [s[m]["at"][t]["range"][1] for s in seeds.values() if s[m]["at"][t]["range"][1] is not None]
            at[t] = [min(lo, key=_order) if lo else None, max(hi, key=_order) if hi else None]
        out[m] = {"tokens_to_break_range": [min(lows, key=_order) if lows else None,
                                            max(highs, key=_order) if highs else None], "r_range_at": at}
    return out


def write(scale: str = "long", test_tokens: list[int] | None = None, names: list[str] | None = None,
          tested: list[str] | None = None) -> dict:
    """Forecast and seal it into the bundle of ``scale`` (``forecast.json``), with the names
    of the models the test will train further (``tested``, in the order they train)."""
    f = forecast(scale, test_tokens, names) | {"tested": list(tested or [])}
    bundle.write_file(scale, FORECAST, f)
    return f


def read(scale: str = "long") -> dict | None:
    """The sealed forecast of ``scale``, or None when it has none; checked where it is read
    (:func:`_malformed`): a one-line UserError naming the file otherwise."""
    f = bundle.read_file(scale, FORECAST)
    if f is None:
        return None
    why = _malformed(f)
    if why is not None:
        raise UserError(f"the forecast {bundle.bundle_dir(scale) / FORECAST} {why}: {REWRITE}, or {bundle.RESTORE}")
    return f


REWRITE = "write it again with rflens.longrun.forecast.write (it forecasts from the shipped curves)"


def _is_count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _malformed(f) -> str | None:
    """What makes ``f`` no forecast :func:`write` wrote (None: nothing): the test's sizes
    whole positive numbers, each model named in ``tested`` one of ``models`` with its seed,
    and each seed's forecast at every test size under each curve model."""
    if not isinstance(f, dict) or not isinstance(f.get("models"), dict):
        return "holds no forecast of models"
    tokens, tested = f.get("test_tokens"), f.get("tested")
    if not isinstance(tokens, list) or not all(_is_count(t) for t in tokens):
        return f"gives test_tokens = {json.dumps(tokens)[:60]}, not a list of token counts"
    if not isinstance(tested, list) or not all(isinstance(n, str) for n in tested):
        return f"gives tested = {json.dumps(tested)[:60]}, not a list of model names"
    for model, m in f["models"].items():
        if not isinstance(m, dict) or not isinstance(m.get("seeds"), dict):
            return f"holds no seeds of {model}"
        for seed, s in m["seeds"].items():
            at = [s[cm].get("at") if isinstance(s, dict) and isinstance(s.get(cm), dict) else None for cm in MODELS]
            if not all(isinstance(a, dict) and set(map(str, tokens)) <= set(a) for a in at):
                return f"lacks the forecast of {_seed_name(model, seed)} at a test size"
    for name in tested:
        model, _, seed = name.partition("_seed=")
        if (seed or "0") not in f["models"].get(model, {"seeds": {}})["seeds"]:
            return f"names {name} in tested, which its models do not hold"
    return None


def _test_sizes(path, f: dict, test: str) -> None:
    """UserError naming the forecast's file unless each of its test sizes is one the ``test``
    run measures (a size between them would be compared with the nearest measured one)."""
    from rflens.longrun import plan
    from rflens.setup import presets

    sizes = plan.sizes(presets.long_run(test))
    off = [t for t in f["test_tokens"] if t not in sizes]
    if off:
        raise UserError(f"the forecast {path} gives test_tokens {off[:3]}, sizes the {test} run does not measure (it "
                        f"measures {', '.join(map(str, sizes))}): {REWRITE} at the {test} run's sizes, or "
                        f"{bundle.RESTORE}")


# ----------------------------------------------------------------------------- forecast and outcome, as tables

def _seed_name(model: str, seed: str) -> str:
    return model if seed == "0" else f"{model}_seed={seed}"


def _fmt_tokens(v) -> str:
    if v is None:
        return ""
    if v == "never":
        return "never"
    return f"{v / 1e6:,.0f}M" if v < 1e12 else f"> {1e12 / 1e6:,.0f}M"


def _fmt_range(r) -> str:
    return f"[{_fmt_tokens(r[0])}, {_fmt_tokens(r[1])}]"


def table(scale: str = "long") -> "pd.DataFrame":
    """The sealed forecast of ``scale``, one row a model and seed: r(16 L_tr) at its last
    size, the tokens at which it reaches r = 2 under each curve model with the range over
    the bootstrap, when the interval's lower end would reach 2, and the r forecast at each
    test size. Empty when the bundle has no forecast."""
    import pandas as pd

    from rflens.longrun.compare import paper_label

    f = read(scale)
    rows = []
    for model, m in (f or {}).get("models", {}).items():
        for seed, s in m["seeds"].items():
            name = _seed_name(model, seed)
            row = {"model": name, "the paper's": paper_label(name, scale), "tested": name in f.get("tested", []),
                   "r now": s["last_r"], "r now low": s["last_r_low"]}
            for cm in MODELS:
                row[f"r = 2 at ({cm})"] = _fmt_tokens(s[cm]["tokens_to_break"])
                row[f"range ({cm})"] = _fmt_range(s[cm]["tokens_to_break_range"])
                row[f"low end = 2 at ({cm})"] = _fmt_tokens(s[cm]["tokens_to_lower_end_break"])
                for t, at in s[cm]["at"].items():
                    row[f"r at {int(t) / 1e6:.1f}M ({cm})"] = (f"{at['r']:.2f} [{at['range'][0]:.2f}, "
                                                               f"{at['range'][1]:.2f}]")
            rows.append(row)
    return pd.DataFrame(rows)


def growth_per_doubling(t0: float, r0: float, t1: float, r1: float) -> float:
    """The factor by which r - 1 grew per doubling of tokens from (t0, r0) to (t1, r1),
    geometric over the span; NaN where r - 1 is not above 0 at both ends."""
    if r0 <= 1 or r1 <= 1 or t1 <= t0:
        return float("nan")
    return float(((r1 - 1) / (r0 - 1)) ** (1 / math.log2(t1 / t0)))


NAIVE = ("no change", "line")  # the baselines a sealed forecast is scored beside


def naive(tokens: np.ndarray, r: np.ndarray, at: float) -> dict[str, float]:
    """Two forecasts that need no model of the curve, from its measured sizes alone (in
    :func:`outcome`, those the sealed forecast recorded it read): ``no change`` (r stays at
    its last value) and ``line`` (r on the straight line in log tokens through the last two
    sizes)."""
    slope = (r[-1] - r[-2]) / math.log2(tokens[-1] / tokens[-2])
    return {"no change": float(r[-1]), "line": float(r[-1] + slope * math.log2(at / tokens[-1]))}


def outcome(scale: str = "long", test: str = "long-extended") -> "pd.DataFrame":
    """Each model the forecast named for its test, beside what the test measured: the r
    forecast at each test size (point and range under each curve model), the r measured
    there with its paired interval (as text, and as the numbers ``r``, ``r low``, ``r high``),
    whether it fell inside each range, the model's 33.6M-token point measured again
    against the shipped one, and the growth of r - 1 per doubling of tokens over the sizes the
    forecast fitted (``growth before``) and over the test's last step (``growth in the test``,
    from the test's own curve). A model not trained yet reads so.

    Beside the sealed forecast, the baselines of :func:`naive` (``no change``, ``line``), each
    scored by whether it falls inside the measured r's interval (``inside (no change)``,
    ``inside (line)``), and ``doublings past the fit``: log2 of the test size over the last
    size the forecast fitted, how far the test reached beyond what the fit saw."""
    import pandas as pd

    from rflens.longrun.compare import paper_label

    f = read(scale)
    if f is None:
        return pd.DataFrame()
    _test_sizes(bundle.bundle_dir(scale) / FORECAST, f, test)
    shipped = bundle.complete(test) if bundle.bundle_dir(test).is_dir() else set()
    rows = []
    for name in f["tested"]:
        model, _, seed = name.partition("_seed=")
        s = f["models"][model]["seeds"][seed or "0"]
        for t in map(str, f["test_tokens"]):
            row = {"model": name, "the paper's": paper_label(name, scale), "tokens": f"{int(t) / 1e6:.1f}M"}
            for cm in MODELS:
                at = s[cm]["at"][t]
                row[f"forecast ({cm})"] = f"{at['r']:.2f} [{at['range'][0]:.2f}, {at['range'][1]:.2f}]"
            fitted = np.array(s["fit_tokens"], dtype=float)  # the sealed sizes the forecast read, and r there
            baseline = naive(fitted, np.array(s["fit_r"], dtype=float), int(t))
            row |= baseline | {"doublings past the fit": math.log2(int(t) / fitted[-1])}
            if name not in shipped:
                row |= {"measured": "not trained yet", "inside (power)": None, "inside (decelerating)": None,
                        "inside (no change)": None, "inside (line)": None,
                        "again at 33.6M": "", "r": np.nan, "r low": np.nan, "r high": np.nan,
                        "growth before": np.nan, "growth in the test": np.nan}
                rows.append(row)
                continue
            res = bundle.load(name, test)
            tokens, r, lo = curve(res)
            hi = np.array([p["r_high"][p["lengths"].index(HORIZON_MULT * res["train"]["l_tr"])]
                           for p in sorted(res["points"], key=lambda p: p["tokens"])])
            k = int(np.argmin(abs(tokens - int(t))))
            row["measured"] = f"{r[k]:.2f} [{lo[k]:.2f}, {hi[k]:.2f}]"
            row |= {"r": float(r[k]), "r low": float(lo[k]), "r high": float(hi[k])}
            for cm in MODELS:
                a, b = s[cm]["at"][t]["range"]
                row[f"inside ({cm})"] = bool(a <= r[k] <= b)
            for cm in NAIVE:
                row[f"inside ({cm})"] = bool(lo[k] <= baseline[cm] <= hi[k])
            old_t, old_r, _ = curve(bundle.load(name, scale))
            j = int(np.argmin(abs(tokens - old_t[-1])))
            row["again at 33.6M"] = f"{r[j]:.3f} (shipped {old_r[-1]:.3f})"
            row["growth before"] = growth_per_doubling(old_t[-FIT_SIZES], old_r[-FIT_SIZES], old_t[-1], old_r[-1])
            row["growth in the test"] = growth_per_doubling(tokens[j], r[j], tokens[k], r[k])
            rows.append(row)
    return pd.DataFrame(rows)
