"""A scheme of one's own is the user's code: whatever it returns or raises, at registration or
later at another size, in training or in evaluation, the command stops with one line naming
the scheme and its file, and no number that is not finite is printed or stored."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rflens
from rflens.cli import main
from rflens.errors import UserError
from rflens.measure import perplexity
from rflens.model import positional
from rflens.setup import schemes


def scheme_file(tmp_path, name: str, body: str):
    """A file registering ``name``: ``body`` is the function's body, with ``distance`` (n,) and ``n_head``."""
    path = tmp_path / f"{name}.py"
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    path.write_text(f"import torch\nimport rflens\n\n\n@rflens.register_scheme({name!r})\n"
                    f"def {name}(distance, n_head):\n{lines}\n")
    return path


def one_line(capsys, argv) -> str:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), (code, err, captured.out[-500:])
    assert "Traceback" not in captured.err and not captured.out
    return err[0]


# faults a single size (8) does not show; each body is fine at 8 positions
BEYOND_8 = {
    "shape": "n = distance.numel()\nreturn (-distance[:8]).expand(n_head, -1) if n > 8 else (-distance).expand(n_head, -1)",
    "raises": "if distance.numel() > 8:\n    raise ValueError('too long')\nreturn (-distance).expand(n_head, -1)",
    "base_exception": "if distance.numel() > 8:\n    raise BaseException('boom')\nreturn (-distance).expand(n_head, -1)",
    "exits": "if distance.numel() > 8:\n    raise SystemExit(3)\nreturn (-distance).expand(n_head, -1)",
}
# faults at every size, of a kind the old check (the shape at 8) let through
ANY_SIZE = {
    "int64": ("return (-distance.long()).expand(n_head, -1)", "int64"),
    "meta": ("return torch.zeros(n_head, distance.numel(), device='meta')", "meta tensor"),
    "numpy": ("return (-distance).expand(n_head, -1).numpy()", "ndarray"),
}


@pytest.mark.parametrize("fault", sorted(BEYOND_8))
def test_a_scheme_that_fails_beyond_8_positions_is_refused_when_registered(fault, registry, store, tmp_path, capsys):
    path = scheme_file(tmp_path, f"beyond_{fault}", BEYOND_8[fault])
    err = one_line(capsys, ["--schemes", path, "train", "--scale", "smoke", "--pos", f"beyond_{fault}", "--quiet"])
    assert f"beyond_{fault}" in err and str(path) in err
    assert f"beyond_{fault}" not in schemes.TABLE and f"beyond_{fault}" not in positional.REGISTRY


@pytest.mark.parametrize("fault", sorted(ANY_SIZE))
def test_a_bias_that_is_not_a_float_tensor_with_values_is_refused_when_registered(fault, registry, tmp_path, capsys):
    body, said = ANY_SIZE[fault]
    path = scheme_file(tmp_path, f"kind_{fault}", body)
    err = one_line(capsys, ["--schemes", path, "bias", "--pos", f"kind_{fault}", "--heads", "2"])
    assert said in err and str(path) in err


@pytest.mark.parametrize("fault", ["shape", "raises", "base_exception", "nan"])
def test_a_scheme_that_fails_only_at_the_training_length_is_one_line_in_train(fault, registry, store, tmp_path,
                                                                              capsys):
    """The smoke scale trains at L_tr = 16, a size registration does not try: the check at use
    catches it, before anything is stored."""
    bodies = {
        "shape": "n = distance.numel()\nreturn (-distance[:3]).expand(n_head, -1) if n == 16 else (-distance).expand(n_head, -1)",
        "raises": "if distance.numel() == 16:\n    raise KeyError('sixteen')\nreturn (-distance).expand(n_head, -1)",
        "base_exception": "if distance.numel() == 16:\n    raise BaseException('sixteen')\nreturn (-distance).expand(n_head, -1)",
        "nan": "out = (-distance).expand(n_head, -1).clone()\nif out.shape[1] == 16:\n    out[:, 5] = float('nan')\nreturn out",
    }
    path = scheme_file(tmp_path, f"at16_{fault}", bodies[fault])
    rflens.load_schemes(path)  # registers: the probe sizes pass
    err = one_line(capsys, ["train", "--scale", "smoke", "--pos", f"at16_{fault}", "--quiet"])
    assert f"at16_{fault}" in err and str(path) in err and "16 positions" in err
    assert not store.exists() or not list(store.rglob("manifest.json"))


def test_a_bias_that_is_nan_beyond_100_positions_gives_no_nan_in_evaluate(registry, store, tmp_path, capsys):
    """Item of the hardening list: trained at L_tr = 16 it is fine; evaluated at 16 x L_tr it
    used to print nan with exit 0. Now one line names the file; the lengths below 100 still
    measure, with finite numbers."""
    path = scheme_file(tmp_path, "nan_beyond_100",
                       "out = (-0.5 * distance).expand(n_head, -1).clone()\nout[:, 100:] = float('nan')\nreturn out")
    base = ["--schemes", str(path)]
    assert main([*base, "train", "--scale", "smoke", "--pos", "nan_beyond_100", "--quiet"]) == 0
    capsys.readouterr()
    err = one_line(capsys, [*base, "evaluate", "--scale", "smoke", "--pos", "nan_beyond_100", "--quiet"])
    assert "nan" in err and "distance 100" in err and str(path) in err
    err = one_line(capsys, [*base, "erf", "--scale", "smoke", "--pos", "nan_beyond_100", "--quiet", "--length", "128"])
    assert "distance 100" in err and str(path) in err
    # nothing non-finite was stored on the way
    for f in store.rglob("*.json"):
        assert "NaN" not in f.read_text() and "Infinity" not in f.read_text(), f
    assert main([*base, "evaluate", "--scale", "smoke", "--pos", "nan_beyond_100", "--quiet", "--lengths", "16,64",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert np.isfinite(out["ppl"]).all() and np.isfinite(out["ci_low"] + out["ci_high"]).all()


def test_a_result_that_is_not_finite_is_one_line_naming_the_lengths_that_are():
    good = {"lengths": [16, 32, 64], "ppl": [10.0, 11.0, 12.0], "ci_low": [9.0, 10.0, 11.0],
            "ci_high": [11.0, 12.0, 13.0], "nll": [2.3, 2.4, 2.5]}
    perplexity.check_finite(good, "m")
    for key, value, said in (("ppl", float("nan"), "nan"), ("ci_high", float("inf"), "inf"),
                             ("nll", float("nan"), "loss is not finite")):
        bad = json.loads(json.dumps(good))
        bad[key][2] = value
        with pytest.raises(UserError, match="L_ex = 64.*--lengths up to 32") as info:
            perplexity.check_finite(bad, "m")
        assert said in str(info.value)
    overflow = {**good, "ppl": [float("inf")] * 3, "nll": [800.0] * 3}
    with pytest.raises(UserError, match="overflows.*for it; retrain the model"):
        perplexity.check_finite(overflow, "m")


def test_a_stored_result_that_is_not_finite_is_not_served(monkeypatch):
    """An older store (or anything else the cache reads) holding a nan is refused, not printed."""
    import fakes
    from test_evaluate import FakeCorpus, make_model
    from rflens.setup.config import EvalConfig

    run = fakes.FakeRun(make_model("alibi"), FakeCorpus())
    ev = EvalConfig(n_segments=4, length_mults=(1, 2))
    res = perplexity.perplexity(run, progress=False, eval_cfg=ev)
    assert np.isfinite(res["ppl"]).all()
    stored = {**res, "ppl": [res["ppl"][0], float("nan")], "nll": [res["nll"][0], float("nan")]}
    monkeypatch.setattr(run, "cached", lambda name, params, compute: stored)
    with pytest.raises(UserError, match="L_ex = 16.*--lengths up to 8"):
        perplexity.perplexity(run, progress=False, eval_cfg=ev)


def test_a_query_dependent_scheme_is_checked_where_queries_see_keys(registry, tmp_path):
    """-inf above the diagonal (keys after the query) is ignored; nan below it, or -inf on the
    diagonal, is refused at the size it appears."""
    import torch
    from rflens.setup.config import ModelConfig

    @rflens.register_scheme("masked_future")
    class MaskedFuture(rflens.RelativeScheme):
        query_dependent = True

        def position_bias(self, length):
            out = torch.zeros(self.n_head, length, length)
            out = out.masked_fill(torch.ones(length, length, dtype=torch.bool).triu(1), float("-inf"))
            if length > 64:
                out[:, length - 1, length - 1] = float("-inf")
            return out

    scheme = positional.build(ModelConfig(pos="masked_future", n_head=2))
    assert scheme.position_bias(64).shape == (2, 64, 64)
    with pytest.raises(UserError, match=r"-inf at head 0, query 99, key 99 \(for 2 heads and 100 positions\)"):
        scheme.position_bias(100)


@pytest.mark.parametrize("name, title", [(5, None), ("", None), ("a\nb", None), ("../up", None), ("x" * 65, None),
                                         ("ok_name", 5), ("ok_name", "two\nlines"), ("ok_name", "")])
def test_a_scheme_name_or_title_that_is_not_one_word_or_line_is_refused(name, title, registry, tmp_path, capsys):
    """A name is what --pos takes: "" used to register a scheme that `--pos ""` then trained,
    and a newline split every error listing the schemes over two lines."""
    path = tmp_path / "named.py"
    path.write_text(f"import rflens\n\n\n@rflens.register_scheme({name!r}, title={title!r})\n"
                    "def bias(distance, n_head):\n    return (-distance).expand(n_head, -1)\n")
    err = one_line(capsys, ["--schemes", path, "bias", "--pos", "alibi"])
    assert "register_scheme(" in err
    assert set(schemes.TABLE) == set(schemes.NAMES) | {n for n in schemes.TABLE if schemes.TABLE[n].source}
    assert name not in schemes.TABLE or name in schemes.NAMES


def test_an_overflowing_bias_of_rflens_s_own_is_not_printed_as_a_mask(capsys):
    """-inf is a window's mask; a KERPLE bias of -r1 k^r2 that overflows float32 is not one."""
    err = one_line(capsys, ["bias", "--pos", "kerple_power", "--set", "kerple_init=fixed", "--set", "kerple_r1=1e38",
                            "--set", "kerple_r2=2", "--length", "4"])
    assert "overflows" in err and "kerple_r1" in err
    assert main(["bias", "--pos", "alibi", "--set", "window=2", "--length", "4", "--heads", "2"]) == 0
    assert "-inf" in capsys.readouterr().out  # the window's mask is still shown


def test_a_registration_mistake_names_the_file_once(registry, tmp_path, capsys):
    path = tmp_path / "unnamed.py"
    path.write_text("import rflens\n\n\n@rflens.register_scheme('')\ndef bias(distance, n_head):\n"
                    "    return (-distance).expand(n_head, -1)\n")
    err = one_line(capsys, ["--schemes", path, "bias", "--pos", "alibi"])
    assert err.count(str(path)) == 1 and "register_scheme('')" in err
    path = scheme_file(tmp_path, "kind_int", ANY_SIZE["int64"][0])
    err = one_line(capsys, ["--schemes", path, "bias", "--pos", "alibi"])
    assert err.count(str(path)) == 1
