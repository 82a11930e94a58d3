"""Learnable biases at full speed: a training step of each learnable scheme, three ways.

For every learnable relative scheme (KERPLE, T5, Sandwich with learned ratios) at the tiny
and small presets, one training step (rflens.training.trainer.train_step: forward, backward,
clipping, AdamW) is timed

* *fused*: the default, the bias gradient through ``rflens.model.attention.BiasedAttention``
  (the probabilities kept from the forward pass, the backward pass written out);
* *math*: the same model through SDPA's math path (``attention.FUSED_BIAS_GRAD = False``,
  how a mask that needs a gradient is handled by torch);
* *fixed*: the same scheme with its bias parameters frozen (no gradient reaches the mask:
  SDPA's fused kernel forward and backward), the speed a learnable bias is measured against.

All cases run in one process on the same random batch. In each round, the three cases of
one scheme run back to back in a rotating order, and the round's speed ratios to *fixed*
are paired values: the table gives their median and quartiles over rounds.

    .venv/bin/python bench/bias_grad.py                      # tiny and small, ~8 min
    .venv/bin/python bench/bias_grad.py --sizes tiny --rounds 30
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from rflens.model import attention
from rflens.setup import presets
from rflens.setup.schemes import LEARNABLE
from rflens.training.trainer import build, lr_at, train_step

CASES = ("fused", "math", "fixed")


def bench_size(size: str, schemes: list[str], rounds: int, steps: int) -> dict:
    s = presets.get(size)
    cfg = s.train
    gen = torch.Generator().manual_seed(0)
    batch = torch.randint(0, s.model.vocab_size, (cfg.batch_size, cfg.l_tr + 1), generator=gen)
    built = {}
    for pos in schemes:
        for case in CASES:
            model, opt = build(s.model.replace(pos=pos), cfg, torch.device("cpu"))
            if case == "fixed":
                for p in model.pos.parameters():
                    p.requires_grad_(False)
            built[(pos, case)] = (model, opt)

    def run(key, n):
        model, opt = built[key]
        attention.FUSED_BIAS_GRAD = key[1] != "math"
        try:
            for i in range(n):
                train_step(model.loss, model, opt, batch, lr_at(i, cfg), cfg, contextlib.nullcontext())
        finally:
            attention.FUSED_BIAS_GRAD = True

    for key in built:
        run(key, 2)  # warm-up
    # per scheme and round, the three cases back to back in a rotating order: the ratio of
    # each round is paired (a slow moment of the machine falls on all three alike)
    ratios = {key: [] for key in built}
    for r in range(rounds):
        for pos in schemes:
            order = CASES[r % 3:] + CASES[:r % 3]
            sec = {}
            for case in order:
                t0 = time.perf_counter()
                run((pos, case), steps)
                sec[case] = (time.perf_counter() - t0) / steps
            for case in CASES:
                ratios[(pos, case)].append((sec["fixed"] / sec[case], sec[case]))
    return ratios


def summary(values: list[tuple[float, float]]) -> tuple[float, float, float, float]:
    """Median seconds a step; median speed ratio to fixed and its quartiles over rounds."""
    q = statistics.quantiles([v[0] for v in values], n=4)
    return statistics.median(v[1] for v in values), q[1], q[0], q[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=None, help="timed steps a case and round (default: 5 tiny, 2 small)")
    args = ap.parse_args()
    schemes = list(LEARNABLE)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, fp32, {args.rounds} rounds\n")
    print("| size | scheme | fixed (s/step) | math (s/step) | fused (s/step) | math vs fixed [IQR] "
          "| fused vs fixed [IQR] |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        steps = args.steps or (5 if size == "tiny" else 2)
        ratios = bench_size(size, schemes, args.rounds, steps)
        for pos in schemes:
            fixed, _, _, _ = summary(ratios[(pos, "fixed")])
            math, rm, lm, hm = summary(ratios[(pos, "math")])
            fused, rf, lf, hf = summary(ratios[(pos, "fused")])
            print(f"| {size} | {pos} | {fixed:.4f} | {math:.4f} | {fused:.4f} | {rm:.2f}x [{lm:.2f}, {hm:.2f}] | "
                  f"{rf:.2f}x [{lf:.2f}, {hf:.2f}] |", flush=True)


if __name__ == "__main__":
    main()
