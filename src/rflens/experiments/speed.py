"""Training speed of several models, timed side by side in one process.

The speed a stored run recorded depends on what else the machine was doing while it
trained, so schemes are compared here instead: every model takes the same training steps
(:func:`rflens.training.trainer.train_step`: forward, backward, clipping, AdamW) on the same random
tokens, in interleaved rounds whose order rotates, so that a slow moment of the machine
falls on every model alike. Table 3 of Chi et al. (ACL 2023) reports such speeds beside the
perplexities; ``bench/train_throughput.py`` uses the same function. :func:`record_speed`
times them once and keeps the result beside the models, with the machine named: what the
claims read (:mod:`rflens.claims.checks`, claim 16).
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from rflens.measure import intervals
from rflens.setup import presets
from rflens.setup.config import ModelConfig, TrainConfig


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

    from rflens.training.trainer import build, lr_at, train_step

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


# ----------------------------------------------------------------------------- schemes side by side

SPEED_ROUNDS = 12  # interleaved rounds of training_speed: enough for an interval of a speed ratio
SPEED_STEPS = 3  # timed training steps per scheme and round


def training_speed(preset: presets.Preset, positions=None, *, rounds: int = SPEED_ROUNDS, steps: int = SPEED_STEPS,
                   progress: bool = True, refresh: bool = False) -> dict[str, list[float]]:
    """Training tokens/s of each scheme at this preset's model size, one value per round of
    steps timed side by side (:func:`rflens.experiments.speed.time_steps`), so that two schemes can be
    compared round by round. (The claims read :func:`record_speed`'s record instead.) ``positions`` default to the preset's Table 3 schemes. Cached
    in the run store (``speed/``) by preset, schemes, code version and thread count.
    """
    import hashlib
    import json

    import torch

    from rflens import storage
    from rflens.experiments.speed import time_steps
    from rflens.store import runs
    positions = [str(p) for p in (preset.sweeps.table3_pos if positions is None else positions)]
    params = {"scale": preset.name, "positions": positions, "rounds": rounds, "steps": steps,
              "code": runs.code_version(), "threads": torch.get_num_threads()}
    key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
    path = storage.runs_dir() / "speed" / f"{preset.name}-{key}.json"
    if path.is_file() and not refresh:
        return storage.read_json(path)["tokens_per_s"]
    seconds = time_steps({p: preset.model.replace(pos=p) for p in positions}, preset.train, rounds=rounds, steps=steps,
                         progress=progress)
    tokens = preset.train.batch_size * preset.train.l_tr
    result = {p: [tokens / t for t in s] for p, s in seconds.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    storage.write_json(path, {"params": params, "tokens_per_s": result})
    return result


SPEED_BOOTSTRAP = 2000  # resamples of a speed ratio's rounds (a perplexity's interval takes N_BOOTSTRAP)


def speed_ratio(a: list[float], b: list[float], level: float = 0.95,
                n_boot: int = SPEED_BOOTSTRAP) -> tuple[float, float, float]:
    """The speed of a over b from paired rounds: the geometric mean of the per-round ratios
    a_k / b_k and its percentile-bootstrap interval over rounds
    (:func:`rflens.measure.intervals.mean_interval` of their logs). Returns (ratio, low, high)."""
    logs = np.log(np.asarray(a, dtype=float) / np.asarray(b, dtype=float))
    mean, lo, hi = intervals.mean_interval(logs, seed=0, n_boot=n_boot, level=level)
    return float(np.exp(mean)), float(np.exp(lo)), float(np.exp(hi))


# ----------------------------------------------------------------------------- a record kept with the models
RECORD_FILE = "speed-record.json"  # in a shipped bundle's folder, beside its models


def speed_record_path(preset: presets.Preset):
    """Where the recorded training speed of ``preset`` lives: beside the models, in the
    bundle's folder for a shipped preset, else in the run store (``speed/record-<scale>.json``)."""
    from rflens import storage
    if preset.shipped:
        from rflens.store.bundle import bundle_dir

        return bundle_dir(preset.name) / RECORD_FILE
    return storage.runs_dir() / "speed" / f"record-{preset.name}.json"


def machine_name() -> str:
    """The machine a timing ran on, in words: CPU model, logical cores, torch threads, host."""
    import os
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical cores, {torch.get_num_threads()} torch threads, host {platform.node()}"


def record_speed(preset: presets.Preset, positions=None, *, rounds: int = SPEED_ROUNDS, steps: int = SPEED_STEPS,
                 progress: bool = True) -> dict:
    """Time the preset's Table 3 schemes side by side (:func:`time_steps`, interleaved rounds)
    once, and keep the result beside its models (:func:`speed_record_path`) with the machine
    named and the time of the recording. The claims read this record and never time anything
    themselves, so a verdict does not move with the load of the machine that reads it.
    Returns the record."""
    import torch

    from rflens import storage
    from rflens.store import runs
    from rflens.errors import UserError

    positions = [str(p) for p in (preset.sweeps.table3_pos if positions is None else positions)]
    if not positions:  # nothing to time: a run without Table 3 (deep) has no speed to record
        raise UserError(f"the {preset.name} run trains no Table 3 models, so it has no training speed to record: "
                        "drop --record-speed, or record one at a preset with Table 3 (--scale smoke)")
    if preset.shipped:  # a shipped bundle's files are never rewritten here: its record stays the one it shipped with
        shipped = speed_record_path(preset)
        if preset.read_only or shipped.exists():
            what = "a read-only control" if preset.read_only else "shipped"
            raise UserError(f"the {preset.name} bundle is {what} and keeps the speed record it shipped with "
                            f"({shipped}), which claim 16 reads; it is never replaced: drop --record-speed, or record "
                            "a speed at a preset that trains here (--scale smoke)")
    seconds = time_steps({p: preset.model.replace(pos=p) for p in positions}, preset.train, rounds=rounds, steps=steps,
                         progress=progress)
    tokens = preset.train.batch_size * preset.train.l_tr
    record = {"scale": preset.name, "machine": machine_name(), "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "rounds": rounds, "steps": steps, "threads": torch.get_num_threads(), "code": runs.code_version(),
              "tokens_per_s": {p: [tokens / t for t in s] for p, s in seconds.items()}}
    if preset.shipped:  # a file of the bundle: written and sealed by the bundle's own writer
        from rflens.store import bundle

        bundle.write_file(preset.name, RECORD_FILE, record)
        return record
    path = speed_record_path(preset)
    path.parent.mkdir(parents=True, exist_ok=True)
    storage.write_json(path, record)
    return record


def speed_record(preset: presets.Preset, *, progress: bool = True) -> dict | None:
    """The recorded training speed of ``preset``; a preset that trains in the run store
    records it now when it has none (once: later calls read it). A shipped preset's record
    is only read, never written here (None when the bundle has none)."""
    record = load_speed_record(preset)
    if record is None and not preset.shipped:
        record = record_speed(preset, progress=progress)
    return record


def load_speed_record(preset: presets.Preset) -> dict | None:
    """The recorded training speed of ``preset`` (:func:`record_speed`), or None when none was recorded."""
    from rflens import storage
    if preset.shipped:  # read through the bundle, which checks its manifest first
        from rflens.store import bundle

        return _checked_record(bundle.read_file(preset.name, RECORD_FILE), speed_record_path(preset), shipped=True)
    path = speed_record_path(preset)
    return _checked_record(storage.read_json(path), path, shipped=False) if path.is_file() else None


def _checked_record(record, path, *, shipped: bool) -> dict | None:
    """``record`` (None stays None) when it is what :func:`record_speed` writes: an object
    whose ``tokens_per_s`` maps each scheme to its rounds, finite positive speeds, as many
    rounds for every scheme; else UserError naming the file and its fix."""
    import math

    from rflens.errors import UserError

    if record is None:
        return None
    speeds = record.get("tokens_per_s") if isinstance(record, dict) else None
    ok = isinstance(speeds, dict) and bool(speeds) and all(
        isinstance(k, str) and isinstance(v, list) and v and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in v)
        for k, v in speeds.items())
    if ok and len({len(v) for v in speeds.values()}) != 1:
        ok = False
    if not ok:
        from rflens.store.bundle import RESTORE

        fix = RESTORE if shipped else "remove it, and record the speed again with `python -m rflens claims --record-speed`"
        raise UserError(f"the speed record {path} is damaged (its tokens_per_s are not rounds of finite positive "
                        f"speeds, as many for every scheme): {fix}")
    return record
