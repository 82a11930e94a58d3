"""A Hugging Face model is sized by what its config declares before it is loaded, not by its
weight files: a config of 96 layers of width 8192 beside a 100-byte weights file is refused in
one line naming the memory it needs, instead of a load that the kernel kills at the limit."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, HealthCheck, settings, strategies as st

from rflens import hf
from rflens.cli import main
from rflens.errors import UserError
from rflens.hf import adapter
from rflens.measure import resources

FREE = 24e9  # bytes this test's machine has free
VOCAB, POSITIONS = 50257, 1024


def _gpt2(folder, n_layer: int, n_embd: int):
    """A model folder whose config declares a GPT-2 of ``n_layer`` layers of width ``n_embd``,
    beside a weights file of 100 bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": n_layer, "n_embd": n_embd,
        "n_head": max(1, n_embd // 64), "vocab_size": VOCAB, "n_positions": POSITIONS}))
    (folder / "model.safetensors").write_bytes(b"\0" * 100)
    return folder


def _gpt2_parameters(n_layer: int, d: int) -> int:
    """GPT-2's parameters: the token and position tables, each block's attention and MLP with
    their biases and two LayerNorms, the final LayerNorm (the LM head shares the token table)."""
    return VOCAB * d + POSITIONS * d + n_layer * (12 * d * d + 13 * d) + 2 * d


@pytest.fixture
def small_machine(monkeypatch):
    monkeypatch.setattr(resources, "available_bytes", lambda: int(FREE))


def test_a_config_of_96_layers_of_width_8192_beside_100_bytes_is_one_line(tmp_path, small_machine, store, capsys):
    folder = _gpt2(tmp_path / "huge", 96, 8192)
    text = tmp_path / "text.txt"
    text.write_text("the model reads a window of tokens " * 200)
    assert main(["evaluate", "--hf", str(folder), "--text", str(text), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    need = 4 * _gpt2_parameters(96, 8192)
    assert len(err) == 1 and f"needs about {need / 1e9:.1f} GB" in err[0], err
    assert "as its config declares" in err[0] and str(folder) in err[0], err


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_layer=st.integers(1, 160), width=st.integers(1, 128))
def test_a_model_is_refused_exactly_when_its_declared_parameters_do_not_fit(tmp_path, small_machine, n_layer, width):
    d = 64 * width
    folder = _gpt2(tmp_path / f"m{n_layer}x{d}", n_layer, d)
    ref = hf.resolve(folder)
    params = _gpt2_parameters(n_layer, d)
    assert adapter.declared_parameters(ref) == params
    if 4 * params > resources.SHARE * FREE:
        with pytest.raises(UserError, match=rf"needs about {4 * params / 1e9:.1f} GB"):
            hf.load(folder, device="cpu")
    else:
        adapter.check_memory(ref, "cpu")  # it fits: the load goes on (and names the missing tensors)
