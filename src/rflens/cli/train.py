"""``python -m rflens train``: train a model, or report the one the run store holds."""

from __future__ import annotations

import json
import time

from rflens.cli.common import emit
from rflens.setup import settings
from rflens.setup.config import parse_overrides
from rflens.store import runs
from rflens.training import distributed
from rflens.setup import presets


def run(args) -> int:
    overrides = parse_overrides(args.overrides)
    # every setting is checked before any data is touched or anything is written
    settings.resolve(presets.get(args.scale), args.pos, args.corpus, overrides)
    t0 = time.perf_counter()
    model_run = runs.get_run(presets.get(args.scale), args.pos, args.corpus, overrides, progress=not args.quiet,
                             retrain=args.retrain)
    seconds = time.perf_counter() - t0
    if not distributed.is_main():
        return 0
    m = model_run.metrics
    summary = {
        "key": model_run.key, "path": str(model_run.path), "reused": model_run.reused, "scale": model_run.scale,
        "pos": model_run.pos, "corpus": model_run.data_cfg.corpus,
        "settings": settings.describe(model_run.model_cfg, model_run.data_cfg, model_run.train_cfg, presets.get(model_run.scale)),
        "steps": m["steps"], "val_loss": m["val_loss"], "final_train_loss": m["final_train_loss"],
        "tokens_per_s": m["tokens_per_s"], "train_seconds": m["train_seconds"], "num_params": m["num_params"],
        "seconds": seconds,
    }
    if args.json:
        emit(json.dumps(summary, indent=1))
        return 0
    what = (f"{model_run.scale} {model_run.pos} on {summary['corpus']}"
            + "".join(f", {k}={v}" for k, v in sorted(summary["settings"].items())))
    speed = f" at {m['tokens_per_s']:,.0f} tokens/s" if m["tokens_per_s"] is not None else ""
    facts = (f"{m['steps']} steps, val loss {m['val_loss']:.3f}, {m['num_params']:,} parameters, "
             f"trained in {m['train_seconds']:.1f} s{speed}")
    if model_run.reused:
        emit(f"reused the stored run {model_run.path} ({what}: {facts}); --retrain trains it again")
    else:
        emit(f"trained {what}: {facts}; stored in {model_run.path}")
    return 0
