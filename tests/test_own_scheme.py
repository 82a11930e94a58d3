"""A scheme of one's own, from a file outside rflens: registered, trained, evaluated and
measured with no edit to rflens; and FIRE, the book's worked example, on every kernel."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import rflens
from rflens.errors import UserError
from rflens.model import attention, positional
from rflens.model.transformer import TransformerLM
from rflens.setup import schemes, settings
from rflens.setup.config import ModelConfig
from rflens.setup import presets

HERE = Path(__file__).resolve().parent
OWN = HERE / "own_scheme.py"
FIRE = HERE.parent / "book" / "schemes" / "fire.py"


def test_a_file_registers_fixed_and_learnable_schemes(registry):
    names = rflens.load_schemes(OWN)
    assert {"quarter_slope", "learned_slope"} <= set(names)
    assert not schemes.TABLE["quarter_slope"].learnable and schemes.TABLE["learned_slope"].learnable
    assert schemes.title("learned_slope") == "Learned slope"
    assert str(OWN) in os.environ[schemes.ENV]  # so that processes started from here load it too
    table = positional.last_query_bias(ModelConfig(pos="quarter_slope", n_head=3), 5)
    torch.testing.assert_close(table, torch.tensor([0.0, -0.25, -0.5, -0.75, -1.0]).expand(3, 5))
    rflens.load_schemes(OWN)  # a second load is a no-op
    assert os.environ[schemes.ENV].count(str(OWN)) == 1


def test_a_scheme_is_keyed_by_its_file(registry, tmp_path):
    from rflens.store import runs

    rflens.load_schemes(OWN)
    _, m, d, t = settings.resolve(presets.get("smoke"), "quarter_slope", "prose")
    key = runs.run_key(m, d, t, "fp")
    copy = tmp_path / "copy.py"
    copy.write_text(OWN.read_text().replace("-0.25", "-0.3"))
    with pytest.raises(UserError, match=f"'quarter_slope' is registered by two scheme files, {OWN} and {copy}"):
        rflens.load_schemes(copy)  # the same names from another file: refused, the first kept
    assert schemes.TABLE["quarter_slope"].source == str(OWN) and runs.run_key(m, d, t, "fp") == key
    for name in ("quarter_slope", "learned_slope"):  # a process that loads only the copy
        schemes.TABLE.pop(name), positional.REGISTRY.pop(name)
    schemes._LOADED.pop(str(OWN))
    os.environ.pop(schemes.ENV)
    rflens.load_schemes(copy)
    assert runs.run_key(m, d, t, "fp") != key
    _, ma, da, ta = settings.resolve(presets.get("smoke"), "alibi", "prose")
    assert "scheme_source" not in json.dumps(runs.run_key(ma, da, ta, "fp"))


def test_mistakes_are_one_line(registry, tmp_path):
    with pytest.raises(UserError, match="one of rflens's own schemes"):
        positional.register_scheme("alibi")(lambda k, h: -k.expand(h, -1))
    with pytest.raises(UserError, match="expected \\(2, 8\\)"):
        positional.register_scheme("bad_shape")(lambda k, h: -k)
    with pytest.raises(UserError, match="not found"):
        rflens.load_schemes(tmp_path / "missing.py")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('oops')\n")
    with pytest.raises(UserError, match="failed to import: RuntimeError: oops"):
        rflens.load_schemes(broken)
    text = tmp_path / "schemes.txt"  # not a .py file
    text.write_text(OWN.read_text())
    with pytest.raises(UserError, match=f"scheme file {text} is not a Python file"):
        rflens.load_schemes(text)
    with pytest.raises(UserError, match="unknown|allowed"):
        ModelConfig(pos="never_registered")


@pytest.mark.slow
def test_train_evaluate_erf_and_the_cli_on_a_scheme_of_ones_own(registry, store, tmp_path, monkeypatch, capsys):
    from rflens import cli
    from rflens.measure import perplexity, receptive
    from rflens.store import runs

    assert cli.main(["train", "--scale", "smoke", "--pos", "learned_slope", "--quiet"]) == 2  # not loaded yet
    assert cli.main(["--schemes", str(OWN), "train", "--scale", "smoke", "--pos", "learned_slope", "--quiet"]) == 0
    run = runs.get_run(presets.get("smoke"), "learned_slope", "prose", train=False, progress=False)
    model = run.load_model()
    assert not torch.allclose(model.pos.slope, torch.full_like(model.pos.slope, 0.5))  # it was trained
    ppl = perplexity.perplexity(run, progress=False)
    assert np.isfinite(ppl["ppl"]).all()
    rf = receptive.receptive_field(run, progress=False)
    assert 1 <= rf["erf"] <= rf["length"]
    # a fresh process finds it through the environment, which loading it has set
    assert str(OWN) in os.environ[schemes.ENV]
    capsys.readouterr()
    assert cli.main(["erf", "--scale", "smoke", "--pos", "learned_slope", "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["erf"] == rf["erf"]


# ----------------------------------------------------------------------------- FIRE


def fire_model(**kw):
    rflens.load_schemes(FIRE)
    torch.manual_seed(0)
    cfg = dict(pos="fire", n_layer=2, n_head=4, d_model=32, vocab_size=61, max_distance=16)
    cfg.update(kw)
    return TransformerLM(ModelConfig(**cfg))


def test_fire_is_progressive_past_its_threshold(registry):
    model = fire_model()
    with torch.no_grad():
        bias = model.pos.position_bias(40)  # (H, L, L), threshold 16
        # below the threshold the bias depends on the distance alone
        torch.testing.assert_close(bias[:, 10, 7], bias[:, 15, 12])
        # beyond it, one distance reads the curve further down as the query moves on
        assert not torch.allclose(bias[:, 20, 17], bias[:, 39, 36])
        # the longest distance of every query reads the curve at one point: psi(i) / psi(i)
        torch.testing.assert_close(bias[:, 20, 0], bias[:, 39, 0], rtol=1e-4, atol=1e-5)
    assert schemes.TABLE["fire"].learnable


def test_fire_gives_the_same_logits_and_gradients_on_every_kernel(registry, monkeypatch):
    model = fire_model()
    x = torch.randint(0, 61, (2, 40))
    with torch.no_grad():
        ref = model(x, kernel="sdpa")
        monkeypatch.setattr(attention, "QUERY_BLOCK", 8)
        for kernel in ("chunked", "flex"):
            torch.testing.assert_close(model(x, kernel=kernel), ref, rtol=1e-5, atol=1e-5)
        windowed = fire_model(window=6)
        torch.testing.assert_close(windowed(x, kernel="chunked"), windowed(x, kernel="sdpa"), rtol=1e-5, atol=1e-5)

    def grads():
        model.zero_grad()
        model.loss(x[:, :-1], x[:, 1:]).backward()
        return [p.grad.clone() for p in model.pos.parameters()]

    fused = grads()
    monkeypatch.setattr(attention, "FUSED_BIAS_GRAD", False)
    for a, b in zip(fused, grads()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    assert any(g.abs().sum() > 0 for g in fused)


# ----------------------------------------------------------------------------- scheme files that exit or return non-finite biases


def test_a_scheme_file_that_exits_is_one_line_naming_the_file(registry, tmp_path, capsys):
    from rflens import cli

    quits = tmp_path / "quits.py"
    quits.write_text("import sys\nsys.exit(0)\n")
    assert cli.main(["--schemes", str(quits), "bias", "--pos", "alibi"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and str(quits) in err[0] and "sys.exit(0)" in err[0]
    assert not captured.out
    with pytest.raises(UserError, match="sys.exit"):
        rflens.load_schemes(quits)


@pytest.mark.parametrize("value", ["float('nan')", "float('inf')"])
def test_a_scheme_of_ones_own_whose_bias_is_not_finite_is_one_line_naming_its_file(value, registry, store, tmp_path,
                                                                                   monkeypatch, capsys):
    from rflens import cli

    path = tmp_path / "broken_bias.py"
    path.write_text("import rflens\n\n\n@rflens.register_scheme('broken_bias')\n"
                    f"def broken_bias(distance, n_head):\n    return (0.0 * distance + {value}).expand(n_head, -1)\n")
    for argv in (["bias", "--pos", "broken_bias", "--heads", "2", "--length", "4"],
                 ["train", "--scale", "smoke", "--pos", "broken_bias", "--quiet"]):
        assert cli.main(["--schemes", str(path), *argv]) == 2
        captured = capsys.readouterr()
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and str(path) in err[0] and ("nan" in err[0] or "inf" in err[0]), err
        assert not captured.out
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_run_of_a_scheme_whose_file_is_not_loaded_is_unknown_never_damaged(registry, store, tmp_path, monkeypatch,
                                                                             capsys):
    from rflens import cli
    from rflens.store import runs

    rflens.load_schemes(OWN)
    own = runs.get_run(presets.get("smoke"), "quarter_slope", "prose", steps=3, progress=False)
    good = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)
    # a later process that was not given --schemes
    monkeypatch.delenv(schemes.ENV)
    monkeypatch.setattr(schemes, "_SEEN_ENV", "")
    for table in (schemes.TABLE, positional.REGISTRY):
        table.pop("quarter_slope"), table.pop("learned_slope")
    schemes._LOADED.clear()
    listed = {r["key"]: r for r in runs.list_runs()}
    assert listed[good.key]["status"] == "complete"
    assert listed[own.key]["status"] == "unknown scheme" and f"--schemes {OWN}" in listed[own.key]["error"]
    capsys.readouterr()
    assert cli.main(["runs", "--clean"]) == 0
    out = capsys.readouterr().out
    assert "removed" not in out and f"--schemes {OWN}" in out
    assert own.path.is_dir() and (own.path / "manifest.json").is_file()
    assert cli.main(["runs", "--export", str(tmp_path / "csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--schemes {OWN}" in err[0] and "remove" not in err[0]
    rflens.load_schemes(OWN)  # given its file again, it is what it was
    assert {r["key"]: r["status"] for r in runs.list_runs()}[own.key] == "complete"


def test_scheme_file_mistakes_on_the_command_line_are_one_line(registry, tmp_path, capsys):
    from rflens.cli import main

    text = tmp_path / "x.txt"
    text.write_text(OWN.read_text())
    assert main(["--schemes", str(text), "bias", "--pos", "quarter_slope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a Python file" in err[0] and str(text) in err[0], err
    twin = tmp_path / "twin.py"
    twin.write_text(OWN.read_text())
    assert main(["--schemes", str(OWN), "--schemes", str(twin), "bias", "--pos", "quarter_slope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "registered by two scheme files" in err[0] and str(OWN) in err[0] and str(twin) in err[0]


def test_what_a_scheme_file_prints_leaves_the_json_of_bias_clean(registry, tmp_path, capsys):
    from rflens.cli import main

    chatty = tmp_path / "chatty.py"
    chatty.write_text("print('loading my schemes')\n" + OWN.read_text())
    assert main(["--schemes", str(chatty), "bias", "--pos", "quarter_slope", "--length", "4", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) and "loading my schemes" in err
