"""The lens on pretrained models: last-token perplexity and the ERF of a Hugging Face causal LM.

Chi et al. (ACL 2023) explain length extrapolation by the receptive field (Section 4): a model
extrapolates while the share of its prediction's input gradient that lies beyond L_tr stays
small. The same two measurements apply to any pretrained causal LM, and here they come from the
very code that measures rflens's own models: ``hub`` resolves a folder or hub name to a model
and its identity, ``adapter`` gives a ``transformers`` causal LM the calls rflens's protocols
make, ``text`` turns a file or a corpus's test split into the model's tokens, ``measure`` runs
and caches the two measurements, ``tiny`` builds three tiny random models (learned absolute,
rotary, ALiBi) for tests and demos, and ``table`` holds Chapter 12's table of models. Every
public name is importable from ``rflens.hf``; ``transformers`` is imported only when a model is
loaded or built.

May import: ``measure``, ``data``, ``setup`` and the package root.
"""

from rflens.data.corpus import EOT
from rflens.hf.adapter import CausalLMLens, device_and_dtype, learned_positions, load
from rflens.hf.table import book_models, book_settings, FAMILY_TITLES, lens_table, MODELS_ENV
from rflens.hf.hub import (HUB_ID, LARGE_FILE, LEARNED_ABSOLUTE, LOAD_FIX, POSITION_FIELDS, ModelRef, check_positions,
    resolve)
from rflens.hf.measure import (ERF_LENGTH_MULT, ERF_MAX_TOKENS, HF_VERSION, LENGTH_MULTS, UNKNOWN_L_TR_ERF_LENGTH,
    UNKNOWN_L_TR_LENGTHS, default_lengths, hf_perplexity, hf_receptive_field)
from rflens.hf.text import corpus_documents, encode, read_text, text_segments
from rflens.hf.tiny import ARCHITECTURES, TINY_FORMAT, tiny_random_models, TINY_TEXT, TINY_VOCAB

__all__ = [
    "EOT",
    # hub
    "HUB_ID", "LARGE_FILE", "LEARNED_ABSOLUTE", "LOAD_FIX", "POSITION_FIELDS", "ModelRef", "check_positions",
    "resolve",
    # adapter
    "CausalLMLens", "device_and_dtype", "learned_positions", "load",
    # text
    "corpus_documents", "encode", "read_text", "text_segments",
    # measure
    "ERF_LENGTH_MULT", "ERF_MAX_TOKENS", "HF_VERSION", "LENGTH_MULTS", "UNKNOWN_L_TR_ERF_LENGTH",
    "UNKNOWN_L_TR_LENGTHS", "default_lengths", "hf_perplexity", "hf_receptive_field",
    # tiny
    "ARCHITECTURES", "TINY_FORMAT", "TINY_TEXT", "TINY_VOCAB", "tiny_random_models",
    # table
    "FAMILY_TITLES", "MODELS_ENV", "book_models", "book_settings", "lens_table",
]
