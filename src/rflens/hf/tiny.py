"""Three tiny random causal LMs, one per way of encoding positions (:data:`ARCHITECTURES`:
GPT-2, learned absolute; GPT-NeoX, rotary; BLOOM, ALiBi), saved with ``save_pretrained`` for
tests and demos, each with a small byte-level BPE tokenizer beside it. The same seed gives the
same files, and a model is written to a temporary folder and renamed into place.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch
import torch.nn as nn

from rflens import storage
from rflens.data.corpus import EOT
from rflens.hf.adapter import _quiet_transformers

ARCHITECTURES = ("gpt2", "gpt_neox", "bloom")  # learned absolute, rotary, ALiBi
TINY_FORMAT = 1  # bump when the tiny models change: old folders are rebuilt
TINY_VOCAB = 384
TINY_TEXT = """\
A language model reads a window of tokens and predicts the next one. How far back does it
look? Take the loss of the last token and ask how much it changes when each earlier token
embedding moves a little: the size of that gradient, position by position, is a map of the
context the prediction uses. Sum the map from the most recent token backwards, and the
number of tokens it takes to hold almost all of it is the effective receptive field.
A model trained on short windows meets longer ones at test time. If the field it learned
fits inside the training window, the extra tokens on the left change little, and the
perplexity of the last token stays flat as the window grows. If the field reaches past the
training window, the model leans on distances it never saw, and the perplexity rises.
Learned absolute positions stop where the table stops. Rotary positions turn queries and
keys by an angle that grows with the position. Linear biases subtract a penalty that grows
with the distance, head by head, with slopes that halve from one head to the next.
"""


def tiny_random_models(folder, seed: int = 0) -> dict[str, Path]:
    """Three tiny random causal LMs saved with ``save_pretrained``: {family: folder/<family>}.

    GPT-2 (learned absolute positions, 1024 of them), GPT-NeoX (rotary on every dimension)
    and BLOOM (ALiBi): 2 layers, d = 64, 4 heads, a byte-level BPE tokenizer of a few hundred
    tokens saved beside each. Every parameter is drawn from a generator seeded by ``seed``
    (biases and LayerNorm gains too, so a forward pass that skipped one would differ), with
    weights large enough for the attention to be sharp. A complete folder of the same seed
    is reused; a model is written to a temporary folder and renamed into place, so a crash
    never leaves half of one.
    """
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for family in ARCHITECTURES:
        dest = folder / family
        with storage.locked(folder / f".{family}.lock"):
            if not _tiny_complete(dest, family, seed):
                _build_tiny(family, dest, seed)
        out[family] = dest
    return out


def _tiny_complete(dest: Path, family: str, seed: int) -> bool:
    try:
        mark = storage.read_json(dest / "rflens_tiny.json")
    except (OSError, ValueError):
        return False
    return (mark == {"family": family, "seed": seed, "format": TINY_FORMAT}
            and all((dest / f).is_file() for f in ("config.json", "model.safetensors", "tokenizer.json")))


def _tiny_config(family: str, vocab: int):
    from transformers import BloomConfig, GPT2Config, GPTNeoXConfig

    ids = {"vocab_size": vocab, "bos_token_id": 0, "eos_token_id": 0}  # <|endoftext|> is id 0
    if family == "gpt2":
        return GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=1024, resid_pdrop=0.0, embd_pdrop=0.0,
                          attn_pdrop=0.0, **ids)
    if family == "gpt_neox":
        return GPTNeoXConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                             max_position_embeddings=1024, rotary_pct=1.0, use_parallel_residual=True, **ids)
    return BloomConfig(hidden_size=64, n_layer=2, n_head=4, **ids)


def _randomize(model, seed: int) -> None:
    """Every parameter from one seeded generator, in name order: matrices N(0, 0.15^2),
    biases N(0, 0.05^2), LayerNorm gains 1 + N(0, 0.1^2)."""
    gen = torch.Generator().manual_seed(seed)
    norms = {name for name, m in model.named_modules() if isinstance(m, nn.LayerNorm)}
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            module, _, kind = name.rpartition(".")
            noise = torch.randn(p.shape, generator=gen)
            if module in norms and kind == "weight":
                p.copy_(1 + 0.1 * noise)
            else:
                p.copy_((0.05 if kind == "bias" else 0.15) * noise)


def _build_tiny(family: str, dest: Path, seed: int) -> None:
    from rflens.data.build import train_tokenizer

    with _quiet_transformers(False):
        from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

        tok = train_tokenizer([TINY_TEXT], TINY_VOCAB, progress=False)
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, bos_token=EOT)
        torch.manual_seed(seed)  # the library's own initialisation, overwritten below
        model = AutoModelForCausalLM.from_config(_tiny_config(family, tok.get_vocab_size()))
        _randomize(model, seed)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            storage.write_json(tmp / "rflens_tiny.json", {"family": family, "seed": seed, "format": TINY_FORMAT})
            old = dest.with_name(f".{dest.name}.{os.getpid()}.old")
            if dest.exists():  # another seed or format: replaced
                dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
