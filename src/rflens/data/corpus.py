"""One built corpus: its tokenizer, its token streams and the evaluation segments.

A :class:`Corpus` only reads what :func:`rflens.data.prepare` built and checked; it never
writes. The token streams are memory-mapped: a split is read from disk only where it is
used.

The evaluation segments serve the last-token protocol of Chi et al. (ACL 2023, footnote
2 and Figure 3; see :mod:`rflens.measure.perplexity`): every evaluation length, and every model,
scores the same last tokens, and a longer length only adds context on the left.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rflens.errors import UserError
from rflens.setup.config import DataConfig

SPLITS = ("train", "validation", "test")
EOT = "<|endoftext|>"  # separates documents in the token streams; id 0
REGION_MAX = 32768  # the evaluation region starts at most this many tokens into the stream


def eval_region_start(total: int) -> int:
    """Where the evaluation region of a stream of ``total`` tokens begins: its second
    half, or from token 32768 on in a long stream."""
    return min(int(total) // 2, REGION_MAX)


def draw_segments(tokens, n: int, length: int, seed: int = 0, what: str = "the token stream") -> np.ndarray:
    """``n`` segments of ``length`` consecutive tokens of the 1-D ``tokens``, (n, length) int64.

    The last-token protocol's draw, for any stream (a corpus's test split, or a text
    tokenized by another model's tokenizer). Segment ends are drawn once per (n, seed)
    from the evaluation region (:func:`eval_region_start`), which leaves room for any
    length up to its start: every such length scores the same last tokens, and a longer
    one only adds context on the left. A longer segment draws its ends from the positions
    that leave room for it. ``what`` names the stream in the error messages.
    """
    n, length = int(n), int(length)
    if n <= 0 or length <= 0:
        raise UserError(f"eval_segments needs n > 0 and length > 0 (got n={n}, length={length})")
    total = len(tokens)
    if length > total:
        raise UserError(f"{what} has {total} tokens, fewer than length={length}: "
                        f"use a shorter length or more data (max_bytes)")
    ends = segment_ends(total, n, length, seed)
    idx = ends[:, None] - length + np.arange(length)[None, :]  # (n, length)
    return np.asarray(tokens[idx], dtype=np.int64)


def segment_ends(total: int, n: int, length: int, seed: int = 0) -> np.ndarray:
    """The exclusive end positions (n,) of the segments :func:`draw_segments` draws from a
    stream of ``total`` tokens (the scored token of segment i is at ``ends[i] - 1``)."""
    n, length, total = int(n), int(length), int(total)
    floor = eval_region_start(total)
    rng = np.random.default_rng([seed, n, 0x5E6])
    if length <= floor:
        return rng.integers(floor, total + 1, size=n)
    # too long for the shared ends: ends that leave room for this length
    return rng.integers(length, total + 1, size=n)


def document_ids(tokens, positions, eot: int) -> np.ndarray:
    """The document (0, 1, ...) that holds each of ``positions`` in the 1-D stream ``tokens``,
    int64 like ``positions``.

    A stream holds its documents one after the other, each followed by the separator
    ``eot`` (:data:`EOT`, as :mod:`rflens.data.build` writes them): the document of a
    position is the number of separators before it, and a separator belongs to the document
    it closes."""
    positions = np.asarray(positions, dtype=np.int64)
    if positions.size and (positions.min() < 0 or positions.max() >= len(tokens)):
        raise UserError(f"positions must lie in the stream of {len(tokens)} tokens")
    before = np.concatenate([[0], np.cumsum(np.asarray(tokens) == eot, dtype=np.int64)])  # separators before i
    return before[positions]


def segment_documents(tokens, n: int, length: int, seed: int, eot: int) -> np.ndarray:
    """The document of each segment's scored (last) token, (n,) int64, for the segments
    :func:`draw_segments` draws with the same ``n``, ``length`` and ``seed`` from ``tokens``
    (:func:`document_ids`): the clusters of a bootstrap over documents
    (:func:`rflens.measure.intervals.paired_ratio`)."""
    if int(length) > len(tokens):
        raise UserError(f"the token stream has {len(tokens)} tokens, fewer than length={length}")
    return document_ids(tokens, segment_ends(len(tokens), n, length, seed) - 1, eot)


def document_draw(tokens, n: int, length: int, seed: int, eot: int,
                  what: str = "the token stream") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` segments of ``length`` tokens whose scored (last) tokens cover every document of
    the 1-D ``tokens``: (segments (n, length) int64, the document of each scored token (n,),
    the exclusive end of each segment in the stream (n,): its scored token's position + 1).

    The uniform draw (:func:`draw_segments`) scores tokens where chance puts them, so a test
    split of many short documents and a few long ones is read on some of its documents only
    (172 of prose-wide's 308 for 1024 segments). Here each document gets one scored token,
    and the other ``n - D`` go to the documents in proportion to their tokens (largest
    remainders), each drawn uniformly inside its document; a segment's context is the
    ``length - 1`` tokens before its scored token, read around the stream as a ring where
    it would start before the stream does (context crosses document boundaries in both
    draws). Fixed by (n, length, seed): every model on the same stream scores the same
    tokens, and a shorter length is the same segments' right end."""
    n, length, total = int(n), int(length), len(tokens)
    ids = document_ids(tokens, np.arange(total), eot)
    sizes = np.bincount(ids)
    if n < len(sizes):
        raise UserError(f"{what} holds {len(sizes)} documents: a draw over every document needs n >= {len(sizes)}, "
                        f"not {n}")
    if length > total:
        raise UserError(f"{what} has {total} tokens, fewer than length={length}: use a shorter length")
    quota = (n - len(sizes)) * sizes / total
    extra = np.floor(quota).astype(np.int64)
    extra[np.argsort(-(quota - extra), kind="stable")[:n - len(sizes) - int(extra.sum())]] += 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rng = np.random.default_rng([seed, n, 0xD0C5])
    docs = np.repeat(np.arange(len(sizes)), 1 + extra)
    scored = starts[docs] + (rng.random(n) * sizes[docs]).astype(np.int64)  # uniform inside each document
    idx = (scored[:, None] - length + 1 + np.arange(length)[None, :]) % total
    return np.asarray(tokens[idx], dtype=np.int64), docs.astype(np.int64), scored + 1


class Corpus:
    """One built corpus: tokenizer, token streams (memory mapped) and evaluation segments."""

    def __init__(self, cfg: DataConfig, path: Path, manifest: dict):
        from tokenizers import Tokenizer

        self.cfg = cfg
        self.name = cfg.corpus
        self.path = path
        self.manifest = manifest
        self.fingerprint: str = manifest["fingerprint"]
        # embedding size a model needs: every id is below it (a small slice may learn fewer merges)
        self.vocab_size: int = max(cfg.vocab_size, manifest["tokenizer_vocab"]) if manifest["tokenizer"] != "gpt2" \
            else manifest["tokenizer_vocab"]
        self.tokenizer = Tokenizer.from_file(str(path / manifest["files"]["tokenizer"]["name"]))
        self._dtype = np.dtype(manifest["dtype"])
        self._tokens: dict[str, np.ndarray] = {}

    def __repr__(self) -> str:
        t = self.manifest["tokens"]
        return (f"Corpus({self.name!r}, vocab={self.vocab_size}, tokens train/validation/test="
                f"{t['train']}/{t['validation']}/{t['test']}, fingerprint={self.fingerprint[:12]})")

    def tokens(self, split: str) -> np.ndarray:
        """The token ids of a split as a read-only 1-D memmap (not loaded into memory)."""
        if split not in SPLITS:
            raise UserError(f"unknown split {split!r}: choose train, validation or test")
        if split not in self._tokens:
            f = self.path / self.manifest["files"][split]["name"]
            self._tokens[split] = np.memmap(f, dtype=self._dtype, mode="r")
        return self._tokens[split]

    def eval_region_start(self) -> int:
        """Where the evaluation region of the test split begins: every protocol scores
        tokens from here to the end (the tokens before it serve as context only), so that
        protocols compared on one model differ by how they score, not by what they score."""
        return eval_region_start(len(self.tokens("test")))

    def eval_segments(self, n: int, length: int, seed: int = 0) -> np.ndarray:
        """``n`` segments of ``length`` tokens from the test split, shape (n, length), int64.

        Segment ends are drawn once per (n, seed) from positions that leave room for any
        length up to ``min(T // 2, 32768)``, so every evaluation length, and every model
        on this corpus, scores the same last tokens; a longer ``length`` only adds context.
        See :func:`draw_segments`.
        """
        return draw_segments(self.tokens("test"), n, length, seed, what=f"the {self.name} test split")

    @property
    def eot_id(self) -> int:
        """The id of the separator that closes every document in the token streams."""
        eot = self.tokenizer.token_to_id(EOT)
        if eot is None:
            raise UserError(f"the tokenizer of {self.name} has no {EOT} token: rebuild the corpus (rflens data)")
        return int(eot)

    def document_segments(self, n: int, length: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``n`` segments of ``length`` tokens of the test split whose scored tokens cover
        every one of its documents, the document and the end of each (:func:`document_draw`)."""
        return document_draw(self.tokens("test"), n, length, seed, self.eot_id, what=f"the {self.name} test split")

    def segment_docs(self, n: int, length: int, seed: int = 0) -> np.ndarray:
        """The test-split document (0, 1, ...) of the scored token of each of the segments
        :meth:`eval_segments` draws with the same ``n``, ``length`` and ``seed``, (n,) int64
        (:func:`segment_documents`)."""
        return segment_documents(self.tokens("test"), n, length, seed, self.eot_id)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def summary(self) -> dict:
        m = self.manifest
        return {
            "corpus": self.name, "source": self.cfg.source, "path": str(self.path), "vocab_size": self.vocab_size,
            "documents": m["documents"], "tokens": m["tokens"], "bytes": m["bytes"],
            "bytes_per_token": m["bytes_per_token"], "sources": m["sources"], "fingerprint": self.fingerprint,
        }
