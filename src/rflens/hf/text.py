"""The text a model is measured on, in the model's tokens: a UTF-8 file (one document), or the
test split of an embedded rflens corpus, whose documents are decoded with the corpus tokenizer
(byte-level BPE, lossless) and re-encoded with the model's, separated by the model's end-of-text
token. Segments are drawn by :func:`rflens.data.corpus.draw_segments`, the draw of
:meth:`rflens.data.Corpus.eval_segments`, so every length scores the same last tokens.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from rflens.data.corpus import EOT
from rflens.errors import UserError
from rflens.setup.config import DataConfig


def read_text(path) -> str:
    """The text of a UTF-8 file, one line of error otherwise."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"no such text file: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text: give a plain text file") from None


def corpus_documents(corpus) -> list[str]:
    """The documents of a corpus's test split, decoded with the corpus tokenizer (the
    token stream separates them with <|endoftext|>)."""
    test = np.asarray(corpus.tokens("test"))
    ends = np.flatnonzero(test == corpus.tokenizer.token_to_id(EOT))
    starts = np.concatenate([[0], ends + 1])
    ends = np.concatenate([ends, [test.size]])
    docs = [test[a:b].tolist() for a, b in zip(starts, ends) if b > a]
    return [t for t in corpus.tokenizer.decode_batch(docs) if t]


def encode(tokenizer, documents: list[str]) -> np.ndarray:
    """One token stream: every document encoded with ``tokenizer`` (no special tokens),
    followed by its end-of-text token where it has one (else by the tokens of a blank line)."""
    if not documents:
        return np.zeros(0, dtype=np.int64)
    ids = tokenizer(documents, add_special_tokens=False, verbose=False)["input_ids"]
    eos = tokenizer.eos_token_id
    sep = [eos] if eos is not None else tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    parts = [np.asarray(x + sep, dtype=np.int64) for x in ids]
    stream = np.concatenate(parts)
    return stream[:-len(sep)] if len(documents) == 1 and sep else stream  # one file: no separator after it


def text_segments(tokens: np.ndarray, n: int, length: int, seed: int = 0, what: str = "the text") -> np.ndarray:
    """(n, length) last-token segments of a token stream, drawn as the corpus's are."""
    return text_draw(tokens, n, length, seed, what)[0]


def text_draw(tokens: np.ndarray, n: int, length: int, seed: int = 0, what: str = "the text") -> tuple[np.ndarray, dict]:
    """:func:`text_segments`, and what they rest on (:func:`rflens.measure.perplexity.draw`): where
    each ends, how many are distinct, how much they overlap."""
    from rflens.measure.perplexity import draw

    if len(tokens) < length:
        raise UserError(f"{what} has {len(tokens)} tokens with this model's tokenizer, fewer than the {length} "
                        f"that one segment needs: give a longer text or shorter lengths")
    return draw(tokens, n, length, seed, what=what)


class _Text:
    """Where the text comes from, its fingerprint for the cache, and its documents."""

    def __init__(self, text=None, corpus: str = "prose", data_cfg: DataConfig | None = None, progress: bool = False):
        if text is not None:
            path = Path(text).expanduser()
            self.describe = f"text {path.name}"
            self.what = str(path)
            body = read_text(path)
            self._documents = [body]
            self.fingerprint = {"file_sha256": hashlib.sha256(body.encode("utf-8")).hexdigest()}
        else:
            from rflens import data

            cfg = data_cfg or DataConfig()
            cfg = cfg.replace(corpus=corpus) if corpus else cfg
            self._corpus = data.prepare(cfg, progress=progress)
            self.describe = f"{cfg.corpus} test split"
            self.what = f"the {cfg.corpus} test split"
            self._documents = None
            self.fingerprint = {"corpus": cfg.corpus, "fingerprint": self._corpus.fingerprint}

    def tokens(self, tokenizer) -> np.ndarray:
        docs = self._documents if self._documents is not None else corpus_documents(self._corpus)
        return encode(tokenizer, docs)
