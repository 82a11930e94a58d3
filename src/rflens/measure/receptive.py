"""Receptive-field analysis (Chi et al., ACL 2023, Section 4.1, Figures 5, 7 and 11).

How far back does a model look when it predicts a token? For the last token of each of
N segments, take the gradient of its loss with respect to every input embedding e_m
(the token embeddings, before any positional information is added). Its norm per
position, divided by the sum over positions, is the *normalised gradient*; averaged over
the N segments it says which share of the prediction's sensitivity lies at each distance.
Summed from the most recent token backwards it gives the *cumulative* curve, and the
effective receptive field (ERF) is the number of most recent tokens the cumulative curve
needs to reach a threshold (0.99 in the paper).

The paper's explanation of length extrapolation: a model extrapolates when its ERF fits
inside the training length L_tr, because then no prediction depends on distances it never
saw. For windowed attention (Eq. 3) the *theoretical* receptive field grows like R * w
(R layers of windows of w positions each).

Convention (shared with :mod:`rflens.measure.perplexity`): a segment has L + 1 tokens; the model
reads the first L and the loss is that of predicting the final one from the last input
position. ``normalized[k]`` is the share of the input k positions before that last input
position (index 0 = the most recent token).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from rflens.errors import UserError
from rflens.measure import resources
from rflens.measure.intervals import CI_LEVEL, draw_rows, N_BOOTSTRAP
from rflens.model import positional
from rflens.paper import ERF_THRESHOLD
from rflens.setup.config import EvalConfig

# Bump when a change here changes the numbers, so cached results are recomputed.
ERF_VERSION = 1

# An ERF that reaches into the oldest tenth of its segment is set by the segment, not by the
# model: a longer segment would spread the gradient further and read a larger ERF. Such a
# value is only a lower bound (see :func:`erf_capped`).
ERF_CAP_MARGIN = 0.1


# -----------------------------------------------------------------------------
# pure functions


def input_gradients(model, segments: np.ndarray, batch_size: int = 8, progress: bool = True,
                    kernel: str = "auto") -> np.ndarray:
    """||d loss_last / d e_m|| for every input position m of every segment.

    ``segments``: (N, L + 1) token ids; the model reads ``segments[:, :L]`` and the loss is
    the cross-entropy of ``segments[:, L]`` at the last position. Returns float64 (N, L)
    in input order (column L - 1 is the most recent token). Samples do not interact, so one
    backward of the summed loss of a batch gives each sample's own gradient. Parameters are
    frozen during the call (no parameter gradients to compute) and restored afterwards.
    """
    segments = np.asarray(segments)
    if segments.ndim != 2 or segments.shape[0] == 0 or segments.shape[1] < 2:
        raise UserError(f"segments must be an (N, L + 1) array with N >= 1 and L >= 1, got shape {segments.shape}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise UserError(f"batch_size must be a positive integer, got {batch_size!r}")
    n, length = segments.shape[0], segments.shape[1] - 1
    device = next(model.parameters()).device
    seg = torch.as_tensor(segments.astype(np.int64), device=device)
    out = np.empty((n, length), dtype=np.float64)
    saved = [(p, p.requires_grad) for p in model.parameters()]
    try:
        for p, _ in saved:
            p.requires_grad_(False)
        with torch.enable_grad():
            for j in tqdm(range(0, n, batch_size), desc="input gradients", disable=not progress, leave=False):
                idx, target = seg[j:j + batch_size, :-1], seg[j:j + batch_size, -1]  # (B, L), (B,)
                embeds = model.embed(idx).detach().requires_grad_(True)  # (B, L, d)
                logits = model(embeds=embeds, last_only=True, kernel=kernel)[:, -1]  # (B, v)
                loss = F.cross_entropy(logits.float(), target, reduction="sum")
                (grad,) = torch.autograd.grad(loss, embeds)  # (B, L, d)
                out[j:j + batch_size] = grad.double().norm(dim=-1).cpu().numpy()
    finally:
        for p, flag in saved:
            p.requires_grad_(flag)
    return out


def normalize(norms: np.ndarray, who: str = "the model", fix: str | None = None) -> np.ndarray:
    """Per-sample normalised gradients averaged over samples, index 0 = most recent token.

    ``norms``: (N, L) in input order, as from :func:`input_gradients`. Returns (L,) summing to 1;
    a sample without a finite, positive gradient is a UserError naming ``who`` (and ``fix``).
    """
    return per_segment(norms, who, fix).mean(axis=0)  # (L,)


def per_segment(norms: np.ndarray, who: str = "the model", fix: str | None = None) -> np.ndarray:
    """Each sample's normalised gradient, index 0 = most recent token: (N, L), each row summing
    to 1 (:func:`normalize` is their mean; an ERF's interval resamples them,
    :func:`erf_interval`)."""
    norms = np.asarray(norms, dtype=np.float64)
    if norms.ndim == 1:
        norms = norms[None]
    total = norms.sum(axis=1, keepdims=True)  # (N, 1)
    if np.any(total <= 0) or not np.all(np.isfinite(total)):
        bad = int(np.flatnonzero((total <= 0) | ~np.isfinite(total))[0])
        raise UserError(f"{who} gives sample {bad} a {'zero' if total[bad, 0] == 0 else 'non-finite'} input "
                        f"gradient: the receptive field is undefined{'; ' + fix if fix else ''}")
    return (norms / total)[:, ::-1].copy()  # (N, L)


def erf_from_normalized(normalized, threshold: float = ERF_THRESHOLD) -> int:
    """The smallest k such that the k most recent tokens hold ``threshold`` of the gradient."""
    if not 0 < threshold <= 1:
        raise UserError(f"threshold must be in (0, 1], got {threshold!r}")
    cumulative = np.cumsum(np.asarray(normalized, dtype=np.float64))
    # a tiny tolerance so that threshold = 1 is reached despite rounding in the sum
    reached = np.flatnonzero(cumulative >= threshold * cumulative[-1] - 1e-12)
    return int(reached[0]) + 1


def erf_capped(erf: int, length: int, theoretical: int | None = None) -> bool:
    """Whether an ERF measured on segments of ``length`` tokens is only a lower bound.

    It is when the ERF reaches into the oldest ``ERF_CAP_MARGIN`` of the segment: the
    gradient still had somewhere to go, and a longer segment would read a larger ERF (a
    model that looks at every token, like NoPE, reads about 0.99 x the segment at any
    length). The exception is a model whose theoretical field (R x w for windows) fits in the
    segment: its gradient is exactly zero beyond the field, so a longer segment reads the same.
    """
    if theoretical is not None and theoretical <= length:
        return False
    return bool(erf > (1 - ERF_CAP_MARGIN) * length)


def summarize(normalized, threshold: float, l_tr: int, theoretical: int | None = None) -> dict:
    """Cumulative curve, ERF (and whether the segment capped it, :func:`erf_capped`) and the
    share of the gradient inside the last L_tr tokens."""
    normalized = np.asarray(normalized, dtype=np.float64)
    cumulative = np.cumsum(normalized)
    erf = erf_from_normalized(normalized, threshold)
    return {
        "length": int(normalized.size),
        "normalized": normalized.tolist(),
        "cumulative": cumulative.tolist(),
        "erf": erf,
        "capped": erf_capped(erf, normalized.size, theoretical),
        "share_in_ltr": float(cumulative[min(l_tr, normalized.size) - 1]),
        "theoretical": theoretical,
        "l_tr": int(l_tr),
        "threshold": float(threshold),
    }


def theoretical_field(model_cfg) -> int | None:
    """R * w for windowed attention (each layer reaches w - 1 positions further back), else None."""
    window = getattr(model_cfg, "window", None)
    return None if window is None else int(model_cfg.n_layer * window)


# -----------------------------------------------------------------------------
# a stored model


def receptive_field(run, *, length: int | None = None, n: int | None = None, threshold: float | None = None,
                    progress: bool = True, eval_cfg: EvalConfig | None = None) -> dict:
    """Receptive-field analysis of a stored model; the gradients are cached in the run store.

    Defaults from the run's scale: ``length = erf_length_mult x L_tr``, ``n = erf_samples``,
    ``threshold = erf_threshold``. The threshold only enters the summary, so changing it
    reuses the stored gradients.
    """
    from rflens.measure.perplexity import check_rope, corpus_segments, eval_config

    ev = eval_cfg or eval_config(run)
    l_tr = run.train_cfg.l_tr
    length = ev.erf_length_mult * l_tr if length is None else length
    n = ev.erf_samples if n is None else n
    threshold = ev.erf_threshold if threshold is None else threshold
    for name, value in (("length", length), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise UserError(f"the receptive-field {name} must be a positive integer, got {value!r}")
    if not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise UserError(f"the ERF threshold must be in (0, 1], e.g. {ERF_THRESHOLD}; got {threshold!r}")
    length, n = int(length), int(n)
    check_rope(run.model_cfg, ev)
    params = {"length": length, "n": n, "seed": ev.seed, "version": ERF_VERSION, **ev.rope_params()}
    # every sample is a forward and backward pass over the whole segment
    step, segments = resources.training_step_bytes(run.model_cfg, 1, length), 8 * n * (length + 1)
    resources.check(step + segments, f"the receptive field over {length:,} tokens of {n:,} segments",
                    "use a smaller --n" if segments > step else "use a shorter --length")

    def compute() -> dict:
        t0 = time.perf_counter()
        model = run.load_model()
        # a bias that is not finite over the segment: one line naming the setting or the file
        positional.check_bias(model.cfg, length, model.pos)
        segments, about = corpus_segments(run.corpus(), n, length + 1, ev.seed)  # (N, L + 1)
        with positional.stretched(model, *ev.rope_for(length, l_tr), l_tr):
            norms = input_gradients(model, segments, batch_size=ev.batch_size, progress=progress)
        normalized = normalize(norms, f"the model {getattr(run, 'key', '')} ({run.model_cfg.pos})",
                               "retrain it with a scheme and settings whose gradients stay finite")
        return {"length": length, "n": n, "seed": ev.seed, "normalized": normalized.tolist(),
                "seconds": round(time.perf_counter() - t0, 3), **about}

    stored = run.cached("input_gradients", params, compute)
    check_gradients(stored, length, f"the model {getattr(run, 'key', '')} ({run.model_cfg.pos})",
                    f"the folder {getattr(run, 'path', 'of the model')}/results")
    result = summarize(stored["normalized"], threshold, l_tr, theoretical_field(run.model_cfg))
    result.update(n=stored["n"], seed=stored["seed"], seconds=stored["seconds"])
    result.update({k: stored[k] for k in SEGMENT_KEYS if k in stored})
    return result


def check_gradients(stored, length: int, who: str, where: str) -> None:
    """UserError when normalised gradients read back (from the run store, or a bundle) are not
    what :func:`normalize` writes for segments of ``length``: ``length`` finite shares >= 0
    that sum to 1. ``where`` names what to delete so that they are measured again."""
    def bad(field: str):
        raise UserError(f"the stored receptive field of {who} is damaged ({field}): delete {where} to measure it again")

    if not isinstance(stored, dict):
        bad("not a JSON object")
    values = stored.get("normalized")
    if (not isinstance(values, list) or len(values) != length
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)):
        bad("normalized")
    values = np.asarray(values, dtype=np.float64)
    if not np.isfinite(values).all() or (values < 0).any() or abs(values.sum() - 1) > 1e-2:  # shipped shares are rounded
        bad("normalized: not finite shares summing to 1")
    for key in ("n", "seed"):
        if isinstance(stored.get(key), bool) or not isinstance(stored.get(key), int) or stored[key] < 0:
            bad(key)
    if isinstance(stored.get("seconds"), bool) or not isinstance(stored.get("seconds"), (int, float)):
        bad("seconds")


# what :func:`rflens.measure.perplexity.draw` says about the segments, kept with the gradients
SEGMENT_KEYS = ("segment_ends", "segments_distinct", "tokens_covered", "segment_length", "stream_tokens",
                "region_start", "in_region")


# -----------------------------------------------------------------------------
# Figure 7: where the gradient jumps

# a gradient peak counts as "at the absolute position L_tr" within 5% of L_tr
JUMP_TOLERANCE = 0.05


def few_recent(length: int) -> int:
    """How many of the most recent tokens to skip when looking for the gradient jump.

    The last few tokens always carry most of the gradient (local context); the jump of
    Figure 7 is a second peak far from them. "Few" = 2% of the segment, at least 4 tokens.
    """
    return max(4, math.ceil(0.02 * length))


def gradient_jump(normalized, l_tr: int) -> dict:
    """Where the normalised gradient peaks outside the most recent few tokens (Figure 7).

    ``normalized[i]`` belongs to the token i positions before the last one, so in a segment
    of length L its absolute (0-based) position is ``abs_pos = L - 1 - i``. The paper reads
    the peak as "the L_tr-th token"; we call it close when ``|abs_pos - L_tr| <= 5% of
    L_tr``, with at least one position of slack so that the 1-based reading (0-based
    L_tr - 1) is also inside the window at small L_tr.
    """
    g = np.asarray(normalized, dtype=float)
    L = len(g)
    skip = few_recent(L)
    if L <= skip:
        return {"jump_index": None, "jump_abs_pos": None, "jump_ok": None, "jump_tolerance": None, "few": skip}
    i = int(skip + np.argmax(g[skip:]))
    abs_pos = L - 1 - i
    tol = max(1.0, JUMP_TOLERANCE * l_tr)
    return {"jump_index": i, "jump_abs_pos": abs_pos, "jump_ok": bool(abs(abs_pos - l_tr) <= tol),
            "jump_tolerance": tol, "few": skip, "jump_share": float(g[i])}


def step_at_l_tr(normalized, l_tr: int) -> dict:
    """The step of the normalised gradient at the absolute position L_tr, beside its neighbours.

    ``normalized[i]`` belongs to the token i positions before the last one; read by absolute
    (0-based) position p, g(p). The step at L_tr is the drop g(q) - g(q + 1) from the L_tr-th
    token into the first position training never showed, with q = L_tr - 1 or L_tr (the
    1-based and 0-based readings of "the L_tr-th token"), the larger of the two. Its
    neighbours: every step |g(p + 1) - g(p)| with p in [L_tr / 2, 3 L_tr / 2], on both sides,
    except the four that touch q, and none among the most recent few tokens
    (:func:`few_recent`). A jump: the step at L_tr exceeds every neighbour.
    """
    g = np.asarray(normalized, dtype=float)[::-1]  # (L,) by absolute position
    L = len(g)
    last = L - 1 - few_recent(L)  # steps may not reach into the most recent few tokens
    if l_tr + 1 > last:
        return {"step": None, "neighbour_step": None, "jump": None}
    step = max(g[q] - g[q + 1] for q in (l_tr - 1, l_tr))
    near = [p for p in range(max(0, l_tr // 2), min(last, l_tr + l_tr // 2) + 1) if not l_tr - 2 <= p <= l_tr + 1]
    neighbour = max((abs(g[p + 1] - g[p]) for p in near if p + 1 <= last), default=0.0)
    return {"step": float(step), "neighbour_step": float(neighbour), "jump": bool(step > neighbour)}


def erf_interval(shares, threshold: float, l_tr: int, seed: int = 0, n_boot: int = N_BOOTSTRAP,
                 level: float = CI_LEVEL) -> dict:
    """The ERF and the share of the gradient within the last ``l_tr`` tokens, each with its
    percentile-bootstrap interval over segments: ``shares`` (N, L), as from :func:`per_segment`,
    holds each segment's normalised gradient (index 0 the most recent token); a replicate
    averages N segments drawn with replacement (:func:`rflens.measure.intervals.draw_rows`,
    seeded with ``seed`` alone) and reads the ERF of that mean, as the ERF of the whole mean is
    read. Returns {erf, erf_low, erf_high, share, share_low, share_high}."""
    g = np.asarray(shares, dtype=np.float64)
    if g.ndim != 2 or not len(g):
        raise UserError(f"per-segment gradients must be an (N, L) array with N >= 1, got shape {g.shape}")
    rows = draw_rows(seed, len(g), n_boot, by_n=False)
    means = np.stack([g[r].mean(0) for r in rows])  # (n_boot, L)
    erfs = [erf_from_normalized(m, threshold) for m in means]
    within = means[:, :l_tr].sum(1) / means.sum(1)
    q = [(1 - level) / 2, (1 + level) / 2]
    mean = g.mean(0)
    (e_lo, e_hi), (s_lo, s_hi) = np.quantile(erfs, q), np.quantile(within, q)
    return {"erf": erf_from_normalized(mean, threshold), "erf_low": float(e_lo), "erf_high": float(e_hi),
            "share": float(mean[:l_tr].sum() / mean.sum()), "share_low": float(s_lo), "share_high": float(s_hi)}
