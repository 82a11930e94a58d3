"""Training speed of several models, timed side by side in one process.

The speed a stored run recorded depends on what else the machine was doing while it
trained, so schemes are compared here instead: every model takes the same training steps
(:func:`rflens.train.train_step`: forward, backward, clipping, AdamW) on the same random
tokens, in interleaved rounds whose order rotates, so that a slow moment of the machine
falls on every model alike. Table 3 of Chi et al. (ACL 2023) reports such speeds beside the
perplexities; ``bench/train_throughput.py`` uses the same function.
"""

from __future__ import annotations

import contextlib
import time

from .config import ModelConfig, TrainConfig


def time_steps(model_cfgs: dict[str, ModelConfig], train_cfg: TrainConfig, *, rounds: int, steps: int,
               warmup: int = 1, progress: bool = False) -> dict[str, list[float]]:
    """Seconds per training step of each model, one value per round.

    Each model (built as training builds it, from ``train_cfg.seed``) first takes
    ``warmup`` untimed steps; then, ``rounds`` times, each takes ``steps`` timed steps,
    in a different order each round. The batch is ``train_cfg.batch_size`` random windows
    of ``l_tr + 1`` tokens.
    """
    import torch
    from tqdm.auto import tqdm

    from .train import build, lr_at, train_step

    names = list(model_cfgs)
    gen = torch.Generator().manual_seed(0)
    vocab = min(cfg.vocab_size for cfg in model_cfgs.values())
    batch = torch.randint(0, vocab, (train_cfg.batch_size, train_cfg.l_tr + 1), generator=gen)
    cpu = torch.device("cpu")
    built = {name: build(cfg, train_cfg, cpu) for name, cfg in model_cfgs.items()}
    no_autocast = contextlib.nullcontext()

    def run(name: str, n: int) -> None:
        model, optimizer = built[name]
        model.train()
        for i in range(n):
            train_step(model.loss, model, optimizer, batch, lr_at(i, train_cfg), train_cfg, no_autocast)

    for name in names:  # first calls allocate memory and build caches
        run(name, warmup)
    seconds = {name: [] for name in names}
    for r in tqdm(range(rounds), desc="training speed", disable=not progress, leave=False):
        for name in names[r % len(names):] + names[:r % len(names)]:  # rotate: no model always runs first
            t0 = time.perf_counter()
            run(name, steps)
            seconds[name].append((time.perf_counter() - t0) / steps)
    return seconds
