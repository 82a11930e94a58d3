"""One CPU core's training speed: the step as it was (unfused loss, for-loop AdamW) against
the step rflens.training.trainer takes now, in the same process, interleaved rounds.

Each size builds two identical models from one seed. The baseline computes the loss as
``F.cross_entropy(model(idx), targets)`` (the (B L, v) logits whole) and steps a for-loop
AdamW; the current step is ``rflens.training.trainer.train_step`` on ``TransformerLM.loss`` (the LM
head and the loss fused in blocks of rows) with the optimizer ``rflens.training.trainer.build`` makes.
Both take the same random batches. The core's matmul peak (a 1024^3 fp32 matmul) is timed
in the same rounds, so MFU = model FLOPs per second / that peak is read against this machine
at this moment. One thread; pin the process to a core (``taskset -c 1``) and run nothing
else beside it.

    taskset -c 1 .venv/bin/python bench/train_speed.py                 # tiny and small, ~4 min
    taskset -c 1 .venv/bin/python bench/train_speed.py --profile tiny  # where a step's time goes
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch
import torch.nn.functional as F

from rflens.setup import presets
from rflens.training.trainer import build, train_step

STEPS = {"tiny": 20, "small": 2}  # timed steps per round


def peak_flops(n: int = 1024, reps: int = 5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n ** 3 * reps / (time.perf_counter() - t0)


def steppers(size: str, pos: str):
    """{'before': step(), 'now': step()} and the model's training FLOPs per token."""
    s = presets.get(size)
    mcfg, tcfg = s.model.replace(pos=pos), s.train.replace(dtype="fp32")
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, mcfg.vocab_size, (tcfg.batch_size, tcfg.l_tr + 1), generator=gen) for _ in range(4)]
    off = contextlib.nullcontext()
    cpu = torch.device("cpu")

    old_model, built_opt = build(mcfg, tcfg, cpu)
    old_opt = torch.optim.AdamW([{"params": g["params"], "weight_decay": g["weight_decay"]} for g in built_opt.param_groups],
                                lr=tcfg.lr, betas=(tcfg.beta1, tcfg.beta2), foreach=False, fused=False)

    def old_loss(idx, targets):
        logits = old_model(idx)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    new_model, new_opt = build(mcfg, tcfg, cpu)
    state = {"i": 0}

    def step(fn, model, opt):
        def run():
            state["i"] += 1
            train_step(fn, model, opt, batches[state["i"] % len(batches)], tcfg.lr, tcfg, off)
        return run

    return ({"before": step(old_loss, old_model, old_opt), "now": step(new_model.loss, new_model, new_opt)},
            new_model.flops_per_token(tcfg.l_tr), tcfg.batch_size * tcfg.l_tr)


def bench(sizes: list[str], pos: str, rounds: int) -> list[dict]:
    rows = []
    for size in sizes:
        fns, flops, tokens = steppers(size, pos)
        for fn in fns.values():  # warm-up: allocations, caches
            for _ in range(2):
                fn()
        secs = {name: [] for name in fns}
        peaks = []
        names = list(fns)
        for r in range(rounds):
            peaks.append(peak_flops())
            for name in names[r % 2:] + names[:r % 2]:
                t0 = time.perf_counter()
                for _ in range(STEPS[size]):
                    fns[name]()
                secs[name].append((time.perf_counter() - t0) / STEPS[size])
        peak = statistics.median(peaks)
        ratios = [b / n for b, n in zip(secs["before"], secs["now"])]
        for name in names:
            tps = tokens / statistics.median(secs[name])
            rows.append({"size": size, "step": name, "tokens_per_s": tps, "mfu": flops * tps / peak, "peak": peak,
                         "ratio": statistics.median(ratios) if name == "now" else 1.0,
                         "ratio_range": (min(ratios), max(ratios)) if name == "now" else (1.0, 1.0)})
    return rows


def profile(size: str, pos: str, steps: int = 20) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    fns, _, _ = steppers(size, pos)
    for name, fn in fns.items():
        for _ in range(3):
            fn()
        with prof(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
            for _ in range(steps):
                fn()
        events = sorted(p.key_averages(group_by_input_shape=True), key=lambda e: -e.self_cpu_time_total)
        total = sum(e.self_cpu_time_total for e in events)
        print(f"\n{size}, {name}: {total / steps / 1e3:.1f} ms a step (self CPU time, {steps} steps)")
        print("| op | input shapes | ms a step | share |")
        print("|---|---|---|---|")
        for e in events[:12]:
            shapes = ", ".join(str(tuple(s)) for s in e.input_shapes if s)[:60]
            print(f"| `{e.key}` | {shapes} | {e.self_cpu_time_total / steps / 1e3:.1f} | "
                  f"{100 * e.self_cpu_time_total / total:.0f}% |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--pos", default="alibi")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile", metavar="SIZE", help="print where a step's time goes (torch.profiler) and stop")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.profile:
        profile(args.profile, args.pos)
        return
    rows = bench(args.sizes.split(","), args.pos, args.rounds)
    print(f"one thread, {args.pos}, {args.rounds} interleaved rounds, medians; peak = 1024^3 fp32 matmul in the same rounds")
    print("| size | step | tokens/s | MFU | now vs before [min, max over rounds] |")
    print("|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['ratio']:.2f}x [{r['ratio_range'][0]:.2f}, {r['ratio_range'][1]:.2f}]" if r["step"] == "now" else "1.00x"
        print(f"| {r['size']} | {r['step']} | {r['tokens_per_s']:,.0f} | {100 * r['mfu']:.0f}% "
              f"(of {r['peak'] / 1e9:.0f} GFLOP/s) | {ratio} |")


if __name__ == "__main__":
    main()
