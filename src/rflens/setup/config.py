"""Settings for models, data, training and evaluation.

Every experiment in the book is described by four small dataclasses. A setting is checked
when the dataclass is made, so a bad value fails at once with one line that names the
field and what is allowed (:class:`rflens.errors.ConfigError`), before any work is done.

Names follow the paper (Chi et al., 2023, Section 2): ``n_layer`` is R, ``n_head`` is H,
``d_model`` is d, ``l_tr`` is the training length L_tr; ``slope_shift`` is the Delta of
Section 3, ``window`` the w of Eq. (3), ``d_bar`` the d-bar of Sandwich (Eq. 5).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from dataclasses import dataclass, fields

from rflens import paper
from rflens.errors import ConfigError
from rflens.setup import schemes

# Positional schemes, selected by name (the table of rflens.setup.schemes; implementations in
# rflens.model.positional). Settings are checked against the table itself, so a scheme added to
# it at run time is accepted too.
SCHEMES = schemes.NAMES
ALIBI_SLOPE_SETS = ("paper", "official")
KERPLE_INITS = ("uniform", "fixed")
T5_INITS = ("neox", "zero")
KERNELS = ("auto", "sdpa", "flex", "chunked")
CORPORA = ("prose", "code", "math")
# Larger stand-ins for runs that must not repeat their text (rflens.data.wide); built by name only
WIDE_CORPORA = ("prose-wide", "code-wide", "math-tex")
# Cut from a wide corpus by whole training documents, its tokenizer and test split kept
# (rflens.data.subsets): the diversity ladder's text
SUBSET_CORPORA = ("prose-wide-6m", "prose-wide-3m", "prose-wide-sotu")
SOURCES = ("embedded", "hub", "files")
PROTOCOLS = ("last_token", "non_overlapping", "sliding")
ROPE_SCALINGS = ("pi", "ntk", "yarn")  # rotary stretched at evaluation (rflens.model.positional.rope_frequencies)
DTYPES = ("fp32", "bf16", "auto")  # auto: bf16 where the hardware computes it natively
ALIBI_MAX_EXPONENT = 64  # |h| of an ALiBi slope 1/2^h: 2^64 x a million tokens is still a finite float32
FLOAT32_MAX = 3.4028234663852886e38  # torch's optimizers hold the learning rate in float32
MAX_STEPS = 10**9  # training steps: a billion smoke steps is already weeks of one core
# cosine: warm-up, then cosine decay over the run; wsd: warm-up, a constant rate, then a
# linear cool-down over the last cooldown_frac of the steps (warmup-stable-decay)
SCHEDULES = ("cosine", "wsd")


@functools.cache
def _number_fields(cls) -> tuple[frozenset[str], frozenset[str]]:
    """The fields of a settings class typed float (or float | None), and those typed int."""
    hints = typing.get_type_hints(cls)
    floats = frozenset(n for n, h in hints.items() if h is float or float in typing.get_args(h))
    ints = frozenset(n for n, h in hints.items() if h is int or int in typing.get_args(h))
    return floats, ints


def _positive(name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(name, value, "must be a positive number" + (" or None" if allow_none else ""))


def _choice(name: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(name, value, "allowed values are " + ", ".join(map(str, allowed)))


class _Settings:
    """Shared behaviour: canonical numbers, dict round trip and ``key=value`` overrides."""

    def _canonical_numbers(self) -> None:
        """One value, one form: a numpy scalar becomes a Python number, an int given for a
        float field a float, and an integral float given for an int field an int. So
        ``slope_shift=0`` and the default 0.0 (or ``window=64.0`` from a table and 64) are
        one setting, and serialise and key a run the same."""
        floats, ints = _number_fields(type(self))
        for f in fields(self):
            v = getattr(self, f.name)
            if hasattr(v, "item") and not isinstance(v, (str, bytes, tuple)):  # numpy scalar
                v = v.item()
            if isinstance(v, bool):
                pass
            elif f.name in floats and isinstance(v, int):
                v = float(v)
            elif f.name in ints and isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(v, float) and not math.isfinite(v):
                raise ConfigError(f.name, v, "must be a finite number")
            object.__setattr__(self, f.name, v)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict):
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(unknown[0], d[unknown[0]], f"unknown {cls.__name__} field; known: {', '.join(sorted(known))}")
        d = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return cls(**d)

    def replace(self, **changes):
        return self.from_dict({**self.to_dict(), **changes})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


@dataclass(frozen=True)
class ModelConfig(_Settings):
    """A decoder-only transformer LM (paper Section 2) and its positional scheme."""

    pos: str = "alibi"
    n_layer: int = 12  # R
    n_head: int = 12  # H
    d_model: int = 768  # d
    vocab_size: int = 8192  # v
    # The defaults below follow the paper's training code (GPT-NeoX as in the KERPLE
    # repository); each is a switch, and the book lists what the other setting means.
    tie_weights: bool = False  # the paper's config sets no-weight-tying
    # absolute schemes (sinusoidal): multiply the token embeddings by sqrt(d) before the
    # positions are added (Vaswani et al.). The paper's code (GPT-NeoX) does not scale.
    scale_embeddings: bool = True
    # a fixed first token: position 0 of every input (training and evaluation) is replaced
    # by this token id (e.g. 0, <|endoftext|>); None: off
    first_token: int | None = None
    # windowed attention (Eq. 3): attend only to positions with m - n < window; any scheme
    window: int | None = None
    # ALiBi (Section 3): h = n * 8 / H (+ slope_shift); same_slope sets one h for every head
    slopes: str = "paper"
    slope_shift: float = 0.0
    same_slope: float | None = None
    # Sandwich (Eq. 5-6): d_bar frequencies / 2, compression ratios h_c = n * 8 / H
    d_bar: int = paper.SANDWICH_D_BAR
    # smoothed Sandwich: a * log(1 + |m - n|) + b
    smooth_a: float = paper.SMOOTHED_SANDWICH[0]
    smooth_b: float = paper.SMOOTHED_SANDWICH[1]
    # KERPLE: initial values of the learnable r1, r2 (kept positive)
    # "uniform": each head draws its own start as the KERPLE code does (log: r1 ~ U(0, 2),
    # r2 ~ U(0, 1); power: r1 ~ U(0, 1), r2 ~ U(0, 2)); "fixed": kerple_r1, kerple_r2 everywhere
    kerple_init: str = "uniform"
    kerple_r1: float = 1.0
    kerple_r2: float = 1.0
    # T5 relative buckets (causal)
    num_buckets: int = 32
    # "neox": the table starts xavier-normal and is multiplied by sqrt(head_dim), as GPT-NeoX's
    # relative position bias; "zero": starts at zero, added as it is (T5, Hugging Face)
    t5_init: str = "neox"
    max_distance: int = 128
    rotary_base: float = 10000.0

    def __post_init__(self):
        self._canonical_numbers()
        schemes.ensure_loaded()
        _choice("pos", self.pos, tuple(schemes.TABLE))
        for name in ("n_layer", "n_head", "d_model", "vocab_size", "num_buckets", "max_distance"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ConfigError(name, v, "must be a positive integer")
        if self.d_model % self.n_head:
            raise ConfigError("d_model", self.d_model, f"must be divisible by n_head={self.n_head}")
        if self.pos == "rotary" and (self.d_model // self.n_head) % 2:
            raise ConfigError("d_model", self.d_model, "rotary needs an even head size d_model / n_head")
        if self.window is not None and (isinstance(self.window, bool) or not isinstance(self.window, int) or self.window <= 0):
            raise ConfigError("window", self.window, "must be a positive integer number of positions, or None")
        if self.first_token is not None and (isinstance(self.first_token, bool) or not isinstance(self.first_token, int)
                                             or not 0 <= self.first_token < self.vocab_size):
            raise ConfigError("first_token", self.first_token, f"must be a token id in [0, {self.vocab_size}) or None")
        if self.pos == "window" and self.window is None:
            raise ConfigError("window", None, "pos='window' needs a window size, e.g. window=32")
        _choice("slopes", self.slopes, ALIBI_SLOPE_SETS)
        if isinstance(self.d_bar, bool) or not isinstance(self.d_bar, int) or self.d_bar <= 0 or self.d_bar % 2:
            raise ConfigError("d_bar", self.d_bar, "must be a positive even integer")
        _choice("kerple_init", self.kerple_init, KERPLE_INITS)
        _choice("t5_init", self.t5_init, T5_INITS)
        _positive("kerple_r1", self.kerple_r1)
        _positive("kerple_r2", self.kerple_r2)
        if self.pos == "kerple_power" and self.kerple_r2 > 2:
            raise ConfigError("kerple_r2", self.kerple_r2, "the power variant needs 0 < r2 <= 2")
        _positive("rotary_base", self.rotary_base)
        if self.num_buckets < 2:
            raise ConfigError("num_buckets", self.num_buckets, "must be at least 2")
        for name in ("smooth_a", "smooth_b", "kerple_r1", "kerple_r2", "rotary_base"):
            if abs(getattr(self, name)) > FLOAT32_MAX:
                raise ConfigError(name, getattr(self, name), f"must be at most {FLOAT32_MAX:.3g} in size, the largest "
                                  "float32 (the scheme computes in float32)")
        self._check_alibi_exponents()

    def _check_alibi_exponents(self) -> None:
        """ALiBi's slopes 1/2^h must be finite, non-zero float32 numbers whose bias stays
        finite: every head's exponent h (after ``slope_shift``, or ``same_slope``) within
        +-ALIBI_MAX_EXPONENT. Beyond it a slope overflows (nan biases) or rounds to 0 (NoPE)."""
        bound = ALIBI_MAX_EXPONENT
        if self.same_slope is not None:
            if not -bound <= self.same_slope <= bound:
                raise ConfigError("same_slope", self.same_slope,
                                  f"the exponent h of the slope 1/2^h must be in [-{bound}, {bound}] "
                                  "(beyond it the slope overflows or rounds to 0 in float32)")
            return
        # the exponents before the shift lie in (0, 8] for both slope sets
        low, high = -bound, bound - 8
        if not low <= self.slope_shift <= high:
            raise ConfigError("slope_shift", self.slope_shift,
                              f"must be in [{low}, {high}], so that every head's exponent h + slope_shift stays "
                              f"in [-{bound}, {bound}] (beyond it the slope 1/2^h overflows or rounds to 0 in float32)")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


@dataclass(frozen=True)
class DataConfig(_Settings):
    """Which text the model reads and how it is tokenized (see rflens.data)."""

    corpus: str = "prose"
    source: str = "embedded"
    vocab_size: int = 8192
    max_bytes: int | None = None  # use only a prefix of the corpus (tests, smoke scale)
    files: tuple[str, ...] = ()  # for source="files"
    hub_name: str | None = None  # for source="hub"; None: the paper's Pile subset for `corpus`
    split_seed: int = 0

    def __post_init__(self):
        self._canonical_numbers()
        _choice("source", self.source, SOURCES)
        if self.source == "embedded":
            _choice("corpus", self.corpus, CORPORA + WIDE_CORPORA + SUBSET_CORPORA)
        if self.source == "files" and not self.files:
            raise ConfigError("files", self.files, "source='files' needs at least one path")
        if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, int) or self.vocab_size < 260:
            raise ConfigError("vocab_size", self.vocab_size, "must be an integer >= 260 (256 bytes + specials)")
        _positive("max_bytes", self.max_bytes, allow_none=True)


MIN_EVAL_LENGTH = 2  # the shortest length a perplexity reads: one token predicted from one before it


@dataclass(frozen=True)
class TrainConfig(_Settings):
    """The training recipe (defaults: shared by KERPLE and the paper, scaled by presets)."""

    l_tr: int = 512  # L_tr
    batch_size: int = 32  # global batch, in sequences
    steps: int = 50_000
    lr: float = 6e-4
    beta1: float = 0.9
    beta2: float = 0.999
    weight_decay: float = 0.0
    warmup_frac: float = 0.01
    warmup: int | None = None  # warm-up steps; None: warmup_frac x steps
    min_lr_frac: float = 0.0  # cosine to zero, as GPT-NeoX's default min_lr
    schedule: str = "cosine"  # or "wsd" (SCHEDULES)
    cooldown_frac: float = 0.2  # wsd: the share of the steps spent cooling down
    grad_clip: float = 1.0
    seed: int = 0
    eval_interval: int = 0  # steps between validation losses; 0: only at the end
    eval_batches: int = 4
    ckpt_interval: int = 0  # steps between checkpoints; 0: only at the end
    dtype: str = "fp32"  # "bf16": autocast; "auto": bf16 on GPUs and bf16-capable CPUs, else fp32
    compile: bool = False

    def __post_init__(self):
        self._canonical_numbers()
        for name in ("l_tr", "batch_size", "steps", "eval_batches"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ConfigError(name, v, "must be a positive integer")
        if self.l_tr < MIN_EVAL_LENGTH:  # trainable, but no evaluation could read it (measure.perplexity.check_lengths)
            raise ConfigError("l_tr", self.l_tr, f"must be at least {MIN_EVAL_LENGTH} tokens: an evaluation at "
                              f"L_tr predicts each token from those before it (--set train.l_tr={MIN_EVAL_LENGTH} or more)")
        if self.steps > MAX_STEPS:
            raise ConfigError("steps", self.steps, f"must be at most {MAX_STEPS:,} (MAX_STEPS: more than any "
                              "machine trains; a billion steps of the smoke preset already take weeks)")
        for name in ("eval_interval", "ckpt_interval", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(name, v, "must be a non-negative integer")
        if self.warmup is not None and (isinstance(self.warmup, bool) or not isinstance(self.warmup, int)
                                        or not 0 <= self.warmup < self.steps):
            raise ConfigError("warmup", self.warmup, f"must be a whole number of steps in [0, steps = {self.steps})")
        _choice("schedule", self.schedule, SCHEDULES)
        if not 0 < self.cooldown_frac <= 1:
            raise ConfigError("cooldown_frac", self.cooldown_frac, "must be in (0, 1]")
        _positive("lr", self.lr)
        if self.lr > FLOAT32_MAX:
            raise ConfigError("lr", self.lr, f"must be at most {FLOAT32_MAX:.3g}, the largest float32 (the optimizer "
                              "holds it as one; a useful lr is below 1)")
        for name in ("beta1", "beta2", "warmup_frac", "min_lr_frac"):
            v = getattr(self, name)
            if not 0 <= v < 1:
                raise ConfigError(name, v, "must be in [0, 1)")
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise ConfigError("grad_clip" if self.grad_clip < 0 else "weight_decay",
                              min(self.grad_clip, self.weight_decay), "must be >= 0")
        if self.weight_decay * self.lr >= 1:
            raise ConfigError("weight_decay", self.weight_decay,
                              f"weight_decay x lr must be below 1 (AdamW multiplies every weight by 1 - lr x "
                              f"weight_decay each step; lr={self.lr:g}): lower --set weight_decay")
        if self.grad_clip > FLOAT32_MAX:
            raise ConfigError("grad_clip", self.grad_clip, f"must be at most {FLOAT32_MAX:.3g}, the largest float32 "
                              "(0 turns clipping off)")
        _choice("dtype", self.dtype, DTYPES)


@dataclass(frozen=True)
class EvalConfig(_Settings):
    """How models are measured (rflens.measure.perplexity, rflens.measure.receptive)."""

    length_mults: tuple[int, ...] = (1, 2, 4, 8, 16)  # L_ex = L_tr x these
    n_segments: int = 1000  # N (the paper: 1000)
    protocol: str = "last_token"
    stride: int | None = None  # sliding-window protocol; None: half of each window, L / 2
    batch_size: int = 8
    seed: int = 0
    erf_length_mult: int = 4  # receptive-field analysis on segments of 4 x L_tr
    erf_samples: int = 64
    erf_threshold: float = paper.ERF_THRESHOLD
    # rotary models only: a context-extension method applied at evaluation, with no
    # retraining; rope_factor None stretches each length L_ex by L_ex / L_tr
    rope_scaling: str | None = None
    rope_factor: float | None = None

    def __post_init__(self):
        self._canonical_numbers()
        if not self.length_mults or any(isinstance(m, bool) or not isinstance(m, int) or m <= 0 for m in self.length_mults):
            raise ConfigError("length_mults", self.length_mults, "must be positive integers, e.g. 1,2,4,8,16")
        for name in ("n_segments", "batch_size", "erf_length_mult", "erf_samples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ConfigError(name, v, "must be a positive integer")
        _choice("protocol", self.protocol, PROTOCOLS)
        _positive("stride", self.stride, allow_none=True)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ConfigError("seed", self.seed, "must be an integer in [0, 2^32)")
        if not 0 < self.erf_threshold <= 1:
            raise ConfigError("erf_threshold", self.erf_threshold, "must be in (0, 1]")
        if self.rope_scaling is not None:
            _choice("rope_scaling", self.rope_scaling, ROPE_SCALINGS)
        if self.rope_factor is not None and (isinstance(self.rope_factor, bool) or self.rope_factor < 1):
            raise ConfigError("rope_factor", self.rope_factor, "must be a number >= 1 (or None: L_ex / L_tr)")

    def rope_for(self, length: int, l_tr: int) -> tuple[str | None, float]:
        """The stretching method and its factor at evaluation length ``length``."""
        if self.rope_scaling is None:
            return None, 1.0
        return self.rope_scaling, float(self.rope_factor or max(1.0, length / l_tr))

    def rope_params(self) -> dict:
        """The stretching settings for a cached result's key (empty when there is none)."""
        return {} if self.rope_scaling is None else {"rope": [self.rope_scaling, self.rope_factor]}


SETTINGS = {"model": ModelConfig, "data": DataConfig, "train": TrainConfig, "eval": EvalConfig}


def _coerce(cls, name: str, text: str):
    """Turn the text of ``--set name=text`` into the type of field ``name`` of ``cls``."""
    hint = typing.get_type_hints(cls)[name]
    args = typing.get_args(hint)
    optional = type(None) in args
    if optional and text.lower() in ("none", "null", ""):
        return None
    is_union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
    base = next(a for a in args if a is not type(None)) if is_union else hint
    origin = typing.get_origin(base)
    try:
        if origin is tuple:
            item = typing.get_args(base)[0]
            return tuple(item(x) for x in text.replace(" ", "").split(",") if x)
        if base is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if base is int:
            return int(text)
        if base is float:
            return float(text)
        return str(text)
    except ValueError:
        type_name = getattr(base, "__name__", str(base))
        raise ConfigError(name, text, f"expected a value of type {type_name}") from None


def parse_overrides(pairs: list[str] | tuple[str, ...] | None) -> dict[str, dict]:
    """Parse ``["key=value", ...]`` into ``{"model": {...}, "train": {...}, ...}``.

    A key may be bare (``window=32``: found in whichever settings class has it) or
    qualified (``train.steps=100``). A bare key that names a setting of the trained model
    (model, data or train) is that setting, even where an evaluation setting has the same
    name (``batch_size``, ``seed``): ``eval.batch_size=...`` names the evaluation's.
    Unknown keys and wrong types raise ConfigError.
    """
    out: dict[str, dict] = {k: {} for k in SETTINGS}
    for pair in pairs or ():
        if "=" not in pair:
            raise ConfigError("--set", pair, "expected key=value, e.g. --set window=32")
        key, text = pair.split("=", 1)
        key = key.strip()
        if "." in key:
            section, name = key.split(".", 1)
            if section not in SETTINGS:
                raise ConfigError("--set", key, "sections are " + ", ".join(SETTINGS))
            sections = [section] if name in {f.name for f in fields(SETTINGS[section])} else []
        else:
            name = key
            sections = [s for s, cls in SETTINGS.items() if name in {f.name for f in fields(cls)}]
            if any(s != "eval" for s in sections):
                sections = [s for s in sections if s != "eval"]
        if not sections:
            known = sorted({f.name for cls in SETTINGS.values() for f in fields(cls)})
            raise ConfigError("--set", key, "unknown setting; known: " + ", ".join(known))
        for section in sections:  # e.g. vocab_size lives in model and data
            out[section][name] = _coerce(SETTINGS[section], name, text)
    return out
