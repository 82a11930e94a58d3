"""The two measurements of a Hugging Face causal LM, last-token perplexity
(:func:`hf_perplexity`) and the receptive-field analysis (:func:`hf_receptive_field`), run by
:mod:`rflens.measure.perplexity` and :mod:`rflens.measure.receptive` through the adapter, with their default
lengths and sample counts. Results are JSON files under ``runs_dir()/hf/``, keyed by the model's
identity, the text's fingerprint and the settings; a repeated call reads them without loading
the model.
"""

from __future__ import annotations

import hashlib
import json
import time

import numpy as np
import torch

from rflens import storage
from rflens.errors import UserError
from rflens.measure import resources
from rflens.setup.config import DataConfig, EvalConfig
from rflens.measure.perplexity import (EVAL_VERSION, check_finite, check_lengths, check_n, check_stored,
    last_token_nll, last_token_result, rows_per_pass)
from rflens.hf.adapter import device_and_dtype, load
from rflens.hf.hub import ModelRef, resolve
from rflens.hf.text import _Text, text_draw
from rflens.measure.intervals import N_BOOTSTRAP
from rflens.measure.receptive import check_gradients, ERF_VERSION, input_gradients, normalize, SEGMENT_KEYS, summarize
from rflens.paper import ERF_THRESHOLD

# Bump when a change in rflens.hf changes the numbers, so cached results are recomputed.
HF_VERSION = 2  # 2: segments drawn twice resampled together, what the segments rest on recorded
# Pretrained models are large: the default lengths reach 4 x L_tr (rflens's own models: 16 x)
LENGTH_MULTS = (0.25, 0.5, 1, 2, 4)
ERF_LENGTH_MULT = 2
UNKNOWN_L_TR_LENGTHS = (256, 512, 1024, 2048, 4096)  # when the config names no position count
UNKNOWN_L_TR_ERF_LENGTH = 1024
ERF_MAX_TOKENS = 1024  # tokens per forward and backward pass of the receptive-field analysis


PRETRAINED_FIX = "check its weights and dtype (a pretrained model gives finite losses)"


def check_vocabulary(lens, tokens: np.ndarray, name: str) -> np.ndarray:
    """``tokens``, unless the tokenizer gives ids the model has no embedding for (a folder
    whose tokenizer belongs to another model): then one line, not an IndexError inside it."""
    size = lens.hf.get_input_embeddings().num_embeddings
    if len(tokens) and (int(tokens.max()) >= size or int(tokens.min()) < 0):
        raise UserError(f"the tokenizer of {name} gives token id {int(tokens.max())}, but the model embeds only ids "
                        f"0..{size - 1}: the folder's tokenizer belongs to another model; save the model's own "
                        "tokenizer beside it")
    return tokens


def _defaults(scale: str | None, eval_cfg: EvalConfig | None, data_cfg: DataConfig | None):
    from rflens.setup import presets

    preset = presets.get(scale or presets.DEFAULT_SCALE)
    ev = eval_cfg or preset.eval
    if getattr(ev, "rope_scaling", None) is not None:
        raise UserError("rope_scaling stretches rflens's rotary models; a Hugging Face model keeps its own "
                        "positions: drop --set rope_scaling")
    return ev, data_cfg or preset.data


def _cached(kind: str, params: dict, compute) -> dict:
    """``compute()``'s result, stored under runs_dir()/hf; ``cached`` says whether it was read."""

    params = json.loads(json.dumps(params, default=str))
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()
    result, hit = storage.cached_file(storage.runs_dir() / "hf" / f"{kind}-{digest[:20]}.json", kind, params, compute)
    return {**result, "cached": hit}


def _about(ref: ModelRef, text: _Text, dtype: torch.dtype) -> dict:
    field = ref.l_tr_field
    return {"model": ref.name, "model_type": ref.model_type, "text": text.describe, "l_tr": ref.l_tr,
            "l_tr_source": (f"the config's {field}" if field else
                            "unknown: the config names no position count (n_positions, max_position_embeddings)"),
            "dtype": str(dtype).replace("torch.", "")}


def _inputs(ref: ModelRef, text, corpus: str, data_cfg: DataConfig, device, seed: int, progress: bool):
    """The text to measure on, the device and dtype, and the cache parameters every
    measurement of ``ref`` shares (model, text, seed, dtype)."""
    src = _Text(text, corpus, data_cfg, progress)
    device, dtype = device_and_dtype(device)
    return src, device, dtype, {"model": ref.identity, "text": src.fingerprint, "seed": seed, "dtype": str(dtype)}


def default_lengths(ref: ModelRef) -> list[int]:
    """L_tr x (1/4, 1/2, 1, 2, 4), those that fit a learned-absolute model; without an L_tr,
    256 to 4096."""
    if ref.l_tr is None:
        return list(UNKNOWN_L_TR_LENGTHS)
    lengths = sorted({max(2, int(ref.l_tr * m)) for m in LENGTH_MULTS})
    return [x for x in lengths if ref.max_positions is None or x <= ref.max_positions]


def hf_perplexity(model, *, text=None, corpus: str = "prose", lengths=None, n: int | None = None,
                  revision: str | None = None, scale: str | None = None, eval_cfg: EvalConfig | None = None,
                  data_cfg: DataConfig | None = None, device=None, progress: bool = True) -> dict:
    """Last-token perplexity of a Hugging Face causal LM at several lengths, cached.

    ``model``: a folder or hub name. The text: the file ``text``, else the test split of the
    embedded ``corpus`` (built with ``data_cfg``, default the preset's). ``lengths`` default
    to :func:`default_lengths`; ``n``, the seed and the batch size to the preset's
    evaluation settings (``scale``, default tiny; ``eval_cfg`` overrides). The result has the
    keys of :func:`rflens.measure.perplexity.perplexity`'s, and ``model``, ``text``, ``l_tr_source``,
    ``cached``.
    """
    ev, data_cfg = _defaults(scale, eval_cfg, data_cfg)
    if ev.protocol != "last_token":
        raise UserError(f"a Hugging Face model is measured with the last-token protocol only, not {ev.protocol}")
    ref = model if isinstance(model, ModelRef) else resolve(model, revision)
    lengths = check_lengths(default_lengths(ref) if lengths is None else lengths)
    ref.check_length(max(lengths))
    n = check_n(ev.n_segments if n is None else n)
    resources.check(resources.last_token_bytes(n, max(lengths), len(lengths), N_BOOTSTRAP),
                    f"evaluating {n:,} segments of up to {max(lengths):,} tokens",
                    "ask for fewer segments (--n) or shorter lengths (--lengths)")
    src, device, dtype, params = _inputs(ref, text, corpus, data_cfg, device, ev.seed, progress)
    params.update(lengths=lengths, n=n, version=[HF_VERSION, EVAL_VERSION])

    def compute() -> dict:
        t0 = time.perf_counter()
        lens, tokenizer = load(ref, device=device, progress=progress)
        tokens = check_vocabulary(lens, src.tokens(tokenizer), ref.name)
        segments, about = text_draw(tokens, n, max(lengths) + 1, ev.seed, src.what)  # (N, max L + 1)
        nll = last_token_nll(lens, segments, lengths, batch_size=ev.batch_size, progress=progress)
        result = {**last_token_result(nll, lengths, ref.l_tr, ev.seed, about), **_about(ref, src, dtype),
                  "seconds": round(time.perf_counter() - t0, 3)}
        check_finite(result, ref.name, PRETRAINED_FIX)  # nothing non-finite is stored
        return result

    result = _cached("perplexity", params, compute)
    check_stored(result, lengths, ref.name, f"the folder {storage.runs_dir() / 'hf'}")
    check_finite(result, ref.name, PRETRAINED_FIX)
    return result


def hf_receptive_field(model, *, text=None, corpus: str = "prose", length: int | None = None, n: int | None = None,
                       threshold: float | None = None, revision: str | None = None, scale: str | None = None,
                       eval_cfg: EvalConfig | None = None, data_cfg: DataConfig | None = None, device=None,
                       progress: bool = True) -> dict:
    """Receptive-field analysis of a Hugging Face causal LM; the gradients are cached.

    ``length`` defaults to 2 x L_tr (L_tr for a learned-absolute model, 1024 without an
    L_tr), ``n`` and ``threshold`` to the preset's ``erf_samples`` and ``erf_threshold``.
    The result has the keys of :func:`rflens.measure.receptive.receptive_field`'s (``l_tr`` and
    ``share_in_ltr`` None when L_tr is unknown), and ``model``, ``text``, ``cached``.
    """
    ev, data_cfg = _defaults(scale, eval_cfg, data_cfg)
    ref = model if isinstance(model, ModelRef) else resolve(model, revision)
    if length is None:
        length = UNKNOWN_L_TR_ERF_LENGTH if ref.l_tr is None else (
            ref.l_tr if ref.max_positions is not None else ERF_LENGTH_MULT * ref.l_tr)
    n = ev.erf_samples if n is None else n
    threshold = ev.erf_threshold if threshold is None else threshold
    for name, value in (("length", length), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise UserError(f"the receptive-field {name} must be a positive integer, got {value!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise UserError(f"the ERF threshold must be in (0, 1], e.g. {ERF_THRESHOLD}; got {threshold!r}")
    length, n = int(length), int(n)
    ref.check_length(length, "--length")
    # the segment draw (its positions, the gathered tokens, the int64 segments) and the gradient norms
    resources.check((8 + 8 + 8 + 8) * n * (length + 1), f"the receptive field over {length:,} tokens of {n:,} "
                    "segments", "use a smaller --n or a shorter --length")
    src, device, dtype, params = _inputs(ref, text, corpus, data_cfg, device, ev.seed, progress)
    params.update(length=length, n=n, version=[HF_VERSION, ERF_VERSION])

    def compute() -> dict:
        t0 = time.perf_counter()
        lens, tokenizer = load(ref, device=device, progress=progress)
        tokens = check_vocabulary(lens, src.tokens(tokenizer), ref.name)
        segments, about = text_draw(tokens, n, length + 1, ev.seed, src.what)  # (N, L + 1)
        # a backward pass holds every layer's activations: a long segment gets a pass of its own
        batch = rows_per_pass(length, ev.batch_size, ERF_MAX_TOKENS)
        norms = input_gradients(lens, segments, batch_size=batch, progress=progress)
        return {"length": length, "n": n, "seed": ev.seed, "normalized": normalize(norms, ref.name, PRETRAINED_FIX).tolist(),
                "seconds": round(time.perf_counter() - t0, 3), **_about(ref, src, dtype), **about}

    stored = _cached("input_gradients", params, compute)
    check_gradients(stored, length, ref.name, f"the folder {storage.runs_dir() / 'hf'}")
    result = summarize(stored["normalized"], threshold, stored["l_tr"] or length)
    if stored["l_tr"] is None:
        result.update(l_tr=None, share_in_ltr=None)
    result.update({k: stored[k] for k in ("n", "seed", "seconds", "cached", "model", "model_type", "text",
                                          "l_tr_source", "dtype")})
    result.update({k: stored[k] for k in SEGMENT_KEYS if k in stored})
    return result
