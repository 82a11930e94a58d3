"""Training: the recipe the paper follows, resumable, deterministic, on one or many devices.

Chi et al. (ACL 2023) train their models with the recipe of the KERPLE / GPT-NeoX code
base they build on: Adam(W) with lr 6e-4, betas (0.9, 0.999), 1% linear warm-up then
cosine decay, gradient clipping at 1.0, no dropout, bf16 on GPUs. The presets in
:mod:`rflens.setup.presets` scale the recipe down for CPUs.

A training batch is ``batch_size`` random windows of ``l_tr + 1`` tokens from the train
split, drawn by a seeded numpy generator whose state goes into every checkpoint. That
makes a run reproducible to the bit on a CPU: two runs of one configuration end with the
same weights, and a run killed at any moment (even with SIGKILL) and started again
resumes from its last checkpoint and ends with the weights of an uninterrupted run.

Several processes (``torchrun --nproc_per_node N -m rflens train ...``) train with
DistributedDataParallel: every rank draws the same global batch and takes its own slice,
so the batch and the result do not depend on N. Only rank 0 writes files.

torch is imported inside the functions: ``python -m rflens train`` on a model that is
already stored answers without loading torch at all.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import json
import math
import pickle
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rflens import data
from rflens.errors import UserError
from rflens.setup.config import DataConfig, ModelConfig, TrainConfig
from rflens.storage import atomic_path, atomic_write, sha256_file, write_json
from rflens.training import distributed

CHECKPOINT_POINTER = "checkpoint.json"  # names the current checkpoint file and its sha256
WEIGHTS = "model.safetensors"


# ----------------------------------------------------------------------------- schedule

def warmup_steps(cfg: TrainConfig) -> int:
    if cfg.warmup is not None:
        return cfg.warmup
    return max(1, round(cfg.warmup_frac * cfg.steps)) if cfg.warmup_frac > 0 else 0


def cooldown_steps(cfg: TrainConfig, steps: int | None = None) -> int:
    """wsd: the steps of the final linear cool-down of a run of ``steps`` (default
    ``cfg.steps``), at least one."""
    return max(1, round(cfg.cooldown_frac * (cfg.steps if steps is None else steps)))


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of step ``step`` (0-based): linear warm-up, then cosine to min_lr_frac * lr
    (``schedule="cosine"``), or a constant rate and a linear cool-down over the last
    :func:`cooldown_steps` to min_lr_frac * lr (``"wsd"``).

    With a fixed number of ``warmup`` steps, a wsd run of S steps follows the schedule of a
    longer one up to its cool-down: a snapshot of the longer run cooled down from step
    S - cooldown_steps is the finished shorter run (rflens.longrun.plan).
    """
    warmup = warmup_steps(cfg)
    if step < warmup:
        return cfg.lr * (step + 1) / warmup
    if cfg.schedule == "wsd":
        cooldown = cooldown_steps(cfg)
        left = cfg.steps - step  # cfg.steps - step for the last `cooldown` steps: cooldown .. 1
        decay = min(1.0, left / cooldown)
        return cfg.lr * (cfg.min_lr_frac + (1.0 - cfg.min_lr_frac) * decay)
    progress = min(1.0, (step - warmup) / max(1, cfg.steps - warmup))
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))  # 1 -> 0
    return cfg.lr * (cfg.min_lr_frac + (1.0 - cfg.min_lr_frac) * cosine)


POINTS = 7  # measured sizes of a branched run: its budget / 2^6, ..., / 2, the budget


def point_steps(cfg: TrainConfig) -> list[int]:
    """The sizes (in steps) at which a wsd run is branched and measured: steps / 2^(POINTS-1),
    ..., steps, those whose cool-down starts after the warm-up."""
    pts = sorted({max(1, cfg.steps >> k) for k in range(POINTS)})
    warmup = cfg.warmup or 0
    return [p for p in pts if p - cooldown_steps(cfg, p) >= warmup]


# ----------------------------------------------------------------------------- batches

class Batches:
    """Random training windows: the global batch of a step, and this rank's slice of it.

    Every rank runs the same generator and draws the same ``batch_size`` start offsets;
    rank r keeps rows ``r * B / N .. (r + 1) * B / N``. Hence the global batch, and with
    it the training run, is the same for any number of ranks N.
    """

    def __init__(self, tokens: np.ndarray, l_tr: int, batch_size: int, seed: int, rank: int = 0, world: int = 1):
        if len(tokens) < l_tr + 2:
            raise UserError(f"the train split has {len(tokens)} tokens, fewer than one window of l_tr + 1 = {l_tr + 1}: "
                            "use a smaller l_tr or more data (max_bytes)")
        if batch_size % world:
            raise UserError(f"batch_size={batch_size} cannot be split evenly over {world} processes: "
                            "choose a multiple of --nproc_per_node")
        self.tokens, self.l_tr, self.batch_size = tokens, l_tr, batch_size
        self.lo, self.hi = rank * batch_size // world, (rank + 1) * batch_size // world
        self.rng = np.random.Generator(np.random.PCG64(seed))

    def starts(self) -> np.ndarray:
        # a window [s, s + l_tr] must end inside the split: s <= len - l_tr - 1
        return self.rng.integers(0, len(self.tokens) - self.l_tr, size=self.batch_size)

    def next(self) -> np.ndarray:
        """(B / N, l_tr + 1) int64 token windows of this rank."""
        starts = self.starts()[self.lo:self.hi]
        return self.tokens[starts[:, None] + np.arange(self.l_tr + 1)].astype(np.int64)

    def state(self) -> dict:
        return self.rng.bit_generator.state

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state


def validation_windows(tokens: np.ndarray, l_tr: int, n: int, seed: int) -> np.ndarray:
    """A fixed set of ``n`` validation windows (n, l_tr + 1): the same at every evaluation."""
    if len(tokens) < l_tr + 2:
        raise UserError(f"the validation split has {len(tokens)} tokens, fewer than one window of {l_tr + 1}: "
                        "use a smaller l_tr or more data (max_bytes)")
    rng = np.random.Generator(np.random.PCG64([seed, 1]))  # its own stream: never moves the training batches
    starts = rng.integers(0, len(tokens) - l_tr, size=n)
    return tokens[starts[:, None] + np.arange(l_tr + 1)].astype(np.int64)


# ----------------------------------------------------------------------------- checkpoints

CHECKPOINT_FILE = re.compile(r"checkpoint-\d{8}\.pt")  # the only names a pointer may give: files of its own folder


def read_checkpoint_pointer(out_dir: Path, fix: str = "start over with --retrain") -> dict | None:
    """The pointer to the last checkpoint, after checking that it names a checkpoint file of
    ``out_dir`` itself (no other path) whose sha256 it gives; UserError naming ``fix`` if not."""
    out_dir = Path(out_dir)
    pointer = out_dir / CHECKPOINT_POINTER
    if not pointer.is_file():
        return None
    try:
        info = json.loads(pointer.read_text())
        name = info["file"]
        if not (isinstance(name, str) and CHECKPOINT_FILE.fullmatch(name)):
            why = "it names a file outside the run's folder"
        elif (out_dir / name).is_symlink() or not (out_dir / name).is_file():
            why = "its file is missing"
        elif sha256_file(out_dir / name) != info["sha256"]:
            why = "sha256 mismatch"
        else:
            return info
    except (OSError, ValueError, KeyError, TypeError):
        why = "its pointer is unreadable"
    raise UserError(f"the training checkpoint in {out_dir} is corrupted ({why}): {fix}")


def load_checkpoint(out_dir: Path, info: dict, fix: str = "start over with --retrain") -> dict:
    """The training state a checkpoint holds, read as data only (tensors, numbers, strings:
    ``weights_only``), so a crafted file cannot run code; UserError naming ``fix`` otherwise."""
    import torch

    try:
        return torch.load(Path(out_dir) / info["file"], map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError) as err:
        raise UserError(f"the training checkpoint in {out_dir} is corrupted (not a checkpoint of this code: "
                        f"{type(err).__name__}): {fix}") from None


def _save_checkpoint(out_dir: Path, state: dict, step: int) -> None:
    """Write checkpoint-<step>.pt, then switch the pointer to it, then drop older ones.

    The pointer is replaced atomically, so a kill at any moment leaves either the old or
    the new checkpoint as the valid one, never a half-written file behind the pointer.
    """
    import torch

    name = f"checkpoint-{step:08d}.pt"
    try:
        with atomic_write(out_dir / name) as f:
            torch.save(state, f)
    except RuntimeError as err:  # torch's writer reports a full disk as a RuntimeError
        if shutil.disk_usage(out_dir).free < (1 << 20) or "unexpected pos" in str(err):
            raise OSError(errno.ENOSPC, "No space left on device", str(out_dir / name)) from None
        raise
    write_json(out_dir / CHECKPOINT_POINTER, {"file": name, "sha256": sha256_file(out_dir / name), "step": step})
    for old in out_dir.glob("checkpoint-*.pt"):
        if old.name != name:
            old.unlink(missing_ok=True)


def _remove_checkpoints(out_dir: Path) -> None:
    """The training state of a finished run, and temporary files a killed writer left."""
    (out_dir / CHECKPOINT_POINTER).unlink(missing_ok=True)
    for old in [*out_dir.glob("checkpoint-*.pt"), *out_dir.glob(".*.tmp")]:
        old.unlink(missing_ok=True)


def tidy(out_dir: Path) -> None:
    """A complete run holds only what it needs: remove what a kill between the manifest and
    the clean-up left behind (checkpoints, temporary files)."""
    with contextlib.suppress(OSError):  # a store we may not write: the leftovers stay, the run is complete
        _remove_checkpoints(out_dir)


def _check_finite(losses: list[float], first_step: int, what: str = "training loss") -> None:
    """UserError naming the step when a loss is NaN or infinite: the run has diverged."""
    for i, value in enumerate(losses):
        if not math.isfinite(value):
            raise UserError(f"training diverged: the {what} is {value} at step {first_step + i}; "
                            "nothing was stored as complete; try a lower learning rate (--set lr=...)")


# ----------------------------------------------------------------------------- training steps

@dataclass
class Progress:
    """Where a training run stands: saved in every checkpoint, so a resumed run continues
    its curves and clocks."""

    step: int = 0
    train_loss: list = field(default_factory=list)  # one value per step of the main run
    val_curve: list = field(default_factory=list)  # [step, validation loss] pairs
    elapsed: float = 0.0  # wall seconds of training (and measuring the points), over every session
    step_seconds: float = 0.0  # seconds inside training steps (for tokens/s)
    points: list = field(default_factory=list)  # the sizes branched and measured so far


class OutOfTime(Exception):
    """The sitting's time ran out at a step whose state is checkpointed: the run resumes
    from there. ``progress``: where it stood (its curve and clocks)."""

    def __init__(self, step: int, progress: Progress):
        super().__init__(step)
        self.step, self.progress = step, progress


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.time() > deadline


def _loss_module(lm):
    """The LM loss as a module's forward(), so that DistributedDataParallel sees (and
    syncs) the call."""
    import torch.nn as nn

    class LossModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = lm

        def forward(self, idx, targets):
            return self.lm.loss(idx, targets)

    return LossModule()


def build(model_cfg: ModelConfig, cfg: TrainConfig, device):
    """The model, initialised on the CPU from the seed (so its initial weights do not
    depend on the device), and its AdamW optimizer (no weight decay on norms, biases and
    scalar parameters)."""
    import torch

    from rflens.model.transformer import TransformerLM

    torch.manual_seed(cfg.seed)
    model = TransformerLM(model_cfg)
    model.to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]  # matrices and embeddings
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # norms, biases, learnable scalars
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), fused=True)
    return model, optimizer


def _resume(out_dir: Path, model, optimizer, batches: Batches, device, fix: str) -> Progress:
    """Load the last checkpoint into the model, optimizer, batches and RNGs, if there is one."""
    import torch

    info = read_checkpoint_pointer(out_dir, fix)
    if info is None:
        return Progress()
    state = load_checkpoint(out_dir, info, fix)
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        batches.set_state(state["batches"])
        torch.set_rng_state(state["torch_rng"])
        if device.type == "cuda" and state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], device)
        return Progress(state["step"], state["train_loss"], state["val_curve"], state["elapsed"],
                        state["step_seconds"], state.get("points", []))
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise UserError(f"the training checkpoint in {out_dir} is corrupted (not a checkpoint of these settings: "
                        f"{type(err).__name__}): {fix}") from None


def _checkpoint(out_dir: Path, model, optimizer, batches: Batches, progress: Progress, device,
                model_cfg: ModelConfig, cfg: TrainConfig) -> None:
    import torch

    _save_checkpoint(out_dir, {
        "model": model.state_dict(), "optimizer": optimizer.state_dict(), "batches": batches.state(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "step": progress.step, "train_loss": progress.train_loss, "val_curve": progress.val_curve,
        "elapsed": progress.elapsed, "step_seconds": progress.step_seconds, "points": progress.points,
        "model_cfg": model_cfg.to_dict(), "train_cfg": cfg.to_dict(),
    }, progress.step)


def train_step(step_fn, model, optimizer, chunk, lr: float, cfg: TrainConfig, autocast) -> "torch.Tensor":  # noqa: F821
    """One optimisation step on the windows ``chunk`` (B, L + 1): the loss of predicting
    each next token, its gradients (clipped at ``cfg.grad_clip``), an AdamW step at ``lr``.
    Returns the loss, detached and still on the device."""
    import torch

    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast:
        loss = step_fn(chunk[:, :-1], chunk[:, 1:])
    loss.backward()
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip, foreach=True)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def validate(model, val: np.ndarray, batch_size: int, autocast, device) -> float:
    """Mean loss over the fixed validation windows (this rank's share), averaged over ranks."""
    import torch

    model.eval()
    total = torch.zeros((), device=device, dtype=torch.float64)
    with torch.no_grad():
        for i in range(0, len(val), batch_size):
            chunk = torch.from_numpy(val[i:i + batch_size]).to(device)
            with autocast:
                loss = model.loss(chunk[:, :-1], chunk[:, 1:])
            total += loss.double() * len(chunk)
    model.train()
    return distributed.all_mean([total / len(val)])[0]


def save_weights(model, path: Path, fix: str) -> None:
    """The module's weights written to ``path`` by safetensors, atomically (nothing half-written
    is left). A write that fails (a full disk, a folder that cannot be written) is one line
    naming the folder, why, the space free there and ``fix``: safetensors reports a full disk
    as a SafetensorError, which nothing above would know to read."""
    from safetensors import SafetensorError
    from safetensors.torch import save_model

    try:
        with atomic_path(path) as tmp:
            save_model(model.cpu() if next(model.parameters()).device.type != "cpu" else model, str(tmp))
    except (OSError, SafetensorError) as err:
        raise UserError(f"cannot write {path.name} in {path.parent} ({_write_fault(err)}; {_free_space(path.parent)}): "
                        f"{fix}") from None


def _write_fault(err: BaseException) -> str:
    """What went wrong with a write, in a few words: the operating system's message where the
    error carries one (safetensors wraps it: ``IoError(Os { code: 28, ..., message: "..." })``)."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    found = re.search(r'message: "([^"]+)"', str(err))
    if found:
        return found.group(1)
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _free_space(folder: Path) -> str:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return "its free space unknown"
    return f"{free / 2**20:,.1f} MiB free there"


def _store(out_dir: Path, model, metrics: dict) -> None:
    """Weights, metrics, then the manifest (written last: its presence marks the run as
    complete); the checkpoints go."""
    out_dir.mkdir(parents=True, exist_ok=True)
    save_weights(model, out_dir / WEIGHTS, "free some space, or point RFLENS_RUNS at a larger disk, then run the "
                 "command again: it resumes from the last checkpoint")
    write_json(out_dir / "metrics.json", metrics)
    files = [WEIGHTS, "metrics.json"] + (["config.json"] if (out_dir / "config.json").is_file() else [])
    write_json(out_dir / "manifest.json", {"sha256": {f: sha256_file(out_dir / f) for f in files}})
    _remove_checkpoints(out_dir)


# ----------------------------------------------------------------------------- the loop

def train(model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig, *, out_dir, progress: bool = True,
          corpus=None, points=(), on_point=None, deadline: float | None = None, store: bool = True,
          fix: str = "start over with --retrain") -> dict:
    """Train a model into ``out_dir`` (resuming from its checkpoint if there is one).

    ``points``: sizes (in steps, wsd schedule) at which the run is branched: when the main
    run reaches a size's cool-down, a copy of its state is cooled down to that size, which
    is exactly the finished shorter run (same batches, same rates, bitwise); it is handed
    to ``on_point(steps, model, val_loss)``, and the main run continues from where it
    branched. ``on_point`` is also called with the finished model when ``points`` holds
    ``train_cfg.steps``. The state is checkpointed at each branch; when ``deadline`` (a
    ``time.time()``) passes, :class:`OutOfTime` is raised at a checkpointed step.

    With ``store`` it writes model.safetensors, metrics.json and manifest.json (last) into
    ``out_dir``. Returns the metrics: per-step training loss of the main run, validation
    losses, tokens/s, seconds. ``fix``: what a damaged checkpoint's message advises.
    """
    import torch
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    distributed.init()
    rank, world, local = distributed.rank(), distributed.world_size(), distributed.local_rank()
    main = rank == 0
    if main:
        out_dir.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", local) if torch.cuda.is_available() else torch.device("cpu")
    if corpus is None:
        corpus = data.prepare(data_cfg, progress=progress and main)
    if corpus.vocab_size > model_cfg.vocab_size:
        raise UserError(f"the corpus has {corpus.vocab_size} tokens but the model only {model_cfg.vocab_size}: "
                        f"--set vocab_size={corpus.vocab_size}")
    cfg = train_cfg
    batches = Batches(corpus.tokens("train"), cfg.l_tr, cfg.batch_size, cfg.seed, rank, world)
    val = validation_windows(corpus.tokens("validation"), cfg.l_tr, cfg.eval_batches * cfg.batch_size, cfg.seed)
    val = val[rank * len(val) // world:(rank + 1) * len(val) // world]  # this rank's share
    val_batch = max(1, cfg.batch_size // world)

    model, optimizer = build(model_cfg, cfg, device)
    state = _resume(out_dir, model, optimizer, batches, device, fix)
    start = state.step
    if start and main and progress:
        print(f"resuming {out_dir.name} from step {start}", file=sys.stderr)
    step_fn = _loss_module(model)
    if cfg.compile:
        step_fn = torch.compile(step_fn)
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        step_fn = DistributedDataParallel(step_fn, device_ids=[local] if device.type == "cuda" else None)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.dtype == "bf16")
    # the branches still to take, by the main-run step their cool-down starts from
    branches = {p - cooldown_steps(cfg, p): p for p in sorted(points) if p < cfg.steps and p not in state.points}

    tokens_per_step = cfg.batch_size * cfg.l_tr
    bar = tqdm(total=cfg.steps, initial=start, disable=not (progress and main), unit="step", dynamic_ncols=True,
               desc=f"train {model_cfg.pos}", file=sys.stderr)
    pending: list = []  # losses still on the device; fetched every few steps (no sync per step on GPUs)
    flush_every = 10
    session = 0.0  # seconds in training steps since this process started (for the bar's tokens/s)
    elapsed_before = state.elapsed
    saved_at = start if start else None  # the step whose state is on disk
    t_start = time.perf_counter()

    def checkpoint() -> None:
        nonlocal saved_at
        state.elapsed = elapsed_before + time.perf_counter() - t_start
        if main:
            _checkpoint(out_dir, model, optimizer, batches, state, device, model_cfg, cfg)
        saved_at = state.step
        if _past(deadline):  # the state on disk is that of this step: nothing is lost
            raise OutOfTime(state.step, state)

    def branch(first: int, target: int) -> None:
        """Cool a copy of the main run down from ``first`` to ``target`` steps, measure it,
        and restore the main run."""
        keep = (copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict()), batches.state())
        schedule = cfg.replace(steps=target)
        cooling = []
        for step in range(first, target):
            chunk = torch.from_numpy(batches.next()).to(device, non_blocking=True)
            cooling.append(train_step(step_fn, model, optimizer, chunk, lr_at(step, schedule), cfg, autocast))
            if len(cooling) == flush_every or step == target - 1:
                _check_finite(distributed.all_mean(cooling), step - len(cooling) + 2)
                cooling = []
        on_point(target, model, validate(model, val, val_batch, autocast, device))
        model.load_state_dict(keep[0])
        optimizer.load_state_dict(keep[1])
        batches.set_state(keep[2])
        model.train()

    if _past(deadline):  # the state on disk is the one resumed from (or none at step 0)
        raise OutOfTime(start, state)
    model.train()
    step = start
    try:
        while True:
            if step in branches:  # the main run reached a size's cool-down: branch there
                if saved_at != step:
                    checkpoint()  # a kill in the branch then repeats the branch only
                target = branches.pop(step)
                branch(step, target)
                state.points.append(target)
                checkpoint()
            if step == cfg.steps:
                break
            t0 = time.perf_counter()
            chunk = torch.from_numpy(batches.next()).to(device, non_blocking=True)
            pending.append(train_step(step_fn, model, optimizer, chunk, lr_at(step, cfg), cfg, autocast))
            done = step + 1
            at_checkpoint = cfg.ckpt_interval and done % cfg.ckpt_interval == 0 and done != cfg.steps
            at_eval = cfg.eval_interval and done % cfg.eval_interval == 0
            # the sitting's end is met at the step it falls in, not at the next checkpoint (one process: the
            # ranks of several would have to agree on the time)
            late = world == 1 and done != cfg.steps and done not in branches and _late(deadline)
            if len(pending) >= flush_every or done == cfg.steps or at_checkpoint or at_eval or done in branches or late:
                fetched = distributed.all_mean(pending)
                _check_finite(fetched, done - len(fetched) + 1)  # before any checkpoint keeps a diverged state
                state.train_loss.extend(fetched)
                pending = []
                bar.set_postfix(loss=f"{state.train_loss[-1]:.3f}",
                                tok_s=f"{tokens_per_step * (done - start) / (session + time.perf_counter() - t0):,.0f}",
                                refresh=False)
            spent = time.perf_counter() - t0  # includes the sync of the losses when they were fetched
            state.step_seconds += spent
            session += spent
            bar.update(1)
            state.step = step = done
            if at_eval and done != cfg.steps:
                state.val_curve.append([done, validate(model, val, val_batch, autocast, device)])
            if at_checkpoint or late:
                checkpoint()
            if late:  # checkpointed at this step: the run resumes from it
                raise OutOfTime(state.step, state)
    finally:
        bar.close()

    val_loss = validate(model, val, val_batch, autocast, device)
    _check_finite([val_loss], cfg.steps, "validation loss")
    if not state.val_curve or state.val_curve[-1][0] != cfg.steps:
        state.val_curve.append([cfg.steps, val_loss])
    if cfg.steps in points:
        on_point(cfg.steps, model, val_loss)
        state.points.append(cfg.steps)
    state.elapsed = elapsed_before + time.perf_counter() - t_start
    tail = state.train_loss[-max(1, len(state.train_loss) // 10):]
    metrics = {
        "steps": cfg.steps, "tokens": cfg.steps * tokens_per_step, "train_loss": state.train_loss,
        "final_train_loss": float(np.mean(tail)), "val_curve": state.val_curve, "val_loss": val_loss,
        "tokens_per_s": cfg.steps * tokens_per_step / max(state.step_seconds, 1e-9), "train_seconds": state.elapsed,
        "num_params": model.num_params(non_embedding=False),
        "num_params_non_embedding": model.num_params(non_embedding=True),
        "world_size": world, "device": device.type, "dtype": cfg.dtype, "torch": torch.__version__,
        "threads": torch.get_num_threads(), "resumed_from": start,
    }
    if main and store:
        _store(out_dir, model, metrics)
    distributed.barrier()
    return metrics


def _late(deadline: float | None) -> bool:
    """Whether the sitting's time ran out, asked after every training step (:func:`_past` is
    asked at the checkpoints and branches)."""
    return deadline is not None and time.time() > deadline
