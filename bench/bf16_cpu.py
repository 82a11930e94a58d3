"""Does bf16 autocast speed up CPU training here? fp32 vs bf16, one process, interleaved.

Two copies of the same model (R=4, H=4, d=128, vocab 2048, ALiBi, L_tr=64, batch 32: the
tiny preset with R=4), same initial weights and the same batches, trained in alternating
blocks of steps, one in fp32 and one under torch.autocast("cpu", bfloat16). Reports
tokens/s of each (median over blocks) and the validation loss of both after the same steps.

    taskset -c 0 env OMP_NUM_THREADS=1 python bench/bf16_cpu.py --steps 50 --block 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from rflens import data
    from rflens.model.transformer import TransformerLM
    from rflens.setup import presets
    from rflens.training.trainer import Batches, lr_at, validation_windows

    s = presets.get("tiny")
    mcfg = s.model.replace(n_layer=4, pos="alibi", tie_weights=False)
    tcfg = s.train.replace(batch_size=32, steps=args.steps)
    corpus = data.prepare(s.data, progress=False)
    val = torch.from_numpy(validation_windows(corpus.tokens("validation"), tcfg.l_tr, 128, 0))
    models, opts, batches, times = {}, {}, {}, {"fp32": [], "bf16": []}
    for name in times:
        torch.manual_seed(0)
        models[name] = TransformerLM(mcfg).train()
        opts[name] = torch.optim.AdamW(models[name].parameters(), lr=tcfg.lr, betas=(0.9, 0.999), weight_decay=0.0)
        batches[name] = Batches(corpus.tokens("train"), tcfg.l_tr, tcfg.batch_size, 0)

    def steps(name: str, start: int, n: int) -> float:
        m, opt = models[name], opts[name]
        t0 = time.perf_counter()
        for step in range(start, start + n):
            x = torch.from_numpy(batches[name].next())
            for g in opt.param_groups:
                g["lr"] = lr_at(step, tcfg)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "bf16"):
                loss = m.loss(x[:, :-1], x[:, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    tokens_per_block = args.block * tcfg.batch_size * tcfg.l_tr
    for r, start in enumerate(range(0, args.steps, args.block)):
        order = ("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32")  # alternate who goes first
        for name in order:
            times[name].append(steps(name, start, args.block))

    out = {"threads": args.threads, "steps": args.steps, "block": args.block,
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__}
    for name, m in models.items():
        m.eval()
        with torch.no_grad():
            losses = [m.loss(val[i:i + 32, :-1], val[i:i + 32, 1:]).item() for i in range(0, len(val), 32)]
        out[name] = {"tokens_per_s_median": tokens_per_block / statistics.median(times[name]),
                     "tokens_per_s_blocks": [round(tokens_per_block / t) for t in times[name]],
                     "val_loss_fp32_eval": sum(losses) / len(losses)}
    out["bf16_speedup"] = out["bf16"]["tokens_per_s_median"] / out["fp32"]["tokens_per_s_median"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
