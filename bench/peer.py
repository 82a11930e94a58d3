"""rflens against x-transformers: the same model shape, trained side by side in one process.

For each scheme that both libraries implement (no position, ALiBi, rotary, T5's bucketed
bias; sinusoidal with a caveat, below) and each size (the ``tiny`` and ``small`` presets'
R, H, d, vocabulary, L_tr and batch), both models take the same training step (forward,
cross-entropy, backward, gradient clipping at 1, AdamW) on the same random batch. In each
round the two run back to back, in alternating order, and the round's speed ratio
rflens / x-transformers is one paired value; the table gives the median over rounds and
its quartiles (> 1: rflens is faster).

x-transformers is set to the rflens shape: pre-LayerNorm, GELU MLP of width 4d, head
dimension d / H, untied embeddings, SDPA (``attn_flash``; x-transformers refuses it with
T5's bias and uses its own attention there), full-width rotary
(``rotary_emb_dim = d / H``; its default rotates half), ALiBi on every head. What still
differs: x-transformers has no biases in the q, k, v projections (rflens has GPT-NeoX's), and
its ``scaled_sinu_pos_emb`` multiplies the sinusoid by one learned scale where rflens adds
the fixed sinusoid scaled by sqrt(d).

    .venv/bin/pip install -r bench/requirements.txt   # x-transformers, for this script only
    .venv/bin/python bench/peer.py                     # fp32 at tiny and small, bf16 at tiny (~6 min)
    .venv/bin/python bench/peer.py --sizes small --dtypes fp32,bf16 --rounds 3

bf16 is autocast on the CPU for both libraries; on a CPU without native bf16 (no AVX512-BF16
or AMX) both are emulated and several times slower than fp32.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from rflens.model.transformer import TransformerLM
from rflens.setup import presets

SCHEMES = ("nope", "alibi", "rotary", "t5", "sinusoidal")


def xt_model(pos: str, cfg) -> torch.nn.Module:
    try:
        from x_transformers import Decoder, TransformerWrapper
    except ImportError:
        sys.exit("x-transformers is not installed: .venv/bin/pip install -r bench/requirements.txt")
    hd = cfg.d_model // cfg.n_head
    layers = Decoder(dim=cfg.d_model, depth=cfg.n_layer, heads=cfg.n_head, attn_dim_head=hd, ff_mult=4,
                     attn_flash=pos != "t5", alibi_pos_bias=pos == "alibi", rel_pos_bias=pos == "t5",
                     rotary_pos_emb=pos == "rotary", rotary_emb_dim=hd if pos == "rotary" else None)
    return TransformerWrapper(num_tokens=cfg.vocab_size, max_seq_len=4096, attn_layers=layers,
                              use_abs_pos_emb=pos == "sinusoidal", scaled_sinu_pos_emb=pos == "sinusoidal",
                              tie_embedding=False)


def make_step(model, vocab: int, dtype: str):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if dtype == "bf16" else contextlib.nullcontext()

    def step(batch):
        with amp:
            logits = model(batch[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, vocab).float(), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step


def bench(size: str, dtype: str, rounds: int, steps: int) -> dict:
    s = presets.get(size)
    cfg, train = s.model, s.train
    batch = torch.randint(0, cfg.vocab_size, (train.batch_size, train.l_tr + 1), generator=torch.Generator().manual_seed(0))
    out = {}
    for pos in SCHEMES:
        torch.manual_seed(0)
        models = {"rflens": TransformerLM(cfg.replace(pos=pos)), "x-transformers": xt_model(pos, cfg)}
        params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
        steps_of = {name: make_step(m.train(), cfg.vocab_size, dtype) for name, m in models.items()}
        for fn in steps_of.values():  # warm-up
            fn(batch)
        ratios, sec = [], {name: [] for name in models}
        for r in range(rounds):
            order = list(steps_of) if r % 2 == 0 else list(steps_of)[::-1]
            t = {}
            for name in order:
                t0 = time.perf_counter()
                for _ in range(steps):
                    steps_of[name](batch)
                t[name] = (time.perf_counter() - t0) / steps
                sec[name].append(t[name])
            ratios.append(t["x-transformers"] / t["rflens"])
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        tokens = train.batch_size * train.l_tr
        out[pos] = {"rflens": tokens / statistics.median(sec["rflens"]),
                    "x-transformers": tokens / statistics.median(sec["x-transformers"]),
                    "ratio": statistics.median(ratios), "q1": q[0], "q3": q[2], "params": params}
        r = out[pos]
        print(f"| {size} | {dtype} | {pos} | {r['rflens']:,.0f} | {r['x-transformers']:,.0f} | {r['ratio']:.2f}x "
              f"[{r['q1']:.2f}, {r['q3']:.2f}] | {params['rflens'] / 1e6:.2f}M / {params['x-transformers'] / 1e6:.2f}M |",
              flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--dtypes", default=None, help="comma-separated fp32,bf16 (default: fp32, and bf16 at tiny)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=None, help="steps a model and round (default: 3 tiny, 1 small)")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    print("| size | dtype | scheme | rflens tokens/s | x-transformers tokens/s | rflens vs x-transformers [IQR] "
          "| parameters (rflens / x-t) |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        dtypes = args.dtypes.split(",") if args.dtypes else (["fp32", "bf16"] if size == "tiny" else ["fp32"])
        for dtype in dtypes:
            steps = args.steps or (3 if size == "tiny" else 1)
            rounds = args.rounds if dtype == "fp32" else max(3, args.rounds // 3)
            bench(size, dtype, rounds, steps)


if __name__ == "__main__":
    main()
