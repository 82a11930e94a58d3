"""The perplexity protocols score the tokens they claim to, the way a slow loop would.

Models are randomly initialised (no training): the protocols are about which tokens are
scored with which context, which does not depend on what the model has learnt.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fakes
from rflens.errors import UserError
from rflens.measure import intervals, perplexity
from rflens.model import transformer as model_mod
from rflens.setup.config import EvalConfig, ModelConfig, SCHEMES
from rflens.setup import presets

VOCAB = 61


def make_model(pos="alibi", seed=0, **kw):
    defaults = dict(pos=pos, n_layer=2, n_head=2, d_model=32, vocab_size=VOCAB, d_bar=16, max_distance=64)
    if pos == "window":
        defaults["window"] = 6
    defaults.update(kw)
    torch.manual_seed(seed)
    return model_mod.TransformerLM(ModelConfig(**defaults)).eval()


def make_segments(n, length, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(n, length))


@torch.no_grad()
def reference_last_token(model, segments, lengths):
    """The protocol written as plainly as possible: crop, run one segment, full logits."""
    out = np.zeros((len(lengths), len(segments)))
    for i, length in enumerate(lengths):
        for j, seg in enumerate(segments):
            crop = torch.as_tensor(seg[len(seg) - 1 - length:], dtype=torch.long)  # L inputs + the target
            assert crop.numel() == length + 1
            logits = model(crop[None, :-1], kernel="sdpa")[0, -1]  # full logits, last position
            out[i, j] = -F.log_softmax(logits.double(), -1)[crop[-1]].item()
    return out


@pytest.mark.parametrize("pos", ["alibi", "window", "sinusoidal", "rotary", "t5"])
def test_batched_last_token_matches_the_slow_loop(pos):
    model = make_model(pos)
    segments = make_segments(7, 41)
    lengths = [2, 5, 17, 40]
    fast = perplexity.last_token_nll(model, segments, lengths, batch_size=3, progress=False)
    slow = reference_last_token(model, segments, lengths)
    assert fast.shape == (4, 7)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-5)


@pytest.mark.parametrize("pos", ["alibi", "window"])
def test_memory_bounded_path_gives_the_same_nll(pos):
    # long inputs take the chunked kernel (several query blocks) and fewer segments per pass
    model = make_model(pos)
    segments = make_segments(3, 1101)
    assert perplexity.choose_kernel(model, 1100) == "chunked" and perplexity.choose_kernel(model, 64) == "auto"
    assert perplexity.rows_per_pass(1100, 8, max_tokens=2200) == 2 and perplexity.rows_per_pass(9000, 8) == 1
    a = perplexity.last_token_nll(model, segments, [1100, 3], batch_size=8, max_tokens=2200, progress=False)
    b = reference_last_token(model, segments, [1100, 3])
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


class ContextFree(torch.nn.Module):
    """Ignores its input: the NLL then depends only on which token is scored."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.bias = torch.nn.Parameter(torch.randn(VOCAB))
        self.seen = []

    def forward(self, idx, last_only=False, kernel="auto"):
        self.seen.append(idx.clone())
        n = 1 if last_only else idx.shape[1]
        return self.bias.expand(idx.shape[0], n, VOCAB)


def test_the_same_final_token_is_scored_at_every_length():
    model = ContextFree()
    segments = make_segments(5, 33)
    lengths = [32, 2, 8]
    nll = perplexity.last_token_nll(model, segments, lengths, batch_size=5, progress=False)
    expected = -F.log_softmax(model.bias.detach().double(), -1).numpy()[segments[:, -1]]
    for row in nll:
        np.testing.assert_allclose(row, expected, atol=1e-6)
    # and the input at length L is exactly the L tokens before the final one
    for length, idx in zip(lengths, model.seen):
        np.testing.assert_array_equal(idx.numpy(), segments[:, 32 - length:32])


@pytest.mark.parametrize("lengths", [[1], [0, 8], [-3], [], [33]])
def test_bad_lengths_raise_one_line(lengths):
    with pytest.raises(UserError) as err:
        perplexity.last_token_nll(ContextFree(), make_segments(2, 33), lengths, progress=False)
    assert "\n" not in str(err.value)


@torch.no_grad()
def reference_windows(model, tokens, length, n, stride):
    """Window k reads tokens[k*stride : k*stride + L]; k > 0 scores only its last `stride` targets."""
    sums, counts = [], []
    for k in range(n):
        s = k * stride
        if s + length + 1 > len(tokens):
            break
        x = torch.as_tensor(tokens[s:s + length + 1], dtype=torch.long)
        logp = F.log_softmax(model(x[None, :-1], kernel="sdpa")[0].double(), -1)
        nll = -logp[torch.arange(length), x[1:]]
        keep = nll if k == 0 else nll[length - stride:]
        sums.append(keep.sum().item())
        counts.append(keep.numel())
    return np.array(sums), np.array(counts)


@pytest.mark.parametrize("stride", [None, 4, 1])
def test_window_protocols_match_the_slow_loop(stride):
    model = make_model("sandwich")
    tokens = make_segments(1, 200)[0]
    length = 16
    s = stride or length
    got_sum, got_count = perplexity.window_nll(model, tokens, length, 9, stride=stride, batch_size=4, progress=False)
    ref_sum, ref_count = reference_windows(model, tokens, length, 9, s)
    np.testing.assert_array_equal(got_count, ref_count)
    np.testing.assert_allclose(got_sum, ref_sum, rtol=1e-6, atol=1e-5)
    # every token after the first is scored exactly once, as far as the windows reach
    assert got_count.sum() == length + (len(got_count) - 1) * s


def test_window_protocol_stops_at_the_end_of_the_stream():
    tokens = make_segments(1, 50)[0]
    sums, counts = perplexity.window_nll(ContextFree(), tokens, 16, 100, progress=False)
    assert len(sums) == 3  # (50 - 1 - 16) // 16 + 1 windows fit
    with pytest.raises(UserError):
        perplexity.window_nll(ContextFree(), tokens[:10], 16, 1, progress=False)
    with pytest.raises(UserError):
        perplexity.window_nll(ContextFree(), tokens, 16, 1, stride=17, progress=False)


def test_bootstrap_interval_brackets_the_estimate_and_is_seeded():
    rng = np.random.default_rng(0)
    nll = rng.gamma(2.0, 1.5, size=200)
    ppl, lo, hi = intervals.bootstrap_ppl(nll, seed=3)
    assert lo < ppl < hi
    assert ppl == pytest.approx(np.exp(nll.mean()))
    assert intervals.bootstrap_ppl(nll, seed=3) == (ppl, lo, hi)
    # more segments, narrower interval
    _, lo2, hi2 = intervals.bootstrap_ppl(np.tile(nll, 16), seed=3)
    assert hi2 - lo2 < (hi - lo) / 2
    # token-weighted units: sum / count
    ppl_w, _, _ = intervals.bootstrap_ppl([10.0, 2.0], [5, 1])
    assert ppl_w == pytest.approx(np.exp(12.0 / 6))


def test_a_kept_bootstrap_draw_gives_what_a_fresh_one_gives(monkeypatch):
    nll = np.random.default_rng(1).gamma(2.0, 1.5, size=300)
    idx = np.random.default_rng(5).integers(0, 300, size=(1000, 300))
    boot = np.exp(nll[idx].mean(1))
    expected = (float(np.exp(nll.mean())), *map(float, np.quantile(boot, [0.025, 0.975])))
    kept = intervals.bootstrap_ppl(nll, seed=5)
    assert kept == pytest.approx(expected, rel=1e-12) and intervals.bootstrap_ppl(nll, seed=5) == kept
    monkeypatch.setattr(intervals, "KEEP_DRAWS", 10)  # too large to keep: drawn afresh
    assert intervals.bootstrap_ppl(nll, seed=5) == kept


@pytest.mark.parametrize("pos", SCHEMES)
def test_every_scheme_gives_finite_perplexity_far_beyond_short_lengths(pos):
    model = make_model(pos)
    segments = make_segments(3, 257)
    nll = perplexity.last_token_nll(model, segments, [8, 64, 256], batch_size=3, progress=False)
    assert np.isfinite(nll).all()
    sums, _ = perplexity.window_nll(model, segments[0], 128, 2, stride=64, progress=False)
    assert np.isfinite(sums).all()


# -----------------------------------------------------------------------------
# perplexity(run): defaults from the scale, results through the run's cache


class FakeCorpus:
    def __init__(self, n_tokens=5000):
        self.stream = make_segments(1, n_tokens, seed=7)[0]

    def eval_segments(self, n, length, seed=0):
        rng = np.random.default_rng(seed)
        starts = rng.integers(0, self.stream.size - length, size=n)
        return self.stream[starts[:, None] + np.arange(length)]

    def tokens(self, split):
        assert split == "test"
        return self.stream

    def eval_region_start(self):
        return self.stream.size // 2


def FakeRun(model):
    return fakes.FakeRun(model, FakeCorpus())


def test_perplexity_defaults_and_cache():
    run = FakeRun(make_model("alibi"))
    ev = EvalConfig(n_segments=6, length_mults=(1, 2, 4))
    res = perplexity.perplexity(run, progress=False, eval_cfg=ev)
    assert res["lengths"] == [8, 16, 32] and res["n"] == 6 and res["l_tr"] == 8
    assert all(lo <= p <= hi for p, lo, hi in zip(res["ppl"], res["ci_low"], res["ci_high"]))
    # exp of the mean NLL of the very segments eval_segments returns
    segs = FakeCorpus().eval_segments(6, 33, 0)
    nll = perplexity.last_token_nll(run.model, segs, [8, 16, 32], progress=False)
    np.testing.assert_allclose(res["ppl"], np.exp(nll.mean(1)), rtol=1e-9)
    again = perplexity.perplexity(run, progress=False, eval_cfg=ev)
    assert again == res and run.computed == 1
    for protocol in ("non_overlapping", "sliding"):
        r = perplexity.perplexity(run, protocol=protocol, lengths=[8, 16], n=4, progress=False, eval_cfg=ev)
        assert r["protocol"] == protocol and len(r["ppl"]) == 2 and np.isfinite(r["ppl"]).all()
    assert run.computed == 3
    with pytest.raises(UserError):
        perplexity.perplexity(run, n=0, progress=False, eval_cfg=ev)
    with pytest.raises(UserError):
        perplexity.perplexity(run, protocol="overlapping", progress=False, eval_cfg=ev)
    with pytest.raises(UserError):
        perplexity.perplexity(run, lengths=[1, 8], progress=False, eval_cfg=ev)


# -----------------------------------------------------------------------------
# through the run store, at smoke scale (trains two tiny models in a fresh store)


@pytest.mark.slow
def test_smoke_run_end_to_end(store, tmp_path, monkeypatch, capsys):

    from rflens import cli
    from rflens.measure import receptive
    from rflens.store import runs

    run = runs.get_run(presets.get("smoke"), "alibi", "prose", progress=False)
    res = perplexity.perplexity(run, progress=False)
    l_tr = run.train_cfg.l_tr
    assert res["lengths"] == [l_tr * m for m in (1, 2, 4, 8, 16)] and res["n"] == 16
    assert np.isfinite(res["ppl"]).all() and len(res["nll_per_segment"]) == 5
    assert list((run.path / "results").glob("perplexity_last_token-*.json"))

    # a repeated call reads the store and computes nothing
    def boom(*a, **k):
        raise AssertionError("recomputed a cached result")

    monkeypatch.setattr(perplexity, "last_token_nll", boom)
    assert perplexity.perplexity(run, progress=False) == res
    assert main_json(cli, capsys, ["evaluate", "--scale", "smoke", "--quiet", "--json"]) == res
    monkeypatch.undo()
    monkeypatch.setenv("RFLENS_RUNS", str(store))

    # the command line: the windowed model of the smoke sweep, its table and its JSON
    assert cli.main(["erf", "--scale", "smoke", "--pos", "window", "--set", "window=4", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "ERF" in out and "theoretical receptive field R*w: 8" in out
    erf = main_json(cli, capsys, ["erf", "--scale", "smoke", "--pos", "window", "--set", "window=4", "--quiet",
                                  "--json", "--threshold", "0.9"])
    assert erf["threshold"] == 0.9 and erf["erf"] <= 2 * (4 - 1) + 1 and erf["length"] == 4 * l_tr
    assert sum(erf["normalized"]) == pytest.approx(1.0)
    window_run = runs.get_run(presets.get("smoke"), "window", "prose", window=4, train=False, progress=False)
    assert receptive.receptive_field(window_run, threshold=0.9, progress=False) == erf
    assert cli.main(["evaluate", "--scale", "smoke", "--quiet", "--lengths", "1,16"]) == 2
    assert "at least 2 tokens" in capsys.readouterr().err

    # a model with no positional dependence beyond its window: the three protocols score the
    # same region of the test split, so they agree within the last-token interval
    ev = perplexity.eval_config(window_run).replace(n_segments=64)
    by = {p: perplexity.perplexity(window_run, protocol=p, lengths=[64], progress=False, eval_cfg=ev)
          for p in ("last_token", "non_overlapping", "sliding")}
    low, high = by["last_token"]["ci_low"][0], by["last_token"]["ci_high"][0]
    assert low <= by["sliding"]["ppl"][0] <= high and low <= by["non_overlapping"]["ppl"][0] <= high
    region = run.corpus().tokens("test").size - run.corpus().eval_region_start()
    assert by["non_overlapping"]["tokens"][0] == (region - 1) // 64 * 64  # the whole region, in chunks

    # an evaluation setting given with --set is the one used (the --protocol flag does not shadow it)
    sliding = main_json(cli, capsys, ["evaluate", "--scale", "smoke", "--quiet", "--json", "--lengths", "16",
                                      "--set", "protocol=sliding"])
    assert sliding["protocol"] == "sliding" and sliding["stride"] == "half"  # of each window
    flag = main_json(cli, capsys, ["evaluate", "--scale", "smoke", "--quiet", "--json", "--lengths", "16",
                                   "--set", "protocol=sliding", "--protocol", "non_overlapping"])
    assert flag["protocol"] == "non_overlapping"


def main_json(cli, capsys, argv):
    import json

    capsys.readouterr()
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


# ----------------------------------------------------------------------------- paired statistics
def test_paired_ratio_of_identical_lengths_is_one_with_an_interval_holding_one():
    rng = np.random.default_rng(0)
    nll = np.repeat(rng.gamma(2.0, 2.0, size=(1, 512)), 3, axis=0)  # three lengths, the same losses
    r, lo, hi = intervals.paired_ratio(nll)
    assert np.allclose(r, 1.0) and np.all(lo <= 1.0) and np.all(hi >= 1.0)
    assert np.allclose(lo, 1.0) and np.allclose(hi, 1.0)  # no spread of differences: a point


def test_paired_ratio_covers_the_true_ratio_at_the_stated_rate():
    """Synthetic losses: NLL_i(L) = NLL_i(L_tr) + delta + noise, so r = exp(delta) exactly in
    expectation. Over 200 evaluation samples the 95% interval covers it about 95% of the time,
    and it is much narrower than an unpaired interval would be."""
    rng = np.random.default_rng(1)
    delta, covered, widths = 0.05, 0, []
    for trial in range(200):
        base = rng.gamma(2.0, 2.0, size=512)  # hard and easy tokens: a wide spread
        nll = np.stack([base, base + delta + rng.normal(0, 0.3, size=512)])
        r, lo, hi = intervals.paired_ratio(nll, seed=trial, n_boot=400)
        covered += lo[1] <= np.exp(delta) <= hi[1]
        widths.append(hi[1] - lo[1])
    assert 0.90 <= covered / 200 <= 0.99
    assert np.median(widths) < 0.07  # ~ exp(0.05) +- 2 x 0.3 / sqrt(512); unpaired it would be ~0.4


def test_bootstrap_draws_are_shared_by_every_model_and_length():
    a, b = intervals.bootstrap_indices(64, seed=3), intervals.bootstrap_indices(64, seed=3)
    assert np.array_equal(a, b) and a.shape == (intervals.N_BOOTSTRAP, 64)
    assert not np.array_equal(a, intervals.bootstrap_indices(64, seed=4))


def test_a_window_model_reads_exactly_its_receptive_field():
    """With R layers and a window w, the last token sees R(w - 1) + 1 positions: its NLL is
    the same (to float32 rounding) at every L_ex from there on, at any length and kernel, and
    differs with one token less. Such a model cannot fail beyond an L_tr >= R(w - 1) + 1."""
    torch.manual_seed(0)
    cfg = ModelConfig(pos="window", window=4, n_layer=2, n_head=2, d_model=32, vocab_size=300)
    model = model_mod.TransformerLM(cfg).eval()
    field = cfg.n_layer * (cfg.window - 1) + 1  # 7
    seg = np.random.default_rng(0).integers(0, 300, size=(8, 1100))
    nll = perplexity.last_token_nll(model, seg, [field, 16, 64, 256, 1024], progress=False)  # 1024: chunked kernel
    assert np.abs(nll - nll[0]).max() < 1e-5
    short = perplexity.last_token_nll(model, seg, [field - 1], progress=False)
    assert np.abs(short - nll[0]).max() > 1e-4


def test_the_rising_rule_rarely_fires_on_a_model_that_cannot_rise():
    """False positives of "r rises" (lower bound of r(L) above 1): on losses whose differences
    have mean zero (a model whose context beyond L_tr changes nothing on average), the rule
    fires in about 2.5% of evaluation samples, the one-sided rate of a 95% interval."""
    rng = np.random.default_rng(2)
    fired = 0
    for trial in range(400):
        base = rng.gamma(2.0, 2.0, size=512)
        nll = np.stack([base, base + rng.normal(0, 0.3, size=512)])
        _, lo, _ = intervals.paired_ratio(nll, seed=trial, n_boot=400)
        fired += lo[1] > 1.0
    assert fired / 400 <= 0.05
