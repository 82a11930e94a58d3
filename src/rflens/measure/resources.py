"""What a command will need, estimated before it allocates, against what the machine has.

A mistyped size (``--n 100000000``, ``--length 100000000``, ``--set l_tr=30000``) should be
one line that names the estimate and the limit, not minutes of swapping and an
out-of-memory kill. The estimates are deliberately rough (they count the large arrays of
each step, not every temporary) and the limit is a share of the memory available now.
"""

from __future__ import annotations

import os

from rflens.errors import UserError

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


def training_parts(model_cfg, train_cfg, batch_per_rank: int) -> dict[str, float]:
    """The terms of :func:`training_bytes`, keyed by the settings that make each one large
    (so a refusal names the setting that caused it)."""
    d, R, H, V = model_cfg.d_model, model_cfg.n_layer, model_cfg.n_head, model_cfg.vocab_size
    B, L = batch_per_rank, train_cfg.l_tr
    return {
        "d_model or n_layer": FLOAT * 4 * 12 * R * d * d,  # weights, gradients and Adam's moments
        "vocab_size or d_model": FLOAT * 4 * 2 * V * d,  # the embeddings and the LM head, likewise
        "n_layer, d_model, l_tr or batch_size": FLOAT * B * L * R * 16 * d,  # activations kept for backward
        "vocab_size, l_tr or batch_size": FLOAT * B * L * V * 2,  # the logits and their gradient
        "l_tr or batch_size": FLOAT * 3 * B * H * L * L,  # one layer's attention scores
        "eval_batches": 8 * train_cfg.eval_batches * train_cfg.batch_size * (L + 1),  # validation windows
    }


def training_fix(model_cfg, train_cfg, batch_per_rank: int) -> str:
    """"lower --set ..." naming the settings of the largest term of the estimate."""
    parts = training_parts(model_cfg, train_cfg, batch_per_rank)
    return f"lower --set {max(parts, key=parts.get)}"


def training_bytes(model_cfg, train_cfg, batch_per_rank: int) -> float:
    """A training run on one process: one step of ``batch_per_rank`` sequences and the fixed
    validation windows (token ids, int64) it holds throughout."""
    val_windows = 8 * train_cfg.eval_batches * train_cfg.batch_size * (train_cfg.l_tr + 1)
    return training_step_bytes(model_cfg, batch_per_rank, train_cfg.l_tr) + val_windows


def last_token_bytes(n: int, length: int, n_lengths: int, n_boot: int = 1000) -> float:
    """What the last-token protocol allocates in proportion to N, for any model: the segment
    draw (its index, the gathered tokens and the int64 segments, each N x (length + 1)), an
    NLL per segment and length, one length's bootstrap (``n_boot`` x N resample indices, and
    the NLLs and counts they gather), and the per-segment NLLs written into the cached result
    (Python floats, their JSON text and the copy read back)."""
    segments = (8 + 4 + 8) * n * (length + 1)
    nll = 8 * n * n_lengths
    bootstrap = 3 * 8 * n_boot * n
    cached = 100 * n * n_lengths  # ~32 bytes a Python float in a list, ~20 of JSON text, and a parsed copy
    return segments + nll + bootstrap + cached


def evaluation_bytes(n: int, length: int, n_lengths: int, batch_size: int, model_cfg, n_boot: int = 1000) -> float:
    """The last-token protocol on a model of rflens: :func:`last_token_bytes` and one
    batch's forward pass at the longest length."""
    d, V = model_cfg.d_model, model_cfg.vocab_size
    forward = batch_size * length * (8 * d) + batch_size * V
    return last_token_bytes(n, length, n_lengths, n_boot) + FLOAT * forward
