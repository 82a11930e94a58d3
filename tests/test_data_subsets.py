"""Corpora cut from a wide corpus by whole documents (rflens.data.subsets): which documents
a rule keeps, and a build that shares its parent's tokenizer and test split byte for byte."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from rflens import data as D
from rflens.data import build as B, subsets
from rflens.data.subsets import Subset
from rflens.errors import UserError
from rflens.setup.config import DataConfig, SUBSET_CORPORA

IDS = [f"{src}/doc{i}" for i, src in enumerate(["a"] * 6 + ["b"] * 3 + ["c"])]
LENGTHS = [100, 200, 150, 120, 80, 50, 300, 250, 100, 200]  # a: 700, b: 650, c: 200 tokens (1550)


def _kept_by_source(keep):
    out = {}
    for i in keep:
        out.setdefault(subsets.source_of(IDS[i]), 0)
        out[subsets.source_of(IDS[i])] += LENGTHS[i]
    return out


def test_a_stratified_subset_keeps_every_source_in_proportion():
    keep = subsets.select(IDS, LENGTHS, Subset("x", "p", 775))
    by = _kept_by_source(keep)
    assert keep == sorted(keep)  # in stream order
    for src, total in (("a", 700), ("b", 650), ("c", 200)):
        quota = 775 * total / 1550
        assert quota <= by[src] < quota + max(LENGTHS)  # passed by less than one document


def test_subsets_of_one_parent_are_nested_and_the_order_ignores_the_streams_order():
    small, large = (subsets.select(IDS, LENGTHS, Subset("x", "p", n)) for n in (400, 900))
    assert set(small) <= set(large)
    order = list(range(len(IDS)))[::-1]
    again = subsets.select([IDS[i] for i in order], [LENGTHS[i] for i in order], Subset("x", "p", 400))
    assert sorted(order[i] for i in again) == small


def test_a_one_source_subset_keeps_that_source_alone():
    keep = subsets.select(IDS, LENGTHS, Subset("x", "p", 500, source="b"))
    assert set(_kept_by_source(keep)) == {"b"} and sum(LENGTHS[i] for i in keep) >= 500


@pytest.mark.parametrize("rule, match", [(Subset("x", "p", 10, source="z"), "no source 'z'"),
                                         (Subset("x", "p", 700, source="c"), "holds 200"),
                                         (Subset("x", "p", 10_000), "holds 1,550")])
def test_a_rule_the_parent_cannot_serve_is_one_line(rule, match):
    with pytest.raises(UserError, match=match):
        subsets.select(IDS, LENGTHS, rule)


def test_the_registered_subsets_are_the_configs_and_cut_prose_wide():
    assert tuple(subsets.SUBSETS) == SUBSET_CORPORA
    assert {s.parent for s in subsets.SUBSETS.values()} == {"prose-wide"}
    assert all(name in D.ABOUT and name in D.STANDS_IN_FOR for name in SUBSET_CORPORA)


def test_document_lengths_need_a_stream_of_closed_documents():
    assert subsets.document_lengths(np.array([5, 6, 0, 7, 0]), 0).tolist() == [3, 2]
    with pytest.raises(UserError, match="rebuild"):
        subsets.document_lengths(np.array([5, 0, 7]), 0)


@pytest.fixture
def cut_of_prose(tmp_path, monkeypatch):
    """``prose-wide-3m`` re-ruled as a cut of a small prefix of the embedded prose, whose
    sources are the presidents (the second part of a document id)."""
    monkeypatch.setitem(subsets.SUBSETS, "prose-wide-3m", Subset("prose-wide-3m", "prose", 20_000))
    monkeypatch.setattr(subsets, "source_of", lambda doc_id: doc_id.split("-")[1])
    cfg = DataConfig(corpus="prose-wide-3m", vocab_size=320, max_bytes=120_000)
    return cfg, tmp_path


def test_a_subset_shares_its_parents_tokenizer_and_test_split_and_cuts_whole_documents(cut_of_prose):
    cfg, root = cut_of_prose
    sub = D.prepare(cfg, root=root, progress=False)
    parent = D.prepare(cfg.replace(corpus="prose"), root=root, progress=False)
    for key in ("tokenizer", "validation", "test"):
        assert sub.manifest["files"][key]["sha256"] == parent.manifest["files"][key]["sha256"]
    assert sub.manifest["split_ids"]["test"] == parent.manifest["split_ids"]["test"]
    kept = sub.manifest["split_ids"]["train"]
    ids = parent.manifest["split_ids"]["train"]
    assert set(kept) < set(ids) and kept == [i for i in ids if i in set(kept)]
    # the train stream is the kept documents of the parent's, whole and in order
    lengths = subsets.document_lengths(np.asarray(parent.tokens("train")), parent.eot_id)
    want = subsets.cut(np.asarray(parent.tokens("train")), lengths, [ids.index(i) for i in kept])
    assert np.array_equal(np.asarray(sub.tokens("train")), want)
    assert 20_000 <= sub.manifest["tokens"]["train"] < parent.manifest["tokens"]["train"]
    assert sub.fingerprint != parent.fingerprint
    assert sub.eval_segments(8, 64).tolist() == parent.eval_segments(8, 64).tolist()  # the same scored tokens


def test_a_subset_loads_without_rebuilding_and_is_rebuilt_when_its_parent_is(cut_of_prose):
    cfg, root = cut_of_prose
    first = D.prepare(cfg, root=root, progress=False)
    manifest = first.path / "manifest.json"
    stamp = manifest.stat().st_mtime_ns
    assert D.prepare(cfg, root=root, progress=False).fingerprint == first.fingerprint
    assert manifest.stat().st_mtime_ns == stamp
    shutil.rmtree(B.built_path(cfg.replace(corpus="prose"), root))  # the parent is gone: what it was cut from
    corpus, why = B._load(cfg, first.path, "fix")
    assert corpus is None and "sources changed" in why
    assert D.prepare(cfg, root=root, progress=False).fingerprint == first.fingerprint  # the same cut again


@pytest.mark.slow
@pytest.mark.parametrize("name", ["long-6m", "long-3m", "long-sotu"])
def test_the_sealed_passes_count_the_tokens_the_cut_holds_and_stay_within_four(name):
    """The diversity ladder's predictions were sealed with its corpora's sizes: the cuts
    built here from the pinned prose-wide hold exactly those tokens (prose-wide is built
    if missing, about a minute), and no run passes over its text more than 4 times."""
    from rflens.longrun import clock
    from rflens.setup import presets
    from rflens.setup.settings import resolve

    run = presets.get(name)
    corpus = D.prepare(resolve(run, "nope", "prose")[2], progress=False)
    tokens = corpus.manifest["tokens"]["train"]
    assert run.train.steps * run.train.batch_size * run.train.l_tr <= D.MAX_EPOCHS * tokens
    sealed = clock.read(run)
    if sealed is not None:
        assert sealed["unique_tokens"] == {"long": clock.unique_tokens(presets.get("long")), name: tokens}
