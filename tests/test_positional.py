"""The positional schemes give the closed forms of the paper (Chi et al., ACL 2023).

Expected values are computed here from the equations with plain Python / numpy loops,
independently of rflens.model.positional.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rflens.errors import UserError
from rflens.model import positional
from rflens.setup import schemes
from rflens.setup.config import ModelConfig, SCHEMES

RELATIVE = [s for s in SCHEMES if s not in ("nope", "sinusoidal", "rotary")]


def cfg(pos="alibi", **kw) -> ModelConfig:
    kw.setdefault("n_head", 4)
    kw.setdefault("d_model", 8 * kw["n_head"])
    return ModelConfig(pos=pos, n_layer=1, vocab_size=300, **kw)


def test_registry_has_every_scheme():
    # rflens's own schemes (a scheme of one's own, registered by another test, has a source file)
    assert {n for n in positional.REGISTRY if schemes.TABLE[n].source is None} == set(SCHEMES)
    for name in SCHEMES:
        extra = {"window": 4} if name == "window" else {}
        s = positional.build(cfg(name, **extra))
        assert isinstance(s, positional.Scheme) and s.kind in ("none", "absolute", "rotary", "relative")
        assert s.distance_bias(5).shape == (4, 5)


# ---------------------------------------------------------------- ALiBi (Sections 2-3)


@pytest.mark.parametrize("H", [1, 4, 8, 12, 16])
def test_alibi_paper_slopes(H):
    expected = [2.0 ** -(n * 8 / H) for n in range(1, H + 1)]
    np.testing.assert_allclose(positional.alibi_slopes(H), expected, rtol=1e-6)


def test_alibi_official_slopes_for_12_heads_match_the_notes():
    s = positional.alibi_slopes(12, slopes="official").tolist()
    np.testing.assert_allclose(s[:8], [2.0 ** -h for h in range(1, 9)], rtol=1e-6)
    # the official ALiBi code (get_slopes) for H=12 ends 0.707, 0.354, 0.177, 0.088
    np.testing.assert_allclose(s[8:], [0.707, 0.354, 0.177, 0.088], atol=6e-4)


def test_alibi_official_slopes_other_head_counts():
    # a power of two: the same set as the paper's
    for H in (2, 4, 8, 16):
        np.testing.assert_allclose(positional.alibi_slopes(H, "official"), positional.alibi_slopes(H, "paper"))
    # H = 6: the 4-head set (h = 2, 4, 6, 8), then every other exponent of the 8-head set: h = 1, 3
    np.testing.assert_allclose(positional.alibi_slopes(6, "official"), [2.0 ** -h for h in (2, 4, 6, 8, 1, 3)], rtol=1e-6)
    assert positional.alibi_slopes(6, "official").tolist() != positional.alibi_slopes(6, "paper").tolist()


@pytest.mark.parametrize("shift", [-3.0, 0.0, 2.5, 6.0])
@pytest.mark.parametrize("H", [4, 12])
def test_alibi_slope_shift_table(shift, H):
    s = positional.build(cfg("alibi", n_head=H, slope_shift=shift))
    table = s.distance_bias(20).numpy()
    for n in range(1, H + 1):
        for k in range(20):
            assert table[n - 1, k] == pytest.approx(-k / 2 ** (n * 8 / H + shift), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("h", [0.0, 2.0, 4.0, 8.0])
def test_alibi_same_slope_overrides_every_head(h):
    for slopes in ("paper", "official"):
        s = positional.alibi_slopes(12, slopes, slope_shift=3.0, same_slope=h)
        np.testing.assert_allclose(s, [2.0 ** -h] * 12, rtol=1e-6)


# ---------------------------------------------------------------- Sandwich (Eq. 5-6)


def sandwich_closed_form(k: int, d_bar: int, h_c: float) -> float:
    dot = sum(math.cos(k / 10000 ** (2 * i / d_bar)) for i in range(d_bar // 2))
    return (dot - d_bar / 2) / h_c


@pytest.mark.parametrize("d_bar", [8, 64, 128, 256])
@pytest.mark.parametrize("H", [4, 12])
def test_sandwich_equals_eq_5_6(d_bar, H):
    table = positional.build(cfg("sandwich", n_head=H, d_bar=d_bar)).distance_bias(3000)
    for k in (0, 1, 2, 7, 50, 511, 2999):
        for n in (1, H // 2, H):
            expected = sandwich_closed_form(k, d_bar, n * 8 / H)
            assert table[n - 1, k].item() == pytest.approx(expected, rel=1e-5, abs=1e-4)


def test_sandwich_peaks_at_distance_zero():
    table = positional.build(cfg("sandwich", n_head=8)).distance_bias(4096)
    assert torch.all(table[:, 0] == 0)
    assert torch.all(table[:, 1:] < 0)
    # heads with a larger compression ratio are flatter
    assert torch.all(table[:-1, 1:] < table[1:, 1:])


def test_larger_d_bar_gives_a_stronger_window():
    # far away the cosine sum averages out and the bias tends to -d_bar / (2 h_c)
    far = {d: positional.build(cfg("sandwich", d_bar=d)).distance_bias(2000)[:, 1000:].mean().item() for d in (32, 64, 128, 256)}
    assert far[32] > far[64] > far[128] > far[256]


def test_sandwich_function_broadcasts():
    dist = torch.arange(12).reshape(3, 4)
    out = positional.sandwich_bias(dist, 16, torch.tensor([1.0, 2.0]))
    assert out.shape == (2, 3, 4)
    assert out[1, 2, 3].item() == pytest.approx(sandwich_closed_form(11, 16, 2.0), rel=1e-5)


def test_smoothed_log_curve_fit_reproduces_the_notes():
    # measured: least squares of a*log(1+k)+b to Sandwich (d_bar=128, h_c=8) over k=0..8191 gives (-0.832, -0.794)
    k = torch.arange(8192)
    y = positional.sandwich_bias(k, 128, torch.tensor([8.0]))[0].double().numpy()
    A = np.stack([np.log1p(k.numpy()), np.ones(8192)], 1)
    a, b = np.linalg.lstsq(A, y, rcond=None)[0]
    assert a == pytest.approx(-0.832, abs=0.002) and b == pytest.approx(-0.794, abs=0.002)


def test_sandwich_learned_starts_as_sandwich_and_learns():
    fixed = positional.build(cfg("sandwich", n_head=6, d_model=48))
    learned = positional.build(cfg("sandwich_learned", n_head=6, d_model=48))
    assert learned.learnable and not fixed.learnable
    assert [n for n, _ in learned.named_parameters()] == ["compression"]
    torch.testing.assert_close(learned.distance_bias(300), fixed.distance_bias(300), rtol=1e-5, atol=1e-5)
    learned.distance_bias(50).sum().backward()
    assert learned.compression.grad is not None and torch.all(learned.compression.grad != 0)


def test_sandwich_learned_compression_kept_positive():
    s = positional.build(cfg("sandwich_learned"))
    with torch.no_grad():
        s.compression.fill_(-3.0)
    t = s.distance_bias(10)
    assert torch.isfinite(t).all()
    ref = positional.sandwich_bias(torch.arange(10), 128, torch.full((4,), 0.01))
    torch.testing.assert_close(t, ref)


# ---------------------------------------------------------------- smoothed, KERPLE, T5 (Section 7)


@pytest.mark.parametrize("a,b", [(-0.825, -0.8), (-1.5, 0.0), (0.3, 2.0)])
def test_smoothed_log_curve(a, b):
    t = positional.build(cfg("smoothed", smooth_a=a, smooth_b=b)).distance_bias(100)
    for k in (0, 1, 9, 99):
        assert torch.allclose(t[:, k], torch.tensor(a * math.log(1 + k) + b), atol=1e-5)


@pytest.mark.parametrize("r1,r2", [(1.0, 1.0), (0.825, 1.0), (2.0, 0.5)])
def test_kerple_log_at_init(r1, r2):
    s = positional.build(cfg("kerple_log", kerple_init="fixed", kerple_r1=r1, kerple_r2=r2))
    assert s.learnable and {n for n, _ in s.named_parameters()} == {"r1", "r2"}
    t = s.distance_bias(64)
    for k in (0, 1, 5, 63):
        assert torch.allclose(t[:, k], torch.tensor(-r1 * math.log(1 + r2 * k)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("r1,r2", [(1.0, 1.0), (0.5, 2.0), (3.0, 0.25)])
def test_kerple_power_at_init(r1, r2):
    t = positional.build(cfg("kerple_power", kerple_init="fixed", kerple_r1=r1, kerple_r2=r2)).distance_bias(64)
    for k in (0, 1, 5, 63):
        assert torch.allclose(t[:, k], torch.tensor(-r1 * k**r2), rtol=1e-5, atol=1e-6)


def test_kerple_parameters_kept_positive_and_get_gradients():
    for name in ("kerple_log", "kerple_power"):
        s = positional.build(cfg(name))
        with torch.no_grad():
            s.r1.fill_(-1.0)
            s.r2.fill_(5.0)
        t = s.distance_bias(30)
        assert torch.isfinite(t).all() and torch.all(t <= 0)  # r1 clamped at 0.01 > 0: a penalty, never a reward
        r2 = 5.0 if name == "kerple_log" else 2.0  # the power variant keeps r2 <= 2
        expected = -0.01 * (math.log(1 + r2 * 29) if name == "kerple_log" else 29**r2)
        assert t[0, 29].item() == pytest.approx(expected, rel=1e-5)
        t.sum().backward()  # straight-through: the gradient still reaches the clamped parameters
        assert torch.all(s.r1.grad != 0) and torch.all(s.r2.grad != 0)


@pytest.mark.parametrize("nb,md", [(32, 128), (8, 20), (16, 64), (2, 4), (10, 3)])
def test_t5_buckets_monotone_and_saturating(nb, md):
    k = torch.arange(4 * md + 50)
    b = positional.t5_bucket(k, nb, md)
    assert b.dtype == torch.long
    assert b.min() >= 0 and b.max() == nb - 1
    assert torch.all(b[1:] >= b[:-1])  # monotone non-decreasing
    assert torch.all(b[k >= md] == nb - 1)  # saturated from max_distance on
    exact = nb // 2
    assert torch.equal(b[: min(exact, md)], k[: min(exact, md)])  # one bucket per short distance


def test_t5_bucket_values():
    b = positional.t5_bucket(torch.tensor([0, 15, 16, 32, 64, 127, 128, 10_000]), 32, 128).tolist()
    # exact below 16; then 16 + floor(16 * log(k/16) / log(8))
    assert b == [0, 15, 16, 16 + int(16 * math.log(2) / math.log(8)), 16 + int(16 * math.log(4) / math.log(8)), 31, 31, 31]
    assert positional.t5_bucket(-5, 32, 128).item() == 0  # negative distances (never used causally) clamp to 0


def test_t5_table_reads_its_buckets():
    s = positional.build(cfg("t5", num_buckets=8, max_distance=20, t5_init="zero"))
    with torch.no_grad():
        s.relative_attention_bias.copy_(torch.arange(32, dtype=torch.float32).reshape(4, 8))
    t = s.distance_bias(40)
    buckets = positional.t5_bucket(torch.arange(40), 8, 20)
    for h in range(4):
        assert t[h].tolist() == [float(8 * h + int(x)) for x in buckets]
    t.sum().backward()
    assert s.relative_attention_bias.grad.sum().item() == pytest.approx(4 * 40)


@pytest.mark.parametrize("name, highs", [("kerple_log", (2.0, 1.0)), ("kerple_power", (1.0, 2.0))])
def test_kerple_starts_each_head_at_random_as_the_kerple_code(name, highs):
    """log: -p log(1 + a k) with p ~ U(0, 2), a ~ U(0, 1); power: -a k^p, a ~ U(0, 1), p ~ U(0, 2)."""
    torch.manual_seed(0)
    draws = [positional.build(cfg(name, n_head=64)) for _ in range(20)]
    for attr, high in zip(("r1", "r2"), highs):
        v = torch.cat([getattr(s, attr).detach() for s in draws])  # 1280 draws
        assert 0 <= v.min() and v.max() <= high
        assert v.mean().item() == pytest.approx(high / 2, abs=0.05 * high)  # U(0, high): mean high / 2
        assert v.std().item() == pytest.approx(high / math.sqrt(12), rel=0.08)  # and sd high / sqrt(12)
    assert len(set(draws[0].r1.tolist())) == 64  # every head its own width


def test_t5_starts_as_gpt_neox_xavier_normal_times_sqrt_head_dim():
    torch.manual_seed(0)
    c = cfg("t5", n_head=8, d_model=8 * 36, num_buckets=32)  # head_dim 36
    tables = torch.cat([positional.build(c).relative_attention_bias.detach().flatten() for _ in range(10)])
    assert tables.mean().item() == pytest.approx(0.0, abs=0.02)
    assert tables.std().item() == pytest.approx(math.sqrt(2 / (32 + 8)), rel=0.05)  # xavier-normal of (buckets, H)
    s = positional.build(c)
    with torch.no_grad():
        s.relative_attention_bias.fill_(0.5)
    assert torch.allclose(s.distance_bias(10), torch.full((8, 10), 0.5 * 6.0))  # times sqrt(36)
    zero = positional.build(cfg("t5", n_head=8, d_model=8 * 36, t5_init="zero"))
    assert torch.count_nonzero(zero.relative_attention_bias) == 0 and zero.scale == 1.0


# ---------------------------------------------------------------- masks and distance structure


@pytest.mark.parametrize("pos", RELATIVE + ["nope", "rotary"])
@pytest.mark.parametrize("w", [1, 3, 8])
def test_window_masks(pos, w):
    L = 12
    B = positional.bias_matrix(cfg(pos, window=w), L)  # (H, L, L)
    m, n = torch.meshgrid(torch.arange(L), torch.arange(L), indexing="ij")
    masked = (n > m) | (m - n >= w)
    assert torch.all(torch.isinf(B[:, masked]) & (B[:, masked] < 0))
    assert torch.all(torch.isfinite(B[:, ~masked]))


@pytest.mark.parametrize("pos", RELATIVE)
def test_relative_bias_depends_only_on_distance(pos):
    extra = {"window": 5} if pos == "window" else {}
    s = positional.build(cfg(pos, **extra))
    if s.learnable:  # move away from the initial values so every bucket / head differs
        with torch.no_grad():
            for p in s.parameters():
                p.add_(torch.rand_like(p))
    torch.manual_seed(0)  # learnable schemes start at random: the same draw for both views
    B = positional.bias_matrix(cfg(pos, **extra), 16)
    L = 16
    for m in range(L):
        for n in range(m + 1):
            torch.testing.assert_close(B[:, m, n], B[:, m - n, 0])
    # the last row is what the `bias` command prints, reversed
    torch.manual_seed(0)
    torch.testing.assert_close(positional.last_query_bias(cfg(pos, **extra), L), B[:, L - 1].flip(-1))


@pytest.mark.parametrize("pos", ["nope", "sinusoidal", "rotary"])
def test_no_relative_bias_for_absolute_schemes(pos):
    with pytest.raises(UserError, match="no relative bias"):
        positional.last_query_bias(cfg(pos), 8)
    # with a window their only "bias" is the window mask
    b = positional.last_query_bias(cfg(pos, window=3), 6)
    assert b[:, :3].eq(0).all() and torch.isinf(b[:, 3:]).all()


# ---------------------------------------------------------------- absolute and rotary


def test_sinusoidal_closed_form_and_any_length():
    d = 10
    s = positional.build(cfg("sinusoidal", n_head=2, d_model=d))
    pos = torch.tensor([0, 1, 37, 100_000])
    p = s.embed(pos)
    assert p.shape == (4, d)
    for r, m in enumerate(pos.tolist()):
        for i in range(d // 2):
            assert p[r, 2 * i].item() == pytest.approx(math.sin(m / 10000 ** (2 * i / d)), abs=1e-6)
            assert p[r, 2 * i + 1].item() == pytest.approx(math.cos(m / 10000 ** (2 * i / d)), abs=1e-6)


def test_rotary_scores_depend_only_on_distance():
    s = positional.build(cfg("rotary", n_head=2, d_model=32))
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 1, 16), torch.randn(1, 2, 1, 16)

    def score(m, n):
        qr, _ = s.rotate(q, q, torch.tensor([m]))
        _, kr = s.rotate(k, k, torch.tensor([n]))
        return (qr * kr).sum(-1)

    torch.testing.assert_close(score(5, 2), score(105, 102), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(score(0, 0), (q * k).sum(-1))
    assert not torch.allclose(score(5, 2), score(5, 4))
