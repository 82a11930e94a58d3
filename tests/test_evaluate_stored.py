"""What evaluate, erf and the Hugging Face path read back is checked where it is read: a stored
result edited or damaged (with a checksum that matches, as anyone can write one) is one line
naming what to delete, never a traceback and never other numbers; a model folder whose
config is not a model's settings, or a hub name that is not cached, is one line."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rflens import hf, storage
from rflens.cli import main


def one_line(capsys, argv) -> str:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), (code, err, captured.out[-300:])
    assert "Traceback" not in captured.err and not captured.out
    return err[0]


def tamper(path, key, value) -> None:
    """Change one field of a cached result and write the checksum it then has."""
    entry = json.loads(path.read_text())
    entry["result"][key] = value
    entry["sha256"] = storage._digest(entry["result"])
    path.write_text(json.dumps(entry))


EVALUATE = ["evaluate", "--scale", "smoke", "--quiet", "--lengths", "16,32", "--n", "4"]
ERF = ["erf", "--scale", "smoke", "--quiet", "--n", "2"]


@pytest.mark.parametrize("key, value", [("ppl", ["x", 1.0]), ("ppl", [1.0]), ("lengths", "ab"), ("tokens", ["a", "b"]),
                                        ("ppl", [2.0, 3.0]), ("ci_low", None), ("segment_ends", [1, 2]),
                                        ("seconds", "x")])
def test_an_edited_stored_perplexity_is_one_line(key, value, store, capsys):
    assert main(EVALUATE) == 0
    clean = capsys.readouterr().out
    (entry,) = store.rglob("perplexity_last_token-*.json")
    tamper(entry, key, value)
    err = one_line(capsys, EVALUATE)
    assert "damaged" in err and str(entry.parent) in err
    shutil.rmtree(entry.parent)  # the fix the line names
    assert main(EVALUATE) == 0 and capsys.readouterr().out.split("(")[0] == clean.split("(")[0]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_stored_perplexity_that_is_not_finite_is_not_printed(value, store, capsys):
    assert main(EVALUATE) == 0
    capsys.readouterr()
    (entry,) = store.rglob("perplexity_last_token-*.json")
    tamper(entry, "nll", [2.0, value])
    err = one_line(capsys, EVALUATE)
    assert "L_ex = 32" in err or "damaged" in err


@pytest.mark.parametrize("value", [[float("nan")] * 64, ["a"] * 64, [], [-1.0, 2.0] + [0.0] * 62, [1.0]])
def test_an_edited_stored_receptive_field_is_one_line(value, store, capsys):
    assert main(ERF) == 0
    capsys.readouterr()
    (entry,) = store.rglob("input_gradients-*.json")
    tamper(entry, "normalized", value)
    err = one_line(capsys, ERF)
    assert "damaged" in err and str(entry.parent) in err


# ----------------------------------------------------------------------------- --hf


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return hf.tiny_random_models(tmp_path_factory.mktemp("hf"))


@pytest.mark.parametrize("config", [[1, 2], "gpt2", 7])
def test_a_config_that_is_not_an_object_is_one_line(config, tiny, tmp_path, store, capsys):
    folder = tmp_path / "model"
    shutil.copytree(tiny["gpt2"], folder)
    (folder / "config.json").write_text(json.dumps(config))
    err = one_line(capsys, ["evaluate", "--hf", folder, "--scale", "smoke", "--quiet", "--lengths", "16", "--n", "2"])
    assert "config.json" in err and "not a model's settings" in err


@pytest.mark.parametrize("value", [True, -5, 0, 1, 2.5, "1024"])
def test_a_position_count_that_is_not_one_is_one_line_naming_it(value, tiny, tmp_path, store, capsys):
    """It used to read True as L_tr = 1 and answer "lengths is empty", advice that does not help."""
    folder = tmp_path / "model"
    shutil.copytree(tiny["gpt2"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["n_positions"] = value
    (folder / "config.json").write_text(json.dumps(config))
    for argv in (["evaluate", "--n", "2"], ["erf", "--n", "1"]):
        err = one_line(capsys, [argv[0], "--hf", folder, "--scale", "smoke", "--quiet", *argv[1:]])
        assert "n_positions" in err and json.dumps(value) in err


def test_a_hub_name_that_is_not_cached_is_one_line_when_the_hub_is_out_of_reach(store, monkeypatch, tmp_path, capsys):
    from rflens.data import sources
    from rflens.errors import UserError

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))

    def unreachable(timeout=3.0):
        raise UserError("the hub cannot be reached")

    monkeypatch.setattr(sources, "check_hub", unreachable)
    err = one_line(capsys, ["evaluate", "--hf", "nosuch-org/nosuch-model", "--scale", "smoke", "--quiet"])
    assert "nosuch-org/nosuch-model" in err and "cannot be reached" in err


def test_a_stored_hf_perplexity_that_is_edited_is_one_line(tiny, tmp_path, store, capsys):
    text = tmp_path / "t.txt"
    text.write_text(" ".join(["the model reads a window of tokens"] * 40))
    argv = ["evaluate", "--hf", str(tiny["bloom"]), "--text", str(text), "--scale", "smoke", "--quiet",
            "--lengths", "8,16", "--n", "4"]
    assert main(argv) == 0
    capsys.readouterr()
    (entry,) = (store / "hf").glob("perplexity-*.json")
    tamper(entry, "ci_high", [np.inf, 1.0])
    err = one_line(capsys, argv)
    assert "L_ex = 8" in err or "damaged" in err


def test_a_revision_of_a_folder_is_refused_not_ignored(tiny, store, capsys):
    for argv in (["evaluate", "--lengths", "8", "--n", "2"], ["erf", "--length", "8", "--n", "1"]):
        err = one_line(capsys, [argv[0], "--hf", tiny["bloom"], "--revision", "main", "--scale", "smoke", "--quiet",
                                *argv[1:]])
        assert "--revision" in err and "drop --revision" in err


def _saved_gpt2(folder, tokenizer_from, vocab: int, fill=None):
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_embd=32, n_layer=1, n_head=2, n_positions=64,
                                       bos_token_id=0, eos_token_id=0))
    if fill is not None:
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(fill)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer_from).save_pretrained(folder)
    return folder


def test_a_tokenizer_of_another_model_is_one_line_not_an_index_error(tiny, tmp_path, store, capsys):
    folder = _saved_gpt2(tmp_path / "small_vocab", tiny["gpt2"], vocab=50)
    capsys.readouterr()  # the library's progress bar while saving
    text = tmp_path / "t.txt"
    text.write_text(" ".join(["the model reads a window of tokens"] * 10))
    for argv in (["evaluate", "--lengths", "4"], ["erf", "--length", "4"]):
        err = one_line(capsys, [argv[0], "--hf", folder, "--text", text, "--scale", "smoke", "--quiet", "--n", "2",
                                *argv[1:]])
        assert "tokenizer" in err and "0..49" in err


def test_a_pretrained_model_that_gives_nan_says_to_check_it_not_to_retrain_it(tiny, tmp_path, store, capsys):
    folder = _saved_gpt2(tmp_path / "nan_weights", tiny["gpt2"], vocab=384, fill=float("nan"))
    capsys.readouterr()  # the library's progress bar while saving
    text = tmp_path / "t.txt"
    text.write_text(" ".join(["the model reads a window of tokens"] * 10))
    for argv in (["evaluate", "--lengths", "4,8"], ["erf", "--length", "4"]):
        err = one_line(capsys, [argv[0], "--hf", folder, "--text", text, "--scale", "smoke", "--quiet", "--n", "2",
                                *argv[1:]])
        assert "nan_weights" in err and "check its weights" in err
        assert "retrain the" not in err and "shorter --lengths" not in err  # advice that cannot work


def test_windowed_protocols_say_when_the_region_holds_fewer_units_than_asked(store, capsys):
    argv = ["evaluate", "--scale", "smoke", "--quiet", "--protocol", "non_overlapping", "--lengths", "16,256"]
    assert main(argv + ["--n", "100000"]) == 0
    out = capsys.readouterr().out
    assert "N = 100,000 chunks asked, but the evaluation region holds only" in out and "at L_ex = 256" in out
    assert main(argv + ["--n", "3"]) == 0
    assert "asked, but" not in capsys.readouterr().out
