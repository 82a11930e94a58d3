"""The lens on pretrained models: last-token perplexity and the ERF of a Hugging Face causal LM.

Chi et al. (ACL 2023) explain length extrapolation by the receptive field (Section 4): a
model extrapolates while the share of its prediction's input gradient that lies beyond L_tr
stays small. The same two measurements apply to any pretrained causal LM. The protocols of
:mod:`rflens.evaluate` (last-token perplexity) and :mod:`rflens.receptive` (normalised input
gradients, ERF) read a model through three calls only, ``model(idx, last_only=True)``,
``model.embed(idx)`` and ``model(embeds=..., last_only=True)``; :class:`CausalLMLens` gives a
``transformers`` causal LM those three calls, so that its numbers come from the very code
that measures rflens's own models.

* **L_tr.** A pretrained model's config names the context it was built for
  (``n_positions``, ``max_position_embeddings``): for GPT-2 and Pythia that is the training
  length, and it is taken as L_tr. A config without one (BLOOM) leaves L_tr unknown, and
  the results say so.
* **Learned absolute positions** (GPT-2, OPT): no position beyond the table exists, so a
  longer length is refused in one line instead of failing inside the model.
* **Text.** A text file (one document), or the test split of an embedded rflens corpus:
  its documents are decoded with the corpus tokenizer (byte-level BPE, lossless) and
  re-encoded with the model's, separated by the model's end-of-text token.
* **Segments** are drawn by :func:`rflens.data.corpus.draw_segments`, the draw of
  :meth:`rflens.data.Corpus.eval_segments`: every length scores the same last tokens.
* **Cache.** Results are JSON files under ``runs_dir()/hf/``, keyed by the model's identity
  (a folder: its path, config and the sha256 of its files; a hub model: its name and
  commit), the text's fingerprint and the settings; a repeated call reads them without
  loading the model.
* **Precision.** bf16 weights on CUDA, float32 on CPU.

:func:`tiny_random_models` builds three tiny random models, one per way of encoding
positions (GPT-2: learned absolute; GPT-NeoX: rotary; BLOOM: ALiBi), for tests and demos.
``transformers`` is imported only when a model is loaded or built.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from . import resources, storage
from .config import DataConfig, EvalConfig
from .data.corpus import EOT, draw_segments
from .errors import UserError
from .evaluate import EVAL_VERSION, check_lengths, check_n, last_token_nll, last_token_result, rows_per_pass
from .paper import ERF_THRESHOLD
from .receptive import ERF_VERSION, input_gradients, normalize, summarize
from .results import N_BOOTSTRAP

# Bump when a change here changes the numbers, so cached results are recomputed.
HF_VERSION = 1
# Pretrained models are large: the default lengths reach 4 x L_tr (rflens's own models: 16 x)
LENGTH_MULTS = (0.25, 0.5, 1, 2, 4)
ERF_LENGTH_MULT = 2
UNKNOWN_L_TR_LENGTHS = (256, 512, 1024, 2048, 4096)  # when the config names no position count
UNKNOWN_L_TR_ERF_LENGTH = 1024
ERF_MAX_TOKENS = 1024  # tokens per forward and backward pass of the receptive-field analysis
POSITION_FIELDS = ("n_positions", "max_position_embeddings")  # the config fields taken as L_tr
# model types whose positions are a learned table: nothing exists beyond it
LEARNED_ABSOLUTE = frozenset({"gpt2", "gpt_neo", "gpt_bigcode", "opt", "biogpt"})
LARGE_FILE = 256 * 2**20  # files above this are fingerprinted by size and sampled sha256
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
LOAD_FIX = "give a folder written by save_pretrained (e.g. one of rflens.hf.tiny_random_models), " \
           "or a hub name that is in the local Hugging Face cache"


# -----------------------------------------------------------------------------
# which model: a folder or a hub name, and its identity for the cache


class ModelRef:
    """A model to load: where its files are, its config and what identifies it."""

    def __init__(self, name: str, folder: Path, identity: dict):
        self.name, self.folder, self.identity = name, folder, identity
        try:
            self.config = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError) as err:
            raise UserError(f"{folder / 'config.json'} cannot be read ({type(err).__name__}): {LOAD_FIX}") from None
        self.model_type: str = str(self.config.get("model_type", "?"))

    def __repr__(self) -> str:
        return f"ModelRef({self.name!r}, {self.model_type}, l_tr={self.l_tr})"

    @property
    def l_tr_field(self) -> str | None:
        """The config field taken as L_tr, or None when the config names no position count."""
        return next((f for f in POSITION_FIELDS if isinstance(self.config.get(f), int)), None)

    @property
    def l_tr(self) -> int | None:
        return self.config[self.l_tr_field] if self.l_tr_field else None

    @property
    def max_positions(self) -> int | None:
        """The last position + 1 a learned-absolute model has; None for relative schemes."""
        return self.l_tr if self.model_type in LEARNED_ABSOLUTE else None

    def check_length(self, length: int, flag: str = "--lengths") -> None:
        check_positions(self.name, self.max_positions, length, flag)


def check_positions(name: str, max_positions: int | None, length: int, flag: str = "--lengths") -> None:
    """One line when ``length`` tokens need positions a learned-absolute model does not have."""
    if max_positions is not None and length > max_positions:
        raise UserError(f"{name} has only {max_positions} positions (learned absolute position embeddings): "
                        f"length {length} does not fit; use {flag} up to {max_positions}")


def resolve(name_or_path, revision: str | None = None) -> ModelRef:
    """The folder and identity of a model: a folder written by ``save_pretrained``, or a
    hub name found in the local Hugging Face cache (downloaded when the hub is reachable)."""
    name = str(name_or_path)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"{path} has no config.json, so it is not a saved model: {LOAD_FIX}")
        folder = path.resolve()
        config = (folder / "config.json").read_bytes()
        identity = {"folder": str(folder), "config_sha256": hashlib.sha256(config).hexdigest(),
                    "files": _file_fingerprints(folder)}
        return ModelRef(name, folder, identity)
    if path.exists():
        raise UserError(f"{path} is a file, not a model folder: {LOAD_FIX}")
    if not HUB_ID.match(name) or name.startswith((".", "~")):
        raise UserError(f"no model folder {path}: {LOAD_FIX}")
    folder = _hub_snapshot(name, revision)
    return ModelRef(name, folder, {"hub": name, "commit": folder.name})


def _file_fingerprints(folder: Path) -> dict[str, str]:
    """sha256 of every file of a model folder (size and sampled sha256 for large ones)."""
    out = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and not p.name.startswith("."):
            size = p.stat().st_size
            out[p.name] = (storage.sha256_file(p) if size <= LARGE_FILE
                           else f"{size}:{storage.sha256_file(p, sample=True)}")
    return out


def _hub_offline() -> str | None:
    """The environment variable that puts the hub off limits, if one does."""
    return next((v for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
                 if os.environ.get(v, "").lower() in ("1", "true", "yes", "on")), None)


def _hub_snapshot(name: str, revision: str | None) -> Path:
    """The snapshot folder of a hub model in the local cache; downloaded first when it is
    not there and the hub can be reached."""
    from huggingface_hub import try_to_load_from_cache

    def cached() -> Path | None:
        found = try_to_load_from_cache(name, "config.json", revision=revision)
        return Path(found).parent if isinstance(found, str) else None

    folder = cached()
    if folder is not None:
        return folder
    where = f"{name}{'@' + revision if revision else ''}"
    offline = _hub_offline()
    if offline:
        raise UserError(f"no model folder {name}, and {where} is not in the local Hugging Face cache "
                        f"({offline} is set): {LOAD_FIX}")
    from .data.sources import check_hub

    try:
        check_hub()
    except UserError:
        raise UserError(f"no model folder {name}, and {where} is not in the local Hugging Face cache "
                        f"(the hub cannot be reached): {LOAD_FIX}") from None
    try:
        from huggingface_hub import list_repo_files, snapshot_download

        files = list_repo_files(name, revision=revision)
        weights = ["*.safetensors"] if any(f.endswith(".safetensors") for f in files) else ["*.bin"]
        # the config, the tokenizer's files and one format of the weights, not every format the repo has
        snapshot_download(name, revision=revision, allow_patterns=["*.json", "*.txt", "*.model", *weights])
    except Exception as err:  # noqa: BLE001 - the hub's errors are many; the fix is the same
        raise UserError(f"cannot download {where} from the Hugging Face hub ({_first_line(err)}): {LOAD_FIX}") from None
    folder = cached()
    if folder is None:
        raise UserError(f"{where} was downloaded but not found in the local cache: {LOAD_FIX}")
    return folder


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


@contextlib.contextmanager
def _quiet_transformers(progress: bool):
    """transformers without its progress bars (unless ``progress``) and its warnings."""
    from transformers.utils import logging as tlog

    bars, level = tlog.is_progress_bar_enabled(), tlog.get_verbosity()
    if not progress:
        tlog.disable_progress_bar()
    tlog.set_verbosity_error()
    try:
        yield
    finally:
        tlog.set_verbosity(level)
        if bars:
            tlog.enable_progress_bar()


# -----------------------------------------------------------------------------
# the adapter: a transformers causal LM with the calls rflens's protocols make


class CausalLMLens(nn.Module):
    """A ``transformers`` causal LM seen through rflens's model interface.

    ``forward(idx)`` or ``forward(embeds=...)`` -> logits (B, L', vocab), with L' = 1 when
    ``last_only``; ``embed(idx)`` -> the input token embeddings (B, L, d), before any
    position is added (GPT-2 adds ``wpe`` inside the model), which is where Section 4 takes
    its gradients. ``kernel`` is accepted and ignored: the model chooses its own attention.
    """

    def __init__(self, model, name: str = "model", max_positions: int | None = None):
        super().__init__()
        self.hf = model.eval()
        self.name = name
        self.max_positions = max_positions if max_positions is not None else learned_positions(model)
        self._keep = "logits_to_keep" in inspect.signature(model.forward).parameters

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        return self.hf.get_input_embeddings()(idx)

    def forward(self, idx: torch.Tensor | None = None, *, embeds: torch.Tensor | None = None,
                last_only: bool = False, kernel: str | None = None) -> torch.Tensor:
        if (idx is None) == (embeds is None):
            raise TypeError("give exactly one of idx and embeds")
        length = (idx if idx is not None else embeds).shape[1]
        check_positions(self.name, self.max_positions, length)
        kw = {"logits_to_keep": 1} if (last_only and self._keep) else {}
        out = self.hf(input_ids=idx, inputs_embeds=embeds, use_cache=False, **kw)
        return out.logits[:, -1:] if last_only else out.logits  # (B, L', v)


def learned_positions(model) -> int | None:
    """The size of a model's learned position table (a ``wpe`` or ``*position*`` embedding),
    as its config gives it where it does; None when positions are not a table."""
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(module, nn.Embedding) and (leaf == "wpe" or "position" in leaf):
            counts = [getattr(model.config, f, None) for f in POSITION_FIELDS]
            return next((c for c in counts if isinstance(c, int)), module.num_embeddings)
    return None


def device_and_dtype(device=None) -> tuple[torch.device, torch.dtype]:
    """CUDA with bf16 weights where there is a GPU, else the CPU with float32."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return device, (torch.bfloat16 if device.type == "cuda" else torch.float32)


def load(model, *, revision: str | None = None, device=None, progress: bool = False):
    """(CausalLMLens, tokenizer) of a folder or hub name (or a :class:`ModelRef`)."""
    ref = model if isinstance(model, ModelRef) else resolve(model, revision)
    device, dtype = device_and_dtype(device)
    if device.type == "cpu":
        weights = sum(p.stat().st_size for p in ref.folder.iterdir()
                      if p.suffix in (".safetensors", ".bin", ".pt", ".pth") and p.is_file())
        stored = str(ref.config.get("dtype") or ref.config.get("torch_dtype") or "float32")
        resources.check(weights * (2 if stored in ("float16", "bfloat16") else 1), f"{ref.name} in float32",
                        "use a smaller model, or a machine with more memory or a GPU")
    try:
        with _quiet_transformers(progress):
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(ref.folder)
            hf_model = AutoModelForCausalLM.from_pretrained(ref.folder, dtype=dtype)
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - a folder transformers cannot read: one line
        raise UserError(f"cannot load {ref.name} as a causal language model ({_first_line(err)}): {LOAD_FIX}") from None
    return CausalLMLens(hf_model.to(device), ref.name, ref.max_positions), tokenizer


# -----------------------------------------------------------------------------
# text: a file or an embedded corpus's test split, in the model's tokens


def read_text(path) -> str:
    """The text of a UTF-8 file, one line of error otherwise."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"no such text file: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text: give a plain text file") from None


def corpus_documents(corpus) -> list[str]:
    """The documents of a corpus's test split, decoded with the corpus tokenizer (the
    token stream separates them with <|endoftext|>)."""
    test = np.asarray(corpus.tokens("test"))
    ends = np.flatnonzero(test == corpus.tokenizer.token_to_id(EOT))
    starts = np.concatenate([[0], ends + 1])
    ends = np.concatenate([ends, [test.size]])
    docs = [test[a:b].tolist() for a, b in zip(starts, ends) if b > a]
    return [t for t in corpus.tokenizer.decode_batch(docs) if t]


def encode(tokenizer, documents: list[str]) -> np.ndarray:
    """One token stream: every document encoded with ``tokenizer`` (no special tokens),
    followed by its end-of-text token where it has one (else by the tokens of a blank line)."""
    if not documents:
        return np.zeros(0, dtype=np.int64)
    ids = tokenizer(documents, add_special_tokens=False, verbose=False)["input_ids"]
    eos = tokenizer.eos_token_id
    sep = [eos] if eos is not None else tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    parts = [np.asarray(x + sep, dtype=np.int64) for x in ids]
    stream = np.concatenate(parts)
    return stream[:-len(sep)] if len(documents) == 1 and sep else stream  # one file: no separator after it


def text_segments(tokens: np.ndarray, n: int, length: int, seed: int = 0, what: str = "the text") -> np.ndarray:
    """(n, length) last-token segments of a token stream, drawn as the corpus's are."""
    if len(tokens) < length:
        raise UserError(f"{what} has {len(tokens)} tokens with this model's tokenizer, fewer than the {length} "
                        f"that one segment needs: give a longer text or shorter lengths")
    return draw_segments(tokens, n, length, seed, what=what)


class _Text:
    """Where the text comes from, its fingerprint for the cache, and its documents."""

    def __init__(self, text=None, corpus: str = "prose", data_cfg: DataConfig | None = None, progress: bool = False):
        if text is not None:
            path = Path(text).expanduser()
            self.describe = f"text {path.name}"
            self.what = str(path)
            body = read_text(path)
            self._documents = [body]
            self.fingerprint = {"file_sha256": hashlib.sha256(body.encode("utf-8")).hexdigest()}
        else:
            from . import data

            cfg = data_cfg or DataConfig()
            cfg = cfg.replace(corpus=corpus) if corpus else cfg
            self._corpus = data.prepare(cfg, progress=progress)
            self.describe = f"{cfg.corpus} test split"
            self.what = f"the {cfg.corpus} test split"
            self._documents = None
            self.fingerprint = {"corpus": cfg.corpus, "fingerprint": self._corpus.fingerprint}

    def tokens(self, tokenizer) -> np.ndarray:
        docs = self._documents if self._documents is not None else corpus_documents(self._corpus)
        return encode(tokenizer, docs)


# -----------------------------------------------------------------------------
# the measurements, cached under runs_dir()/hf


def _defaults(scale: str | None, eval_cfg: EvalConfig | None, data_cfg: DataConfig | None):
    from . import scales

    preset = scales.get(scale or scales.DEFAULT_SCALE)
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
    keys of :func:`rflens.evaluate.perplexity`'s, and ``model``, ``text``, ``l_tr_source``,
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
    src = _Text(text, corpus, data_cfg, progress)
    device, dtype = device_and_dtype(device)
    params = {"model": ref.identity, "text": src.fingerprint, "lengths": lengths, "n": n, "seed": ev.seed,
              "dtype": str(dtype), "version": [HF_VERSION, EVAL_VERSION]}

    def compute() -> dict:
        t0 = time.perf_counter()
        lens, tokenizer = load(ref, device=device, progress=progress)
        segments = text_segments(src.tokens(tokenizer), n, max(lengths) + 1, ev.seed, src.what)  # (N, max L + 1)
        nll = last_token_nll(lens, segments, lengths, batch_size=ev.batch_size, progress=progress)
        return {**last_token_result(nll, lengths, ref.l_tr, ev.seed), **_about(ref, src, dtype),
                "seconds": round(time.perf_counter() - t0, 3)}

    return _cached("perplexity", params, compute)


def hf_receptive_field(model, *, text=None, corpus: str = "prose", length: int | None = None, n: int | None = None,
                       threshold: float | None = None, revision: str | None = None, scale: str | None = None,
                       eval_cfg: EvalConfig | None = None, data_cfg: DataConfig | None = None, device=None,
                       progress: bool = True) -> dict:
    """Receptive-field analysis of a Hugging Face causal LM; the gradients are cached.

    ``length`` defaults to 2 x L_tr (L_tr for a learned-absolute model, 1024 without an
    L_tr), ``n`` and ``threshold`` to the preset's ``erf_samples`` and ``erf_threshold``.
    The result has the keys of :func:`rflens.receptive.receptive_field`'s (``l_tr`` and
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
    src = _Text(text, corpus, data_cfg, progress)
    device, dtype = device_and_dtype(device)
    params = {"model": ref.identity, "text": src.fingerprint, "length": length, "n": n, "seed": ev.seed,
              "dtype": str(dtype), "version": [HF_VERSION, ERF_VERSION]}

    def compute() -> dict:
        t0 = time.perf_counter()
        lens, tokenizer = load(ref, device=device, progress=progress)
        segments = text_segments(src.tokens(tokenizer), n, length + 1, ev.seed, src.what)  # (N, L + 1)
        # a backward pass holds every layer's activations: a long segment gets a pass of its own
        batch = rows_per_pass(length, ev.batch_size, ERF_MAX_TOKENS)
        norms = input_gradients(lens, segments, batch_size=batch, progress=progress)
        return {"length": length, "n": n, "seed": ev.seed, "normalized": normalize(norms).tolist(),
                "seconds": round(time.perf_counter() - t0, 3), **_about(ref, src, dtype)}

    stored = _cached("input_gradients", params, compute)
    result = summarize(stored["normalized"], threshold, stored["l_tr"] or length)
    if stored["l_tr"] is None:
        result.update(l_tr=None, share_in_ltr=None)
    result.update({k: stored[k] for k in ("n", "seed", "seconds", "cached", "model", "model_type", "text",
                                          "l_tr_source", "dtype")})
    return result


# -----------------------------------------------------------------------------
# tiny random models of three families, for tests and demos

FAMILIES = ("gpt2", "gpt_neox", "bloom")  # learned absolute, rotary, ALiBi
TINY_FORMAT = 1  # bump when the tiny models change: old folders are rebuilt
TINY_VOCAB = 384
TINY_TEXT = """\
A language model reads a window of tokens and predicts the next one. How far back does it
look? Take the loss of the last token and ask how much it changes when each earlier token
embedding moves a little: the size of that gradient, position by position, is a map of the
context the prediction uses. Sum the map from the most recent token backwards, and the
number of tokens it takes to hold almost all of it is the effective receptive field.
A model trained on short windows meets longer ones at test time. If the field it learned
fits inside the training window, the extra tokens on the left change little, and the
perplexity of the last token stays flat as the window grows. If the field reaches past the
training window, the model leans on distances it never saw, and the perplexity rises.
Learned absolute positions stop where the table stops. Rotary positions turn queries and
keys by an angle that grows with the position. Linear biases subtract a penalty that grows
with the distance, head by head, with slopes that halve from one head to the next.
"""


def tiny_random_models(folder, seed: int = 0) -> dict[str, Path]:
    """Three tiny random causal LMs saved with ``save_pretrained``: {family: folder/<family>}.

    GPT-2 (learned absolute positions, 1024 of them), GPT-NeoX (rotary on every dimension)
    and BLOOM (ALiBi): 2 layers, d = 64, 4 heads, a byte-level BPE tokenizer of a few hundred
    tokens saved beside each. Every parameter is drawn from a generator seeded by ``seed``
    (biases and LayerNorm gains too, so a forward pass that skipped one would differ), with
    weights large enough for the attention to be sharp. A complete folder of the same seed
    is reused; a model is written to a temporary folder and renamed into place, so a crash
    never leaves half of one.
    """
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for family in FAMILIES:
        dest = folder / family
        with storage.locked(folder / f".{family}.lock"):
            if not _tiny_complete(dest, family, seed):
                _build_tiny(family, dest, seed)
        out[family] = dest
    return out


def _tiny_complete(dest: Path, family: str, seed: int) -> bool:
    try:
        mark = storage.read_json(dest / "rflens_tiny.json")
    except (OSError, ValueError):
        return False
    return (mark == {"family": family, "seed": seed, "format": TINY_FORMAT}
            and all((dest / f).is_file() for f in ("config.json", "model.safetensors", "tokenizer.json")))


def _tiny_config(family: str, vocab: int):
    from transformers import BloomConfig, GPT2Config, GPTNeoXConfig

    ids = {"vocab_size": vocab, "bos_token_id": 0, "eos_token_id": 0}  # <|endoftext|> is id 0
    if family == "gpt2":
        return GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=1024, resid_pdrop=0.0, embd_pdrop=0.0,
                          attn_pdrop=0.0, **ids)
    if family == "gpt_neox":
        return GPTNeoXConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                             max_position_embeddings=1024, rotary_pct=1.0, use_parallel_residual=True, **ids)
    return BloomConfig(hidden_size=64, n_layer=2, n_head=4, **ids)


def _randomize(model, seed: int) -> None:
    """Every parameter from one seeded generator, in name order: matrices N(0, 0.15^2),
    biases N(0, 0.05^2), LayerNorm gains 1 + N(0, 0.1^2)."""
    gen = torch.Generator().manual_seed(seed)
    norms = {name for name, m in model.named_modules() if isinstance(m, nn.LayerNorm)}
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            module, _, kind = name.rpartition(".")
            noise = torch.randn(p.shape, generator=gen)
            if module in norms and kind == "weight":
                p.copy_(1 + 0.1 * noise)
            else:
                p.copy_((0.05 if kind == "bias" else 0.15) * noise)


def _build_tiny(family: str, dest: Path, seed: int) -> None:
    from .data.build import train_tokenizer

    with _quiet_transformers(False):
        from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

        tok = train_tokenizer([TINY_TEXT], TINY_VOCAB, progress=False)
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, bos_token=EOT)
        torch.manual_seed(seed)  # the library's own initialisation, overwritten below
        model = AutoModelForCausalLM.from_config(_tiny_config(family, tok.get_vocab_size()))
        _randomize(model, seed)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            storage.write_json(tmp / "rflens_tiny.json", {"family": family, "seed": seed, "format": TINY_FORMAT})
            old = dest.with_name(f".{dest.name}.{os.getpid()}.old")
            if dest.exists():  # another seed or format: replaced
                dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# -----------------------------------------------------------------------------
# what Chapter 11 measures

MODELS_ENV = "RFLENS_HF_MODELS"  # comma-separated folders or hub names the book measures too
FAMILY_TITLES = {"gpt2": "GPT-2, learned absolute", "gpt_neox": "GPT-NeoX, rotary", "bloom": "BLOOM, ALiBi"}


def book_models(folder) -> dict[str, str]:
    """{label: folder or name} of the models the book measures: the three tiny random ones
    (:func:`tiny_random_models` in ``folder``, labelled as untrained) and any named in
    ``RFLENS_HF_MODELS`` where the book is built."""
    models = {f"tiny random {FAMILY_TITLES[f]} (untrained)": str(p) for f, p in tiny_random_models(folder).items()}
    for name in (x.strip() for x in os.environ.get(MODELS_ENV, "").split(",")):
        if name:
            models[name] = name
    return models


def book_settings(scale: str) -> dict:
    """The lengths and sample counts of Chapter 11's measurements at a scale: small at the
    smoke scale (the notebook tests), L_ex = 64..512 and 64 segments otherwise."""
    if scale == "smoke":
        return {"lengths": [16, 32, 64], "n": 8, "erf_length": 64, "erf_n": 4}
    return {"lengths": [64, 128, 256, 512], "n": 64, "erf_length": 512, "erf_n": 32}


def lens_table(models: dict[str, str], *, corpus: str = "prose", scale: str | None = None, lengths=None,
               n: int | None = None, erf_length: int | None = None, erf_n: int | None = None,
               progress: bool = False):
    """One row per model: its family, L_tr (from its config, None if it names none), the
    last-token perplexity at each length with its interval, r(L) against the shortest
    length, the ERF on segments of ``erf_length`` and the share of the gradient in L_tr, and
    the seconds each measurement took when it was computed."""
    import pandas as pd

    rows = []
    for label, model in models.items():
        ppl = hf_perplexity(model, corpus=corpus, scale=scale, lengths=lengths, n=n, progress=progress)
        rf = hf_receptive_field(model, corpus=corpus, scale=scale, length=erf_length, n=erf_n, progress=progress)
        row = {"label": label, "model_type": ppl["model_type"], "l_tr": ppl["l_tr"]}
        base = ppl["nll"][0]
        for i, L in enumerate(ppl["lengths"]):
            row[f"ppl@{L}"], row[f"ci_low@{L}"], row[f"ci_high@{L}"] = ppl["ppl"][i], ppl["ci_low"][i], ppl["ci_high"][i]
            row[f"r@{L}"] = float(np.exp(ppl["nll"][i] - base))
        row.update(erf=rf["erf"], erf_length=rf["length"], share_in_ltr=rf["share_in_ltr"],
                   ppl_seconds=ppl["seconds"], erf_seconds=rf["seconds"])
        rows.append(row)
    return pd.DataFrame(rows)
