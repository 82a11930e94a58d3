"""The attention kernels (sdpa, chunked, flex) compute the same attention.

Tolerance: 1e-5 absolute in fp32 against a float64 reference softmax(q k^T / sqrt(hd) + bias) v.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from rflens.errors import ConfigError, UserError
from rflens.model import attention, positional
from rflens.model.transformer import TransformerLM
from rflens.setup.config import ModelConfig

TOL = dict(rtol=1e-5, atol=1e-5)
H, HD = 3, 8


def make_scheme(pos, window=None):
    cfg = ModelConfig(pos=pos, n_layer=1, n_head=H, d_model=H * HD, vocab_size=300, window=window)
    s = positional.build(cfg)
    if s.learnable:
        with torch.no_grad():
            for p in s.parameters():
                p.add_(0.3 * torch.rand_like(p))
    return s


def reference(q, k, v, scheme, window):
    """Plain float64 attention with the bias of the (m, n) matrix."""
    L, Lq = k.shape[2], q.shape[2]
    table = scheme.distance_bias(L).double() if scheme.kind == "relative" else torch.zeros(H, L, dtype=torch.float64)
    m = torch.arange(L - Lq, L)[:, None]
    n = torch.arange(L)[None, :]
    bias = table[:, (m - n).clamp(min=0)]
    masked = (n > m) | ((m - n >= window) if window is not None else torch.zeros_like(n > m))
    bias = bias.masked_fill(masked, float("-inf"))
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias
    return (scores.softmax(-1) @ v.double()).float()


def qkv(L, Lq=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, H, L, HD, generator=g) for _ in range(3))
    return q[:, :, L - (Lq or L):], k, v


@pytest.mark.parametrize("pos", ["nope", "alibi", "sandwich", "t5", "kerple_log"])
@pytest.mark.parametrize("window", [None, 1, 70])
@pytest.mark.parametrize("L", [1, 13, 150])
def test_kernels_agree(pos, window, L, monkeypatch):
    monkeypatch.setattr(attention, "QUERY_BLOCK", 32)  # several blocks, the last one partial
    scheme = make_scheme(pos, window)
    q, k, v = qkv(L)
    ref = reference(q, k, v, scheme, window)
    # eager FlexAttention on CPU costs ~0.3 s a call: checked on a subset of the grid
    kernels = ("sdpa", "chunked", "flex") if pos in ("nope", "alibi", "t5") and L > 1 else ("sdpa", "chunked")
    with torch.no_grad():
        for kernel in kernels:
            plan = attention.make_plan(scheme, window, L, "cpu", kernel)
            torch.testing.assert_close(attention.attend(q, k, v, plan), ref, **TOL, msg=kernel)


@pytest.mark.parametrize("pos,window", [("alibi", None), ("nope", None), ("t5", 4), ("window", 9)])
@pytest.mark.parametrize("Lq", [1, 3])
def test_query_suffix(pos, window, Lq, monkeypatch):
    # the last Lq queries over all keys: what the last layer of a last_only forward does
    monkeypatch.setattr(attention, "QUERY_BLOCK", 2)
    scheme = make_scheme(pos, window or (9 if pos == "window" else None))
    window = window if pos != "window" else 9
    q, k, v = qkv(40, Lq)
    ref = reference(q, k, v, scheme, window)
    with torch.no_grad():
        for kernel in ("sdpa", "chunked", "flex"):
            plan = attention.make_plan(scheme, window, 40, "cpu", kernel)
            torch.testing.assert_close(attention.attend(q, k, v, plan), ref, **TOL, msg=kernel)


def test_chunked_never_builds_the_full_bias(monkeypatch):
    """Every block's bias is a view of the plan's (H, 2L) padded table, over the block's
    queries and the keys up to its last query (inside the window, if any)."""
    monkeypatch.setattr(attention, "QUERY_BLOCK", 16)
    seen = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kw):
        seen.append((q.shape[2], k.shape[2], attn_mask.untyped_storage().nbytes()))
        return real(q, k, v, attn_mask=attn_mask, **kw)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", spy)
    L = 200
    q, k, v = qkv(L)
    for window in (None, 6):
        seen.clear()
        scheme = make_scheme("alibi", window)
        plan = attention.make_plan(scheme, window, L, "cpu", "chunked")
        out = attention.attend(q, k, v, plan)
        torch.testing.assert_close(out, reference(q, k, v, scheme, window), **TOL)
        assert len(seen) == -(-L // 16) and all(bq <= 16 for bq, _, _ in seen)
        assert all(nbytes == H * 2 * L * 4 for _, _, nbytes in seen)  # the padded table, nothing more
        if window is None:
            assert [bk for _, bk, _ in seen] == [min(s + 16, L) for s in range(0, L, 16)]  # causal half skipped
        else:  # only the keys inside the window: block + w - 1
            assert max(bk for _, bk, _ in seen) <= 16 + window - 1


def test_learnable_bias_gets_the_same_gradient_through_sdpa_and_chunked(monkeypatch):
    monkeypatch.setattr(attention, "QUERY_BLOCK", 8)
    grads = {}
    for kernel in ("sdpa", "chunked"):
        torch.manual_seed(0)
        scheme = make_scheme("t5", 12)
        q, k, v = qkv(30)
        plan = attention.make_plan(scheme, 12, 30, "cpu", kernel)
        attention.attend(q, k, v, plan).pow(2).sum().backward()
        grads[kernel] = scheme.relative_attention_bias.grad.clone()
    assert grads["sdpa"].abs().sum() > 0
    torch.testing.assert_close(grads["sdpa"], grads["chunked"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 4, 32, 16), (2, 2, 57, 8), (1, 3, 5, 4)])
@pytest.mark.parametrize("suffix", [False, True])
def test_biased_attention_matches_autograd_on_the_math_path(shape, suffix):
    """BiasedAttention's written-out backward against autograd through SDPA's math path (fp32)."""
    B, h, L, hd = shape
    Lq = L // 2 + 1 if suffix else L
    g = torch.Generator().manual_seed(1)
    q, grad = torch.randn(2, B, h, Lq, hd, generator=g)
    k, v = torch.randn(2, B, h, L, hd, generator=g)
    m, n = torch.arange(L - Lq, L)[:, None], torch.arange(L)[None, :]
    mask = torch.randn(1, h, Lq, L, generator=g).masked_fill(n > m, float("-inf"))

    def outputs_and_grads(attend):
        leaves = [t.clone().requires_grad_() for t in (q, k, v, mask)]
        out = attend(*leaves)
        out.backward(grad)
        return [out] + [t.grad for t in leaves]

    ours = outputs_and_grads(attention.BiasedAttention.apply)
    ref = outputs_and_grads(lambda q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert ours[4].abs().sum() > 0


def test_biased_attention_under_bf16_autocast_follows_sdpa():
    """Under autocast BiasedAttention computes as SDPA does (bf16 matmuls, fp32 softmax) and
    returns gradients in the inputs' own dtypes."""
    g = torch.Generator().manual_seed(2)
    q, k, v = torch.randn(3, 2, 3, 24, 8, generator=g)
    mask = torch.randn(1, 3, 24, 24, generator=g).masked_fill(torch.ones(24, 24).triu(1).bool(), float("-inf"))
    results = []
    for attend in (attention.BiasedAttention.apply,
                   lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)):
        leaves = [t.clone().requires_grad_() for t in (q, k, v, mask)]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = attend(*leaves)
        out.float().pow(2).sum().backward()
        results.append([out.float()] + [t.grad for t in leaves])
    assert results[0][0].dtype == torch.float32 and all(t.dtype == torch.float32 for t in results[0][1:])
    for ours, ref in zip(*results):  # bf16 rounding differs element by element: compare norms
        keep = torch.isfinite(ref)
        assert (ours[keep] - ref[keep]).norm() <= 2e-2 * ref[keep].norm()


@pytest.mark.parametrize("pos", ["t5", "kerple_log", "kerple_power", "sandwich_learned"])
def test_learnable_tables_get_autograds_gradient_through_a_model(pos, monkeypatch):
    """A learnable scheme's parameters get the same gradient with and without BiasedAttention."""
    cfg = ModelConfig(pos=pos, n_layer=2, n_head=H, d_model=H * HD, vocab_size=50)
    idx = torch.randint(0, 50, (3, 21), generator=torch.Generator().manual_seed(0))
    grads = {}
    for fused in (True, False):
        monkeypatch.setattr(attention, "FUSED_BIAS_GRAD", fused)
        torch.manual_seed(0)
        model = TransformerLM(cfg)
        model.loss(idx[:, :-1], idx[:, 1:]).backward()
        grads[fused] = {name: p.grad.clone() for name, p in model.named_parameters()}
    assert any(name.startswith("pos.") for name in grads[True])
    for name, ref in grads[False].items():
        torch.testing.assert_close(grads[True][name], ref, rtol=1e-4, atol=1e-6, msg=name)


def test_sdpa_builds_one_4d_bias_per_plan():
    scheme = make_scheme("alibi")
    plan = attention.make_plan(scheme, None, 20, "cpu", "sdpa")
    m1 = plan.sdpa_mask(0)
    assert m1.shape == (1, H, 20, 20)
    assert plan.sdpa_mask(0) is m1  # shared by every layer
    assert plan.sdpa_mask(19).shape == (1, H, 1, 20)
    # no bias and no window: no mask at all (SDPA's causal fast path)
    assert attention.make_plan(make_scheme("rotary"), None, 20, "cpu", "sdpa").table is None


def test_auto_kernel_choice_and_bad_kernel():
    s = make_scheme("alibi")
    assert attention.make_plan(s, None, 4095, "cpu", "auto").kernel == "sdpa"
    assert attention.make_plan(s, None, 4096, "cpu", "auto").kernel == "chunked"
    with pytest.raises(ConfigError, match="kernel"):
        attention.make_plan(s, None, 10, "cpu", "fast")


def test_flex_refuses_backward_on_cpu():
    q, k, v = qkv(10)
    q.requires_grad_(True)
    plan = attention.make_plan(make_scheme("alibi"), None, 10, "cpu", "flex")
    with pytest.raises(UserError, match="no backward on CPU"):
        attention.attend(q, k, v, plan)


def test_attention_flops():
    # 12 d per key and layer; causal: (L + 1) / 2 keys per query on average
    assert attention.attention_flops(2, 64, 9) == pytest.approx(12 * 2 * 64 * 5)
    # window 1: one key per query
    assert attention.attention_flops(1, 10, 100, window=1) == pytest.approx(12 * 10)


def test_flex_block_mask_built_once_per_shape():
    # every forward pass makes a new plan; the block mask (a pass over every block) is shared
    s = make_scheme("alibi")
    a = attention.make_plan(s, 4, 40, "cpu", "flex").block_mask(0, "cpu")
    b = attention.make_plan(s, 4, 40, "cpu", "flex").block_mask(0, "cpu")
    assert a is b
    assert attention.make_plan(s, 5, 40, "cpu", "flex").block_mask(0, "cpu") is not a  # another window
    assert attention.make_plan(s, 4, 40, "cpu", "flex").block_mask(39, "cpu") is not a  # the last query


def test_compiled_flex_raises_the_recompile_limit(monkeypatch):
    # past torch's default of 8 recompilations FlexAttention would run eagerly (unfused, tens
    # of times slower): a process that trains and measures at several lengths must stay compiled
    from torch import _dynamo

    monkeypatch.setattr(attention, "_COMPILED_FLEX", None)
    with _dynamo.config.patch(recompile_limit=8, accumulated_recompile_limit=8):  # torch's own defaults
        fn = attention._flex_fn(torch.device("cuda"))  # compiled lazily: no GPU needed to build it
        assert fn is not attention._flex_fn(torch.device("cpu"))
        assert _dynamo.config.recompile_limit >= attention.FLEX_RECOMPILE_LIMIT
        assert _dynamo.config.accumulated_recompile_limit >= attention.FLEX_RECOMPILE_LIMIT
