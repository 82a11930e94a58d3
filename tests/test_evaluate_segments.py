"""What an interval rests on: segment ends are drawn with replacement, so a short text gives
the same segment several times; the bootstrap then resamples the distinct segments (whole
clusters), the result says how many there are and when their contexts overlap or end
elsewhere than the shared evaluation region, and without clusters every draw is the one it
always was (no stored interval moves)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rflens import hf
from rflens.cli import main
from rflens.data.corpus import draw_segments, eval_region_start
from rflens.measure import intervals, perplexity

WORDS = ("the model reads a window of tokens and predicts the next one while its receptive field "
         "grows with depth and the bias decays with distance").split()


# ----------------------------------------------------------------------------- bootstrap_indices


def test_without_clusters_the_draw_is_the_one_it_always_was():
    for n, seed in ((1, 0), (64, 3), (512, 0), (71, 9)):
        expected = np.random.default_rng([seed, n]).integers(0, n, size=(1000, n))
        got = intervals.bootstrap_indices(n, seed)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_distinct_clusters_give_the_rows_of_the_plain_draw():
    plain = intervals.bootstrap_indices(64, seed=3)
    clustered = intervals.bootstrap_indices(64, seed=3, clusters=np.arange(64)[::-1] * 7 + 5)
    assert len(clustered) == 1000 and all(np.array_equal(a, b) for a, b in zip(plain, clustered))


def test_a_replicate_takes_whole_clusters_as_many_as_there_are():
    rng = np.random.default_rng(0)
    clusters = rng.integers(0, 9, size=40)  # 40 segments in at most 9 clusters
    members = {c: set(np.flatnonzero(clusters == c)) for c in np.unique(clusters)}
    draws = intervals.bootstrap_indices(40, seed=1, n_boot=200, clusters=clusters)
    assert len(draws) == 200
    for idx in draws:
        counts = {c: int(np.sum(clusters[idx] == c)) for c in members}
        # every cluster is taken a whole number of times, all its segments each time
        taken = {c: counts[c] // len(m) for c, m in members.items()}
        assert all(counts[c] == taken[c] * len(m) for c, m in members.items())
        for c, m in members.items():
            assert all(int(np.sum(idx == i)) == taken[c] for i in m)
        assert sum(taken.values()) == len(members)  # as many clusters as there are
    assert intervals.bootstrap_indices(40, seed=1, n_boot=200, clusters=clusters)[5].tolist() == draws[5].tolist()
    with pytest.raises(Exception, match="one cluster per segment"):
        intervals.bootstrap_indices(40, clusters=clusters[:5])


def test_cluster_sums_are_the_sums_of_the_drawn_segments():
    rng = np.random.default_rng(5)
    clusters = rng.integers(0, 13, size=60)
    values = rng.normal(size=(3, 60))
    draws = intervals.bootstrap_indices(60, seed=2, n_boot=300, clusters=clusters)
    gathered = np.stack([values[:, i].sum(1) for i in draws], axis=1)  # (3, 300)
    sums = intervals.cluster_bootstrap_sums(values, seed=2, n_boot=300, clusters=clusters)
    assert sums.shape == (3, 300) and np.allclose(sums, gathered, rtol=1e-12, atol=1e-12)
    assert not np.allclose(intervals.cluster_bootstrap_sums(values, seed=3, n_boot=300, clusters=clusters), gathered)


def test_a_kept_cluster_draw_gives_what_a_fresh_one_gives(monkeypatch):
    rng = np.random.default_rng(6)
    clusters, values = rng.integers(0, 17, size=80), rng.normal(size=(2, 80))
    kept = intervals.cluster_bootstrap_sums(values, seed=4, n_boot=200, clusters=clusters)
    assert intervals.cluster_bootstrap_sums(values, seed=4, n_boot=200, clusters=clusters).tobytes() == kept.tobytes()
    monkeypatch.setattr(intervals, "KEEP_DRAWS", 10)  # too large to keep: drawn afresh, block by block
    assert intervals.cluster_bootstrap_sums(values, seed=4, n_boot=200, clusters=clusters).tobytes() == kept.tobytes()


def test_redrawn_segments_widen_the_interval_to_that_of_the_distinct_ones():
    """71 distinct values drawn 512 times: the plain bootstrap treats 512 observations as
    independent; the clustered one gives about the interval of the 71."""
    rng = np.random.default_rng(0)
    values = rng.normal(5.0, 1.0, size=71)
    ends = rng.integers(0, 71, size=512)
    nll = values[ends]
    _, lo_plain, hi_plain = intervals.bootstrap_ppl(nll, seed=0)
    _, lo, hi = intervals.bootstrap_ppl(nll, seed=0, clusters=ends)
    _, lo71, hi71 = intervals.bootstrap_ppl(values[np.unique(ends)], seed=0)
    assert (hi - lo) > 2 * (hi_plain - lo_plain)
    assert 0.7 < (hi - lo) / (hi71 - lo71) < 1.4
    # all distinct: bitwise the plain interval
    assert intervals.bootstrap_ppl(nll, seed=0, clusters=np.arange(512)) == intervals.bootstrap_ppl(nll, seed=0)


# ----------------------------------------------------------------------------- the draw and what it says


def test_the_draw_is_the_corpus_draw_with_its_ends():
    tokens = np.random.default_rng(1).integers(0, 500, size=3000)
    for length in (17, 1600, 3000):
        segments, about = perplexity.draw(tokens, 40, length, seed=2)
        assert np.array_equal(segments, draw_segments(tokens, 40, length, seed=2))
        ends = np.asarray(about["segment_ends"])
        assert all(np.array_equal(tokens[e - length:e], s) for e, s in zip(ends, segments))
        assert about["segments_distinct"] == np.unique(ends).size
        covered = np.zeros(tokens.size, bool)
        for e in np.unique(ends):
            covered[e - length:e] = True
        assert about["tokens_covered"] == covered.sum()
        assert about["in_region"] == (length <= eval_region_start(3000))


def test_a_corpus_draw_describes_the_segments_eval_segments_returns(own_data):
    from rflens import data
    from rflens.setup import presets

    corpus = data.prepare(presets.get("smoke").data, progress=False)
    segments, about = perplexity.corpus_segments(corpus, 16, 257, seed=0)
    assert np.array_equal(segments, corpus.eval_segments(16, 257, 0))
    same, again = perplexity.draw(corpus.tokens("test"), 16, 257, seed=0)
    assert np.array_equal(segments, same) and again == {k: v for k, v in about.items() if k != "segment_docs"}
    assert about["segment_docs"] == corpus.segment_docs(16, 257, 0).tolist()  # the corpus knows its documents


def test_last_token_result_counts_and_says_the_distinct_segments():
    ends = np.array([900, 900, 950, 950, 950, 1000])
    about = perplexity.describe_segments(ends, 300, 1095)
    nll = np.random.default_rng(0).normal(3, 1, size=(2, 6))
    res = perplexity.last_token_result(nll, [16, 64], None, 0, about)
    assert res["units"] == [3, 3] and res["segments_distinct"] == 3 and "3 distinct" in res["ci"]
    notes = perplexity.segment_notes(res)
    assert any("6 segments drawn, 3 of them distinct" in x for x in notes)
    assert any("overlap" in x for x in notes)
    # nothing said about separate, distinct segments in the shared region; nor without a description
    plain = perplexity.last_token_result(nll, [16, 64], None, 0,
                                       perplexity.describe_segments(np.arange(6) * 400 + 20_000, 300, 40_000))
    assert perplexity.segment_notes(plain) == [] and plain["units"] == [6, 6]
    assert perplexity.segment_notes(perplexity.last_token_result(nll, [16, 64], None, 0)) == []
    assert plain["ci_low"] == perplexity.last_token_result(nll, [16, 64], None, 0)["ci_low"]


# ----------------------------------------------------------------------------- --hf --text, end to end


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield hf.tiny_random_models(tmp_path_factory.mktemp("hf"))
    torch.set_num_threads(before)


def test_a_short_text_says_its_segments_are_redrawn_and_rests_the_interval_on_the_distinct_ones(tiny, store, tmp_path,
                                                                                                 capsys):
    text = tmp_path / "short.txt"
    text.write_text(" ".join(np.random.default_rng(0).choice(WORDS, size=60)))
    argv = ["evaluate", "--hf", str(tiny["bloom"]), "--text", str(text), "--scale", "smoke", "--quiet", "--n", "64"]
    assert main(argv + ["--lengths", "16"]) == 0
    out = capsys.readouterr().out
    assert "distinct)" in out and "of them distinct" in out and "resamples the" in out
    assert main(argv + ["--lengths", "16", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    k = res["segments_distinct"]
    assert k < 64 and res["units"] == [k] and len(set(res["segment_ends"])) == k
    total = res["stream_tokens"]
    assert k <= total - max(17, eval_region_start(total)) + 1  # no more distinct ends than positions


def test_lengths_that_move_the_segments_say_so(tiny, store, tmp_path, capsys):
    """--lengths 16 and --lengths 16,<beyond the region> score other tokens at L = 16: said."""
    text = tmp_path / "text.txt"
    text.write_text(" ".join(np.random.default_rng(1).choice(WORDS, size=300)))
    argv = ["evaluate", "--hf", str(tiny["bloom"]), "--text", str(text), "--scale", "smoke", "--quiet", "--n", "8",
            "--json"]
    assert main(argv + ["--lengths", "16"]) == 0
    short = json.loads(capsys.readouterr().out)
    total = short["stream_tokens"]
    far = total - 10  # longer than the tokens before the evaluation region
    assert far + 1 > eval_region_start(total) and short["in_region"]
    assert main(argv + ["--lengths", f"16,{far}"]) == 0
    long = json.loads(capsys.readouterr().out)
    assert not long["in_region"] and long["segment_ends"] != short["segment_ends"]
    assert any("do not fit before the evaluation region" in x for x in perplexity.segment_notes(long))
    assert not any("evaluation region" in x for x in perplexity.segment_notes(short))
    assert main(argv[:-1] + ["--lengths", f"16,{far}"]) == 0
    assert "do not fit before the evaluation region" in capsys.readouterr().out


def test_an_interval_over_one_segment_says_it_is_none():
    nll = np.array([[2.0], [2.5]])
    res = perplexity.last_token_result(nll, [16, 32], 16, 0, perplexity.describe_segments([20_000], 33, 40_000))
    assert res["ci_low"] == res["ci_high"] == res["ppl"] or np.allclose(res["ci_low"], res["ppl"])
    assert any("rests on one segment" in x for x in perplexity.segment_notes(res))
    windows = {"protocol": "non_overlapping", "n": 4, "lengths": [16, 256], "units": [4, 1]}
    assert any("single chunk" in x for x in perplexity.unit_notes(windows))
