"""Segments that score every test document (rflens.data.corpus.document_draw): the draw, the
perplexity it gives, a long run's Table 2 model measured on it, and a retraining that keeps
more joining the bundle in place of the shipped copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rflens.data.corpus import document_draw, document_ids
from rflens.errors import UserError
from rflens.longrun import emergence, plan
from rflens.measure.perplexity import perplexity
from rflens.setup import presets
from rflens.store import bundle
from rflens.store.shipped import ShippedRun

WSD = (("schedule", "wsd"), ("warmup", 2), ("steps", 32), ("ckpt_interval", 8))


def _stream(sizes, seed=0):
    """A token stream of documents of ``sizes`` tokens (the last one of each the separator 0)."""
    rng = np.random.default_rng(seed)
    return np.concatenate([np.r_[rng.integers(1, 50, size - 1), 0] for size in sizes])


def test_every_document_is_scored_and_the_rest_go_by_size():
    sizes = [3, 2, 10, 2, 400, 5]
    tokens = _stream(sizes)
    segments, docs, ends = document_draw(tokens, 64, 8, seed=0, eot=0)
    assert segments.shape == (64, 8) and len(docs) == len(ends) == 64
    counts = np.bincount(docs, minlength=len(sizes))
    assert (counts >= 1).all() and counts.sum() == 64
    assert counts[4] == counts.max() and counts[4] >= 55  # the long document takes its share
    # the scored token lies in its document, and the context is the tokens before it, around the ring
    assert np.array_equal(document_ids(tokens, ends - 1, 0), docs)
    for seg, end in zip(segments, ends):
        assert np.array_equal(seg, tokens[(np.arange(end - 8, end)) % len(tokens)])
    # fixed by its settings; a shorter length is the same segments' right end
    again, _, _ = document_draw(tokens, 64, 8, seed=0, eot=0)
    short, _, short_ends = document_draw(tokens, 64, 4, seed=0, eot=0)
    assert np.array_equal(again, segments) and np.array_equal(short, segments[:, 4:])
    assert np.array_equal(short_ends, ends)
    assert not np.array_equal(document_draw(tokens, 64, 8, seed=1, eot=0)[2], ends)


def test_fewer_segments_than_documents_is_one_line_naming_the_fix():
    with pytest.raises(UserError, match="6 documents.*n >= 6, not 5"):
        document_draw(_stream([3, 2, 10, 2, 400, 5]), 5, 8, seed=0, eot=0)
    with pytest.raises(UserError, match="fewer than length"):
        document_draw(_stream([3, 2]), 4, 8, seed=0, eot=0)


def test_a_models_perplexity_on_every_document_is_its_own_result(store):
    from rflens.store.runs import get_run

    run = get_run(presets.get("smoke"), "alibi", "prose", {}, progress=False)
    uniform = perplexity(run, lengths=[16, 32], progress=False)
    every = perplexity(run, lengths=[16, 32], progress=False, draw="documents")
    n_docs = int(np.sum(np.asarray(run.corpus().tokens("test")) == run.corpus().eot_id))
    assert every["draw"] == "documents" and set(every["segment_docs"]) == set(range(n_docs))
    assert "draw" not in uniform and every["ppl"] != uniform["ppl"]
    assert perplexity(run, lengths=[16, 32], progress=False, draw="documents") == every  # cached
    with pytest.raises(UserError, match="draw='sorted'"):
        perplexity(run, lengths=[16, 32], progress=False, draw="sorted")
    with pytest.raises(UserError, match="last-token protocol only"):
        perplexity(run, protocol="sliding", lengths=[16, 32], progress=False, draw="documents")


def test_a_table2_model_is_measured_on_every_document_and_its_retraining_joins_in_place(store, reference, tmp_path,
                                                                                          monkeypatch):
    spec = plan.LongModel("alibi", WSD)
    smoke = presets.get("smoke")
    first = emergence.run(spec, smoke, progress=False, keep_weights=False)  # shipped before Table 2 kept more
    assert "every_document" not in bundle.read_result(first)["points"][-1]
    assert ShippedRun(first).measurable([16, 32], "documents") == []
    # retrained as a Table 2 model now is: on every document at its last size, with its weights
    monkeypatch.setattr(emergence, "every_document_lengths", lambda run, s: [16, 32])
    again = emergence.run(spec, smoke, progress=False, keep_weights=True, root=tmp_path / "keep")
    last = bundle.read_result(again)["points"][-1]
    assert last["every_document"]["lengths"] == [16, 32] and last["every_document"]["documents"] >= 2
    assert [p for p in bundle.read_result(again)["points"][:-1] if "every_document" in p] == []
    assert list(bundle.point_document_nlls(again)) == [last["steps"]]
    assert bundle.reproduces(first, again) and not bundle.reproduces(again, first)
    # not to the bit (as on another machine): it joins only when the caller found it reproduced by the check's rule
    real = bundle.point_nlls
    monkeypatch.setattr(bundle, "point_nlls", lambda p: {k: v + 1e-3 * (Path(p) == Path(again)) for k, v in real(p).items()})
    assert bundle.keeps_more(first, again) and not bundle.reproduces(first, again)
    with pytest.raises(UserError, match="nor reproduces it with more kept"):
        bundle.adopt("smoke", again)
    monkeypatch.setattr(bundle, "point_nlls", real)
    bundle.adopt("smoke", again)
    joined = bundle.bundle_dir("smoke") / spec.name
    assert (joined / bundle.WEIGHTS).is_file() and "every_document" in bundle.read_result(joined)["points"][-1]
    served = ShippedRun(joined)
    assert served.measurable([8, 16, 32, 64], "documents") == [16, 32]
    res = perplexity(served, lengths=[16, 32], progress=False, draw="documents")
    assert res["ppl"] == pytest.approx(last["every_document"]["ppl"], rel=1e-3)
    assert res["segment_docs"] == last["every_document"]["segment_docs"]
    # another model under the same name (another seed) neither continues nor reproduces it
    other = emergence.run(plan.LongModel("alibi", (*WSD, ("seed", 3))), smoke, progress=False, keep_weights=True,
                          root=tmp_path / "other")
    assert not bundle.reproduces(joined, other)
    # nor does it stand in by the check's rule: another seed differs beyond the seeds' spread, or keeps nothing more
    assert not bundle.keeps_more(joined, other)


def test_a_retraining_on_another_machine_stands_in_when_the_checks_rule_accepts_it(monkeypatch, tmp_path):
    from rflens.longrun import recheck

    shipped, later = tmp_path / "shipped", tmp_path / "later"
    monkeypatch.setattr(bundle, "keeps_more", lambda a, b: True)
    monkeypatch.setattr(recheck, "_load", lambda path: {"path": path, "machine": {}})
    monkeypatch.setattr(recheck, "like_machine", lambda result: False)
    monkeypatch.setattr(recheck, "seed_spread", lambda run: {"pairs": [], "sizes": {}})
    rows = {(True, False): True, (True, True): False, (False, False): False}  # (reproduced, bitwise) -> stands in
    for (ok, bitwise), expected in rows.items():
        monkeypatch.setattr(recheck, "compare", lambda a, b, like, spread: {"reproduced": ok, "bitwise": bitwise})
        assert recheck.reproduced_elsewhere(shipped, later, presets.get("smoke")) is expected
    monkeypatch.setattr(bundle, "keeps_more", lambda a, b: False)  # nothing more kept: the shipped copy stays
    assert not recheck.reproduced_elsewhere(shipped, later, presets.get("smoke"))


def test_table2_models_keep_their_weights_and_are_measured_up_to_table1s_horizon():
    deep = presets.long_run("deep")
    retrained = plan.named("alibi_slope_shift=3_batch_size=4_l_tr=256", deep)
    assert plan.every_document_lengths(deep, retrained) == [256, 512, 1024]  # 16 x the run's L_tr = 64
    assert plan.keeps_weights(deep, retrained)
    assert plan.every_document_lengths(deep, plan.named("alibi_slope_shift=3", deep)) is None
