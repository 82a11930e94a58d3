"""Phenomena pilot: at which CPU-affordable size do the paper's extrapolation failures appear?

Chi et al. (ACL 2023), Table 1: ALiBi with flat slopes and windowed attention whose
theoretical receptive field R*w exceeds L_tr blow up beyond L_tr; steep slopes and small
windows stay flat. This script trains small versions of those models (the `tiny` preset:
prose, vocab 2048, d=128, H=4, lr 2e-3, 5% warm-up; batch 32 sequences; tie_weights=False
as in the paper's code) at a few depths R, token budgets and training lengths L_tr, and
measures for each model

* last-token perplexity at L_ex = L_tr x 1, 2, 4, 8, 16 on N = 512 segments (the same
  segments, hence the same scored tokens, for every model: rflens.measure.perplexity.perplexity);
* r(L) = ppl(L) / ppl(L_tr) = exp(mean_i(NLL_i(L) - NLL_i(L_tr))), with a 95% PAIRED
  bootstrap interval: 1000 replicates of resampled segment indices, drawn once (seed 0)
  and reused for every length and every model;
* the ERF (rflens.measure.receptive, 99% of the cumulative gradient) on segments of 4 x L_tr;
* training minutes and tokens/s (one thread pinned to one core while the other core ran
  other work).

Models of a configuration (R, d, L_tr, tokens):
  nope          no positions
  alibi_max     ALiBi, slope shift Delta' = 8 - log2(512 / L_tr)   (the paper's flattest, mapped)
  alibi_min     ALiBi, slope shift Delta' = -3 - log2(512 / L_tr)  (the paper's steepest, mapped)
  win1/win3/win45  windowed attention with R*w/L_tr about 1, 3, 4.5 (needs w <= L_tr)
  sin           Sinusoidal, unscaled token embeddings (the paper's code)
  sin_scaled    Sinusoidal, embeddings x sqrt(d) (rflens's default)
  rotary        Rotary
  nope_bos / win3_bos  ablation: a fixed first token (id 0, <|endoftext|>) at position 0
                of every training and evaluation input (ModelConfig.first_token)

SELECTION RULE (fixed before any number was seen; also in bench/README.md):
  A configuration qualifies when
    (failing side) every failing-side model fails: r(16 L_tr) >= 2 -- read two ways:
        "point":  the estimate r(16 L_tr) >= 2;
        "strict": the lower 95% bound of r(16 L_tr) >= 2;
      failing side = alibi_max (slope-shift sweep; the same-slope sweep's flattest slope is
      the same regime), win3 and win45;
    (stable side) every stable-side model stays flat: the upper 95% bound of r(L) <= 1.10
      at every L_ex; stable side = win1 and alibi_min.
  All five models must have been trained at the configuration. win45 exists only for
  R >= 5 (w <= L_tr means R*w/L_tr <= R), so a configuration with R <= 4 cannot qualify;
  such configurations are still reported ("partial": all the models that exist pass).
  Among qualifying configurations the rule picks the cheapest: fewest training minutes
  per model (mean over its models). If none qualifies, none is picked and the trend is
  reported.

Usage (one thread on core 0; results are cached in the run store, a rerun reuses them):
  taskset -c 0 env OMP_NUM_THREADS=1 python bench/phenomena.py run --stage corner
  python bench/phenomena.py report          # table + rule verdicts -> bench/README.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

import numpy as np

from rflens.experiments.tables import PILOT_FAILING as FAILING, PILOT_STABLE as STABLE  # the rule's two sides
from rflens.measure.criterion import BREAKS as FAIL_R, EXTRAPOLATION_TOLERANCE as STABLE_R
from rflens.setup.presets import mapped_exponents
from rflens.setup import presets

HERE = Path(__file__).resolve().parent
OUT_JSON = HERE / "phenomena.json"
README = HERE / "README.md"
N_SEGMENTS = 512
MULTS = (1, 2, 4, 8, 16)
N_BOOT = 1000
BOOT_SEED = 0
ERF_SAMPLES = 64
TOKENS = {"1M": 1_000_000, "3M": 3_000_000, "8M": 8_000_000}
BATCH = 32
D_MODEL = 128

# Stages, in the order they were run; each adds models at one configuration.
# (R, L_tr, tokens, d, models, why)
STAGES = {
    # the cheapest corner that can host a failing window (R*w/L_tr = 3 needs R >= 3)
    "corner": (4, 32, "1M", D_MODEL,
               ["nope", "alibi_max", "alibi_min", "win1", "win3", "sin", "sin_scaled", "rotary"],
               "cheapest corner with a failing-side window; all schemes once"),
    # one knob at a time from the corner, failing-side models (and NoPE) only
    "ltr": (4, 64, "1M", D_MODEL, ["nope", "alibi_max", "win3"], "knob: L_tr 32 -> 64"),
    "depth": (6, 32, "1M", D_MODEL, ["nope", "alibi_max", "win3", "win45"], "knob: depth R 4 -> 6"),
    "tokens": (4, 32, "3M", D_MODEL, ["nope", "alibi_max", "win3"], "knob: tokens 1M -> 3M"),
    # move along the knob that moved r(16 L_tr) most (tokens: NoPE 1.24 -> 1.47, ALiBi
    # Delta'max 1.11 -> 1.32 from 1M to 3M; depth R 4 -> 6 and L_tr 32 -> 64 moved it by
    # <= 0.05 or lowered it). The budget allows one 8M model (~22 min): the rule's ALiBi
    # failing side. 8M tokens are 2.65 passes over the 3.0M-token prose train split.
    "tokens8": (4, 32, "8M", D_MODEL, ["alibi_max"], "move along tokens: 3M -> 8M (budget: one model)"),
    # labelled ablation at the corner (the cheapest configuration): a fixed first token
    "bos": (4, 32, "1M", D_MODEL, ["nope_bos", "win3_bos"], "ablation: fixed first token (id 0) at the corner"),
    # width: the book's preset must train ~40 models in ~25 minutes on 2 cores; d = 64 trains
    # ~2x the tokens per second of d = 128 at R = 4. Does a narrower model keep r at equal
    # tokens, so that the tokens it buys move r as the tokens knob did?
    "narrow": (4, 32, "1M", 64, ["nope", "alibi_max", "alibi_min", "win1", "win3", "sin_scaled"],
               "knob: width d 128 -> 64 at the corner"),
    "narrow3": (4, 32, "3M", 64, ["nope", "alibi_max", "win3"], "width d = 64 at 3M tokens"),
}


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%H:%M:%S")


def log(msg: str) -> None:
    print(f"[{now()} UTC] {msg}", flush=True)


def window_for(ratio: float, R: int, l_tr: int) -> int | None:
    w = max(1, round(ratio * l_tr / R))
    return w if w <= l_tr else None


def model_overrides(spec: str, R: int, l_tr: int, d: int) -> tuple[str, dict] | None:
    """(pos, overrides) of model ``spec`` at depth R and L_tr, or None if it cannot exist."""
    base = {"n_layer": R, "d_model": d, "tie_weights": False}
    bos = spec.endswith("_bos")
    if bos:
        spec = spec[: -len("_bos")]
        base["first_token"] = 0
    if spec == "nope":
        return "nope", base
    if spec == "alibi_max":
        return "alibi", {**base, "slope_shift": mapped_exponents((8,), l_tr)[0]}
    if spec == "alibi_min":
        return "alibi", {**base, "slope_shift": mapped_exponents((-3,), l_tr)[0]}
    if spec in ("win1", "win3", "win45"):
        w = window_for({"win1": 1.0, "win3": 3.0, "win45": 4.5}[spec], R, l_tr)
        return None if w is None else ("window", {**base, "window": w})
    if spec == "sin":
        return "sinusoidal", {**base, "scale_embeddings": False}
    if spec == "sin_scaled":
        return "sinusoidal", {**base, "scale_embeddings": True}
    if spec == "rotary":
        return "rotary", base
    raise SystemExit(f"unknown model spec {spec!r}")


def model_id(R, d, l_tr, tokens, spec) -> str:
    return f"R{R}-d{d}-L{l_tr}-T{tokens}-{spec}"


def ratios(nll: np.ndarray) -> dict:
    """r(L) and its paired 95% bootstrap interval from per-segment NLLs (len(MULTS), N),
    by rflens.measure.intervals.paired_ratio (the book's statistics). The stored results of this pilot
    were computed with the same estimator and its own seeding of the segment draws."""
    from rflens.measure.intervals import paired_ratio

    r, lo, hi = paired_ratio(nll, base=0, seed=BOOT_SEED, n_boot=N_BOOT)
    diff = nll - nll[0:1]  # (lengths, N): NLL_i(L) - NLL_i(L_tr)
    return {"r": r.tolist(), "r_lo": lo.tolist(), "r_hi": hi.tolist(), "diff_sd": diff.std(1, ddof=1).tolist()}


def load_results() -> dict:
    if OUT_JSON.is_file():
        return json.loads(OUT_JSON.read_text())
    return {"meta": {}, "models": {}}


def save_results(res: dict) -> None:
    from rflens.store.runs import write_json

    write_json(OUT_JSON, res)


def run_model(R, d, l_tr, tokens, spec, stage) -> dict | None:
    import torch

    from rflens.measure import perplexity, receptive
    from rflens.setup.config import EvalConfig
    from rflens.store import runs

    got = model_overrides(spec, R, l_tr, d)
    mid = model_id(R, d, l_tr, tokens, spec)
    if got is None:
        log(f"SKIP {mid}: no window w <= L_tr gives this R*w/L_tr")
        return None
    pos, over = got
    steps = max(1, round(TOKENS[tokens] / (BATCH * l_tr)))
    over = {**over, "l_tr": l_tr, "batch_size": BATCH, "steps": steps}
    log(f"START {mid}: {pos} {over}")
    run = runs.get_run(presets.get("tiny"), pos, "prose", progress=False, **over)
    m = run.metrics
    log(f"  trained {mid} ({'reused' if run.reused else 'new'}): {m['train_seconds'] / 60:.2f} min, "
        f"{m['tokens_per_s']:,.0f} tok/s, val loss {m['val_loss']:.3f}")
    ev = EvalConfig(length_mults=MULTS, n_segments=N_SEGMENTS, batch_size=32, erf_length_mult=4,
                    erf_samples=ERF_SAMPLES, erf_threshold=0.99, seed=0)
    t1 = time.perf_counter()
    ppl = perplexity.perplexity(run, eval_cfg=ev, progress=False)
    erf = receptive.receptive_field(run, eval_cfg=ev, progress=False)
    t_eval = time.perf_counter() - t1
    nll = np.asarray(ppl["nll_per_segment"], dtype=np.float64)
    rr = ratios(nll)
    row = {
        "id": mid, "stage": stage, "spec": spec, "pos": pos, "R": R, "d": d, "l_tr": l_tr, "tokens_label": tokens,
        "tokens": steps * BATCH * l_tr, "steps": steps, "settings": over, "run_key": run.key,
        "window": over.get("window"), "rw_over_ltr": (R * over["window"] / l_tr) if over.get("window") else None,
        "slope_shift": over.get("slope_shift"),
        "lengths": ppl["lengths"], "ppl": ppl["ppl"], "ppl_ci_low": ppl["ci_low"], "ppl_ci_high": ppl["ci_high"],
        **rr,
        "erf": erf["erf"], "erf_share_in_ltr": erf["share_in_ltr"], "erf_length": erf["length"],
        "erf_theoretical": erf["theoretical"],
        "val_loss": m["val_loss"], "train_minutes": m["train_seconds"] / 60, "tokens_per_s": m["tokens_per_s"],
        "eval_seconds": t_eval, "threads": m.get("threads"), "torch_threads_now": torch.get_num_threads(),
    }
    r = row["r"]
    log(f"DONE {mid}: ppl(L_tr) {row['ppl'][0]:.1f}  r = " + " ".join(f"{x:.3f}" for x in r[1:])
        + f"  r16 CI [{row['r_lo'][-1]:.3f}, {row['r_hi'][-1]:.3f}]  ERF {row['erf']}  "
        f"train {row['train_minutes']:.2f} min  eval {t_eval:.0f} s")
    return row


def cmd_run(args) -> int:
    import torch

    torch.set_num_threads(1)
    res = load_results()
    res["meta"] = {
        "machine": "one thread pinned to one core while the other core ran other work",
        "torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "n_segments": N_SEGMENTS, "length_mults": list(MULTS), "n_boot": N_BOOT, "boot_seed": BOOT_SEED,
        "erf_samples": ERF_SAMPLES, "erf_threshold": 0.99, "batch": BATCH, "scale": "tiny", "corpus": "prose",
        "dtype": "fp32", "stages": {k: {"R": v[0], "l_tr": v[1], "tokens": v[2], "d": v[3], "models": v[4],
                                        "why": v[5]} for k, v in STAGES.items()},
    }
    for stage in args.stage:
        R, l_tr, tokens, d, specs, why = STAGES[stage]
        if args.models:
            specs = [s for s in specs if s in args.models.split(",")]
        log(f"STAGE {stage}: R={R} d={d} L_tr={l_tr} tokens={tokens} models={specs} ({why})")
        for spec in specs:
            row = run_model(R, d, l_tr, tokens, spec, stage)
            if row is not None:
                res = load_results() | {"meta": res["meta"]}
                res["models"][row["id"]] = row
                save_results(res)
    log("ALL DONE")
    return 0


# ----------------------------------------------------------------------------- report

def verdicts(models: dict) -> list[dict]:
    """The selection rule, applied to every configuration that has models."""
    configs: dict = {}
    for row in models.values():
        configs.setdefault((row["R"], row["d"], row["l_tr"], row["tokens_label"]), {})[row["spec"]] = row
    out = []
    for (R, d, l_tr, tok), rows in sorted(configs.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][3])):
        fail_point, fail_strict, stable, missing = [], [], [], []
        for spec in FAILING:
            if spec not in rows:
                missing.append(spec)
                continue
            fail_point.append(rows[spec]["r"][-1] >= FAIL_R)
            fail_strict.append(rows[spec]["r_lo"][-1] >= FAIL_R)
        for spec in STABLE:
            if spec not in rows:
                missing.append(spec)
                continue
            stable.append(max(rows[spec]["r_hi"]) <= STABLE_R)
        complete = not missing
        minutes = float(np.mean([r["train_minutes"] for r in rows.values()]))
        out.append({
            "config": f"R={R}, d={d}, L_tr={l_tr}, {tok} tokens", "R": R, "d": d, "l_tr": l_tr, "tokens": tok,
            "minutes_per_model": minutes, "missing": missing,
            "qualifies_point": complete and all(fail_point) and all(stable),
            "qualifies_strict": complete and all(fail_strict) and all(stable),
            "partial_point": bool(fail_point) and all(fail_point) and all(stable),
            "partial_strict": bool(fail_strict) and all(fail_strict) and all(stable),
            "failing_point": dict(zip([s for s in FAILING if s in rows], fail_point)),
            "failing_strict": dict(zip([s for s in FAILING if s in rows], fail_strict)),
            "stable": dict(zip([s for s in STABLE if s in rows], stable)),
        })
    return out


def fmt_table(models: dict) -> str:
    head = ("| R | d | L_tr | tokens | model | w (R*w/L_tr) / Δ' | val loss | ppl(L_tr) | r(2) | r(4) | r(8) | r(16) "
            "| 95% paired CI r(16) | ERF (share in L_tr) | train min | tok/s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    order = {s: i for i, s in enumerate(["nope", "nope_bos", "alibi_max", "alibi_min", "win1", "win3", "win3_bos",
                                         "win45", "sin", "sin_scaled", "rotary"])}
    rows = sorted(models.values(), key=lambda r: (r["R"], r["l_tr"], TOKENS[r["tokens_label"]], r["d"],
                                                   order.get(r["spec"], 99)))
    for r in rows:
        if r["window"]:
            knob = f"w={r['window']} ({r['rw_over_ltr']:.2f})"
        elif r["slope_shift"] is not None:
            knob = f"Δ'={r['slope_shift']:g}"
        else:
            knob = ""
        lines.append(
            f"| {r['R']} | {r['d']} | {r['l_tr']} | {r['tokens'] / 1e6:.2f}M | {r['spec']} | {knob} | {r['val_loss']:.3f} "
            f"| {r['ppl'][0]:.1f} | {r['r'][1]:.3f} | {r['r'][2]:.3f} | {r['r'][3]:.3f} | {r['r'][4]:.3f} "
            f"| [{r['r_lo'][4]:.3f}, {r['r_hi'][4]:.3f}] | {r['erf']} ({r['erf_share_in_ltr']:.2f}) "
            f"| {r['train_minutes']:.2f} | {r['tokens_per_s']:,.0f} |")
    return "\n".join(lines)


def fmt_verdicts(vs: list[dict]) -> str:
    lines = ["| configuration | min/model | failing side fails (point) | failing side fails (strict) "
             "| stable side holds (upper CI <= 1.10) | missing | verdict |", "|---|---|---|---|---|---|---|"]
    for v in vs:
        def yn(d):
            return ", ".join(f"{k} {'yes' if ok else 'no'}" for k, ok in d.items()) or "-"
        verdict = ("qualifies (strict)" if v["qualifies_strict"] else "qualifies (point only)" if v["qualifies_point"]
                   else "partial pass (point)" if v["partial_point"] else "does not qualify")
        lines.append(f"| {v['config']} | {v['minutes_per_model']:.2f} | {yn(v['failing_point'])} "
                     f"| {yn(v['failing_strict'])} | {yn(v['stable'])} | {', '.join(v['missing']) or '-'} | {verdict} |")
    q = [v for v in vs if v["qualifies_point"]]
    qs = [v for v in vs if v["qualifies_strict"]]
    pick = min(q, key=lambda v: v["minutes_per_model"]) if q else None
    pick_s = min(qs, key=lambda v: v["minutes_per_model"]) if qs else None
    lines.append("")
    lines.append(f"Rule's pick (point reading): {pick['config'] if pick else 'none'}; "
                 f"strict reading: {pick_s['config'] if pick_s else 'none'}.")
    return "\n".join(lines)


def cmd_report(args) -> int:
    res = load_results()
    models = res["models"]
    vs = verdicts(models)
    res["verdicts"] = vs
    save_results(res)
    block = ("<!-- phenomena-table:start -->\n" + fmt_table(models) + "\n\n" + fmt_verdicts(vs)
             + "\n<!-- phenomena-table:end -->")
    text = README.read_text()
    a, b = "<!-- phenomena-table:start -->", "<!-- phenomena-table:end -->"
    if a in text and b in text:
        text = text[: text.index(a)] + block + text[text.index(b) + len(b):]
        README.write_text(text)
    print(block)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--stage", nargs="+", required=True, choices=list(STAGES))
    r.add_argument("--models", default=None, help="comma-separated subset of the stage's models")
    sub.add_parser("report")
    args = ap.parse_args()
    return cmd_run(args) if args.cmd == "run" else cmd_report(args)


if __name__ == "__main__":
    sys.exit(main())
