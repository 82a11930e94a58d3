"""Training throughput of every positional scheme on the CPU, against causal SDPA without bias.

For each preset size (tiny, small) and each scheme, a training step as rflens.training.trainer takes
it (AdamW, gradient clipping, the model's default kernel, fp32) runs on random tokens.
Machines here are shared and noisy, so the schemes are timed in interleaved rounds (a
different order each round) and every number is the median over rounds; the ratios to
``nope`` (plain causal SDPA, no bias) come from the same run and are the numbers to
compare. MFU is model FLOPs (TransformerLM.flops_per_token: 6N plus the causal attention
work) per second over a peak of 190 GFLOP/s (fp32 matmul on 2 threads, measured on these
machines; bench/README.md).

    .venv/bin/python bench/train_throughput.py                  # tiny and small, all schemes
    .venv/bin/python bench/train_throughput.py --sizes tiny --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rflens.experiments.speed import time_steps
from rflens.setup import presets
from rflens.setup.schemes import NAMES, RELATIVE

PEAK_FLOPS = 190e9  # fp32, 2 threads (bench/README.md)


def model_cfg(size: str, pos: str):
    s = presets.get(size)
    extra = {"window": s.train.l_tr // 4} if pos == "window" else {}
    return s.model.replace(pos=pos, **extra)


def bench_size(size: str, schemes: list[str], rounds: int, steps: int, warmup: int) -> dict:
    """Median over rounds of the seconds per training step, side by side (rflens.experiments.speed)."""
    from rflens.model.transformer import TransformerLM

    s = presets.get(size)
    cfg = s.train
    cfgs = {p: model_cfg(size, p) for p in schemes}
    seconds = time_steps(cfgs, cfg, rounds=rounds, steps=steps, warmup=warmup)
    tokens = cfg.batch_size * cfg.l_tr
    out = {}
    for p in schemes:
        sec = statistics.median(seconds[p])
        tps = tokens / sec
        with torch.device("meta"):
            flops = TransformerLM(cfgs[p]).flops_per_token(cfg.l_tr)
        out[p] = {"tokens_per_s": tps, "mfu": flops * tps / PEAK_FLOPS, "seconds_per_step": sec}
    base = out.get("nope")
    for p in schemes:
        out[p]["ratio"] = out[p]["tokens_per_s"] / base["tokens_per_s"] if base else float("nan")
    return out


def table(results: dict) -> str:
    sizes = list(results)
    head = "| scheme | " + " | ".join(f"{s} tokens/s | {s} MFU | {s} vs nope" for s in sizes) + " |"
    sep = "|---|" + "---|---|---|" * len(sizes)
    rows = [head, sep]
    for p in next(iter(results.values())):
        cells = []
        for s in sizes:
            r = results[s][p]
            flag = " (<0.90)" if p in RELATIVE and r["ratio"] < 0.90 else ""
            cells.append(f"{r['tokens_per_s']:,.0f} | {100 * r['mfu']:.0f}% | {r['ratio']:.2f}x{flag}")
        rows.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="tiny,small", help="comma-separated presets (default tiny,small)")
    ap.add_argument("--schemes", default=",".join(NAMES), help="comma-separated schemes (nope is always added)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    ap.add_argument("--steps", type=int, default=None, help="timed steps a round (default: 10 tiny, 4 small)")
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    schemes = args.schemes.split(",")
    if "nope" in schemes:
        schemes.remove("nope")
    schemes = ["nope"] + schemes
    results = {}
    for size in args.sizes.split(","):
        s = presets.get(size)
        steps = args.steps or (10 if s.train.l_tr * s.train.batch_size <= 2048 else 4)
        t0 = time.time()
        results[size] = bench_size(size, schemes, args.rounds, steps, args.warmup)
        m = s.model
        print(f"# {size}: R={m.n_layer}, H={m.n_head}, d={m.d_model}, vocab {m.vocab_size}, L_tr={s.train.l_tr}, "
              f"batch {s.train.batch_size}; {args.rounds} rounds x {steps} steps ({time.time() - t0:.0f} s)", flush=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, fp32, peak {PEAK_FLOPS / 1e9:.0f} GFLOP/s")
    print(table(results))


if __name__ == "__main__":
    main()
