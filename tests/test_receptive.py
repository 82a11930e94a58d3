"""Receptive-field analysis (Section 4.1) on models whose answer is known in advance."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fakes
from rflens.errors import UserError
from rflens.measure import criterion, receptive
from rflens.model import transformer as model_mod
from rflens.setup.config import EvalConfig, ModelConfig

VOCAB = 53


def make_model(pos="alibi", seed=0, **kw):
    cfg = dict(pos=pos, n_layer=2, n_head=2, d_model=32, vocab_size=VOCAB)
    cfg.update(kw)
    torch.manual_seed(seed)
    return model_mod.TransformerLM(ModelConfig(**cfg)).eval()


def make_segments(n, length, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(n, length))


@pytest.mark.parametrize("n_layer, window", [(1, 5), (2, 4), (3, 3)])
def test_windowed_model_has_no_gradient_beyond_its_reach(n_layer, window):
    # one layer reaches w - 1 positions back (Eq. 3), R layers R * (w - 1): nothing beyond
    model = make_model("window", n_layer=n_layer, window=window)
    norms = receptive.input_gradients(model, make_segments(4, 31), batch_size=4, progress=False)
    normalized = receptive.normalize(norms)
    reach = n_layer * (window - 1) + 1
    assert np.all(normalized[reach:] == 0)
    assert np.all(normalized[:reach] > 0)
    summary = receptive.summarize(normalized, 0.99, l_tr=16, theoretical=n_layer * window)
    assert summary["erf"] <= reach <= summary["theoretical"]
    assert receptive.erf_from_normalized(normalized, 1.0) == reach


def test_normalised_gradients_sum_to_one_and_erf_grows_with_threshold():
    model = make_model("alibi")
    normalized = receptive.normalize(receptive.input_gradients(model, make_segments(5, 41), progress=False))
    assert normalized.shape == (40,)
    assert normalized.sum() == pytest.approx(1.0, abs=1e-12)
    erfs = [receptive.erf_from_normalized(normalized, t) for t in np.linspace(0.05, 1.0, 40)]
    assert erfs == sorted(erfs) and erfs[0] >= 1 and erfs[-1] <= 40 and erfs[0] < erfs[-1]


def test_erf_on_hand_made_curves():
    curve = [0.5, 0.3, 0.2]
    assert [receptive.erf_from_normalized(curve, t) for t in (0.4, 0.5, 0.8, 0.81, 1.0)] == [1, 1, 2, 3, 3]
    s = receptive.summarize(curve, 0.75, l_tr=2)
    assert s["erf"] == 2 and s["share_in_ltr"] == pytest.approx(0.8) and s["cumulative"][-1] == pytest.approx(1)
    with pytest.raises(UserError):
        receptive.erf_from_normalized(curve, 0)


def test_an_erf_near_the_end_of_its_segment_is_read_as_a_lower_bound():
    uniform = np.full(128, 1 / 128)  # a model that looks at every token: the segment sets the ERF
    s = receptive.summarize(uniform, 0.99, l_tr=32)
    assert s["erf"] == 127 and s["capped"]
    assert criterion.erf_text(s["erf"], s["capped"]) == "≥ 127"
    local = np.r_[np.full(10, 0.0999), np.full(118, 0.001 / 118)]  # 99.9% in the last 10 tokens
    s = receptive.summarize(local, 0.99, l_tr=32)
    assert s["erf"] == 10 and not s["capped"] and criterion.erf_text(10, s["capped"]) == "10"
    # the oldest tenth of the segment is where the bound starts
    assert receptive.erf_capped(116, 128) and not receptive.erf_capped(115, 128)
    # a window whose whole field fits in the segment reads the same at any longer length
    assert not receptive.erf_capped(120, 128, theoretical=120)
    assert receptive.erf_capped(120, 128, theoretical=160)
    # a table without the flag reads as not capped
    assert criterion.erf_text(95, float("nan")) == "95" and criterion.erf_text(95, None) == "95"


@pytest.mark.parametrize("n_layer, window", [(2, 8), (2, 10)])
def test_a_windowed_models_erf_is_never_a_lower_bound_when_its_field_fits(n_layer, window):
    model = make_model("window", n_layer=n_layer, window=window)
    length = n_layer * window  # the field R(w - 1) + 1 ends in the segment's oldest tenth
    normalized = receptive.normalize(receptive.input_gradients(model, make_segments(4, length + 1), progress=False))
    s = receptive.summarize(normalized, 1.0, l_tr=4, theoretical=receptive.theoretical_field(model.cfg))
    assert s["erf"] == n_layer * (window - 1) + 1 > 0.9 * length and not s["capped"]


def test_index_zero_is_the_most_recent_token():
    # gradients in input order [oldest ... newest] come back newest first
    norms = np.array([[1.0, 2.0, 7.0], [0.0, 0.0, 4.0]])
    np.testing.assert_allclose(receptive.normalize(norms), [(0.7 + 1.0) / 2, 0.1, 0.05])


@pytest.mark.parametrize("pos", ["alibi", "sinusoidal", "t5"])
def test_batched_gradients_equal_per_sample_gradients(pos):
    model = make_model(pos)
    segments = make_segments(5, 25)
    batched = receptive.input_gradients(model, segments, batch_size=5, progress=False)
    for i in range(len(segments)):
        one = receptive.input_gradients(model, segments[i:i + 1], batch_size=1, progress=False)
        np.testing.assert_allclose(batched[i], one[0], rtol=1e-4, atol=1e-9)


def test_gradients_match_a_direct_autograd_and_parameters_are_restored():
    model = make_model("sandwich", d_bar=16)
    model.blocks[0].mlp.c_fc.weight.requires_grad_(False)  # a mixed state must come back as it was
    flags = [p.requires_grad for p in model.parameters()]
    seg = make_segments(1, 13)
    norms = receptive.input_gradients(model, seg, progress=False)
    assert [p.requires_grad for p in model.parameters()] == flags
    idx = torch.as_tensor(seg[:, :-1])
    e = model.embed(idx).detach().requires_grad_(True)
    loss = F.cross_entropy(model(embeds=e)[:, -1], torch.as_tensor(seg[:, -1]))  # full logits this time
    loss.backward()
    np.testing.assert_allclose(norms[0], e.grad[0].norm(dim=-1).double().numpy(), rtol=1e-4, atol=1e-10)


def test_bad_inputs_raise_one_line():
    model = make_model()
    for bad in (np.zeros((0, 5), dtype=int), np.zeros((3, 1), dtype=int), np.zeros(5, dtype=int)):
        with pytest.raises(UserError) as err:
            receptive.input_gradients(model, bad, progress=False)
        assert "\n" not in str(err.value)


class FakeCorpus:
    def eval_segments(self, n, length, seed=0):
        return make_segments(n, length, seed=seed + 11)

    def tokens(self, split):  # only its length is read, to describe where the segments end
        return np.zeros(100_000, dtype=np.int64)


def FakeRun(model):
    return fakes.FakeRun(model, FakeCorpus())


def test_receptive_field_of_a_run_uses_the_cache_across_thresholds():
    run = FakeRun(make_model("window", window=3))
    ev = EvalConfig(erf_samples=3, erf_length_mult=4)
    a = receptive.receptive_field(run, progress=False, eval_cfg=ev)
    assert a["length"] == 32 and a["n"] == 3 and a["theoretical"] == 6 and a["threshold"] == 0.99
    assert len(a["normalized"]) == len(a["cumulative"]) == 32
    b = receptive.receptive_field(run, threshold=0.5, progress=False, eval_cfg=ev)
    assert run.computed == 1 and b["erf"] <= a["erf"] <= 2 * (3 - 1) + 1
    assert receptive.receptive_field(make_run_alibi(), progress=False, eval_cfg=ev)["theoretical"] is None
    with pytest.raises(UserError):
        receptive.receptive_field(run, threshold=1.5, progress=False, eval_cfg=ev)
    with pytest.raises(UserError):
        receptive.receptive_field(run, n=0, progress=False, eval_cfg=ev)


def make_run_alibi():
    return FakeRun(make_model("alibi"))


def test_an_erfs_interval_resamples_segments_and_holds_the_erf_of_their_mean():
    from rflens.measure.receptive import erf_interval
    from rflens.measure.receptive import erf_from_normalized, per_segment

    rng = np.random.default_rng(0)
    norms = rng.exponential(size=(32, 64)) * np.exp(-np.arange(64) / 8)[::-1]  # input order: recent last
    g = per_segment(norms)
    assert g.shape == (32, 64) and np.allclose(g.sum(1), 1) and g[:, 0].mean() > g[:, -1].mean()
    out = erf_interval(g, 0.8, 16)
    assert out["erf"] == erf_from_normalized(g.mean(0), 0.8)
    assert out["erf_low"] <= out["erf"] <= out["erf_high"] and out["erf_low"] < out["erf_high"]
    assert out["share_low"] <= out["share"] <= out["share_high"] < 1
    same = erf_interval(np.repeat(g[:1], 32, axis=0), 0.8, 16)  # segments alike: no spread
    assert same["erf_low"] == same["erf_high"] == same["erf"]
    with pytest.raises(UserError, match=r"\(N, L\)"):
        erf_interval(g[0], 0.8, 16)
