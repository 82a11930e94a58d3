"""What a command will need, estimated before it allocates, against what the machine has.

A mistyped size (``--n 100000000``, ``--length 100000000``, ``--set l_tr=30000``) should be
one line that names the estimate and the limit, not minutes of swapping and an
out-of-memory kill. The estimates are deliberately rough (they count the large arrays of
each step, not every temporary) and the limit is a share of the memory available now.
"""

from __future__ import annotations

import os

from .errors import UserError

SHARE = 0.8  # of the memory available now that one command may plan to use
FLOAT = 4  # bytes of a float32


def available_bytes() -> int:
    """Memory available to this process now: the kernel's MemAvailable, capped by an
    address-space limit (``ulimit -v``, ``resource.setrlimit``) if one is set."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
            avail = 1 << 62
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            avail = min(avail, soft)
    except (ImportError, ValueError, OSError):  # pragma: no cover - not POSIX
        pass
    return avail


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def check(estimate: float, what: str, fix: str) -> None:
    """UserError when ``estimate`` bytes exceed the share of memory a command may use."""
    limit = SHARE * available_bytes()
    if estimate > limit:
        raise UserError(f"{what} needs about {_gb(estimate)} of memory, more than the {_gb(limit)} this "
                        f"machine has free: {fix}")


def training_step_bytes(model_cfg, batch_size: int, l_tr: int) -> float:
    """One training step: the weights with their gradients and Adam's two moments, the
    activations kept for the backward pass, and the attention scores of one layer."""
    d, R, H, V = model_cfg.d_model, model_cfg.n_layer, model_cfg.n_head, model_cfg.vocab_size
    params = 12 * R * d * d + 2 * V * d
    tokens = batch_size * l_tr
    activations = tokens * R * 16 * d + tokens * V * 2  # per layer ~16 d floats; logits and their gradient
    scores = 3 * batch_size * H * l_tr * l_tr  # scores, probabilities and their gradient, one layer at a time
    return FLOAT * (4 * params + activations + scores)


def training_bytes(model_cfg, train_cfg, batch_per_rank: int) -> float:
    """A training run on one process: one step of ``batch_per_rank`` sequences and the fixed
    validation windows (token ids, int64) it holds throughout."""
    val_windows = 8 * train_cfg.eval_batches * train_cfg.batch_size * (train_cfg.l_tr + 1)
    return training_step_bytes(model_cfg, batch_per_rank, train_cfg.l_tr) + val_windows


def evaluation_bytes(n: int, length: int, n_lengths: int, batch_size: int, model_cfg) -> float:
    """The last-token protocol: N segments of ``length`` + 1 token ids, an NLL per segment
    and length, and one batch's forward pass at the longest length."""
    d, V = model_cfg.d_model, model_cfg.vocab_size
    forward = batch_size * length * (8 * d) + batch_size * V
    return 8 * n * (length + 1) + 8 * n * n_lengths + FLOAT * forward
