"""Time and peak memory of last-token evaluation at long lengths, against a naive path.

The last-token protocol (Chi et al., ACL 2023, footnote 2) evaluates at L_ex up to
16 x L_tr. A naive evaluation runs the whole model with the (1, H, L, L) attention bias
materialised (SDPA with a float mask) and the LM head at every position, then keeps the
last position. ``rflens.measure.perplexity.last_token_nll`` computes only the last position's logits
and switches to the memory-bounded chunked attention kernel for long inputs.

Each (path, length) case runs in a fresh subprocess so that its peak resident memory
(``ru_maxrss``) is its own: the reported peak is ru_maxrss at the end minus the resident
memory just before the evaluation (model, data and imports excluded). The time is the
median of ``--repeats`` runs of both paths alternated in one process (so that a change
of machine load hits both), wall-clock and process CPU time.

    .venv/bin/python bench/eval_memory.py                     # small preset, 1/4/16 x L_tr + 4096, 8192
    .venv/bin/python bench/eval_memory.py --lengths 128,512,2048 --batch 4

Random weights: time and memory do not depend on what the model has learnt.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def setup(length: int, batch: int, pos: str):
    import numpy as np
    import torch
    import torch.nn.functional as F

    from rflens.measure import perplexity
    from rflens.model.transformer import TransformerLM
    from rflens.setup.config import ModelConfig

    torch.manual_seed(0)
    # the small preset's model: R = 4, H = 8, d = 256, v = 8192 (rflens.setup.presets)
    kw = {"window": 128} if pos == "window" else {}
    model = TransformerLM(ModelConfig(pos=pos, n_layer=4, n_head=8, d_model=256, vocab_size=8192, **kw)).eval()
    segments = np.random.default_rng(0).integers(0, 8192, size=(batch, length + 1))

    def naive():
        with torch.no_grad():
            idx = torch.as_tensor(segments[:, :-1])
            logits = model(idx, kernel="sdpa")  # (B, L, v), the (1, H, L, L) bias inside
            return F.cross_entropy(logits[:, -1], torch.as_tensor(segments[:, -1]), reduction="none").numpy()

    def ours():
        return perplexity.last_token_nll(model, segments, [length], batch_size=batch, progress=False)[0]

    return {"naive": naive, "rflens": ours}, perplexity.choose_kernel(model, length)


def memory_case(path: str, length: int, batch: int, pos: str) -> dict:
    """One evaluation in this (fresh) process: its peak memory above the resident set before."""
    fns, kernel = setup(length, batch, pos)
    base = rss_kb()
    t0 = time.perf_counter()
    nll = fns[path]()
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base  # KiB on Linux
    return {"path": path, "length": length, "peak_mb": peak / 1024, "first_s": wall, "mean_nll": float(nll.mean()),
            "kernel": kernel if path == "rflens" else "sdpa"}


def timing_case(length: int, batch: int, pos: str, repeats: int) -> dict:
    """Both paths in one process, alternated, so that a change of machine load hits both."""
    fns, _ = setup(length, batch, pos)
    wall = {"naive": [], "rflens": []}
    cpu = {"naive": [], "rflens": []}
    for _ in range(repeats):
        for path in ("naive", "rflens"):
            t0, c0 = time.perf_counter(), time.process_time()
            fns[path]()
            wall[path].append(time.perf_counter() - t0)
            cpu[path].append(time.process_time() - c0)
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    return {"length": length, **{f"{p}_wall_s": med(wall[p]) for p in wall}, **{f"{p}_cpu_s": med(cpu[p]) for p in cpu}}


def _sub(args, case: str) -> dict:
    cmd = [sys.executable, __file__, "--case", case, "--batch", str(args.batch), "--repeats", str(args.repeats),
           "--pos", args.pos, "--threads", str(args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": ((out.stderr.strip().splitlines() or ["?"])[-1])[:80]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="128,512,2048,4096,8192", help="L_ex values (L_tr = 128)")
    p.add_argument("--batch", type=int, default=8, help="segments per evaluation, EvalConfig.batch_size (default 8)")
    p.add_argument("--repeats", type=int, default=2, help="timed runs per path, alternated; the median is reported")
    p.add_argument("--pos", default="alibi", help="positional scheme (default alibi)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)  # internal: naive|rflens|time,length
    args = p.parse_args()
    if args.case:
        import torch

        torch.set_num_threads(args.threads)
        kind, length = args.case.split(",")
        if kind == "time":
            res = timing_case(int(length), args.batch, args.pos, args.repeats)
        else:
            res = memory_case(kind, int(length), args.batch, args.pos)
        print(json.dumps(res))
        return 0
    rows = []
    for length in [int(x) for x in args.lengths.split(",")]:
        row = {"length": length}
        for path in ("naive", "rflens"):
            row[path] = _sub(args, f"{path},{length}")
        row["time"] = _sub(args, f"time,{length}")
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"\nlast-token evaluation of {args.batch} segments, small preset model (R=4, H=8, d=256, v=8192, "
          f"{args.pos}, random weights), {args.threads} threads, L_tr = 128. Peak: extra resident memory of the "
          f"first evaluation in a fresh process. Time: median of {args.repeats} alternated runs (wall / CPU).\n")
    print("| L_ex | L_ex/L_tr | naive peak | rflens peak | peak ratio | naive time | rflens time | time ratio (wall / CPU) | rflens kernel | mean NLL diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        a, b, t, length = row["naive"], row["rflens"], row["time"], row["length"]
        if "error" in a or "error" in b or "error" in t:
            err = a.get("error") or b.get("error") or t.get("error")
            print(f"| {length} | {length / 128:g} | {err} | | | | | | | |")
            continue
        print(f"| {length} | {length / 128:g} | {a['peak_mb']:.0f} MB | {b['peak_mb']:.0f} MB "
              f"| {b['peak_mb'] / max(a['peak_mb'], 1e-9):.2f} "
              f"| {t['naive_wall_s']:.2f} s / {t['naive_cpu_s']:.2f} s | {t['rflens_wall_s']:.2f} s / {t['rflens_cpu_s']:.2f} s "
              f"| {t['rflens_wall_s'] / t['naive_wall_s']:.2f} / {t['rflens_cpu_s'] / t['naive_cpu_s']:.2f} "
              f"| {b['kernel']} | {abs(a['mean_nll'] - b['mean_nll']):.1e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
