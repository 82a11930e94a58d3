"""Causal self-attention with an additive relative bias, three interchangeable kernels.

All kernels compute softmax(q k^T / sqrt(hd) + bias) v over keys n <= m, where the bias of
a relative scheme (rflens.model.positional) is a per-head function of the distance m - n only,
given as one (H, L) table; the window of Eq. (3) of Chi et al. (ACL 2023) puts -inf at
m - n >= w. The bias is added to the *scaled* logits (as in ALiBi's and Sandwich's code).

* ``"sdpa"``: ``F.scaled_dot_product_attention``. No bias and no window: the ``is_causal``
  fast path. Otherwise one float mask (1, H, L, L) -- 4-D, since SDPA falls back to a
  slower path for a 3-D mask -- built once per forward pass and shared by every layer.
  The fast CPU training path; gradients reach learnable biases through the mask
  (:class:`BiasedAttention`, faster than SDPA's own path for a mask that needs one).
* ``"flex"``: FlexAttention with a ``score_mod`` that reads the table and a BlockMask for
  causality and the window (fully masked blocks are skipped: small windows are cheap).
  The GPU path; on CPU torch 2.13 has no backward for it, and eager mode materialises
  the scores, so it is only for forward checks there.
* ``"chunked"``: memory-bounded. Queries are processed in blocks of 256, each over the
  keys up to its last query only (the causal half is skipped), and a windowed model only
  reads the keys inside the window. With the keys in reverse order, a block's bias is a
  strided view of one (H, 2L) padded table, so no bias is ever materialised, and SDPA's
  fused kernel keeps its scores in tiles: for evaluation at 16-64 x L_tr. (Without a bias
  or a window it is SDPA's causal kernel, which is memory-bounded already.)
* ``"auto"``: flex on CUDA; on CPU sdpa below 4096 positions, chunked from 4096 on.

A :class:`Plan` holds what is shared by the layers of one forward pass.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from rflens.errors import ConfigError, UserError
from rflens.setup.config import KERNELS

AUTO_CHUNK_FROM = 4096  # CPU: from this length on, "auto" takes the memory-bounded kernel
QUERY_BLOCK = 256  # queries per block of the chunked kernel
FUSED_BIAS_GRAD = True  # a learnable bias through BiasedAttention (False: SDPA's math path)


@dataclass
class Plan:
    """What the layers of one forward pass share: the kernel, the length and the bias.

    ``table``: (H, L) bias by distance with -inf beyond the window, or None when the
    attention is plain causal (no bias, no window). ``raw_table``: the same without the
    window's -inf (FlexAttention handles the window in its block mask). ``full``: for a
    scheme whose bias also depends on the query position (``query_dependent``), the
    (H, L, L) bias with -inf where n > m and beyond the window; ``table`` is then None.
    """

    kernel: str
    length: int
    window: int | None
    table: Tensor | None
    raw_table: Tensor | None
    full: Tensor | None = None
    _masks: dict = field(default_factory=dict)

    # -- sdpa --------------------------------------------------------------------------
    def sdpa_mask(self, q_start: int) -> Tensor:
        """(1, H, L - q_start, L) float mask for queries q_start..L-1, built once and cached."""
        if self.full is not None:
            return self.full[None, :, q_start:]
        key = ("sdpa", q_start)
        if key not in self._masks:
            full = self._masks.get(("sdpa", 0))
            if full is not None:
                self._masks[key] = full[:, :, q_start:]
            else:
                self._masks[key] = relative_mask(self.table, q_start, self.length, 0, self.length)[None]
        return self._masks[key]

    # -- chunked -----------------------------------------------------------------------
    def padded_table(self, dtype, device) -> Tensor:
        """(H, 2L): -inf for the L negative distances (keys after the query), then the table
        (zeros for a causal-only plan)."""
        key = ("padded", dtype)
        if key not in self._masks:
            table = self.table if self.table is not None else torch.zeros(1, self.length, device=device)
            neg = torch.full((table.shape[0], self.length), float("-inf"), device=table.device)
            self._masks[key] = torch.cat([neg, table], dim=1).to(dtype)
        return self._masks[key]

    # -- flex --------------------------------------------------------------------------
    def block_mask(self, q_start: int, device):
        key = ("flex", q_start)
        if key not in self._masks:
            # inside a compiled model torch traces the builder itself (it ignores the cache)
            build = _block_mask.__wrapped__ if torch.compiler.is_compiling() else _block_mask
            self._masks[key] = build(self.length - q_start, self.length, q_start, self.window, str(device))
        return self._masks[key]


def make_plan(scheme, window: int | None, length: int, device, kernel: str = "auto") -> Plan:
    """Choose the kernel and compute the bias table once for a forward pass of ``length``."""
    if kernel not in KERNELS:
        raise ConfigError("kernel", kernel, "allowed values are " + ", ".join(KERNELS))
    if kernel == "auto":
        dev = torch.device(device)
        if dev.type == "cuda":
            kernel = "flex"
        else:
            kernel = "chunked" if length >= AUTO_CHUNK_FROM else "sdpa"
    if getattr(scheme, "query_dependent", False):
        full = scheme.position_bias(length)  # (H, L, L): the bias query m gives to key n
        m = torch.arange(length, device=full.device)
        dist = m[:, None] - m[None, :]
        drop = (dist < 0) if window is None else (dist < 0) | (dist >= window)
        full = full.masked_fill(drop, float("-inf")).to(device)
        return Plan(kernel=kernel, length=length, window=window, table=None, raw_table=None, full=full)
    raw = None
    if scheme.kind == "relative":
        raw = scheme.distance_bias(length)  # (H, L)
        if raw.device != torch.device(device):
            raw = raw.to(device)
    elif window is not None:
        raw = torch.zeros(scheme.n_head, length, device=device)
    table = None
    if raw is not None:
        table = raw
        if window is not None and window < length:
            k = torch.arange(length, device=raw.device)
            table = raw.masked_fill(k >= window, float("-inf"))  # Eq. (3)
    return Plan(kernel=kernel, length=length, window=window, table=table, raw_table=raw)


def relative_mask(table: Tensor, q_start: int, q_end: int, k_start: int, k_end: int) -> Tensor:
    """(H, q_end - q_start, k_end - k_start) bias for queries m in [q_start, q_end) and keys
    n in [k_start, k_end): table[h, m - n], -inf where n > m."""
    m = torch.arange(q_start, q_end, device=table.device)
    n = torch.arange(k_start, k_end, device=table.device)
    dist = m[:, None] - n[None, :]  # (Lq, Lk)
    out = table[:, dist.clamp(min=0)]  # (H, Lq, Lk)
    return out.masked_fill(dist < 0, float("-inf"))


def attend(q: Tensor, k: Tensor, v: Tensor, plan: Plan) -> Tensor:
    """Attention of queries q (B, H, Lq, hd) -- the last Lq positions -- over all keys and
    values k, v (B, H, L, hd). Returns (B, H, Lq, hd)."""
    L, Lq = k.shape[2], q.shape[2]
    q_start = L - Lq
    if plan.kernel == "sdpa":
        return _sdpa(q, k, v, plan, q_start)
    if plan.kernel == "chunked":
        return _chunked(q, k, v, plan, q_start)
    if plan.kernel == "flex":
        return _flex(q, k, v, plan, q_start)
    raise ConfigError("kernel", plan.kernel, "allowed values are " + ", ".join(KERNELS))


def _sdpa(q, k, v, plan: Plan, q_start: int) -> Tensor:
    if plan.table is None and plan.full is None:
        if q_start == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if q.shape[2] == 1:  # the last query sees every key
            return F.scaled_dot_product_attention(q, k, v)
        return _chunked(q, k, v, plan, q_start)
    mask = plan.sdpa_mask(q_start).to(q.dtype)  # (1, H, Lq, L)
    if FUSED_BIAS_GRAD and mask.requires_grad and torch.is_grad_enabled():
        return BiasedAttention.apply(q, k, v, mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class BiasedAttention(torch.autograd.Function):
    """softmax(q k^T / sqrt(hd) + mask) v with a gradient for a learnable (1, H, Lq, L) mask.

    SDPA sends a mask that needs a gradient to its generic math path, whose autograd graph
    keeps several (B, H, Lq, L) intermediates and differentiates softmax op by op. Here the
    forward pass keeps the probabilities P alone (one (B, H, Lq, L) tensor, computed in
    place), and the backward pass is written out: with D = rowsum(dO * O),
    dS = P * (dO v^T - D), dq = dS k / sqrt(hd), dk = dS^T q / sqrt(hd), dv = P^T dO, and
    the mask's gradient is dS summed over what the mask broadcasts over (the batch). The table's own gradient, the sum of
    that along each diagonal m - n, is the backward pass of the indexing that built the
    mask (:func:`relative_mask`).
    """

    @staticmethod
    def forward(ctx, q, k, v, mask):
        device = q.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else q.dtype
        ctx.dtypes, ctx.mask_shape, ctx.mask_dtype = (q.dtype, k.dtype, v.dtype), mask.shape, mask.dtype
        with torch.autocast(device, enabled=False):  # as autocast would: matmuls in its dtype, softmax in fp32
            q, k, v = (t.to(dtype).contiguous() for t in (q, k, v))  # heads split from one (B, L, 3d) matmul
            scores = torch.matmul(q, k.transpose(-1, -2)).float().mul_(q.shape[-1] ** -0.5).add_(mask)
            p = torch.softmax(scores, -1, out=scores).to(dtype)
            out = torch.matmul(p, v)
        ctx.save_for_backward(q, k, v, p, out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, p, out = ctx.saved_tensors
        scale = q.shape[-1] ** -0.5
        with torch.autocast(q.device.type, enabled=False):
            g = grad_out.to(p.dtype)
            ds = torch.matmul(g, v.transpose(-1, -2)).float()  # dP
            ds.sub_((g.float() * out.float()).sum(-1, keepdim=True)).mul_(p)  # dS
            dmask = ds.sum_to_size(ctx.mask_shape).to(ctx.mask_dtype) if ctx.needs_input_grad[3] else None
            ds = ds.to(p.dtype)
            dq = torch.matmul(ds, k).mul_(scale)
            dk = torch.matmul(ds.transpose(-1, -2), q).mul_(scale)
            dv = torch.matmul(p.transpose(-1, -2), g)
        return dq.to(ctx.dtypes[0]), dk.to(ctx.dtypes[1]), dv.to(ctx.dtypes[2]), dmask


def _chunked(q, k, v, plan: Plan, q_start: int, block: int | None = None) -> Tensor:
    L = k.shape[2]
    block = block or QUERY_BLOCK
    if plan.full is not None:  # a query-dependent bias: blocks of the (H, L, L) bias itself
        outs = []
        for s in range(q_start, L, block):
            e = min(s + block, L)
            k0 = 0 if plan.window is None else max(0, s - plan.window + 1)
            mask = plan.full[None, :, s:e, k0:e]
            outs.append(F.scaled_dot_product_attention(q[:, :, s - q_start:e - q_start], k[:, :, k0:e], v[:, :, k0:e],
                                                       attn_mask=mask.to(q.dtype)))
        return torch.cat(outs, dim=2)
    if plan.table is None and q_start == 0:
        # plain causal attention: SDPA's causal kernel is already memory-bounded
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    padded = plan.padded_table(q.dtype, q.device)  # (H, 2L): padded[h, L + d] = table[h, d], -inf for d < 0
    H, row = padded.shape[0], padded.stride(0)
    # keys in reverse order: then the bias of a block of queries and keys is a Toeplitz matrix
    # with stride 1 along both axes, a view of the padded table that allocates nothing
    kf, vf = k.flip(2), v.flip(2)
    outs = []
    for s in range(q_start, L, block):
        e = min(s + block, L)
        k0 = 0 if plan.window is None else max(0, s - plan.window + 1)  # keys inside the window only
        # query m = s + i and the j-th reversed key n = e - 1 - j: m - n = i + j + s - e + 1
        mask = padded.as_strided((1, H, e - s, e - k0), (0, row, 1, 1), padded.storage_offset() + L + s - e + 1)
        qb = q[:, :, s - q_start : e - q_start]
        outs.append(F.scaled_dot_product_attention(qb, kf[:, :, L - e : L - k0], vf[:, :, L - e : L - k0], attn_mask=mask))
    return torch.cat(outs, dim=2)


@functools.lru_cache(maxsize=64)
def _block_mask(q_len: int, kv_len: int, q_start: int, window: int | None, device: str):
    """FlexAttention's BlockMask of causal (and windowed) attention for queries
    q_start..q_start + q_len - 1 over keys 0..kv_len - 1: built once per shape, not per
    forward pass (building one is a pass over every block)."""
    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b, h, q_idx, kv_idx):
        m = q_idx + q_start
        keep = m >= kv_idx
        if window is not None:
            keep = keep & (m - kv_idx < window)
        return keep

    return create_block_mask(mask_mod, None, None, q_len, kv_len, device=device)


_COMPILED_FLEX = None
# Compiled FlexAttention is specialised to each shape, dtype and kind of bias (dynamic=False),
# so a process that trains and measures at several lengths compiles it several times. Past
# torch's default limit of 8 recompilations, torch runs it eagerly instead: an unfused kernel
# that materialises every score, tens of times slower. Raised, not removed: a runaway still ends.
FLEX_RECOMPILE_LIMIT = 128


def _flex_fn(device):
    """FlexAttention: compiled on CUDA (the fused kernel); eager on CPU (forward checks)."""
    global _COMPILED_FLEX
    from torch.nn.attention.flex_attention import flex_attention

    if torch.device(device).type == "cpu":
        return flex_attention
    if _COMPILED_FLEX is None:
        from torch import _dynamo

        config = _dynamo.config
        config.recompile_limit = max(config.recompile_limit, FLEX_RECOMPILE_LIMIT)
        config.accumulated_recompile_limit = max(config.accumulated_recompile_limit, 2 * FLEX_RECOMPILE_LIMIT)
        _COMPILED_FLEX = torch.compile(flex_attention, dynamic=False)
    return _COMPILED_FLEX


def _flex(q, k, v, plan: Plan, q_start: int) -> Tensor:
    import warnings

    if q.device.type == "cpu" and torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise UserError("kernel='flex' has no backward on CPU in torch 2.13: use kernel='sdpa' for training, "
                        "or call the model under torch.no_grad()")
    block_mask = plan.block_mask(q_start, q.device)
    score_mod = None
    if plan.full is not None:
        full = plan.full.to(q.dtype)

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + full[h, q_idx + q_start, kv_idx]
    elif plan.raw_table is not None:
        table = plan.raw_table.to(q.dtype)

        def score_mod(score, b, h, q_idx, kv_idx):
            # masked (n > m) pairs are excluded by the block mask; clamp keeps the index valid
            return score + table[h, (q_idx + q_start - kv_idx).clamp(min=0)]

    with warnings.catch_warnings():
        if q.device.type == "cpu":  # eager on purpose; compiled, a fall back to eager must show
            warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        return _flex_fn(q.device)(q, k, v, score_mod=score_mod, block_mask=block_mask)


def attention_flops(n_layer: int, d_model: int, length: int, window: int | None = None) -> float:
    """Training FLOPs per token of the attention scores and the weighted sum (fwd + bwd).

    Forward, per layer and query: 2 d FLOPs per key for q.k and 2 d for the sum over v;
    backward twice that: 12 d per key. A causal query sees (L + 1) / 2 keys on average
    (fewer with a window): the work needed, not the masked square SDPA computes.
    """
    w = length if window is None else min(window, length)
    keys = (w * (w + 1) / 2 + (length - w) * w) / length  # mean over m of min(m + 1, w)
    return 12.0 * n_layer * d_model * keys
