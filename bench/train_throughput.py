"""Training throughput of every positional scheme on the CPU, against causal SDPA without bias.

For each preset size (tiny, small) and each scheme, a training step as rflens.train takes
it (AdamW, gradient clipping, the model's default kernel, fp32) runs on random tokens.
Machines here are shared and noisy, so the schemes are timed in interleaved rounds (a
different order each round) and every number is the median over rounds; the ratios to
``nope`` (plain causal SDPA, no bias) come from the same run and are the numbers to
compare. MFU is model FLOPs (TransformerLM.flops_per_token: 6N plus the causal attention
work) per second over a peak of 190 GFLOP/s (fp32 matmul on 2 threads,
shared/notes/performance.md).

    .venv/bin/python bench/train_throughput.py                  # tiny and small, all schemes
    .venv/bin/python bench/train_throughput.py --sizes tiny --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rflens import scales
from rflens.config import SCHEMES
from rflens.model import TransformerLM
from rflens.train import lr_at

PEAK_FLOPS = 190e9  # fp32, 2 threads (shared/notes/performance.md)
RELATIVE = {"alibi", "window", "sandwich", "sandwich_learned", "smoothed", "kerple_log", "kerple_power", "t5"}


def make_model(size: str, pos: str):
    s = scales.get(size)
    extra = {"window": s.train.l_tr // 4} if pos == "window" else {}
    torch.manual_seed(0)
    model = TransformerLM(s.model.replace(pos=pos, **extra)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=s.train.lr, betas=(s.train.beta1, s.train.beta2))
    return model, opt


def time_steps(model, opt, batch: torch.Tensor, steps: int, cfg) -> float:
    """Seconds per training step (median of ``steps`` steps)."""
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(i, cfg)
        loss = model.loss(batch[:, :-1], batch[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_size(size: str, schemes: list[str], rounds: int, steps: int, warmup: int) -> dict:
    s = scales.get(size)
    cfg = s.train
    gen = torch.Generator().manual_seed(0)
    batch = torch.randint(0, s.model.vocab_size, (cfg.batch_size, cfg.l_tr + 1), generator=gen)
    built = {p: make_model(size, p) for p in schemes}
    for p in schemes:  # warm-up: allocator, caches, bias tables
        time_steps(*built[p], batch, warmup, cfg)
    per_step = {p: [] for p in schemes}
    for r in range(rounds):
        order = schemes[r % len(schemes):] + schemes[:r % len(schemes)]  # rotate: no scheme always runs first
        for p in order:
            per_step[p].append(time_steps(*built[p], batch, steps, cfg))
    tokens = cfg.batch_size * cfg.l_tr
    out = {}
    for p in schemes:
        sec = statistics.median(per_step[p])
        tps = tokens / sec
        flops = built[p][0].flops_per_token(cfg.l_tr)
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
    ap.add_argument("--schemes", default=",".join(SCHEMES), help="comma-separated schemes (nope is always added)")
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
        s = scales.get(size)
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
