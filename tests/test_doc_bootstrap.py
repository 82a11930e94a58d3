"""Intervals over documents: the document of each evaluation segment's scored token, and the
paired intervals that resample whole documents (a cluster bootstrap) when a result records
them, while a result without them keeps the segment bootstrap, bitwise."""

from __future__ import annotations

import numpy as np
import pytest

from rflens.claims import rows
from rflens.data import corpus as C
from rflens.errors import UserError
from rflens.measure import columns, intervals
from rflens.setup.config import DataConfig

EOT = 0


def fabricated_stream(lengths, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Documents of the given lengths (tokens 1..99), each closed by EOT, and the document
    of every position written down as the stream is built."""
    rng = np.random.default_rng(seed)
    tokens, docs = [], []
    for d, n in enumerate(lengths):
        tokens += list(rng.integers(1, 100, size=n)) + [EOT]
        docs += [d] * (n + 1)  # the separator belongs to the document it closes
    return np.asarray(tokens, dtype=np.uint16), np.asarray(docs)


# ----------------------------------------------------------------------------- documents of segments


def test_document_ids_on_known_boundaries():
    tokens, truth = fabricated_stream([5, 1, 0, 12, 7])
    pos = np.arange(len(tokens))
    assert np.array_equal(C.document_ids(tokens, pos, EOT), truth)
    assert C.document_ids(tokens, [0, 5, 6, 7, 8], EOT).tolist() == [0, 0, 1, 1, 2]
    with pytest.raises(UserError):
        C.document_ids(tokens, [len(tokens)], EOT)


def test_segment_documents_are_those_of_the_scored_tokens_and_deterministic():
    tokens, truth = fabricated_stream([40, 3, 90, 17, 250, 60, 8, 120], seed=1)
    n, length = 64, 12
    segs = C.draw_segments(tokens, n, length, seed=5)
    ends = C.segment_ends(len(tokens), n, length, seed=5)
    assert np.array_equal(tokens[ends - 1], segs[:, -1])  # the ends are those of the draw
    docs = C.segment_documents(tokens, n, length, seed=5, eot=EOT)
    assert np.array_equal(docs, truth[ends - 1])
    assert np.array_equal(docs, C.segment_documents(tokens, n, length, seed=5, eot=EOT))
    assert not np.array_equal(docs, C.segment_documents(tokens, n, length, seed=6, eot=EOT))
    # every length up to the evaluation region's start scores the same tokens, so the same documents
    assert np.array_equal(docs, C.segment_documents(tokens, n, 100, seed=5, eot=EOT))


def test_built_corpus_gives_documents_within_its_test_split(tmp_path):
    from rflens import data as D
    from rflens.measure.perplexity import corpus_segments, segment_docs_of

    c = D.prepare(DataConfig(corpus="prose", vocab_size=320, max_bytes=120_000), root=tmp_path, progress=False)
    test = np.asarray(c.tokens("test"))
    docs = c.segment_docs(32, 17, seed=0)
    # independently: the start of every document from the separators
    closes = np.flatnonzero(test == c.eot_id)
    assert len(closes) == c.manifest["documents"]["test"] and closes[-1] == len(test) - 1
    ends = C.segment_ends(len(test), 32, 17, seed=0)
    assert np.array_equal(docs, np.searchsorted(closes, ends - 1))  # first separator at or after the token
    segments, about = corpus_segments(c, 32, 17, seed=0)
    assert about["segment_docs"] == docs.tolist()
    old = {"protocol": "last_token", "lengths": [4, 16], "n": 32, "seed": 0,
           "nll_per_segment": [[0.0] * 32] * 2}  # a result stored before documents were recorded
    assert segment_docs_of(c, old) == docs.tolist()
    with pytest.raises(UserError, match="test split of"):
        segment_docs_of(c, {**old, "stream_tokens": len(test) + 1})


# ----------------------------------------------------------------------------- the paired interval


def correlated_nlls(n_docs: int = 12, per_doc: int = 40, seed: int = 0):
    """Per-segment NLLs at two lengths whose differences share a per-document shift."""
    rng = np.random.default_rng(seed)
    docs = np.repeat(np.arange(n_docs), per_doc)
    base = rng.normal(3.0, 1.0, size=docs.size)
    shift = rng.normal(0.0, 0.3, size=n_docs)[docs] + rng.normal(0.0, 0.05, size=docs.size)
    order = rng.permutation(docs.size)  # the documents' segments interleaved, as a draw gives them
    return np.stack([base, base + shift])[:, order], docs[order]


def test_documents_widen_the_interval_when_their_segments_move_together():
    nll, docs = correlated_nlls()
    r, lo, hi = intervals.paired_ratio(nll)
    r2, lo2, hi2 = intervals.paired_ratio(nll, clusters=docs)
    assert r2[1] == r[1]  # the point value does not depend on the resampling
    assert hi2[1] - lo2[1] > 2 * (hi[1] - lo[1])
    # independent segments (no shared shift): about the same width either way
    rng = np.random.default_rng(1)
    flat = np.stack([np.zeros(480), rng.normal(0, 0.3, 480)])
    _, a, b = intervals.paired_ratio(flat)
    _, c, d = intervals.paired_ratio(flat, clusters=docs)
    assert 0.6 < (d[1] - c[1]) / (b[1] - a[1]) < 1.6


def test_each_segment_its_own_document_is_the_segment_bootstrap():
    nll, _ = correlated_nlls(seed=2)
    n = nll.shape[1]
    plain = intervals.paired_ratio(nll, seed=3)
    for clusters in (np.arange(n), np.arange(n)[::-1] * 5 + 2):  # distinct documents, in any numbering
        own = intervals.paired_ratio(nll, seed=3, clusters=clusters)
        assert all(np.allclose(p, o, rtol=0, atol=1e-12) for p, o in zip(plain, own))


def test_document_bootstrap_is_deterministic():
    nll, docs = correlated_nlls(seed=4)
    a = intervals.paired_ratio(nll, seed=7, clusters=docs)
    b = intervals.paired_ratio(nll, seed=7, clusters=docs)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    c = intervals.paired_ratio(nll, seed=8, clusters=docs)
    assert not np.array_equal(a[1], c[1])


def result_of(nll, docs=None, lengths=(16, 32, 64)) -> dict:
    res = {"lengths": list(lengths), "ppl": list(np.exp(nll.mean(1))), "ci_low": None, "ci_high": None,
           "nll_per_segment": nll.tolist(), "seed": 0}
    if docs is not None:
        res["segment_docs"] = [int(d) for d in docs]
    return res


def test_a_result_without_documents_keeps_its_columns_bitwise():
    nll, docs = correlated_nlls(seed=5)
    nll = np.concatenate([nll, nll[1:] * 1.01])  # three lengths
    row = columns.add_ppl_columns({}, result_of(nll), 16)
    _, lo, hi = intervals.paired_ratio(nll, base=0, seed=0)
    assert [row[f"r_lo@{L}"] for L in (16, 32, 64)] == [float(v) for v in lo]
    assert [row[f"r_hi@{L}"] for L in (16, 32, 64)] == [float(v) for v in hi]
    assert "n_docs" not in row
    # with documents: a document interval, and how many documents it rests on
    drow = columns.add_ppl_columns({}, result_of(nll, docs), 16)
    assert drow["n_docs"] == 12 and drow["r_hi@64"] - drow["r_lo@64"] > row["r_hi@64"] - row["r_lo@64"]
    # ... and the segment interval again inside bootstrap_over("segments")
    with intervals.bootstrap_over("segments"):
        srow = columns.add_ppl_columns({}, result_of(nll, docs), 16)
    assert all(srow[k] == row[k] or (srow[k] != srow[k] and row[k] != row[k]) for k in row)  # NaN: no ppl interval
    with pytest.raises(UserError, match="documents or segments"):
        with intervals.bootstrap_over("tokens"):
            pass


def test_ratio_between_schemes_resamples_documents_both_rows_share():
    nll, docs = correlated_nlls(seed=6)
    a = {"label": "a", "ppl@64": 1.0, "nll": {64: nll[1]}, "segment_docs": docs.tolist()}
    b = {"label": "b", "ppl@64": 1.0, "nll": {64: nll[0]}, "segment_docs": docs.tolist()}
    _, lo, hi = rows.ppl_ratio(a, b, 64)
    _, slo, shi = rows.ppl_ratio({**a, "segment_docs": None}, b, 64)
    assert hi - lo > 2 * (shi - slo)
    with intervals.bootstrap_over("segments"):
        assert rows.ppl_ratio(a, b, 64) == (rows.ppl_ratio({**a, "segment_docs": None}, b, 64))


def test_few_documents_are_said():
    assert intervals.docs_note(None) == "" and intervals.docs_note(intervals.MIN_DOCS) == ""
    assert "fewer than 20" in intervals.docs_note(9) and "lower bound" in intervals.docs_note(9)


def test_few_documents_give_the_union_of_both_intervals_many_the_document_one():
    rng = np.random.default_rng(8)
    # documents whose segments disagree within but agree between: the document interval is narrow
    few = np.repeat(np.arange(6), 80)
    nll = np.stack([np.zeros(480), rng.normal(0.05, 0.5, 480)])
    nll[1] -= np.array([nll[1][few == d].mean() for d in range(6)])[few] - 0.05
    _, slo, shi = intervals.paired_ratio(nll)
    _, dlo, dhi = intervals.paired_ratio(nll, clusters=few)
    assert dhi[1] - dlo[1] < 0.5 * (shi[1] - slo[1])  # so few documents: a bootstrap too sure of itself
    _, lo, hi = intervals.paired_interval(nll, docs=few)
    assert lo[1] == min(slo[1], dlo[1]) and hi[1] == max(shi[1], dhi[1])
    many = np.repeat(np.arange(intervals.MIN_DOCS), 24)
    _, mlo, mhi = intervals.paired_ratio(nll, clusters=many)
    _, lo, hi = intervals.paired_interval(nll, docs=many)
    assert np.array_equal(lo, mlo) and np.array_equal(hi, mhi)
    # no documents: bitwise the segment interval
    assert all(np.array_equal(a, b) for a, b in zip(intervals.paired_interval(nll), intervals.paired_ratio(nll)))


# ----------------------------------------------------------------------------- chapter 8's view


def test_horizon_intervals_and_docs_summary_set_both_bootstraps_side_by_side():
    from rflens.claims import scoreboard

    nll, docs = correlated_nlls(seed=9)
    nll = np.concatenate([nll, nll[1:] * 1.02])
    rows = {}
    for unit in ("segments", "documents"):
        with intervals.bootstrap_over(unit):
            row = columns.add_ppl_columns({"label": "m", "l_tr": 4}, result_of(nll, docs, lengths=(4, 32, 64)), 4)
        rows[unit] = {"table1": __import__("pandas").DataFrame([row])}
    view = scoreboard.horizon_intervals(rows)
    assert list(view.index) == ["m"] and view.loc["m", "n_docs"] == 12
    assert view.loc["m", "segments low"] == rows["segments"]["table1"].loc[0, "r_lo@64"]
    assert view.loc["m", "documents high"] == rows["documents"]["table1"].loc[0, "r_hi@64"]
    assert view.loc["m", "width ratio"] > 1
    assert "fewer than 20" in scoreboard.docs_summary(view)
    assert scoreboard.horizon_intervals({"segments": {"table1": None}, "documents": {"table1": None}}).empty


def test_perplexity_records_the_documents_and_fills_them_in_for_an_older_result(tmp_path):
    import sys

    import torch

    from rflens import data as D
    from rflens.measure import perplexity
    from rflens.model.transformer import TransformerLM
    from rflens.setup.config import EvalConfig, ModelConfig

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    import fakes

    c = D.prepare(DataConfig(corpus="prose", vocab_size=320, max_bytes=120_000), root=tmp_path, progress=False)
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(pos="alibi", n_layer=1, n_head=2, d_model=16, vocab_size=c.vocab_size)).eval()
    run = fakes.FakeRun(model, c)
    ev = EvalConfig().replace(n_segments=24, length_mults=(1, 2), batch_size=8)
    res = perplexity.perplexity(run, progress=False, eval_cfg=ev)
    docs = list(res["segment_docs"])
    assert docs == c.segment_docs(24, 17, ev.seed).tolist()
    (key, stored), = run.store.items()
    del stored["segment_docs"]  # as a result stored before documents were recorded
    again = perplexity.perplexity(run, progress=False, eval_cfg=ev)
    assert run.computed == 1 and again["segment_docs"] == docs
    row = columns.add_ppl_columns({}, again, 8)
    assert row["n_docs"] == len(set(docs))
