"""The bench's measured pilots, read for Chapter 11: the phenomena pilot
(``bench/phenomena.json``: which CPU-sized models can show Table 1's failures) and the
second-seed check (``bench/seeds.json``)."""

from __future__ import annotations

import math

import pandas as pd

from rflens.measure.criterion import BREAKS, EXTRAPOLATION_TOLERANCE
from rflens.paper import SLOPE_SHIFT
from rflens.storage import package_repo, read_json


def pilot_table(path=None) -> pd.DataFrame:
    """The measured pilot sweep, one row per model: depth R, width d, L_tr, training tokens,
    the model (``model``: the bench's name; ``label``: as the book prints it, :func:`label`), ppl(L_tr), r at 2..16 L_tr with the paired interval at 16 L_tr,
    the ERF and the training minutes. ``path`` defaults to ``bench/phenomena.json`` of the
    repository; an empty table when it is missing."""
    path = package_repo() / "bench" / "phenomena.json" if path is None else path
    try:
        models = list(read_json(path)["models"].values())
    except (OSError, ValueError, KeyError):
        return pd.DataFrame()
    rows = []
    for m in models:
        row = {"stage": m.get("stage"), "R": m["R"], "d": m["d"], "l_tr": m["l_tr"], "tokens": m.get("tokens_label"),
               "model": m["spec"], "label": label(m), "pos": m["pos"], "ppl(L_tr)": m["ppl"][0]}
        for L, r in zip(m["lengths"][1:], m["r"][1:]):
            row[f"r({L // m['l_tr']} L_tr)"] = r
        row["r(16 L_tr) low"], row["r(16 L_tr) high"] = m["r_lo"][-1], m["r_hi"][-1]
        row["max r high"] = max(m["r_hi"][1:])
        row.update({"ERF": m.get("erf"), "minutes": m.get("train_minutes")})
        rows.append(row)
    return pd.DataFrame(rows)


def label(m: dict) -> str:
    """A pilot model as the book prints it: the scheme (:func:`rflens.store.bundle.label`), its
    Table 1 setting as the code names it (:func:`rflens.experiments.tables.setting_label`: "Δ=4
    (paper's 8)", "w=24": the pilot's windows map to no paper setting),
    and the ablations the bench names in its model keys (a fixed first token, Sinusoidal's
    embeddings unscaled)."""
    from rflens.experiments.tables import setting_label
    from rflens.setup.schemes import title
    from rflens.store.bundle import label as scheme_label

    settings = m.get("settings", {})
    swept = [f for f in ("slope_shift", "same_slope", "window") if settings.get(f) is not None]
    parts = [title(m["pos"]) if swept else scheme_label({"pos": m["pos"], "settings": {}})]
    parts += [setting_label(family, settings[family], m["l_tr"]) for family in swept]
    if m["pos"] == "sinusoidal" and "scale_embeddings" in settings:
        parts.append("(embeddings scaled)" if settings["scale_embeddings"] else "(embeddings unscaled)")
    if m.get("rw_over_ltr") is not None:
        parts.append(f"(R·w/L_tr={m['rw_over_ltr']:g})")
    if settings.get("first_token") is not None:
        parts.append("with a fixed first token")
    return " ".join(parts)


def view(sweep: pd.DataFrame) -> pd.DataFrame:
    """The pilot table as the book shows it: one row per model, named by its configuration
    (R, d, L_tr, training tokens) and its label, the bench's names and stages left out."""
    if sweep.empty:
        return sweep
    return sweep.drop(columns=["stage", "model", "pos"]).set_index(["R", "d", "l_tr", "tokens", "label"])


# The pilot's selection rule, fixed before its first result: at one configuration, every
# failing-side model breaks (r(16 L_tr) >= 2, lower bound of the paired interval) while every
# stable-side model stays flat (upper bound of r(L) <= 1.10 at every length).
PILOT_FAILING = ("alibi_max", "win3", "win45")  # the paper's Delta = 8; R*w/L_tr = 3 and 4.5
PILOT_STABLE = ("win1", "alibi_min")  # R*w/L_tr = 1; the paper's Delta = -3
PILOT_WINDOW_RATIO = {"win1": 1, "win3": 3, "win45": 4.5}  # R*w/L_tr of the pilot's windowed models
# each model of the rule by its role, for a configuration that lacks it (its settings depend on R and L_tr)
PILOT_ROLES = {"alibi_max": f"ALiBi (the paper's Δ={max(SLOPE_SHIFT)})", "alibi_min": f"ALiBi (the paper's Δ={min(SLOPE_SHIFT)})",
               **{m: f"window (R·w/L_tr={ratio:g})" for m, ratio in PILOT_WINDOW_RATIO.items()}}


def pilot_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per pilot configuration (R, d, L_tr, tokens): the weakest failure on the failing
    side (lowest lower bound of r(16 L_tr)), the strongest rise on the stable side (highest upper
    bound of r), the models missing for the rule, and whether the configuration qualifies."""
    if df.empty:
        return df
    rows = []
    for (R, d, l_tr, tokens), g in df[~df["model"].str.endswith("_bos")].groupby(["R", "d", "l_tr", "tokens"],
                                                                                 sort=False):
        fail, stable = g[g["model"].isin(PILOT_FAILING)], g[g["model"].isin(PILOT_STABLE)]
        missing = sorted(set(PILOT_FAILING + PILOT_STABLE) - set(g["model"]))
        weakest = float(fail["r(16 L_tr) low"].min()) if not fail.empty else math.nan
        rise = float(stable["max r high"].max()) if not stable.empty else math.nan
        fails = not fail.empty and weakest >= BREAKS
        flat = stable.empty or rise <= EXTRAPOLATION_TOLERANCE
        rows.append({"R": R, "d": d, "l_tr": l_tr, "tokens": tokens, "minutes per model": g["minutes"].mean(),
                     "failing side: lowest r(16 L_tr) low": weakest, "stable side: highest r high": rise,
                     "missing": "; ".join(PILOT_ROLES[m] for m in missing) or "-",
                     "qualifies": bool(fails and flat and not missing)})
    return pd.DataFrame(rows).set_index(["R", "d", "l_tr", "tokens"])


def seed_spread(path=None) -> dict[str, pd.DataFrame]:
    """The second-seed check (``bench/seeds.py``): {"claims": claims 14 and 15 at each seed
    (a verdict recorded under an earlier criterion than today's reads "not decided again"),
    "table1": r(16 L_tr) of Table 1's failing side at each seed, "table3": ppl(L_tr) and
    ppl(16 L_tr) of every Table 3 model at each seed}. Empty tables when it has not run."""
    path = package_repo() / "bench" / "seeds.json" if path is None else path
    try:
        res = read_json(path)
    except (OSError, ValueError):
        return {"claims": pd.DataFrame(), "table1": pd.DataFrame(), "table3": pd.DataFrame()}
    from rflens.claims.statements import BY_ID

    def today(cid: str) -> bool:
        return res.get("criteria", {}).get(cid) == BY_ID[int(cid)].criterion

    # a verdict recorded under another criterion than today's is not a verdict of today's board:
    # it is shown as not decided, with what it read then
    claims_rows = [{"claim": int(cid), "seed": int(seed), "result": v["result"] if today(cid) else "not decided again",
                    "measured": v["measured"],
                    "criterion": "today's" if today(cid) else
                    f"an earlier one, under which it read {v['result']}: rerunning python bench/seeds.py run decides it"}
                   for cid, by_seed in res["claims"].items() for seed, v in by_seed.items()]
    from rflens.setup.presets import get

    top = f"{max(get(res['scale']).eval.length_mults)} L_tr"  # the longest length the bench measured
    t3 = pd.DataFrame(res["table3"]).pivot_table(index=["corpus", "label"], columns="seed",
                                                 values=["ppl_l_tr", "ppl_top"])
    t3 = t3.rename(columns={"ppl_l_tr": "ppl(L_tr)", "ppl_top": f"ppl({top})"}, level=0)
    t3 = t3.rename(columns=lambda seed: f"seed {seed}", level=1)
    t1 = pd.DataFrame(res["table1"]).set_index(["label", "seed"])[["r_top", "r_lo", "r_hi"]]
    t1.columns = [f"r({top})", f"r({top}) low", f"r({top}) high"]
    return {"claims": pd.DataFrame(claims_rows).set_index(["claim", "seed"]), "table1": t1, "table3": t3}
