"""Corpora cut from a wide corpus by whole documents: less text, or text of one source.

The diversity ladder (``long-6m``, ``long-3m``, ``long-sotu``) asks whether failure to
extrapolate sets in after a number of tokens or after a number of passes over the text.
Its corpora differ from ``prose-wide`` in the training split alone: the tokenizer, the
validation and the test split are ``prose-wide``'s, byte for byte, so that every model
of the ladder is scored on the same test tokens by the same tokenizer.

A subset keeps whole training documents of its parent in one fixed order (a hash of each
document's id), source by source, until the source's quota is reached: ``tokens`` times
the source's share of the parent's training tokens, or, for a subset of one source,
``tokens`` from that source alone. Subsets of one parent drawn this way are nested: the
smaller stratified one is a part of the larger.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from rflens.errors import UserError
from rflens.setup.config import SUBSET_CORPORA


@dataclass(frozen=True)
class Subset:
    name: str
    parent: str  # the wide corpus it is cut from
    tokens: int  # training tokens to keep (each document's closing <|endoftext|> included)
    source: str = ""  # keep this source's documents alone; empty: every source in proportion

    def rule(self) -> dict:
        """What decides the subset's documents, as its manifest records it."""
        return {"parent": self.parent, "tokens": self.tokens, "source": self.source, "order": ORDER}


ORDER = "sha256(id)"  # the order documents are kept in, within each source

# what each holds in words: rflens.data.sources.ABOUT
SUBSETS = {s.name: s for s in (
    Subset("prose-wide-6m", "prose-wide", 6_100_000),
    Subset("prose-wide-3m", "prose-wide", 3_000_000),  # the unique tokens of the first long run's prose
    # the State of the Union addresses, the first long run's text, here in prose-wide's
    # tokenizer and scored on its test split: one source at the stratified 3m's size
    Subset("prose-wide-sotu", "prose-wide", 3_000_000, source="sotu"),
)}
assert tuple(SUBSETS) == SUBSET_CORPORA


def source_of(doc_id: str) -> str:
    """The source (archive) of a wide corpus's document: the first part of its id."""
    return doc_id.split("/", 1)[0]


def document_lengths(tokens: np.ndarray, eot: int) -> np.ndarray:
    """The length of each document of a token stream, its closing separator included."""
    ends = np.flatnonzero(np.asarray(tokens) == eot)
    if len(ends) == 0 or ends[-1] != len(tokens) - 1:
        raise UserError("the parent's training split does not end with a document separator: rebuild it "
                        "(python -m rflens data)")
    return np.diff(np.concatenate([[-1], ends]))


def document_starts(lengths: np.ndarray) -> np.ndarray:
    """Where each document begins in a stream of documents of ``lengths`` tokens, in order."""
    return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


def _rank(doc_id: str) -> str:
    return hashlib.sha256(doc_id.encode("utf-8")).hexdigest()


def select(ids: list[str], lengths, subset: Subset) -> list[int]:
    """The indices (in stream order) of the documents ``subset`` keeps out of documents
    ``ids`` of ``lengths`` tokens: within each source, in hash order, documents are taken
    while the source has fewer tokens than its quota (so a quota is passed by less than
    one document)."""
    lengths = [int(n) for n in lengths]
    if len(ids) != len(lengths):
        raise ValueError(f"{len(ids)} document ids for {len(lengths)} documents")
    total = sum(lengths)
    by_source: dict[str, list[int]] = {}
    for i, doc_id in enumerate(ids):
        by_source.setdefault(source_of(doc_id), []).append(i)
    if subset.source and subset.source not in by_source:
        raise UserError(f"{subset.parent} has no source {subset.source!r}: choose one of {', '.join(sorted(by_source))}")
    sources = [subset.source] if subset.source else sorted(by_source)
    have = sum(lengths[i] for s in sources for i in by_source[s])
    if subset.tokens > have:
        raise UserError(f"{subset.name} asks for {subset.tokens:,} training tokens, but {subset.parent} holds "
                        f"{have:,} there")
    keep = []
    for s in sources:
        members = sorted(by_source[s], key=lambda i: _rank(ids[i]))
        in_source = sum(lengths[i] for i in members)
        quota = subset.tokens if subset.source else subset.tokens * in_source / total
        taken = 0
        for i in members:
            if taken >= quota:
                break
            keep.append(i)
            taken += lengths[i]
    return sorted(keep)


def cut(tokens: np.ndarray, lengths: np.ndarray, keep: list[int]) -> np.ndarray:
    """The token stream of the kept documents, in their order."""
    starts = document_starts(lengths)
    parts = [tokens[starts[i]:starts[i] + lengths[i]] for i in keep]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=tokens.dtype)


def documents(stream: np.ndarray, eot: int) -> list[np.ndarray]:
    """The documents of a token stream, each without its closing separator."""
    lengths = document_lengths(stream, eot)
    starts = document_starts(lengths)
    return [stream[a:a + n - 1] for a, n in zip(starts, lengths)]
