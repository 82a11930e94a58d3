"""Every positional scheme of Chi et al. (ACL 2023), one registry selected by a string.

A scheme is a small ``nn.Module`` of one of four kinds (fixed constants such as ALiBi's
slopes are non-persistent buffers, rebuilt from the config; only learnable parameters go
into a checkpoint):

* ``"none"``      -- no positional information (``nope``);
* ``"absolute"``  -- a vector added to the input embeddings (``sinusoidal``, Section 5);
* ``"rotary"``    -- rotates queries and keys (``rotary``, Section 5);
* ``"relative"``  -- an additive bias on the attention logits that depends only on the
  distance k = m - n between query m and key n: ALiBi (Section 2-3), windowed attention
  (Eq. 3), Sandwich (Eq. 5-6), the smoothed Sandwich, KERPLE and T5 (Section 7).

A relative scheme only has to say what bias it gives to each distance:
``distance_bias(n) -> (H, n)`` for k = 0..n-1. The attention kernels (rflens.model.attention)
turn that one table into the (m, n) bias by indexing it with m - n, and add the causal
mask (n > m) and the window mask (m - n >= w) as -inf. So "depends only on m - n" holds
by construction, and the table is computed once per forward pass for all layers.

The window ``w`` (``ModelConfig.window``) combines with any scheme; ``pos="window"`` is
the paper's windowed attention alone (no bias).
"""

from __future__ import annotations

import contextlib
import math
import re

import torch
import torch.nn as nn
from torch import Tensor

from rflens.errors import UserError
from rflens.setup import schemes
from rflens.setup.config import ModelConfig

# ----------------------------------------------------------------------------------------
# Closed forms (pure functions; the schemes below and the tests use them)


def alibi_exponents(n_head: int, slopes: str = "paper") -> Tensor:
    """The exponents h of ALiBi's slopes 1/2^h, one per head, before any shift.

    ``"paper"``: h = n * 8 / H for n = 1..H (Section 2 of the paper).
    ``"official"``: the set of the ALiBi reference code. For H a power of two it is the
    same as the paper's. Otherwise, with c the largest power of two below H, it takes the
    c exponents of the c-head set, then fills the H - c remaining heads with every other
    exponent of the 2c-head set, starting from its first one (these interleave between
    the first ones). For H = 12: h = 1..8, then 0.5, 1.5, 2.5, 3.5.
    """
    if slopes == "paper":
        return torch.arange(1, n_head + 1, dtype=torch.float64) * 8.0 / n_head
    if slopes != "official":
        raise UserError(f"unknown ALiBi slope set {slopes!r}: use 'paper' or 'official'")
    c = 2 ** int(math.floor(math.log2(n_head)))
    base = torch.arange(1, c + 1, dtype=torch.float64) * 8.0 / c
    if c == n_head:
        return base
    finer = torch.arange(1, 2 * c + 1, dtype=torch.float64) * 8.0 / (2 * c)  # the 2c-head set
    return torch.cat([base, finer[0::2][: n_head - c]])


def alibi_slopes(n_head: int, slopes: str = "paper", slope_shift: float = 0.0,
                 same_slope: float | None = None) -> Tensor:
    """ALiBi's per-head slopes 1/2^h, shape (H,).

    Section 3 of the paper: ``slope_shift`` (Delta) is added to every head's h (Delta < 0:
    steeper slopes, a narrower window); ``same_slope`` gives every head the one exponent h.
    """
    if same_slope is not None:
        h = torch.full((n_head,), float(same_slope), dtype=torch.float64)
    else:
        h = alibi_exponents(n_head, slopes) + float(slope_shift)
    return torch.pow(2.0, -h).float()


def sandwich_compression(n_head: int) -> Tensor:
    """Sandwich's compression ratios h_c = n * 8 / H for n = 1..H, shape (H,)."""
    return torch.arange(1, n_head + 1, dtype=torch.float32) * 8.0 / n_head


def sandwich_bias(distance: Tensor, d_bar: int, compression: Tensor) -> Tensor:
    """Sandwich bias, Eq. (5)-(6): (p_m . p_n - d_bar / 2) / h_c for distance k = m - n.

    p_m . p_n of two sinusoidal embeddings of size d_bar is sum_i cos(k / 10000^(2i/d_bar))
    over the d_bar / 2 frequencies i = 0..d_bar/2 - 1; it peaks at d_bar / 2 when k = 0,
    so the bias is 0 at distance 0 and negative elsewhere. Returns (H, *distance.shape).
    Differentiable in ``compression`` (the learnable variant).
    """
    i = torch.arange(d_bar // 2, dtype=torch.float64, device=distance.device)
    inv_freq = torch.pow(10000.0, -2.0 * i / d_bar)  # (d_bar/2,)
    k = distance.to(torch.float64)
    # sum of cosines computed in float64: at long distances it is a small difference of large sums
    dot = torch.cos(k.unsqueeze(-1) * inv_freq).sum(-1)  # (*distance.shape)
    centred = (dot - d_bar / 2).to(compression.dtype)
    shape = (-1,) + (1,) * distance.dim()
    return centred.unsqueeze(0) / compression.reshape(shape)  # (H, *distance.shape)


def t5_bucket(relative_position: Tensor, num_buckets: int = 32, max_distance: int = 128) -> Tensor:
    """Causal T5 bucket of each distance k = m - n >= 0 (negative values are treated as 0).

    Half of the buckets hold one distance each (0, 1, ..., num_buckets // 2 - 1); the other
    half cover distances up to ``max_distance`` in logarithmically growing bins; every
    distance >= max_distance shares the last bucket, num_buckets - 1. Monotone
    non-decreasing in k.
    """
    k = torch.as_tensor(relative_position).long().clamp(min=0)
    exact = num_buckets // 2
    span = num_buckets - exact  # buckets for the logarithmic part
    if max_distance > exact:
        # position of k between `exact` and `max_distance` on a log scale, in [0, 1) below max_distance
        frac = torch.log(k.clamp(min=1).double() / exact) / math.log(max_distance / exact)
        log_bucket = exact + (frac * span).floor().long()
    else:  # degenerate: no room for logarithmic bins, all long distances share the last bucket
        log_bucket = torch.full_like(k, num_buckets - 1)
    log_bucket = log_bucket.clamp(max=num_buckets - 1)
    bucket = torch.where(k < exact, k, log_bucket)
    # from max_distance on, one shared bucket (also when max_distance < num_buckets // 2)
    return torch.where(k >= max_distance, torch.full_like(k, num_buckets - 1), bucket)


def _positive(p: Tensor, low: float = 0.01, high: float | None = None) -> Tensor:
    """Clamp a learnable value into [low, high] in the forward pass while letting the
    gradient through unchanged (straight-through), so a clamped parameter is never stuck.
    The same effect as KERPLE's official in-place clamp, without mutating the parameter."""
    clamped = p.clamp(min=low, max=high)
    return p + (clamped - p).detach()


# ----------------------------------------------------------------------------------------
# Schemes

REGISTRY: dict[str, type["Scheme"]] = {}  # name -> class, filled by @register


def register(name: str):
    """Class decorator: the implementation of the scheme ``name`` of rflens.setup.schemes.TABLE,
    whose row gives its kind and whether it is learnable."""
    info = schemes.TABLE[name]  # KeyError: a scheme needs its row in the table first

    def add(cls):
        cls.name, cls.kind, cls.learnable = name, info.kind, info.learnable
        REGISTRY[name] = cls
        return cls

    return add


class Scheme(nn.Module):
    """Base class: a positional scheme for H heads (see the module docstring)."""

    name: str = ""  # set by @register, with kind and learnable from the scheme table
    kind: str = "none"
    learnable: bool = False

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self._cache: Tensor | None = None  # fixed relative schemes: table for the longest n seen

    def distance_bias(self, n: int) -> Tensor:
        """(H, n): the bias at distances 0..n-1 (zeros for non-relative schemes)."""
        if self.learnable:
            return self._table(n)
        c = self._cache
        if c is None or c.shape[1] < n:
            c = self._table(n).detach()
            self._cache = c
        return c[:, :n]

    def _table(self, n: int) -> Tensor:
        return torch.zeros(self.n_head, n)

    def embed(self, positions: Tensor) -> Tensor:
        raise TypeError(f"{type(self).__name__} adds nothing to the embeddings")

    def rotate(self, q: Tensor, k: Tensor, positions: Tensor):
        raise TypeError(f"{type(self).__name__} does not rotate queries and keys")

    def _apply(self, fn, *args, **kwargs):  # .to(device) etc.: drop the cached table
        self._cache = None
        return super()._apply(fn, *args, **kwargs)

    def _distances(self, n: int, device=None) -> Tensor:
        return torch.arange(n, dtype=torch.float32, device=device)


@register("nope")
class NoPE(Scheme):
    """No positional information: causal attention alone (``nope``)."""


@register("sinusoidal")
class Sinusoidal(Scheme):
    """Sinusoidal absolute embeddings (Vaswani et al.), added to the input embeddings:
    p[m, 2i] = sin(m / 10000^(2i/d)), p[m, 2i+1] = cos(m / 10000^(2i/d)). Computed for any
    position, so a model can be run at lengths it never saw (Section 5)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.d_model = cfg.d_model

    def embed(self, positions: Tensor) -> Tensor:
        d = self.d_model
        i = torch.arange(0, d, 2, dtype=torch.float64, device=positions.device)
        angle = positions.to(torch.float64).unsqueeze(-1) * torch.pow(10000.0, -i / d)  # (L, ceil(d/2))
        p = torch.zeros(*positions.shape, d, dtype=torch.float64, device=positions.device)
        p[..., 0::2] = torch.sin(angle)
        p[..., 1::2] = torch.cos(angle[..., : d // 2])
        return p.float()  # (L, d)


def rope_frequencies(head_dim: int, base: float = 10000.0, method: str | None = None, factor: float = 1.0,
                     l_tr: int | None = None, beta_fast: float = 32.0, beta_slow: float = 1.0) -> tuple[Tensor, float]:
    """Rotary's inverse frequencies theta_j = base^(-2j/hd), j < hd/2, stretched at inference
    to read ``factor`` times the training length ``l_tr``, and the attention factor that
    multiplies cos and sin (so the logits by its square). Returns ((hd/2,) float64, float).

    * ``None``: plain rotary.
    * ``"pi"``, position interpolation (Chen et al., 2023): positions times 1/factor, i.e.
      theta_j / factor, so L_ex positions map onto the L_tr the model saw.
    * ``"ntk"``, NTK-aware scaling (bloc97, 2023): the base becomes
      base * factor^(hd/(hd-2)): the slowest pair is interpolated by the factor, the
      fastest ones keep their speed.
    * ``"yarn"`` (Peng et al., 2024): pairs that turn more than ``beta_fast`` times within
      L_tr keep their speed, pairs that turn fewer than ``beta_slow`` times are
      interpolated as in PI, with a linear ramp over the dimensions in between (the ramp's
      ends are those dimensions, rounded outwards); the attention factor is
      0.1 ln(factor) + 1.
    """
    j = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim  # 2j / hd
    theta = torch.pow(float(base), -j)
    if method is None or factor == 1.0:
        return theta, 1.0
    if method == "pi":
        return theta / factor, 1.0
    if method == "ntk":
        return torch.pow(float(base) * factor ** (head_dim / (head_dim - 2)), -j), 1.0
    if method != "yarn":
        raise UserError(f"unknown rope_scaling {method!r}: use pi, ntk or yarn")
    if l_tr is None:
        raise UserError("yarn needs the training length l_tr")

    def dim_of(turns: float) -> float:  # the dimension whose pair turns `turns` times within l_tr
        return head_dim * math.log(l_tr / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(dim_of(beta_fast)), 0)
    high = min(math.ceil(dim_of(beta_slow)), head_dim - 1)
    high = high + 0.001 if high == low else high
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)  # 0: keep, 1: interpolate
    return theta * (1 - ramp) + theta / factor * ramp, 0.1 * math.log(factor) + 1.0


@register("rotary")
class Rotary(Scheme):
    """Rotary position embedding (Su et al.): rotate each (x_j, x_{j+hd/2}) pair of q and k
    by the angle m / base^(2j/hd), so q_m . k_n depends on m - n through the angles.

    :meth:`stretch` swaps in the frequencies of a context-extension method
    (:func:`rope_frequencies`) for evaluation beyond the training length; the weights are
    untouched."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.head_dim, self.base = cfg.head_dim, float(cfg.rotary_base)
        self.attention_factor = 1.0
        self.register_buffer("inv_freq", rope_frequencies(self.head_dim, self.base)[0].float(), persistent=False)

    def stretch(self, method: str | None = None, factor: float = 1.0, l_tr: int | None = None) -> None:
        """Use ``method``'s frequencies for ``factor`` x ``l_tr`` positions (None: plain rotary)."""
        inv_freq, self.attention_factor = rope_frequencies(self.head_dim, self.base, method, factor, l_tr)
        self.inv_freq = inv_freq.to(self.inv_freq)

    def rotate(self, q: Tensor, k: Tensor, positions: Tensor):
        # q, k: (B, H, L, hd); positions: (L,) for the L rows of both
        angle = positions.to(torch.float32).unsqueeze(-1) * self.inv_freq  # (L, hd/2)
        cos = torch.cat([angle.cos(), angle.cos()], -1)  # (L, hd)
        sin = torch.cat([angle.sin(), angle.sin()], -1)
        if self.attention_factor != 1.0:  # YaRN: both q and k, so the logits by its square
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        return _rotate(q, cos, sin), _rotate(k, cos, sin)


@contextlib.contextmanager
def stretched(model, method: str | None, factor: float, l_tr: int):
    """Evaluate a rotary ``model`` with ``method``'s frequencies for ``factor`` x ``l_tr``
    positions inside the block; plain rotary again afterwards."""
    if method is None:
        yield model
        return
    if not isinstance(model.pos, Rotary):
        raise UserError(f"rope_scaling={method} stretches rotary models only; this model's scheme is {model.pos.name}")
    model.pos.stretch(method, factor, l_tr)
    try:
        yield model
    finally:
        model.pos.stretch(None)


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], -1)  # (x1, x2) -> (-x2, x1)
    return x * cos.to(x.dtype) + turned * sin.to(x.dtype)


@register("window")
class Window(Scheme):
    """Windowed attention alone, Eq. (3): no bias; the window mask (m - n >= w -> -inf)
    is added by the attention kernels from ``ModelConfig.window``."""


@register("alibi")
class ALiBi(Scheme):
    """ALiBi: bias -(m - n) / 2^h per head (Press et al.; Sections 2-3 of the paper).
    ``slopes`` (buffer, (H,)) holds 1/2^h after ``slope_shift`` / ``same_slope``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        slopes = alibi_slopes(cfg.n_head, cfg.slopes, cfg.slope_shift, cfg.same_slope)
        self.register_buffer("slopes", slopes, persistent=False)  # (H,)

    def _table(self, n: int) -> Tensor:
        # 0 - slope * k rather than -slope * k: distance 0 gets +0.0, not -0.0
        return 0.0 - self.slopes[:, None] * self._distances(n, self.slopes.device)  # (H, n)


@register("sandwich")
class Sandwich(Scheme):
    """Sandwich, Eq. (5)-(6): the centred inner product of two sinusoidal embeddings of
    size ``d_bar``, divided by the compression ratio h_c = n * 8 / H of each head."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.d_bar = cfg.d_bar
        self.register_buffer("compression", sandwich_compression(cfg.n_head), persistent=False)

    def _table(self, n: int) -> Tensor:
        return sandwich_bias(self._distances(n, self.compression.device), self.d_bar, self.compression)


@register("sandwich_learned")
class SandwichLearned(Scheme):
    """Sandwich with learnable compression ratios (the paper's suggested extension),
    initialised at h_c = n * 8 / H and kept >= 0.01."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.d_bar = cfg.d_bar
        self.compression = nn.Parameter(sandwich_compression(cfg.n_head))
        # the un-compressed Sandwich curve does not depend on any parameter: cache it
        self._shape_cache: Tensor | None = None

    def _table(self, n: int) -> Tensor:
        c = self._shape_cache
        if c is None or c.shape[1] < n or c.device != self.compression.device:
            ones = torch.ones(1, device=self.compression.device)
            c = sandwich_bias(self._distances(n, ones.device), self.d_bar, ones)  # (1, n)
            self._shape_cache = c
        return c[:, :n] / _positive(self.compression)[:, None]  # (H, n)


@register("smoothed")
class Smoothed(Scheme):
    """Smoothed Sandwich (Section 7): a * log(1 + |m - n|) + b, the same for every head
    (defaults a = -0.825, b = -0.8: a log-curve fit of Sandwich with d_bar = 128, h_c = 8)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.register_buffer("a", torch.tensor(float(cfg.smooth_a)), persistent=False)
        self.register_buffer("b", torch.tensor(float(cfg.smooth_b)), persistent=False)

    def _table(self, n: int) -> Tensor:
        curve = self.a * torch.log1p(self._distances(n, self.a.device)) + self.b  # (n,)
        return curve.expand(self.n_head, n)


class _Kerple(Scheme):
    """KERPLE (Chi et al., 2022): two learnable parameters r1, r2 per head.

    ``kerple_init="uniform"`` starts each head at its own random width, as the KERPLE code
    does (``r1_high``, ``r2_high`` below: r ~ U(0, high)); ``"fixed"`` starts every head at
    ``kerple_r1``, ``kerple_r2``."""

    r1_high = r2_high = 1.0

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        if cfg.kerple_init == "uniform":
            r1 = torch.rand(cfg.n_head) * self.r1_high
            r2 = torch.rand(cfg.n_head) * self.r2_high
        else:
            r1, r2 = torch.full((cfg.n_head,), float(cfg.kerple_r1)), torch.full((cfg.n_head,), float(cfg.kerple_r2))
        self.r1, self.r2 = nn.Parameter(r1), nn.Parameter(r2)


@register("kerple_log")
class KerpleLog(_Kerple):
    """KERPLE, logarithmic variant: -r1 * log(1 + r2 * |m - n|) with learnable r1, r2 > 0
    per head (kept >= 0.01)."""

    r1_high, r2_high = 2.0, 1.0  # the KERPLE code: -p log(1 + a k), p ~ U(0, 2), a ~ U(0, 1)

    def _table(self, n: int) -> Tensor:
        k = self._distances(n, self.r1.device)
        return -_positive(self.r1)[:, None] * torch.log1p(_positive(self.r2)[:, None] * k)  # (H, n)


@register("kerple_power")
class KerplePower(_Kerple):
    """KERPLE, power variant: -r1 * |m - n|^r2 with learnable r1 > 0 and 0 < r2 <= 2."""

    r1_high, r2_high = 1.0, 2.0  # the KERPLE code: -a k^p, a ~ U(0, 1), p ~ U(0, 2)

    def _table(self, n: int) -> Tensor:
        k = self._distances(n, self.r1.device)
        # k^r2 written as exp(r2 log k) with k = 0 handled apart (0^r2 = 0, gradient 0)
        logk = torch.log(k.clamp(min=1.0))
        powed = torch.where(k > 0, torch.exp(_positive(self.r2, 0.01, 2.0)[:, None] * logk), torch.zeros_like(k))
        return -_positive(self.r1)[:, None] * powed  # (H, n)


@register("t5")
class T5(Scheme):
    """T5 relative bias (Raffel et al.): one learned scalar per (head, bucket), buckets from
    :func:`t5_bucket` (causal).

    ``t5_init="neox"`` (the paper's code): the table starts xavier-normal, std
    sqrt(2 / (num_buckets + H)), and the bias is the table times sqrt(head_dim), so under
    Adam it moves sqrt(head_dim) times faster than an unscaled one. ``"zero"``: it starts at
    zero and is added as it is."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.num_buckets, self.max_distance = cfg.num_buckets, cfg.max_distance
        table = torch.zeros(cfg.n_head, cfg.num_buckets)
        self.scale = 1.0
        if cfg.t5_init == "neox":
            nn.init.normal_(table, std=math.sqrt(2.0 / (cfg.num_buckets + cfg.n_head)))  # xavier-normal
            self.scale = math.sqrt(cfg.head_dim)
        self.relative_attention_bias = nn.Parameter(table)

    def _table(self, n: int) -> Tensor:
        dev = self.relative_attention_bias.device
        buckets = t5_bucket(torch.arange(n, device=dev), self.num_buckets, self.max_distance)  # (n,)
        table = self.relative_attention_bias[:, buckets]  # (H, n)
        return table * self.scale if self.scale != 1.0 else table


# ----------------------------------------------------------------------------------------
# Schemes of one's own


class RelativeScheme(Scheme):
    """Base class of a relative scheme of one's own (see :func:`register_scheme`).

    Give either ``_table(n)``: (H, n), the bias at distances 0..n-1, or, for a bias that
    also depends on the query's position, ``query_dependent = True`` and
    ``position_bias(L)``: (H, L, L), the bias query m gives to key n (entries n > m are
    ignored). Parameters (``nn.Parameter``) are trained with the model."""

    kind = "relative"
    query_dependent = False

    def position_bias(self, length: int) -> Tensor:
        pos = torch.arange(length)
        return self.distance_bias(length)[:, (pos[:, None] - pos[None, :]).clamp(min=0)]

    def _table(self, n: int) -> Tensor:
        if not self.query_dependent:
            raise NotImplementedError(f"{type(self).__name__} defines neither _table nor position_bias")
        return self.position_bias(n)[:, -1].flip(-1)  # the last query's bias, by distance


SCHEME_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")  # what --pos takes for a scheme of one's own
# the sizes a scheme of one's own is tried at when it is registered (every other size is
# checked each time the scheme is used)
PROBE_LENGTHS = (8, 1, 2, 64)


class SchemeFailure(UserError):
    """A scheme of one's own failed, or gave a bias rflens cannot use (one line)."""


def _user_call(name: str, source: str | None, what: str, fn, *args):
    """``fn(*args)``, the code of a scheme of one's own: whatever it raises (an Exception, a
    BaseException, a sys.exit()) becomes one line naming the scheme and its file; only
    Ctrl-C passes through."""
    try:
        return fn(*args)
    except (KeyboardInterrupt, UserError):
        raise
    except BaseException as err:  # noqa: BLE001 - the user's own code: one line, whatever it raised
        text = str(err).strip().splitlines()
        raise SchemeFailure(f"scheme {name!r}{_from(source)} fails {what}: {type(err).__name__}"
                            f"{': ' + text[0] if text else ''}") from None


def _from(source: str | None) -> str:
    return f" (from {source})" if source else ""


def check_user_bias(name: str, source: str | None, bias, n_head: int, length: int, query: bool) -> None:
    """SchemeFailure unless ``bias``, what a scheme of one's own gave for ``n_head`` heads and
    ``length`` positions, is a floating-point tensor with values, of shape (H, L) -- (H, L, L)
    for a query-dependent one --, with no nan or +inf and no -inf where a query meets itself
    (the keys after a query, n > m, are masked anyway)."""
    who = f"scheme {name!r}{_from(source)}"
    where = f"for {n_head} heads and {length} position{'' if length == 1 else 's'}"
    want = (n_head, length, length) if query else (n_head, length)
    if not isinstance(bias, torch.Tensor):
        raise SchemeFailure(f"{who} returns a {type(bias).__name__} {where}; it must return a torch tensor of "
                            f"shape {want}")
    if bias.is_meta:
        raise SchemeFailure(f"{who} returns a meta tensor (it holds no values) {where}: build the bias on the "
                            "device of the distances it is given")
    if not bias.is_floating_point():
        raise SchemeFailure(f"{who} returns {str(bias.dtype).replace('torch.', '')} values {where}: a bias must be "
                            "floating point (e.g. compute it from the float distances it is given)")
    if tuple(bias.shape) != want:
        raise SchemeFailure(f"{who} gives a bias of shape {tuple(bias.shape)} {where}; expected {want}")
    values = bias.detach()
    if query:  # only what each query may see: n <= m
        seen = torch.ones(length, length, dtype=torch.bool, device=values.device).tril()
        bad = (torch.isnan(values) | (values == float("inf"))) & seen
        bad |= torch.eye(length, dtype=torch.bool, device=values.device) & (values == float("-inf"))
    else:
        bad = torch.isnan(values) | (values == float("inf"))
        bad[:, 0] |= values[:, 0] == float("-inf")
    if bool(bad.any()):
        index = [int(i) for i in bad.nonzero()[0]]
        at = (f"head {index[0]}, query {index[1]}, key {index[2]}" if query
              else f"head {index[0]}, distance {index[1]}")
        raise SchemeFailure(f"{who} gives {values[tuple(index)].item()} at {at} ({where}): attention over it is "
                            "not defined; fix its bias function (-inf is allowed only as a mask, away from a "
                            "query's own position)")


def _checked(cls: type, name: str, source: str | None) -> type:
    """A subclass of a scheme of one's own whose bias is checked each time it is computed
    (:func:`check_user_bias`) and whose failures are one line (:func:`_user_call`)."""
    query = bool(getattr(cls, "query_dependent", False))

    def _table(self, n):  # checked before the base class caches or slices it
        out = _user_call(name, source, f"at {n} positions", super(checked, self)._table, n)
        check_user_bias(name, source, out, self.n_head, n, False)
        return out

    def distance_bias(self, n):  # again, for a class that computes it without _table
        out = _user_call(name, source, f"at {n} positions", super(checked, self).distance_bias, n)
        check_user_bias(name, source, out, self.n_head, n, False)
        return out

    def position_bias(self, length):
        out = _user_call(name, source, f"at {length} positions", super(checked, self).position_bias, length)
        check_user_bias(name, source, out, self.n_head, length, True)
        return out

    body = {"_table": _table, "distance_bias": distance_bias, "__doc__": cls.__doc__, "__module__": cls.__module__}
    if query:
        body["position_bias"] = position_bias
    checked = type(cls.__name__, (cls,), body)
    return checked


def register_scheme(name: str, *, title: str | None = None):
    """Decorator: a relative positional scheme of one's own, under ``name``, for every
    experiment, the command line (``--pos name``), the figures and the claims.

    Decorate a function ``bias(distance, n_head) -> (n_head, n)`` of the distances
    0..n-1 (a float tensor of shape (n,)) for a fixed bias, or a :class:`RelativeScheme`
    subclass for one with parameters or one that depends on the query position. Whether
    the scheme is learnable is read off a small instance (any parameter that needs a
    gradient). The file it is defined in becomes part of the key of every model trained
    with it. Put the definition in a file and load it with :func:`rflens.load_schemes`
    (or name it in ``RFLENS_SCHEMES``), so that other processes find it too.

    The bias is tried at a few sizes (:data:`PROBE_LENGTHS`) when it is registered, and
    checked each time it is used (:func:`check_user_bias`): a bias that fails, is not a
    floating-point tensor with values of the right shape, or is nan where attention needs
    it, stops the command with one line naming the scheme and its file.
    """
    import dataclasses
    import inspect

    if not isinstance(name, str) or not SCHEME_NAME.fullmatch(name):
        raise UserError(f"register_scheme({name!r}): a scheme's name is what --pos takes, a word of letters, digits "
                        "and _ - . starting with a letter, at most 64 characters (e.g. 'my_bias')")
    if title is not None and (not isinstance(title, str) or not title.strip() or "\n" in title or len(title) > 80):
        raise UserError(f"register_scheme({name!r}, title={title!r}): the title is a one-line string of at most "
                        "80 characters, as tables and figures print it")

    def add(obj):
        if isinstance(obj, type) and issubclass(obj, Scheme):
            cls = obj
        elif callable(obj):
            def _table(self, n, fn=obj):
                return fn(self._distances(n), self.n_head)

            cls = type(f"Scheme_{name}", (RelativeScheme,), {"_table": _table, "__doc__": obj.__doc__})
        else:
            raise UserError(f"register_scheme({name!r}) decorates a function of (distance, n_head) or a RelativeScheme class")
        try:
            source = inspect.getsourcefile(obj)
        except TypeError:  # defined where no file holds it (a built-in, an interactive session)
            source = None
        info = schemes.SchemeInfo(name, "relative", False, title or name, source=source)
        before = schemes.TABLE.get(name), REGISTRY.get(name)
        schemes.add(info)
        cls = _checked(cls, name, source)
        cls.name, cls.kind = name, "relative"
        REGISTRY[name] = cls
        query = getattr(cls, "query_dependent", False)
        try:  # a small instance: is it learnable, and is its bias usable at a few sizes?
            probe = _user_call(name, source, "when built for 2 heads", cls,
                               ModelConfig(pos=name, n_layer=1, n_head=2, d_model=16, vocab_size=300))
            with torch.no_grad():
                for length in PROBE_LENGTHS:
                    probe._cache = None
                    probe.position_bias(length) if query else probe.distance_bias(length)
            learnable = any(p.requires_grad for p in probe.parameters())
        except UserError:
            for table, old in zip((schemes.TABLE, REGISTRY), before):
                table.pop(name) if old is None else table.__setitem__(name, old)
            raise
        cls.learnable = learnable
        schemes.TABLE[name] = dataclasses.replace(info, learnable=cls.learnable)
        return obj

    return add


def build(cfg: ModelConfig) -> Scheme:
    """The positional scheme named by ``cfg.pos``."""
    schemes.ensure_loaded()
    try:
        cls = REGISTRY[cfg.pos]
    except KeyError:
        raise UserError(f"unknown positional scheme {cfg.pos!r}; known: {', '.join(REGISTRY)}") from None
    return cls(cfg)


# ----------------------------------------------------------------------------------------
# Views of a scheme's bias (for plots and the `bias` command)


def window_table(table: Tensor, window: int | None) -> Tensor:
    """Put -inf at the distances k >= window of an (H, n) distance table (Eq. 3)."""
    if window is None or window >= table.shape[-1]:
        return table
    k = torch.arange(table.shape[-1], device=table.device)
    return table.masked_fill(k >= window, float("-inf"))


def bias_matrix(cfg: ModelConfig, length: int) -> Tensor:
    """(H, L, L): the bias query m gives to key n, with -inf for n > m (causal) and for
    m - n >= window. Zeros (plus masks) for schemes without a relative bias. For plots."""
    with torch.no_grad():
        table = window_table(build(cfg).distance_bias(length), cfg.window)  # (H, L)
        pos = torch.arange(length)
        dist = pos[:, None] - pos[None, :]  # (L, L): m - n
        out = table[:, dist.clamp(min=0)]  # (H, L, L)
        return out.masked_fill(dist < 0, float("-inf"))


# the settings that shape each built-in scheme's bias at initialisation, named when it is not finite
BIAS_SETTINGS = {"alibi": "slope_shift or same_slope", "sandwich": "d_bar", "sandwich_learned": "d_bar",
                 "smoothed": "smooth_a or smooth_b", "kerple_log": "kerple_r1 or kerple_r2",
                 "kerple_power": "kerple_r1 or kerple_r2", "t5": "num_buckets or max_distance"}


def check_bias(cfg: ModelConfig, length: int, scheme: Scheme | None = None) -> None:
    """UserError, naming the setting (or the scheme file) to change, when the bias of
    ``cfg.pos`` at initialisation over distances 0..length-1 holds a nan or +inf, or -inf at
    distance 0 (a query that may not see itself): attention over it is nan, and a model
    trained on it diverges or learns nothing. -inf elsewhere is a mask, and allowed."""
    with torch.random.fork_rng(devices=[]), torch.no_grad():  # a learnable scheme's draws move no seed
        scheme = scheme if scheme is not None else build(cfg)
        if scheme.kind != "relative":
            return
        table = scheme.distance_bias(max(1, length)).detach().float()
    info = schemes.TABLE.get(cfg.pos)
    bad = torch.isnan(table) | (table == float("inf"))
    if cfg.pos in schemes.NAMES:
        bad |= table == float("-inf")  # rflens's schemes mask nothing themselves: -inf is an overflow
    else:
        bad[:, 0] |= table[:, 0] == float("-inf")
    if not bad.any():
        return
    head, k = (int(i) for i in bad.nonzero()[0])
    value = table[head, k].item()
    if info is not None and info.source is not None:
        fix = f"fix the bias function of {cfg.pos!r} in {info.source}"
    elif cfg.pos not in schemes.NAMES:
        fix = f"fix the bias function of {cfg.pos!r}"
    else:
        fix = f"change --set {BIAS_SETTINGS.get(cfg.pos, 'the scheme settings')}"
    why = ("it overflows float32, where rflens's schemes mask nothing" if value == float("-inf") and k > 0
           else "attention over it is not defined")
    raise UserError(f"the {cfg.pos} bias is {value} at head {head}, distance {k} (of {length:,}) with these "
                    f"settings: {why}; {fix}")


def last_query_bias(cfg: ModelConfig, length: int) -> Tensor:
    """(H, L): the bias the last query gives to distances 0..L-1 (-inf beyond the window).

    Raises UserError for schemes without a relative bias (nope, sinusoidal, rotary) unless a
    window is set, in which case their "bias" is the window mask (0 inside, -inf outside).
    """
    scheme = build(cfg)
    if scheme.kind != "relative" and cfg.window is None:
        what = {"none": "no positional information", "absolute": "an absolute scheme (added to the embeddings)",
                "rotary": "a rotation of queries and keys"}[scheme.kind]
        raise UserError(f"{cfg.pos} has no relative bias ({what}); try e.g. --pos alibi, or add --set window=W")
    if length <= 0:
        raise UserError(f"--length must be a positive number of distances, got {length}")
    check_bias(cfg, length, scheme)
    with torch.no_grad():
        return window_table(scheme.distance_bias(length), cfg.window).clone()
