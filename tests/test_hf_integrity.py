"""A Hugging Face folder is measured only as it is: a checkpoint that lacks tensors is refused
in one line (the model would have random layers), and the cache key of a folder changes with
any byte of its weights, however large the file."""

from __future__ import annotations

import json
import os
import re
import shutil
import time

import pytest
from hypothesis import given, HealthCheck, settings, strategies as st
from safetensors.torch import load_file, save_file

from rflens import hf
from rflens.cli import main
from rflens.errors import UserError
import test_hf

one_thread, text_file, tiny = test_hf.one_thread, test_hf.text_file, test_hf.tiny  # the fixtures tests/test_hf.py makes


def one_line_error(capsys, *argv) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


def copy_without(src, dest, drop):
    """A copy of the model folder ``src`` whose checkpoint lacks the tensors ``drop`` picks."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest)
    weights = load_file(dest / "model.safetensors")
    kept = {k: v for k, v in weights.items() if not drop(k)}
    save_file(kept, dest / "model.safetensors", metadata={"format": "pt"})
    return sorted(set(weights) - set(kept))


# ----------------------------------------------------------------------------- a checkpoint missing tensors


def test_a_checkpoint_missing_a_layer_is_one_line_and_nothing_is_cached(tiny, tmp_path, store, text_file, capsys):
    cut = tmp_path / "cut"
    dropped = copy_without(tiny["gpt2"], cut, lambda k: ".h.1." in k)
    assert len(dropped) == 12
    err = one_line_error(capsys, "evaluate", "--hf", cut, "--text", text_file, "--lengths", "16", "--n", "2",
                         "--quiet")
    assert "lacks 12 of the model's tensors" in err and "transformer.h.1.attn.c_attn.bias" in err
    assert "and 6 more" in err and "save_pretrained" in err
    assert "lacks 12" in one_line_error(capsys, "erf", "--hf", cut, "--text", text_file, "--length", "16", "--n", "1",
                                        "--quiet")
    assert not list(store.glob("hf/*.json"))  # nothing measured, nothing cached


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_missing_tensor_is_refused(tiny, tmp_path, data):
    family = data.draw(st.sampled_from(hf.ARCHITECTURES))
    names = sorted(load_file(tiny[family] / "model.safetensors"))
    drop = set(data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True)))
    dropped = copy_without(tiny[family], tmp_path / "cut", lambda k: k in drop)
    with pytest.raises(UserError) as caught:
        hf.load(tmp_path / "cut", device="cpu")
    message = str(caught.value)
    # one line that counts and names what is missing; transformers names some tensors by the
    # model's own keys (GPT-NeoX's embed_out.weight is its lm_head.weight) and reports a tied
    # one twice (BLOOM's word embeddings are its lm_head too), so it may count more than were cut
    assert "\n" not in message
    count = int(re.search(r"lacks (\d+) of the model's tensors", message)[1])
    assert count >= len(dropped)
    shown = message.split("tensors (", 1)[1].split(");", 1)[0].split(" and ")[0].split(", ")
    assert len(shown) == min(count, hf.adapter.MISSING_SHOWN)


# ----------------------------------------------------------------------------- the cache key of a large folder


@pytest.fixture()
def large(tiny, tmp_path, monkeypatch):
    """A copy of the tiny GPT-2 whose weights count as a large file, with sampled hashes of
    a few bytes: what a 300 MiB folder is to the real thresholds."""
    from rflens import storage

    monkeypatch.setattr(hf.hub, "LARGE_FILE", 1024)
    monkeypatch.setattr(storage, "SAMPLE_BYTES", 1024)
    folder = tmp_path / "large"
    shutil.copytree(tiny["gpt2"], folder)
    return folder


def overwrite(path, offset: int, data: bytes) -> None:
    """Bytes changed in place, the size and the modification time kept."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_zeroed_weights_between_the_sampled_ends_are_measured_again(large, store, text_file, capsys):
    argv = ["evaluate", "--hf", large, "--text", text_file, "--lengths", "16", "--n", "3", "--quiet", "--json"]
    assert main([str(a) for a in argv]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main([str(a) for a in argv]) == 0
    assert json.loads(capsys.readouterr().out)["cached"]
    weights = large / "model.safetensors"
    size = weights.stat().st_size
    overwrite(weights, size // 3, bytes(size // 3))  # a third of the tensors zeroed, the ends kept
    assert main([str(a) for a in argv]) == 0
    again = json.loads(capsys.readouterr().out)
    assert not again["cached"] and again["nll_per_segment"] != first["nll_per_segment"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), flip=st.integers(1, 255))
def test_any_changed_byte_changes_the_identity(large, where, flip):
    weights = large / "model.safetensors"
    before = hf.resolve(large).identity
    offset = int(where * weights.stat().st_size)
    old = weights.read_bytes()[offset]
    overwrite(weights, offset, bytes([old ^ flip]))
    assert hf.resolve(large).identity != before


def test_the_digest_of_a_large_file_is_kept_until_the_file_changes(large, store, monkeypatch):
    from rflens import storage

    monkeypatch.setattr(storage, "SETTLED_NS", 0)
    hashed = []
    real = storage._sha256
    monkeypatch.setattr(storage, "_sha256", lambda path, sample: hashed.append(path) or real(path, sample))
    weights = large / "model.safetensors"
    first = hf.resolve(large).identity
    assert weights in hashed
    storage._DIGESTS.clear()  # another process: only the kept digest is left
    hashed.clear()
    assert hf.resolve(large).identity == first and weights not in hashed  # read back, not hashed
    assert list((store / "hf" / "digests").glob("*.json"))
    time.sleep(0.05)  # past the clock tick of the file's change time
    overwrite(weights, weights.stat().st_size // 2, b"\x00" * 16)
    storage._DIGESTS.clear()
    assert hf.resolve(large).identity != first and weights in hashed
