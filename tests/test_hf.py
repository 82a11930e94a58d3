"""The lens on pretrained models: rflens's protocols, run on Hugging Face causal LMs through
rflens.hf, give the numbers of a forward pass written out by hand for each family (GPT-2:
learned absolute positions; GPT-NeoX: rotary; BLOOM: ALiBi), and every mistake is one line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from rflens import hf
from rflens.cli import main
from rflens.data.corpus import draw_segments, eval_region_start
from rflens.errors import UserError
from rflens.measure.perplexity import last_token_nll
from rflens.measure.receptive import input_gradients, normalize

WORDS = ("the model reads a window of tokens and predicts the next one while its receptive field "
         "grows with depth and the bias decays with distance").split()


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, and far slower on two when the cores are busy."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, one_thread):
    return hf.tiny_random_models(tmp_path_factory.mktemp("hf"))


@pytest.fixture()
def text_file(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "text.txt"
    path.write_text(" ".join(rng.choice(WORDS, size=600)) + "\n")
    return path


def one_line_error(capsys, *argv) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


# -----------------------------------------------------------------------------
# each family's forward pass, written out in plain torch from the saved weights


def _ln(x, w, prefix, eps):
    return F.layer_norm(x, x.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], eps)


def _attend(q, k, v, bias=None):
    """Causal softmax attention, (B, H, L, hs) each, with an optional (H, L, L) additive bias."""
    L, hs = q.shape[2], q.shape[3]
    scores = q @ k.transpose(-1, -2) / math.sqrt(hs)  # (B, H, L, L)
    if bias is not None:
        scores = scores + bias
    future = torch.ones(L, L, dtype=torch.bool).triu(1)
    y = scores.masked_fill(future, float("-inf")).softmax(-1) @ v  # (B, H, L, hs)
    return y.transpose(1, 2).reshape(q.shape[0], L, -1)  # (B, L, d)


def gpt2_forward(w, cfg, embeds, positional=True):
    """wte + wpe, pre-LN blocks (Conv1D weights are (in, out)), gelu_new, tied head."""
    B, L, d = embeds.shape
    H, eps = cfg["n_head"], cfg["layer_norm_epsilon"]
    x = embeds + (w["transformer.wpe.weight"][:L] if positional else 0)
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        h = _ln(x, w, p + "ln_1", eps)
        q, k, v = (h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]).split(d, -1)
        q, k, v = (t.view(B, L, H, d // H).transpose(1, 2) for t in (q, k, v))  # (B, H, L, hs)
        x = x + _attend(q, k, v) @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = _ln(x, w, p + "ln_2", eps) @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        h = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))  # gelu_new
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    return _ln(x, w, "transformer.ln_f", eps) @ w["transformer.wte.weight"].T


def neox_forward(w, cfg, embeds, positional=True):
    """Rotary on q and k (halves rotated: (x1, x2) -> (-x2, x1)), fused qkv laid out per head,
    separate LayerNorms for attention and MLP, parallel or sequential residual per config."""
    B, L, d = embeds.shape
    H, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hs = d // H
    rope = cfg["rope_parameters"]
    rd = int(hs * rope["partial_rotary_factor"])
    inv_freq = 1.0 / rope["rope_theta"] ** (torch.arange(0, rd, 2).float() / rd)
    angles = torch.arange(L).float()[:, None] * inv_freq  # (L, rd / 2)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()

    def rotate(t):  # (B, H, L, hs)
        r, rest = t[..., :rd], t[..., rd:]
        half = torch.cat([-r[..., rd // 2:], r[..., :rd // 2]], -1)
        return torch.cat([r * cos + half * sin, rest], -1)

    def linear(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    x = embeds
    for i in range(cfg["num_hidden_layers"]):
        p = f"gpt_neox.layers.{i}."
        qkv = linear(_ln(x, w, p + "input_layernorm", eps), p + "attention.query_key_value")
        q, k, v = qkv.view(B, L, H, 3 * hs).transpose(1, 2).split(hs, -1)  # (B, H, L, hs) each
        if positional:
            q, k = rotate(q), rotate(k)
        a = linear(_attend(q, k, v), p + "attention.dense")

        def mlp(h):
            return linear(F.gelu(linear(h, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")

        if cfg["use_parallel_residual"]:
            x = x + a + mlp(_ln(x, w, p + "post_attention_layernorm", eps))
        else:
            x = x + a
            x = x + mlp(_ln(x, w, p + "post_attention_layernorm", eps))
    head = w["embed_out.weight"] if "embed_out.weight" in w else w["lm_head.weight"]  # (the saved name varies)
    return _ln(x, w, "gpt_neox.final_layer_norm", eps) @ head.T


def bloom_slopes(H):
    """ALiBi slopes as BLOOM builds them: 2^(-8/n) ... for the largest power of two n <= H,
    then every other slope of the 2n-head sequence for the heads left over."""
    n = 2 ** math.floor(math.log2(H))
    slopes = [2 ** (-8 / n * (i + 1)) for i in range(n)]
    extra = [2 ** (-8 / (2 * n) * (i + 1)) for i in range(0, 2 * (H - n), 2)]
    return torch.tensor(slopes + extra)


def bloom_forward(w, cfg, embeds, positional=True):
    """LayerNorm on the embeddings, ALiBi as slope x key position (BLOOM's convention: per
    query row it differs from -slope x distance by a constant), fused qkv as (H, 3, hs)."""
    B, L, d = embeds.shape
    H, eps = cfg["n_head"], cfg["layer_norm_epsilon"]
    hs = d // H
    post = cfg["apply_residual_connection_post_layernorm"]
    bias = bloom_slopes(H)[:, None, None] * torch.arange(L).float()[None, None, :]  # (H, 1, L)

    def linear(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    x = _ln(embeds, w, "transformer.word_embeddings_layernorm", eps)
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        h = _ln(x, w, p + "input_layernorm", eps)
        qkv = linear(h, p + "self_attention.query_key_value").view(B, L, H, 3, hs)
        q, k, v = (qkv[..., j, :].transpose(1, 2) for j in range(3))  # (B, H, L, hs)
        x = (h if post else x) + linear(_attend(q, k, v, bias if positional else None), p + "self_attention.dense")
        h = _ln(x, w, p + "post_attention_layernorm", eps)
        g = linear(h, p + "mlp.dense_h_to_4h")
        g = g * 0.5 * (1 + torch.tanh(0.79788456 * g * (1 + 0.044715 * g * g)))
        x = (h if post else x) + linear(g, p + "mlp.dense_4h_to_h")
    return _ln(x, w, "transformer.ln_f", eps) @ w["transformer.word_embeddings.weight"].T


FORWARD = {"gpt2": gpt2_forward, "gpt_neox": neox_forward, "bloom": bloom_forward}
EMBEDDING = {"gpt2": "transformer.wte.weight", "gpt_neox": "gpt_neox.embed_in.weight",
             "bloom": "transformer.word_embeddings.weight"}


def reference(family, folder, segments, lengths, positional=True):
    """Last-token NLLs (len(lengths), N) and normalised gradients over the longest length."""
    w = load_file(str(folder / "model.safetensors"))
    cfg = json.loads((folder / "config.json").read_text())
    forward, wte = FORWARD[family], w[EMBEDDING[family]]
    seg = torch.as_tensor(segments)
    target = seg[:, -1]
    with torch.no_grad():
        nll = [F.cross_entropy(forward(w, cfg, wte[seg[:, -1 - L:-1]], positional)[:, -1], target, reduction="none")
               for L in lengths]
    embeds = wte[seg[:, :-1]].clone().requires_grad_(True)
    loss = F.cross_entropy(forward(w, cfg, embeds, positional)[:, -1], target, reduction="sum")
    norms = torch.autograd.grad(loss, embeds)[0].norm(dim=-1).double()  # (N, L)
    shares = (norms / norms.sum(1, keepdim=True)).mean(0).flip(0)  # index 0 = the most recent token
    return torch.stack(nll).double().numpy(), shares.numpy()


# -----------------------------------------------------------------------------
# the claims


@pytest.mark.parametrize("family", hf.ARCHITECTURES)
def test_the_protocols_through_the_adapter_give_the_hand_written_forwards_numbers(family, tiny):
    lens, tokenizer = hf.load(tiny[family], device="cpu")
    segments = np.random.default_rng(1).integers(0, len(tokenizer), size=(3, 41))
    lengths = [4, 16, 40]
    nll = last_token_nll(lens, segments, lengths, progress=False)
    shares = normalize(input_gradients(lens, segments, progress=False))
    ref_nll, ref_shares = reference(family, tiny[family], segments, lengths)
    np.testing.assert_allclose(nll, ref_nll, rtol=0, atol=1e-5)
    np.testing.assert_allclose(shares, ref_shares, rtol=1e-5, atol=1e-7)
    # the comparison sees the positions: the same forward without them is far off
    flat_nll, flat_shares = reference(family, tiny[family], segments, lengths, positional=False)
    assert np.abs(flat_nll - ref_nll).max() > 1e-2 and np.abs(flat_shares - ref_shares).max() > 1e-3


def test_hf_perplexity_scores_the_segments_the_corpus_draw_gives(tiny, store, text_file):
    result = hf.hf_perplexity(tiny["gpt_neox"], text=text_file, lengths=[8, 32], n=5, progress=False)
    _, tokenizer = hf.load(tiny["gpt_neox"], device="cpu")
    tokens = hf.encode(tokenizer, [text_file.read_text()])
    segments = draw_segments(tokens, 5, 33, seed=result["seed"])
    ref_nll, _ = reference("gpt_neox", tiny["gpt_neox"], segments, [8, 32])
    np.testing.assert_allclose(result["nll_per_segment"], ref_nll, atol=1e-5)
    assert result["l_tr"] == 1024 and "max_position_embeddings" in result["l_tr_source"]
    assert result["tokens"] == [5, 5] and not result["cached"]


def test_segments_of_any_stream_share_their_last_tokens_across_lengths():
    tokens = np.arange(10_000)  # a token's id is its position
    short, long = draw_segments(tokens, 6, 17, seed=3), draw_segments(tokens, 6, 4000, seed=3)
    np.testing.assert_array_equal(long[:, -17:], short)
    assert (short[:, -1] >= eval_region_start(tokens.size) - 1).all()  # they end in the evaluation region
    assert not np.array_equal(draw_segments(tokens, 6, 17, seed=4), short)


def test_a_corpus_test_split_is_decoded_into_its_documents(tiny):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tiny["bloom"] / "tokenizer.json"))
    docs = ["first document, with words", "a second one\nover two lines", "third"]
    eot = tok.token_to_id(hf.EOT)
    stream = np.concatenate([np.asarray(tok.encode(d).ids + [eot]) for d in docs])

    class Split:
        tokenizer = tok

        def tokens(self, split):
            return stream

    assert hf.corpus_documents(Split()) == docs


def test_a_corpus_is_measured_in_the_models_own_tokens(tiny, store, monkeypatch):
    from tokenizers import Tokenizer

    import rflens.data

    corpus_tok = Tokenizer.from_file(str(tiny["gpt2"] / "tokenizer.json"))  # stands in for the corpus's own
    rng = np.random.default_rng(2)
    docs = [" ".join(rng.choice(WORDS, size=80)) for _ in range(6)]
    eot = corpus_tok.token_to_id(hf.EOT)
    stream = np.concatenate([np.asarray(corpus_tok.encode(d).ids + [eot]) for d in docs])

    class Built:
        tokenizer, fingerprint = corpus_tok, "f1"

        def tokens(self, split):
            return stream

    monkeypatch.setattr(rflens.data, "prepare", lambda cfg, progress=False: Built())
    result = hf.hf_perplexity(tiny["bloom"], corpus="math", lengths=[16], n=3, progress=False)
    _, tokenizer = hf.load(tiny["bloom"], device="cpu")
    segments = draw_segments(hf.encode(tokenizer, docs), 3, 17, seed=result["seed"])
    np.testing.assert_allclose(result["nll_per_segment"], reference("bloom", tiny["bloom"], segments, [16])[0],
                               atol=1e-5)
    assert result["text"] == "math test split" and result["l_tr"] is None and "unknown" in result["l_tr_source"]
    assert hf.hf_perplexity(tiny["bloom"], corpus="math", lengths=[16], n=3, progress=False)["cached"]
    Built.fingerprint = "f2"  # another build of the corpus: measured again
    assert not hf.hf_perplexity(tiny["bloom"], corpus="math", lengths=[16], n=3, progress=False)["cached"]


def test_a_length_beyond_gpt2s_positions_is_one_line(tiny, store, text_file, capsys):
    err = one_line_error(capsys, "evaluate", "--hf", tiny["gpt2"], "--text", text_file, "--lengths", "64,2048")
    assert "only 1024 positions" in err and "--lengths up to 1024" in err
    assert "only 1024 positions" in one_line_error(capsys, "erf", "--hf", tiny["gpt2"], "--text", text_file,
                                                    "--length", "1025")
    lens, _ = hf.load(tiny["gpt2"], device="cpu")
    with pytest.raises(UserError, match="only 1024 positions"):
        lens(torch.zeros(1, 1025, dtype=torch.long), last_only=True)
    assert hf.learned_positions(lens.hf) == 1024 and hf.learned_positions(hf.load(tiny["bloom"])[0].hf) is None
    assert not store.exists()  # refused before anything was computed


def test_a_missing_or_unknown_model_is_one_line(tmp_path, store, text_file, capsys, monkeypatch):
    assert "no model folder" in one_line_error(capsys, "evaluate", "--hf", tmp_path / "nope", "--text", text_file)
    (tmp_path / "empty").mkdir()
    assert "no config.json" in one_line_error(capsys, "erf", "--hf", tmp_path / "empty", "--text", text_file)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    err = one_line_error(capsys, "evaluate", "--hf", "no-such-org/no-such-model", "--text", text_file)
    assert "not in the local Hugging Face cache" in err and "save_pretrained" in err


def test_text_mistakes_are_one_line(tiny, tmp_path, store, capsys):
    assert "no such text file" in one_line_error(capsys, "evaluate", "--hf", tiny["bloom"], "--text",
                                                 tmp_path / "missing.txt")
    (tmp_path / "short.txt").write_text("a few words")
    err = one_line_error(capsys, "evaluate", "--hf", tiny["bloom"], "--text", tmp_path / "short.txt",
                         "--lengths", "64", "--quiet")
    assert "fewer than the 65" in err


def test_the_command_line_prints_a_table_and_reads_the_cache_the_second_time(tiny, store, text_file, capsys):
    argv = ["evaluate", "--hf", str(tiny["gpt_neox"]), "--text", str(text_file), "--lengths", "16,32",
            "--n", "4", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"model: {tiny['gpt_neox']}" in out and "L_ex/L_tr" in out and "computed in" in out
    assert main([*argv, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["cached"] is True and again["lengths"] == [16, 32] and len(again["nll_per_segment"]) == 2
    argv = ["erf", "--hf", str(tiny["bloom"]), "--text", str(text_file), "--length", "32", "--n", "2", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ERF (0.99 of the gradient)" in out and "L_tr unknown" in out and "computed in" in out
    assert main([*argv, "--threshold", "0.5", "--json"]) == 0  # the threshold reuses the stored gradients
    again = json.loads(capsys.readouterr().out)
    assert again["cached"] is True and again["threshold"] == 0.5 and again["l_tr"] is None
    assert len(list((store / "hf").glob("*.json"))) == 2


def test_tiny_random_models_are_the_same_for_the_same_seed(tiny, tmp_path):
    again = hf.tiny_random_models(tmp_path / "a", seed=0)
    for family in hf.ARCHITECTURES:
        for name in ("model.safetensors", "tokenizer.json", "config.json"):
            assert (again[family] / name).read_bytes() == (tiny[family] / name).read_bytes()
    stamp = (again["gpt2"] / "model.safetensors").stat().st_mtime_ns
    assert hf.tiny_random_models(tmp_path / "a", seed=0)["gpt2"] == again["gpt2"]  # reused, not rebuilt
    assert (again["gpt2"] / "model.safetensors").stat().st_mtime_ns == stamp
    other = hf.tiny_random_models(tmp_path / "a", seed=1)  # another seed replaces them
    assert (other["gpt2"] / "model.safetensors").read_bytes() != (tiny["gpt2"] / "model.safetensors").read_bytes()
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.endswith((".tmp", ".old"))]


def test_a_crash_while_building_leaves_no_half_written_model(tmp_path, monkeypatch):
    def crash(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(hf.tiny.storage, "write_json", crash)  # the marker, written last before the rename
    with pytest.raises(OSError):
        hf.tiny_random_models(tmp_path / "m")
    assert [p.name for p in (tmp_path / "m").iterdir() if not p.name.endswith(".lock")] == []
