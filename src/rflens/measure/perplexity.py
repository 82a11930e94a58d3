"""Perplexity at evaluation lengths L_ex beyond the training length L_tr.

Chi et al. (ACL 2023) measure length extrapolation with a *last-token* protocol
(footnote 2 and Figure 3): take N segments of the test text, and for each context
length score only the last token of every segment, with exactly that many previous
tokens in the model's input. The scored tokens are therefore the same at every length
(and for every model), and a change of perplexity with the length can only come from
how the model uses the extra context.

The convention used here: segments have ``max(lengths) + 1`` tokens. At context length
``L`` the model reads ``segment[-(L + 1):-1]`` (``L`` tokens) and predicts
``segment[-1]``, the segment's final token, from its last position. Only that position's
logits are computed (``last_only=True``).

Two more protocols are offered for comparison (both use the same API and the same cache):

* ``non_overlapping`` (ALiBi's main protocol): the test stream is cut into consecutive
  chunks of ``L`` tokens and every token of a chunk is scored; a token early in its chunk
  sees only a short context (the "early token curse" of Figure 3).
* ``sliding``: windows of ``L`` tokens moved by a stride ``s`` (default L / 2); every window scores only
  its last ``s`` tokens (the first window scores all of them), so every scored token but
  the first ``L - s`` sees at least ``L - s`` previous tokens.

All three score tokens of one region of the test split (:meth:`rflens.data.Corpus.eval_region_start`
to its end): the last-token segments end there, and the windowed protocols tile it (the
whole region at every length, unless a number of windows ``n`` is given). A difference
between protocols on one model then comes from how they score, not from what they score.

Confidence intervals: a 95% percentile bootstrap over the evaluation units (segments for
the last-token protocol, chunks or windows for the others), 1000 resamples with a fixed
seed (:func:`rflens.measure.intervals.bootstrap_ppl`); the perplexity of a resample is
exp(sum of NLL / number of scored tokens). Segment ends are drawn with replacement, so a
short text gives the same segment more than once: the bootstrap then resamples the distinct
segments (each with all its draws), and the result says how many distinct segments its
interval rests on, and when their contexts overlap.

Every number a measurement returns is finite, or the measurement stops with one line naming
the setting (a length, or the scheme's bias) that made it not.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from rflens.data.corpus import draw_segments, eval_region_start, segment_ends
from rflens.errors import UserError
from rflens.measure import resources
from rflens.measure.intervals import bootstrap_ppl, CI_LEVEL, N_BOOTSTRAP
from rflens.model import positional
from rflens.setup.config import ConfigError, EvalConfig, MIN_EVAL_LENGTH, PROTOCOLS

# Bump when a change here changes the numbers, so cached results are recomputed.
EVAL_VERSION = 3  # 2: the windowed protocols score the last-token protocol's region; 3: redrawn segments
# where the last-token protocol's scored tokens lie: drawn uniformly from the evaluation region
# (every table's), or covering every test document (Table 2's, where a model allows it:
# rflens.data.corpus.document_draw)
DRAWS = ("uniform", "documents")
# Segments whose contexts hold fewer distinct tokens than this share of their own tokens are
# said to overlap (a short text, or long segments in a short evaluation region).
OVERLAP_SHARE = 0.5
# Upper bound on the full (B, L, v) logits of the windowed protocols, in float32 elements.
MAX_LOGIT_ELEMENTS = 1 << 26  # 256 MB
# Tokens per forward pass: long inputs are evaluated a few segments at a time, so that the
# activations (B, L, 4d) stay the same size at 16 x L_tr as at L_tr.
MAX_TOKENS = 4096
# From this length on (CPU), attention takes the memory-bounded "chunked" kernel: it never
# builds the (H, L, L) bias, skips the causal half of the keys, and from 2048 positions on
# takes a fraction of the time and memory of SDPA with the full bias (bench/eval_memory.py).
CHUNK_FROM = 1024


# -----------------------------------------------------------------------------
# pure functions: a model and token arrays in, NLLs out


def check_lengths(lengths, max_length: int | None = None) -> list[int]:
    if isinstance(lengths, (int, np.integer)):
        lengths = [lengths]
    try:
        lengths = [int(x) for x in lengths]
    except (TypeError, ValueError):
        raise UserError(f"lengths must be integers, got {lengths!r}") from None
    if not lengths:
        raise UserError("lengths is empty: give at least one evaluation length, e.g. --lengths 64,128")
    lengths = list(dict.fromkeys(lengths))  # a length given twice is measured (and printed) once
    bad = [x for x in lengths if x < MIN_EVAL_LENGTH]
    if bad:
        raise UserError(f"evaluation length {bad[0]} is too short: every length must be at least {MIN_EVAL_LENGTH} tokens")
    if max_length is not None and max(lengths) > max_length:
        raise UserError(f"evaluation length {max(lengths)} needs segments of {max(lengths) + 1} tokens, "
                        f"but the segments have {max_length + 1}: use longer segments or shorter lengths")
    return lengths


def check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise UserError(f"the number of segments n must be a positive integer, got {n!r}")
    return int(n)


def choose_kernel(model, length: int) -> str:
    """The attention kernel for an evaluation pass over ``length`` positions.

    "chunked" on CPU from CHUNK_FROM positions on, so that evaluation at 16 x L_tr never
    holds an (H, L, L) bias; otherwise "auto" (SDPA on CPU, FlexAttention on CUDA).
    """
    device = next(model.parameters()).device
    return "chunked" if device.type == "cpu" and length >= CHUNK_FROM else "auto"


def rows_per_pass(length: int, batch_size: int, max_tokens: int = MAX_TOKENS) -> int:
    """Segments per forward pass: at most ``batch_size`` and at most ``max_tokens`` tokens."""
    return max(1, min(batch_size, max_tokens // length))


@torch.no_grad()
def last_token_nll(model, segments: np.ndarray, lengths, batch_size: int = 8, progress: bool = True,
                   kernel: str | None = None, max_tokens: int = MAX_TOKENS) -> np.ndarray:
    """NLL of each segment's final token, predicted with exactly ``length`` previous tokens.

    ``segments``: (N, S) token ids with S >= max(lengths) + 1. At length L the input is
    ``segments[:, S - 1 - L : S - 1]`` and the target ``segments[:, S - 1]`` for every L.
    A forward pass reads at most ``batch_size`` segments and ``max_tokens`` tokens (one
    segment at least); ``kernel`` None picks one per length (:func:`choose_kernel`).
    Returns a float64 array (len(lengths), N).
    """
    segments = np.asarray(segments)
    if segments.ndim != 2 or segments.shape[0] == 0:
        raise UserError(f"segments must be a non-empty (N, length) array, got shape {segments.shape}")
    n, s = segments.shape
    lengths = check_lengths(lengths, s - 1)
    check_n(batch_size)
    device = next(model.parameters()).device
    seg = torch.as_tensor(segments.astype(np.int64), device=device)
    target = seg[:, -1]  # (N,) the same token at every length
    out = np.empty((len(lengths), n), dtype=np.float64)
    batches = [(i, j, j + rows_per_pass(length, batch_size, max_tokens))
               for i, length in enumerate(lengths) for j in range(0, n, rows_per_pass(length, batch_size, max_tokens))]
    for i, j, k in tqdm(batches, desc="last-token NLL", disable=not progress, leave=False):
        length = lengths[i]
        idx = seg[j:k, s - 1 - length:s - 1]  # (B, L)
        logits = model(idx, last_only=True, kernel=kernel or choose_kernel(model, length))[:, -1]  # (B, v)
        nll = F.cross_entropy(logits.float(), target[j:k], reduction="none")  # (B,)
        out[i, j:k] = nll.double().cpu().numpy()
    return out


@torch.no_grad()
def window_nll(model, tokens: np.ndarray, length: int, n: int, stride: int | None = None, batch_size: int = 8,
               progress: bool = True, kernel: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-window NLL sums and token counts of the non-overlapping / sliding protocols.

    Window k reads ``tokens[k * stride : k * stride + length]`` and predicts the next token at
    each position; the first window scores all ``length`` targets, later ones only their last
    ``stride`` targets, so every token after the first is scored once. ``stride = length``
    (the default) is the non-overlapping protocol. At most ``n`` windows, fewer when the
    stream is short. Returns (nll_sum (n_used,), count (n_used,)), float64 and int64.
    """
    (length,) = check_lengths([length])
    n = check_n(n)
    stride = length if stride is None else int(stride)
    if not 1 <= stride <= length:
        raise UserError(f"stride {stride} must be between 1 and the window length {length}")
    tokens = np.asarray(tokens).reshape(-1)
    if tokens.size < length + 1:
        raise UserError(f"the test split has {tokens.size} tokens, fewer than the {length + 1} that one window "
                        f"of length {length} needs: use shorter lengths or a larger corpus")
    n_used = min(n, (tokens.size - 1 - length) // stride + 1)
    device = next(model.parameters()).device
    # keep the (B, L, v) logits bounded, whatever the vocabulary and length
    vocab = model.cfg.vocab_size if hasattr(model, "cfg") else 1
    batch_size = max(1, min(rows_per_pass(length, batch_size), MAX_LOGIT_ELEMENTS // (length * vocab)))
    kernel = kernel or choose_kernel(model, length)
    starts = np.arange(n_used) * stride
    offsets = np.arange(length + 1)
    nll_sum = np.zeros(n_used, dtype=np.float64)
    count = np.full(n_used, stride, dtype=np.int64)
    count[0] = length
    for j in tqdm(range(0, n_used, batch_size), desc=f"NLL L={length}", disable=not progress, leave=False):
        win = torch.as_tensor(tokens[starts[j:j + batch_size, None] + offsets].astype(np.int64), device=device)
        logits = model(win[:, :-1], kernel=kernel)  # (B, L, v)
        nll = F.cross_entropy(logits.flatten(0, 1).float(), win[:, 1:].flatten(), reduction="none")
        nll = nll.view(win.shape[0], length).double()  # (B, L)
        scored = nll[:, length - stride:].sum(1)  # the last `stride` targets
        if j == 0:
            scored[0] = nll[0].sum()  # the first window scores everything
        nll_sum[j:j + batch_size] = scored.cpu().numpy()
    return nll_sum, count


def draw(tokens, n: int, length: int, seed: int = 0, what: str = "the token stream") -> tuple[np.ndarray, dict]:
    """The last-token segments of :func:`rflens.data.corpus.draw_segments` ((n, length) int64,
    the very same), and what they rest on (:func:`describe_segments`)."""
    segments = draw_segments(tokens, n, length, seed, what)  # checks n and length first
    return segments, describe_segments(segment_ends(len(tokens), n, length, seed), length, len(tokens))


def corpus_segments(corpus, n: int, length: int, seed: int = 0) -> tuple[np.ndarray, dict]:
    """A corpus's evaluation segments (:meth:`rflens.data.Corpus.eval_segments`, the draw of
    :func:`rflens.data.corpus.draw_segments` on its test split) and what they rest on, with
    the test-split document of each segment's scored token (``segment_docs``,
    :meth:`rflens.data.Corpus.segment_docs`) where the corpus knows its documents."""
    segments = corpus.eval_segments(n, length, seed)  # checks n and length first
    total = len(corpus.tokens("test"))
    about = describe_segments(segment_ends(total, n, length, seed), length, total)
    if hasattr(corpus, "segment_docs"):  # a stream that knows its documents (rflens.data.Corpus)
        about["segment_docs"] = corpus.segment_docs(n, length, seed).tolist()
    return segments, about


def segment_docs_of(corpus, result: dict) -> list[int]:
    """The test-split document of each segment's scored token for a last-token ``result``
    measured on ``corpus`` (:meth:`rflens.data.Corpus.segment_docs`), recomputed from its
    settings (``n``, ``seed`` and the segment length, ``max(lengths) + 1`` unless it says
    otherwise): for a result that does not record them (stored before they were, or built
    from other measurements), so that its paired intervals can resample documents. The
    segments must have been drawn from this corpus's test split by :func:`corpus_segments`
    with those settings; a result whose stream length differs is refused."""
    if result.get("protocol", "last_token") != "last_token":
        raise UserError(f"only the last-token protocol scores segments, not {result.get('protocol')}")
    n = len(result["nll_per_segment"][0]) if result.get("nll_per_segment") else result.get("n")
    length = int(result.get("segment_length") or max(int(L) for L in result["lengths"]) + 1)
    total = len(corpus.tokens("test"))
    if result.get("stream_tokens") not in (None, total):
        raise UserError(f"the result was measured on a test split of {result['stream_tokens']:,} tokens, but "
                        f"{corpus.name}'s has {total:,}: give the corpus it was measured on")
    return corpus.segment_docs(check_n(n), length, int(result.get("seed", 0))).tolist()


def describe_segments(ends, length: int, total: int) -> dict:
    """What an interval over segments of ``length`` tokens ending at ``ends`` (exclusive
    positions in a stream of ``total`` tokens) rests on: the end of each segment (its
    cluster for the bootstrap), how many are distinct, how many distinct tokens their
    contexts hold, and whether they end in the evaluation region shared by every shorter
    length (:func:`rflens.data.corpus.eval_region_start`)."""
    ends = np.asarray(ends, dtype=np.int64)
    distinct = np.unique(ends)
    # tokens covered by the union of [end - length, end) over the distinct ends
    gaps = np.minimum(np.diff(distinct), length)
    covered = int(gaps.sum()) + length
    return {"segment_ends": ends.tolist(), "segments_distinct": int(distinct.size), "tokens_covered": covered,
            "segment_length": int(length), "stream_tokens": int(total),
            "region_start": eval_region_start(total), "in_region": length <= eval_region_start(total)}


def unit_notes(result: dict) -> list[str]:
    """For the windowed protocols: the lengths at which the evaluation region holds fewer
    chunks or windows than the N asked for (empty when every length has N, or none was asked)."""
    n, unit = result.get("n"), _UNIT.get(result.get("protocol"), "units")
    if result.get("protocol") == "last_token" or not isinstance(n, int):
        return []
    if any(u < 2 for u in result["units"]):
        return [f"an interval over a single {unit[:-1]} is no interval at all: shorter lengths, or a larger corpus, "
                f"give more {unit}"] + unit_notes({**result, "units": [max(2, u) for u in result["units"]]})
    short = [(L, u) for L, u in zip(result["lengths"], result["units"]) if u < n]
    if not short:
        return []
    said = ", ".join(f"{u:,} at L_ex = {L}" for L, u in short)
    return [f"N = {n:,} {unit} asked, but the evaluation region holds only {said}: each length's interval rests on "
            f"the {unit} it has"]


def segment_notes(result: dict, interval: bool = True) -> list[str]:
    """Sentences about the segments a result rests on (a last-token result, or a receptive
    field with ``interval`` False), when they are not distinct, separate draws from the shared
    evaluation region (empty otherwise, and for a result that does not record them)."""
    if "segments_distinct" not in result:
        return []
    n, k, length = len(result["segment_ends"]), result["segments_distinct"], result["segment_length"]
    notes = []
    if k == 1 and interval:
        notes.append("the interval rests on one segment, so it is no interval at all: ask for more segments (--n)")
    if k < n:
        notes.append(f"{n:,} segments drawn, {k:,} of them distinct: a segment drawn again is the same observation"
                     + (f", so the interval resamples the {k:,} distinct segments (with all their draws)" if interval
                        else "") + "; a longer text would give more, and fewer segments (--n) lose nothing")
    if result["tokens_covered"] < OVERLAP_SHARE * k * length:
        notes.append(f"the {k:,} distinct segments of {length:,} tokens overlap: together they hold "
                     f"{result['tokens_covered']:,} distinct tokens, so their scored tokens share most of "
                     f"their context" + (" and the interval is narrower than for separate texts" if interval else ""))
    if not result["in_region"] and result.get("draw", "uniform") == "uniform":  # the documents draw: everywhere
        notes.append(f"segments of {length:,} tokens do not fit before the evaluation "
                     f"region, which starts at token {result['region_start']:,} of {result['stream_tokens']:,}: "
                     f"they end elsewhere, so every length here scores other tokens than a command whose "
                     f"lengths all stay below {result['region_start']:,}")
    return notes


# -----------------------------------------------------------------------------
# a stored model: defaults from its scale, results cached in the run store


def eval_config(run) -> EvalConfig:
    """The evaluation settings of the run's scale (the defaults if it has none)."""
    from rflens.setup import presets

    name = getattr(run, "scale", None)
    return presets.get(name).eval if name else EvalConfig()


def perplexity(run, *, protocol: str | None = None, lengths=None, n: int | None = None, progress: bool = True,
               eval_cfg: EvalConfig | None = None, draw: str = "uniform") -> dict:
    """Perplexity of a stored model at several lengths, cached in the run store.

    Defaults come from the run's scale (``eval_cfg`` overrides them): protocol
    ``last_token``, lengths ``L_tr x length_mults``, ``n = n_segments``. A repeated call
    with the same settings reads the stored result. ``draw="documents"`` (last-token
    protocol only) scores tokens of every test document (:data:`DRAWS`).
    """
    ev = eval_cfg or eval_config(run)
    protocol = protocol or ev.protocol
    if protocol not in PROTOCOLS:
        raise ConfigError("protocol", protocol, "allowed values are " + ", ".join(PROTOCOLS))
    if draw not in DRAWS or (draw != "uniform" and protocol != "last_token"):
        raise UserError(f"draw={draw!r}: choose {' or '.join(DRAWS)} (documents with the last-token protocol only)")
    l_tr = run.train_cfg.l_tr
    lengths = check_lengths([l_tr * m for m in ev.length_mults] if lengths is None else lengths)
    # the last-token protocol scores N segments; the windowed ones the whole evaluation
    # region unless a number of windows is given (n None)
    if n is not None:
        n = check_n(n)
    elif protocol == "last_token":
        n = check_n(ev.n_segments)
    # sliding: a fixed stride, or (None) half of each window, so that the cost of tiling the
    # region stays twice the non-overlapping one at every length
    stride = (ev.stride or "half") if protocol == "sliding" else None
    check_rope(run.model_cfg, ev)
    params = {"protocol": protocol, "lengths": lengths, "n": n, "seed": ev.seed, "stride": stride,
              "version": EVAL_VERSION, **ev.rope_params()}
    if draw != "uniform":  # named only where it is not the default: the uniform draw's cached results stay theirs
        params["draw"] = draw
    if n is not None:
        resources.check(resources.evaluation_bytes(n, max(lengths), len(lengths), ev.batch_size, run.model_cfg,
                                                   N_BOOTSTRAP),
                        f"evaluating {n:,} segments of up to {max(lengths):,} tokens",
                        "ask for fewer segments (--n) or shorter lengths (--lengths)")

    def compute() -> dict:
        t0 = time.perf_counter()
        model = run.load_model()
        # a bias that is not finite at the longest length: one line naming the setting or the file
        positional.check_bias(model.cfg, max(lengths), model.pos)
        corpus = run.corpus()
        total = len(corpus.tokens("test"))
        if protocol == "last_token" and max(lengths) + 1 > total:  # a length of L reads L + 1 tokens: L inputs, 1 target
            raise UserError(f"evaluation length {max(lengths)} reads {max(lengths) + 1} tokens ({max(lengths)} of "
                            f"context and the one it predicts), but the {getattr(corpus, 'name', 'corpus')} test split has {total}: use "
                            f"lengths up to {total - 1} (--lengths), or more data (max_bytes)")
        if protocol == "last_token":
            if draw == "documents":
                segments, docs, ends = corpus.document_segments(n, max(lengths) + 1, ev.seed)
                about = describe_segments(ends, max(lengths) + 1, total) | {
                    "in_region": False, "draw": draw, "segment_docs": docs.tolist()}
            else:
                segments, about = corpus_segments(corpus, n, max(lengths) + 1, ev.seed)  # (N, max L + 1)
            nll = np.concatenate([last_token_nll(model, segments, group, batch_size=ev.batch_size, progress=progress)
                                  for group in _rope_groups(model, ev, lengths, l_tr)])
            result = last_token_result(nll, lengths, l_tr, ev.seed, about)
        else:
            result = _empty_result(protocol, lengths, n, l_tr, ev.seed)
            # the region the last-token segments end in, so that the protocols score the same text
            tokens = corpus.tokens("test")[corpus.eval_region_start():]
            # (a generator: each length is evaluated while the model is stretched for it)
            for (length,) in tqdm(_rope_groups(model, ev, lengths, l_tr, split=True), total=len(lengths),
                                  desc=protocol, disable=not progress, leave=False):
                s = length if protocol == "non_overlapping" else (
                    max(1, length // 2) if stride == "half" else min(stride, length))
                nll_sum, count = window_nll(model, tokens, length, n or tokens.size, s, batch_size=ev.batch_size,
                                            progress=progress)
                ppl, lo, hi = bootstrap_ppl(nll_sum, count, seed=ev.seed)
                _append(result, ppl, lo, hi, nll_sum.sum() / count.sum(), int(count.sum()), nll_sum.size)
            result["stride"] = stride
            result["ci"] = _ci_text(protocol)
        result["seconds"] = round(time.perf_counter() - t0, 3)
        check_finite(result, who)  # nothing non-finite is stored
        return result

    who = f"the model {getattr(run, 'key', '')} ({run.model_cfg.pos})"
    result = run.cached(f"perplexity_{protocol}", params, compute)
    if protocol == "last_token" and "segment_docs" not in result and not hasattr(run, "served") \
            and hasattr(run.corpus(), "segment_docs"):
        # stored before results recorded the documents: the same draw on the same corpus gives them
        result = {**result, "segment_docs": segment_docs_of(run.corpus(), result)}
    # nothing damaged or non-finite is served either, from an older store or a bundle
    check_stored(result, lengths, who, f"the folder {getattr(run, 'path', 'of the model')}/results")
    check_finite(result, who)
    return result


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_stored(result, lengths, who: str, where: str) -> None:
    """UserError when a result read back (from the run store, or built from a bundle) is not
    what this module writes for ``lengths``: it would print wrong numbers, or fail in the
    printing. ``where`` names what to delete so that it is measured again."""
    def bad(field: str):
        raise UserError(f"the stored perplexity of {who} is damaged ({field}): delete {where} to measure it again")

    if not isinstance(result, dict):
        bad("not a JSON object")
    if result.get("lengths") != list(lengths):
        bad("lengths")
    for key in ("ppl", "ci_low", "ci_high", "nll"):
        values = result.get(key)
        if not isinstance(values, list) or len(values) != len(lengths) or not all(_number(v) for v in values):
            bad(key)
    for ppl, nll in zip(result["ppl"], result["nll"]):  # ppl = exp(mean NLL), wherever that is a number
        if np.isfinite(nll) and nll < 700 and not (np.isfinite(ppl) and ppl > 0 and
                                                   abs(np.log(ppl) - nll) <= 1e-6 * max(1.0, abs(nll))):
            bad("ppl is not exp of the mean NLL")
    for key in ("tokens", "units"):
        values = result.get(key)
        if not isinstance(values, list) or len(values) != len(lengths) or not all(_count(v) for v in values):
            bad(key)
    if not _number(result.get("seconds")) or not isinstance(result.get("ci"), str):
        bad("seconds" if not _number(result.get("seconds")) else "ci")
    if "segments_distinct" in result:
        ends = result.get("segment_ends")
        if (not isinstance(ends, list) or not all(_count(e) for e in ends) or
                not all(_count(result.get(k)) for k in ("segments_distinct", "tokens_covered", "segment_length",
                                                         "stream_tokens", "region_start"))
                or result["segments_distinct"] != len(set(ends)) or not isinstance(result.get("in_region"), bool)):
            bad("segments")
    if "segment_docs" in result:
        docs = result["segment_docs"]
        if not isinstance(docs, list) or not all(_count(d) for d in docs) or (
                result.get("nll_per_segment") and len(docs) != len(result["nll_per_segment"][0])):
            bad("segment_docs")


RETRAIN = "retrain the model with a scheme and settings that stay finite there"


def check_finite(result: dict, who: str, remedy: str = RETRAIN) -> None:
    """UserError naming the first length whose perplexity, interval or NLL is not finite, the
    lengths that are, and ``remedy``; nothing else when every number is finite."""
    lengths = result["lengths"]
    keys = ("ppl", "ci_low", "ci_high", "nll")
    for i, length in enumerate(lengths):
        bad = next((result[k][i] for k in keys if not np.isfinite(result[k][i])), None)
        if bad is None:
            continue
        good = [L for j, L in enumerate(lengths) if all(np.isfinite(result[k][j]) for k in keys)]
        what = ("its loss is not finite there" if not np.isfinite(result["nll"][i]) else
                "exp of its mean loss overflows" if not np.isfinite(result["ppl"][i]) else
                "its interval is not finite")
        fix = f"measure --lengths up to {max(good)}, or {remedy}" if good else remedy
        raise UserError(f"{who} gives a perplexity of {bad} at L_ex = {length} ({what}): no number is reported "
                        f"for it; {fix}")


def check_rope(model_cfg, ev: EvalConfig) -> None:
    """A stretching method (``rope_scaling``) is for rotary models only: one line otherwise."""
    if ev.rope_scaling is not None and model_cfg.pos != "rotary":
        raise UserError(f"rope_scaling={ev.rope_scaling} stretches rotary models only, not {model_cfg.pos}: "
                        "drop --set rope_scaling or choose --pos rotary")


def _rope_groups(model, ev: EvalConfig, lengths: list[int], l_tr: int, split: bool = False):
    """The lengths in groups evaluated with one rotary stretching each: all of them at once
    for plain rotary (and every other scheme), one by one when the factor follows L_ex / L_tr;
    the model is stretched while the caller evaluates a group, plain again afterwards."""
    if ev.rope_scaling is None and not split:
        yield lengths
        return
    for length in lengths:
        with positional.stretched(model, *ev.rope_for(length, l_tr), l_tr):
            yield [length]


_UNIT = {"last_token": "segments", "non_overlapping": "chunks", "sliding": "windows"}


def last_token_result(nll: np.ndarray, lengths: list[int], l_tr: int, seed: int, about: dict | None = None) -> dict:
    """The last-token protocol's result from per-segment NLLs ``nll`` (lengths, N): ppl per
    length with its bootstrap interval over segments, and the per-segment NLLs (the same
    tokens for every model, so that comparisons can be paired). ``about``: what the segments
    rest on (:func:`draw`), kept in the result; segments drawn more than once are resampled
    together, and ``units`` counts the distinct ones."""
    nll = np.asarray(nll, dtype=np.float64)
    result = _empty_result("last_token", list(lengths), nll.shape[1], l_tr, seed)
    ends = None if about is None else np.asarray(about["segment_ends"])
    units = row_units = nll.shape[1] if about is None else about["segments_distinct"]
    for row in nll:
        ppl, lo, hi = bootstrap_ppl(row, seed=seed, clusters=ends)
        _append(result, ppl, lo, hi, row.mean(), row.size, row_units)
    result["nll_per_segment"] = np.round(nll, 6).tolist()
    if about is not None:
        result.update(about)
    result["ci"] = _ci_text("last_token") + (f" (the {units:,} distinct segments, each with all its draws)"
                                             if units < nll.shape[1] else "")
    return result


def _empty_result(protocol: str, lengths: list[int], n, l_tr: int, seed: int) -> dict:
    return {"protocol": protocol, "lengths": lengths, "ppl": [], "ci_low": [], "ci_high": [],
            "nll": [], "tokens": [], "units": [], "n": n, "l_tr": l_tr, "seed": seed}


def _ci_text(protocol: str) -> str:
    return f"{CI_LEVEL:.0%} percentile bootstrap over {_UNIT[protocol]}, {N_BOOTSTRAP} resamples"


def _append(result: dict, ppl, lo, hi, nll_mean, tokens, units) -> None:
    result["ppl"].append(ppl)
    result["ci_low"].append(lo)
    result["ci_high"].append(hi)
    result["nll"].append(float(nll_mean))
    result["tokens"].append(int(tokens))
    result["units"].append(int(units))
