"""One prepared check of the GPU path, in one go on a machine with one CUDA GPU (< 8 minutes).

1. FlexAttention against SDPA, forward and backward, for every scheme: logits and every
   parameter gradient of a two-layer model at the paper's width, fp32 and bf16.
2. Compiled training at the paper's shape (R = 12, H = 12, d = 768, L_tr = 512, bf16,
   FlexAttention): tokens/s over timed steps and the MFU against the device's bf16 peak.
3. One ``small`` model trained end to end through the run store, with its time.
4. The ``small`` book's training time estimated from that model's tokens/s (every model of
   ``rflens.experiments.book_models.model_plan(presets.get("small"))``, by its tokens).

    bash bench/gpu_check.sh               # everything, on the GPU
    bash bench/gpu_check.sh --dry-run     # on any machine: every step up to the first CUDA call

The dry run builds every configuration, model (on the meta device) and plan the check uses,
so a mistake in them shows before a GPU is spent on it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from rflens.setup import presets

# dense bf16 peak FLOP/s by device name (vendor data sheets); MFU is left out for others
BF16_PEAK = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12, "A10": 125e12}
TOL = {"fp32": 2e-3, "bf16": 5e-2}  # max |a - b| / (max |b| + 1e-6), logits and gradients
PAPER = dict(n_layer=12, n_head=12, d_model=768)


def log(msg: str) -> None:
    print(msg, flush=True)


def flex_cases():
    """(scheme, ModelConfig) for the FlexAttention check: every scheme, 2 layers, d = 768."""
    from rflens.setup.config import ModelConfig
    from rflens.setup.schemes import NAMES

    out = []
    for pos in NAMES:
        extra = {"window": 96} if pos == "window" else {}
        out.append((pos, ModelConfig(pos=pos, n_layer=2, n_head=12, d_model=768, vocab_size=8192, **extra)))
    return out


def rel_err(a, b) -> float:
    return float((a.float() - b.float()).abs().max() / (b.float().abs().max() + 1e-6))


def check_flex(device, length: int = 512, batch: int = 4) -> list[dict]:
    import torch

    from rflens.model.transformer import TransformerLM

    rows = []
    for pos, cfg in flex_cases():
        for dtype in ("fp32", "bf16"):
            torch.manual_seed(0)
            model = TransformerLM(cfg).to(device)
            idx = torch.randint(0, cfg.vocab_size, (batch, length + 1), device=device)
            got = {}
            for kernel in ("sdpa", "flex"):
                model.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bf16"):
                    loss = model.loss(idx[:, :-1], idx[:, 1:], kernel=kernel)
                    logits = model(idx[:, :-1], kernel=kernel)
                loss.backward()
                got[kernel] = (logits.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()
                                                 if p.grad is not None})
            err = max([rel_err(got["flex"][0], got["sdpa"][0])]
                      + [rel_err(got["flex"][1][n], g) for n, g in got["sdpa"][1].items()])
            ok = err <= TOL[dtype]
            rows.append({"pos": pos, "dtype": dtype, "max_rel_err": err, "ok": ok})
            log(f"  flex vs sdpa  {pos:17s} {dtype}: max rel. error {err:.2e} ({'ok' if ok else 'FAIL'})")
    return rows


def paper_train_config():
    from rflens.setup import presets

    full = presets.get("full")
    return full.model.replace(pos="alibi"), full.train.replace(dtype="bf16", compile=True, batch_size=8)


def check_compiled(device, steps: int = 100) -> dict:
    import torch

    from rflens.training.trainer import build, lr_at, train_step

    mcfg, tcfg = paper_train_config()
    model, opt = build(mcfg, tcfg, device)
    model.train()
    loss_fn = torch.compile(model.loss)
    batch = torch.randint(0, mcfg.vocab_size, (tcfg.batch_size, tcfg.l_tr + 1), device=device)
    amp = torch.autocast("cuda", dtype=torch.bfloat16)
    t0 = time.perf_counter()
    for i in range(3):  # compilation
        train_step(loss_fn, model, opt, batch, lr_at(i, tcfg), tcfg, amp)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    times = []
    for i in range(steps):
        t = time.perf_counter()
        train_step(loss_fn, model, opt, batch, lr_at(i, tcfg), tcfg, amp)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    sec = statistics.median(times)
    tps = tcfg.batch_size * tcfg.l_tr / sec
    name = torch.cuda.get_device_name(device)
    peak = next((v for k, v in BF16_PEAK.items() if k in name), None)
    flops = model.flops_per_token(tcfg.l_tr) * tps
    out = {"device": name, "compile_s": compile_s, "step_s": sec, "tokens_per_s": tps,
           "mfu": flops / peak if peak else None, "peak_flops": peak}
    mfu = f"{100 * out['mfu']:.0f}% of {peak / 1e12:.0f} TFLOP/s" if peak else "n/a (unknown peak)"
    log(f"  compiled training, paper shape, batch {tcfg.batch_size} x {tcfg.l_tr}, bf16, flex: "
        f"{tps:,.0f} tokens/s, {sec * 1e3:.1f} ms/step, MFU {mfu}; compile {compile_s:.0f} s")
    return out


def small_model_item() -> dict:
    return {"pos": "alibi", "corpus": "prose", "overrides": {}}


def check_small(store: Path) -> dict:
    import os

    from rflens.store.runs import get_run

    os.environ["RFLENS_RUNS"] = str(store)
    it = small_model_item()
    t0 = time.perf_counter()
    run = get_run(presets.get("small"), it["pos"], it["corpus"], it["overrides"], progress=True)
    seconds = time.perf_counter() - t0
    tps = run.metrics.get("tokens_per_s")
    log(f"  small model ({it['pos']}) trained end to end in {seconds:.0f} s ({tps:,.0f} tokens/s)")
    return {"seconds": seconds, "tokens_per_s": tps}


def book_tokens(scale: str = "small") -> list[int]:
    from rflens.experiments import book_models

    return [row["tokens"] for row in book_models.training_cost(presets.get(scale))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="stop before the first CUDA call")
    ap.add_argument("--steps", type=int, default=100, help="timed steps of the compiled training")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args()
    import torch

    from rflens.model.transformer import TransformerLM

    log(f"torch {torch.__version__}; python {sys.version.split()[0]}")
    cases = flex_cases()
    with torch.device("meta"):
        for _, cfg in cases:
            TransformerLM(cfg)
    mcfg, tcfg = paper_train_config()
    with torch.device("meta"):
        paper = TransformerLM(mcfg)
    tokens = book_tokens()
    log(f"1. flex vs sdpa: {len(cases)} schemes x fp32, bf16 (2 layers, d = 768, L = 512)")
    log(f"2. compiled training: R={mcfg.n_layer}, H={mcfg.n_head}, d={mcfg.d_model}, L_tr={tcfg.l_tr}, "
        f"{paper.num_params() / 1e6:.0f}M non-embedding parameters, {args.steps} timed steps")
    log(f"3. one small model ({small_model_item()['pos']}) through the run store")
    log(f"4. small book: {len(tokens)} models, {sum(tokens) / 1e6:.0f}M training tokens")
    if args.dry_run:
        log("dry run: every configuration and model built; stopping before the first CUDA call")
        return 0
    if not torch.cuda.is_available():
        log("no CUDA device: run with --dry-run on this machine")
        return 2
    device = torch.device("cuda")
    # a fall back to eager FlexAttention (an unfused kernel) would make every timing below meaningless
    warnings.filterwarnings("error", message=".*flex_attention called without torch.compile.*")
    t0 = time.perf_counter()
    results = {"flex": check_flex(device)}
    log(f"   ({time.perf_counter() - t0:.0f} s)")
    results["compiled"] = check_compiled(device, args.steps)
    with tempfile.TemporaryDirectory() as store:
        results["small"] = check_small(Path(store))
    est = sum(tokens) / results["small"]["tokens_per_s"]
    results["small_book_train_s"] = est
    log(f"  small book, training alone: about {est / 60:.0f} min on this GPU, one model at a time "
        f"({len(tokens)} models)")
    log(f"total {time.perf_counter() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if all(r["ok"] for r in results["flex"]) else 1


if __name__ == "__main__":
    sys.exit(main())
