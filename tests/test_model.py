"""The transformer LM: every scheme trains, is causal, windows limit what it sees, the
kernels and the cheap last-token path give the same logits."""

from __future__ import annotations

import math

import pytest
import torch

from rflens.errors import ConfigError, UserError
from rflens.model import attention
from rflens.model.transformer import TransformerLM
from rflens.setup.config import ModelConfig, SCHEMES

V = 97


def make(pos="alibi", seed=0, **kw) -> TransformerLM:
    kw = {"n_layer": 2, "n_head": 2, "d_model": 16, "vocab_size": V, **kw}
    if pos == "window":
        kw.setdefault("window", 4)
    torch.manual_seed(seed)
    model = TransformerLM(ModelConfig(pos=pos, **kw))
    if model.pos.learnable:  # move learnable biases off their initial values (T5 starts at 0)
        with torch.no_grad():
            for p in model.pos.parameters():
                p.add_(torch.rand_like(p))
    return model.eval()


def tokens(B=2, L=24, seed=1):
    return torch.randint(0, V, (B, L), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("pos", SCHEMES)
def test_forward_backward_every_scheme(pos):
    model = make(pos).train()
    idx = tokens()
    loss = model.loss(idx[:, :-1], idx[:, 1:])
    assert loss.dim() == 0 and math.isfinite(loss.item())
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    if model.pos.learnable:
        for name, p in model.pos.named_parameters():
            assert p.grad.abs().sum() > 0, name


def test_initial_loss_is_about_log_vocab_and_init_follows_gpt2():
    model = make("alibi", n_layer=4, d_model=64, vocab_size=1000)
    idx = torch.randint(0, 1000, (4, 32))
    targets = torch.randint(0, 1000, (4, 32))  # not idx: tied weights favour repeating the input token
    assert model.loss(idx, targets).item() == pytest.approx(math.log(1000), abs=0.3)
    assert model.wte.weight.std().item() == pytest.approx(0.02, rel=0.1)
    proj = model.blocks[0].mlp.c_proj.weight.std().item()
    assert proj == pytest.approx(0.02 / math.sqrt(2 * 4), rel=0.1)


@pytest.mark.parametrize("pos", SCHEMES)
def test_causal_every_scheme(pos):
    model = make(pos)
    idx = tokens(L=20)
    changed = idx.clone()
    changed[:, 12] = (changed[:, 12] + 1) % V
    with torch.no_grad():
        a, b = model(idx, kernel="sdpa"), model(changed, kernel="sdpa")
    torch.testing.assert_close(a[:, :12], b[:, :12], rtol=0, atol=1e-6)
    assert (a[:, 12:] - b[:, 12:]).abs().max() > 1e-4  # the change is seen from position 12 on


@pytest.mark.parametrize("pos", ["window", "alibi", "t5", "rotary", "sinusoidal"])
@pytest.mark.parametrize("R,w", [(1, 3), (2, 4), (3, 2)])
def test_windowed_model_is_blind_beyond_r_times_w(pos, R, w):
    # one layer moves information at most w - 1 positions: R layers see R * (w - 1) tokens back
    # float64: with sinusoidal embeddings the influence of a token decays to below fp32 precision
    model = make(pos, n_layer=R, window=w).double()
    L = 20
    reach = R * (w - 1)
    idx = tokens(L=L)
    with torch.no_grad():
        base = model(idx, last_only=True, kernel="sdpa")
        for dist, visible in ((reach + 1, False), (reach + 5, False), (reach, True), (0, True)):
            changed = idx.clone()
            changed[:, L - 1 - dist] = (changed[:, L - 1 - dist] + 1) % V
            diff = (model(changed, last_only=True, kernel="sdpa") - base).abs().max().item()
            if visible:
                assert diff > 1e-12, f"a token {dist} back should be seen"
            else:  # exactly: masked keys get weight exp(-inf) = 0
                assert diff == 0, f"a token {dist} back (> {reach}) should not be seen"


@pytest.mark.parametrize("pos,window", [("alibi", None), ("window", 5), ("sandwich", None), ("t5", 7),
                                        ("rotary", None), ("sinusoidal", 6), ("kerple_power", None)])
def test_kernels_give_the_same_logits(pos, window, monkeypatch):
    monkeypatch.setattr(attention, "QUERY_BLOCK", 8)  # 45 = 5 full blocks + a partial one
    model = make(pos, window=window)
    idx = tokens(L=45)
    with torch.no_grad():
        ref = model(idx, kernel="sdpa")
        for kernel in ("chunked", "flex", "auto"):
            torch.testing.assert_close(model(idx, kernel=kernel), ref, rtol=1e-5, atol=1e-5, msg=kernel)
        for kernel in ("sdpa", "chunked", "flex"):
            last = model(idx, last_only=True, kernel=kernel)
            assert last.shape == (2, 1, V)
            torch.testing.assert_close(last[:, 0], ref[:, -1], rtol=1e-5, atol=1e-5, msg=kernel)


def test_last_only_with_one_layer_and_one_token():
    model = make("alibi", n_layer=1)
    with torch.no_grad():
        for L in (1, 2, 9):
            idx = tokens(L=L)
            torch.testing.assert_close(model(idx, last_only=True)[:, 0], model(idx)[:, -1], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_auto_switches_to_chunked_at_4096_with_the_same_logits():
    model = make("alibi", n_layer=1, window=None)
    idx = tokens(B=1, L=4100)
    with torch.no_grad():
        auto = model(idx, last_only=True)  # chunked on CPU from 4096 on
        ref = model(idx, last_only=True, kernel="sdpa")
    torch.testing.assert_close(auto, ref, rtol=1e-5, atol=1e-5)


def test_embeds_path_equals_ids_and_gives_input_gradients():
    model = make("sinusoidal")
    idx = tokens()
    e = model.embed(idx).detach().requires_grad_(True)
    logits = model(embeds=e)
    torch.testing.assert_close(logits, model(idx))
    logits[:, -1].logsumexp(-1).sum().backward()
    g = e.grad.norm(dim=-1)  # (B, L)
    assert torch.all(g > 0)
    with pytest.raises(UserError):
        model(idx, embeds=e)
    with pytest.raises(UserError):
        model()


def test_sinusoidal_runs_far_beyond_any_training_length():
    model = make("sinusoidal", n_layer=1)
    with torch.no_grad():
        out = model(tokens(B=1, L=5000), last_only=True)
    assert torch.isfinite(out).all()


def test_deterministic_on_cpu():
    a, b = make("t5", seed=3), make("t5", seed=3)
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(a(idx), b(idx), rtol=0, atol=0)
        torch.testing.assert_close(a(idx), a(idx), rtol=0, atol=0)


def test_parameter_counts_and_weight_tying():
    tied = make("alibi", tie_weights=True)
    untied = make("alibi", tie_weights=False)
    assert tied.lm_head.weight is tied.wte.weight
    d, R = 16, 2
    per_block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    assert tied.num_params() == R * per_block + 2 * d
    assert untied.num_params() == tied.num_params()
    assert untied.num_params(non_embedding=False) == tied.num_params(non_embedding=False) + V * d
    assert make("t5").num_params() == tied.num_params() + 2 * 32  # H x num_buckets
    f = tied.flops_per_token(64)
    assert f > 6 * tied.num_params() and tied.flops_per_token(128) > f


def test_bad_kernel_is_a_config_error():
    with pytest.raises(ConfigError, match="kernel"):
        make()(tokens(), kernel="fast")


@pytest.mark.parametrize("pos", ["alibi", "kerple_log", "t5"])
def test_state_dict_round_trip(pos):
    a, b = make(pos, seed=0), make(pos, seed=1)
    assert not any(k.startswith("pos.") and k.endswith("slopes") for k in a.state_dict())  # constants: rebuilt from cfg
    b.load_state_dict(a.state_dict())
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(a(idx), b(idx), rtol=0, atol=0)


def test_a_fixed_first_token_replaces_position_zero():
    """first_token (the pilot's ablation): position 0 of every input is that token, so what was
    there cannot change the logits; ids and input embeddings agree."""
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(pos="nope", n_layer=1, n_head=2, d_model=16, vocab_size=300, first_token=0)).eval()
    a = torch.randint(1, 300, (2, 9))
    b = a.clone()
    b[:, 0] = 7
    with torch.no_grad():
        assert torch.equal(model(a), model(b))
        assert torch.allclose(model(embeds=model.embed(a)), model(a), atol=1e-6)
    with pytest.raises(Exception, match="first_token"):
        ModelConfig(vocab_size=300, first_token=300)


@pytest.mark.parametrize("rows", [7, 512])  # several blocks with a ragged last one; one block
def test_fused_lm_head_loss_equals_logits_then_cross_entropy(rows, monkeypatch):
    from rflens.model import transformer as model_mod

    monkeypatch.setattr(model_mod, "LOSS_ROWS", rows)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(45, 16, generator=gen, requires_grad=True)
    w = (0.5 * torch.randn(33, 16, generator=gen)).requires_grad_()
    t = torch.randint(0, 33, (45,), generator=gen)
    fused = model_mod.linear_cross_entropy(x, w, t)
    (3.0 * fused).backward()  # a scaled upstream gradient reaches both inputs
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    ref = torch.nn.functional.cross_entropy(x @ w.T, t)
    (3.0 * ref).backward()
    assert fused.item() == pytest.approx(ref.item(), rel=1e-6)
    assert torch.allclose(gx, x.grad, atol=1e-6) and torch.allclose(gw, w.grad, atol=1e-6)
    with torch.no_grad():
        assert model_mod.linear_cross_entropy(x, w, t).item() == pytest.approx(ref.item(), rel=1e-6)


def test_model_loss_is_the_cross_entropy_of_its_logits():
    m = TransformerLM(ModelConfig(n_layer=2, n_head=2, d_model=16, vocab_size=40, pos="alibi"))
    idx = torch.randint(0, 40, (3, 9), generator=torch.Generator().manual_seed(1))
    logits = m(idx[:, :-1])
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 40), idx[:, 1:].reshape(-1))
    assert m.loss(idx[:, :-1], idx[:, 1:]).item() == pytest.approx(ref.item(), rel=1e-6)


def test_training_with_the_fused_loss_ends_where_the_plain_loss_does():
    """Sixty AdamW steps of the smoke model, once through TransformerLM.loss (fused LM head
    and loss) and once through the logits and F.cross_entropy: the same held-out loss to
    0.5% (the tolerance the book's numbers allow), and runs that repeat to the bit."""
    import contextlib

    from rflens.setup import presets
    from rflens.training.trainer import build, train_step

    s = presets.get("smoke")
    gen = torch.Generator().manual_seed(0)
    stream = torch.randint(0, s.model.vocab_size, (64, s.train.l_tr + 1), generator=gen)
    stream[:, 1::2] = (stream[:, 0:-1:2] * 7 + 3) % s.model.vocab_size  # something to learn
    held_out = stream[:16]

    def run(plain: bool):
        model, opt = build(s.model, s.train, torch.device("cpu"))

        def plain_loss(idx, targets):
            logits = model(idx)
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

        for i in range(60):
            batch = stream[16 + (i % 6) * 8: 16 + (i % 6) * 8 + 8]
            train_step(plain_loss if plain else model.loss, model, opt, batch, 2e-3, s.train, contextlib.nullcontext())
        with torch.no_grad():
            return model.loss(held_out[:, :-1], held_out[:, 1:]).item(), model.state_dict()

    fused, fused_w = run(plain=False)
    plain, _ = run(plain=True)
    again, again_w = run(plain=False)
    assert fused == pytest.approx(plain, rel=5e-3) and fused < math.log(s.model.vocab_size) - 0.2  # it learnt
    assert fused == again and all(fused_w[k].equal(again_w[k]) for k in fused_w)
