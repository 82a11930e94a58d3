"""Rotary stretched at evaluation: the frequencies of each method are Hugging Face's, the
evaluation applies them length by length, and the model is plain rotary afterwards."""

import math

import numpy as np
import pytest
import torch

import fakes
from rflens.errors import UserError
from rflens.measure import perplexity, receptive
from rflens.model import positional
from rflens.model.transformer import TransformerLM
from rflens.setup.config import ConfigError, EvalConfig, ModelConfig, parse_overrides

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402


def hf_frequencies(method, head_dim, base, factor, l_tr):
    """The reference: Hugging Face's rope initialisers (linear = PI; dynamic NTK with factor 1
    at seq_len = factor x l_tr is the NTK-aware base; yarn)."""
    common = dict(hidden_size=head_dim * 2, num_attention_heads=2)
    if method == "pi":
        cfg = LlamaConfig(**common, max_position_embeddings=l_tr,
                          rope_parameters={"rope_type": "linear", "factor": factor, "rope_theta": base})
        return ROPE_INIT_FUNCTIONS["linear"](cfg, "cpu")
    if method == "ntk":
        cfg = LlamaConfig(**common, max_position_embeddings=l_tr,
                          rope_parameters={"rope_type": "dynamic", "factor": 1.0, "rope_theta": base})
        return ROPE_INIT_FUNCTIONS["dynamic"](cfg, "cpu", seq_len=int(factor * l_tr))
    cfg = LlamaConfig(**common, max_position_embeddings=int(factor * l_tr),
                      rope_parameters={"rope_type": "yarn", "factor": factor, "rope_theta": base,
                                       "original_max_position_embeddings": l_tr})
    return ROPE_INIT_FUNCTIONS["yarn"](cfg, "cpu")


@pytest.mark.parametrize("method", ["pi", "ntk", "yarn"])
@pytest.mark.parametrize("head_dim,base,l_tr", [(16, 10000.0, 64), (32, 10000.0, 64), (64, 500000.0, 512)])
@pytest.mark.parametrize("factor", [2.0, 4.0, 16.0])
def test_frequencies_match_hugging_face(method, head_dim, base, l_tr, factor):
    ref, ref_attention = hf_frequencies(method, head_dim, base, factor, l_tr)
    ours, attention = positional.rope_frequencies(head_dim, base, method, factor, l_tr)
    np.testing.assert_allclose(ours.numpy(), ref.double().numpy(), rtol=2e-6)
    assert attention == pytest.approx(ref_attention, rel=1e-12)
    plain, _ = positional.rope_frequencies(head_dim, base)
    assert not torch.allclose(ours, plain)  # a stretching that changes nothing would pass too easily


def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones():
    theta, _ = positional.rope_frequencies(32, 10000.0)
    yarn, _ = positional.rope_frequencies(32, 10000.0, "yarn", 8.0, 64)
    assert yarn[0] == theta[0]  # turns far more than 32 times within L_tr
    assert yarn[-1] == pytest.approx(theta[-1] / 8)  # never completes a turn within L_tr


def rotary_model(**kw):
    torch.manual_seed(0)
    return TransformerLM(ModelConfig(pos="rotary", n_layer=2, n_head=2, d_model=32, vocab_size=61, **kw)).eval()


def test_stretched_changes_the_logits_and_restores_plain_rotary():
    model = rotary_model()
    x = torch.randint(0, 61, (2, 40))
    with torch.no_grad():
        plain = model(x)
        with positional.stretched(model, "yarn", 4.0, 8):
            assert model.pos.attention_factor == pytest.approx(0.1 * math.log(4) + 1)
            stretched = model(x)
        again = model(x)
    assert not torch.allclose(plain, stretched)
    torch.testing.assert_close(again, plain, rtol=0, atol=0)


def test_position_interpolation_is_the_plain_model_at_scaled_positions():
    model = rotary_model()
    q, k = torch.randn(1, 2, 12, 16), torch.randn(1, 2, 12, 16)
    pos = torch.arange(12)
    model.pos.stretch("pi", 4.0, 8)
    q4, k4 = model.pos.rotate(q, k, pos)
    model.pos.stretch(None)
    q1, k1 = model.pos.rotate(q, k, pos / 4.0)
    torch.testing.assert_close(q4, q1)
    torch.testing.assert_close(k4, k1)


class Corpus:
    def __init__(self):
        self.stream = np.random.default_rng(7).integers(0, 61, size=4000)

    def eval_segments(self, n, length, seed=0):
        starts = np.random.default_rng(seed).integers(0, self.stream.size - length, size=n)
        return self.stream[starts[:, None] + np.arange(length)]

    def tokens(self, split):
        return self.stream

    def eval_region_start(self):
        return 0


def test_perplexity_stretches_each_length_by_its_own_factor():
    run = fakes.FakeRun(rotary_model(), Corpus())
    ev = EvalConfig(n_segments=5, length_mults=(1, 2, 4), rope_scaling="pi")
    res = perplexity.perplexity(run, progress=False, eval_cfg=ev)
    segs = Corpus().eval_segments(5, 33, 0)
    for i, (length, mult) in enumerate(zip(res["lengths"], (1, 2, 4))):
        with positional.stretched(run.model, "pi", float(mult), 8):
            nll = perplexity.last_token_nll(run.model, segs, [length], progress=False)[0]
        np.testing.assert_allclose(res["nll_per_segment"][i], nll, atol=1e-6)
    plain = perplexity.perplexity(run, progress=False, eval_cfg=ev.replace(rope_scaling=None))
    assert plain["ppl"][0] == pytest.approx(res["ppl"][0])  # factor 1 at L_tr: no stretching
    assert plain["ppl"][2] != pytest.approx(res["ppl"][2])
    assert run.computed == 2  # the stretched and the plain result are cached apart
    fixed = perplexity.perplexity(run, progress=False, eval_cfg=ev.replace(rope_factor=4.0))
    assert fixed["ppl"][2] == pytest.approx(res["ppl"][2]) and fixed["ppl"][0] != pytest.approx(res["ppl"][0])
    windowed = perplexity.perplexity(run, protocol="non_overlapping", lengths=[8, 16], n=3, progress=False, eval_cfg=ev)
    assert np.isfinite(windowed["ppl"]).all()
    torch.testing.assert_close(run.model.pos.inv_freq, rotary_model().pos.inv_freq, rtol=0, atol=0)


def test_receptive_field_under_stretching():
    run = fakes.FakeRun(rotary_model(), Corpus())
    ev = EvalConfig(erf_samples=3, erf_length_mult=4, batch_size=3)
    plain = receptive.receptive_field(run, progress=False, eval_cfg=ev)
    yarn = receptive.receptive_field(run, progress=False, eval_cfg=ev.replace(rope_scaling="yarn"))
    assert plain["length"] == yarn["length"] == 32 and run.computed == 2
    assert not np.allclose(plain["normalized"], yarn["normalized"])


def test_rope_settings_are_checked_in_one_line():
    with pytest.raises(ConfigError, match="rope_scaling"):
        EvalConfig(rope_scaling="linear")
    with pytest.raises(ConfigError, match="rope_factor"):
        EvalConfig(rope_factor=0.5)
    assert parse_overrides(["rope_scaling=ntk", "rope_factor=8"])["eval"] == {"rope_scaling": "ntk", "rope_factor": 8.0}
    torch.manual_seed(0)
    alibi = TransformerLM(ModelConfig(pos="alibi", n_layer=1, n_head=2, d_model=16, vocab_size=61)).eval()
    with pytest.raises(UserError, match="rotary models only"):
        perplexity.perplexity(fakes.FakeRun(alibi, Corpus()), progress=False,
                            eval_cfg=EvalConfig(n_segments=2, rope_scaling="pi"))
