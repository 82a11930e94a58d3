"""Attention kernels on CPU: training step time and long-context inference memory.

Run by hand (takes a few minutes on 2 cores):

    .venv/bin/python bench/kernels.py            # both parts, markdown tables on stdout
    .venv/bin/python bench/kernels.py --part train
    .venv/bin/python bench/kernels.py --part infer --lengths 4096,8192

Part 1, training: one step (forward, backward, AdamW) of the LM at two sizes, for plain
causal SDPA without a bias (the baseline), SDPA with ALiBi's fixed bias, SDPA with T5's
learnable bias, and the chunked kernel. Cases are interleaved round by round so that
machine noise hits them alike; each is reported as the ratio of its median step time to
the baseline's median measured in the same run (shared machines: trust ratios, not
absolute times).

Part 2, inference: last-token logits of an ALiBi model (R=4, H=8, d=256) at long L for
the sdpa and chunked kernels: median time and peak extra resident memory. Each case runs
in its own process and reads ru_maxrss (torch's allocations are invisible to tracemalloc).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from rflens.model import attention  # noqa: E402
from rflens.setup.config import ModelConfig  # noqa: E402
from rflens.model.transformer import TransformerLM  # noqa: E402

THREADS = 2
SIZES = {
    "R=2, H=4, d=128, L=128, batch 16": dict(n_layer=2, n_head=4, d_model=128, length=128, batch=16),
    "R=4, H=8, d=256, L=256, batch 8": dict(n_layer=4, n_head=8, d_model=256, length=256, batch=8),
}
# (label, scheme, kernel, query block of the chunked kernel or None)
TRAIN_CASES = [
    ("sdpa causal, no bias (baseline)", "nope", "sdpa", None),
    ("sdpa + fixed bias (alibi)", "alibi", "sdpa", None),
    ("sdpa + learnable bias (t5)", "t5", "sdpa", None),
    ("chunked (alibi, one block = L)", "alibi", "chunked", None),
    ("chunked (alibi, blocks of 64 queries)", "alibi", "chunked", 64),
]
VOCAB = 8192


def train_part(rounds: int) -> str:
    lines = ["| size | kernel | median step (s) | tokens/s | ratio vs baseline |", "|---|---|---|---|---|"]
    for size_name, s in SIZES.items():
        setups = []
        for label, pos, kernel, block in TRAIN_CASES:
            torch.manual_seed(0)
            cfg = ModelConfig(pos=pos, n_layer=s["n_layer"], n_head=s["n_head"], d_model=s["d_model"], vocab_size=VOCAB)
            model = TransformerLM(cfg)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            g = torch.Generator().manual_seed(1)
            idx = torch.randint(0, VOCAB, (s["batch"], s["length"] + 1), generator=g)
            setups.append((label, model, opt, idx, kernel, block))

        def step(model, opt, idx, kernel, block):
            saved = attention.QUERY_BLOCK
            attention.QUERY_BLOCK = block or saved
            try:
                t = time.perf_counter()
                logits = model(idx[:, :-1], kernel=kernel)
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), idx[:, 1:].reshape(-1))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                return time.perf_counter() - t
            finally:
                attention.QUERY_BLOCK = saved

        times = {label: [] for label, *_ in setups}
        for r in range(rounds + 2):
            for label, model, opt, idx, kernel, block in setups:
                dt = step(model, opt, idx, kernel, block)
                if r >= 2:  # two warm-up rounds
                    times[label].append(dt)
        base = statistics.median(times[setups[0][0]])
        ntok = s["batch"] * s["length"]
        for label, *_ in setups:
            med = statistics.median(times[label])
            lines.append(f"| {size_name} | {label} | {med:.3f} | {ntok / med:,.0f} | {med / base:.2f} |")
    return "\n".join(lines)


def infer_case(kernel: str, length: int, repeats: int) -> dict:
    """One inference case, in its own process: median time and peak extra RSS."""
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    cfg = ModelConfig(pos="alibi", n_layer=4, n_head=8, d_model=256, vocab_size=VOCAB)
    model = TransformerLM(cfg).eval()
    idx = torch.randint(0, VOCAB, (1, length))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    times = []
    with torch.no_grad():
        for _ in range(repeats):
            t = time.perf_counter()
            model(idx, last_only=True, kernel=kernel)
            times.append(time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"kernel": kernel, "length": length, "time_s": statistics.median(times), "peak_extra_mb": (peak - before) / 1024}


def infer_part(lengths: list[int], repeats: int) -> str:
    lines = ["| L | kernel | median time (s) | peak extra memory (MB) |", "|---|---|---|---|"]
    for length in lengths:
        for kernel in ("sdpa", "chunked"):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--infer-case", kernel, str(length),
                                  "--repeats", str(repeats)], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            lines.append(f"| {length} | {kernel} | {r['time_s']:.2f} | {r['peak_extra_mb']:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=("all", "train", "infer"), default="all")
    p.add_argument("--rounds", type=int, default=10, help="timed training steps per case (after 2 warm-up rounds)")
    p.add_argument("--lengths", default="4096", help="inference lengths, comma-separated (default 4096)")
    p.add_argument("--repeats", type=int, default=3, help="inference forward passes per case")
    p.add_argument("--infer-case", nargs=2, metavar=("KERNEL", "LENGTH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.infer_case:
        print(json.dumps(infer_case(args.infer_case[0], int(args.infer_case[1]), args.repeats)))
        return
    torch.set_num_threads(THREADS)
    print(f"torch {torch.__version__}, {THREADS} threads, fp32, vocab {VOCAB}\n")
    if args.part in ("all", "train"):
        print("Training step (forward + backward + AdamW):\n")
        print(train_part(args.rounds), "\n", flush=True)
    if args.part in ("all", "infer"):
        print("Last-token inference, ALiBi, R=4, H=8, d=256, batch 1:\n")
        print(infer_part([int(x) for x in args.lengths.split(",")], args.repeats))


if __name__ == "__main__":
    main()
