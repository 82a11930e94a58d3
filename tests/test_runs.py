"""The run store: one call trains a model or hands back the stored one, never a stale one."""

import ast
import json
import time
from pathlib import Path

import pytest

from rflens.cli import runs as cli_runs
from rflens.errors import ConfigError, UserError
from rflens.setup import presets, settings
from rflens.store import runs


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A fresh run store and data folder for this module (smoke scale)."""
    root = tmp_path_factory.mktemp("store")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RFLENS_RUNS", str(root / "runs"))
        mp.setenv("RFLENS_DATA", str(root / "data"))
        yield root / "runs"


@pytest.fixture(scope="module")
def smoke_run(store):
    return runs.get_run(presets.get("smoke"), "alibi", "prose", progress=False)


def test_runs_dir_follows_the_environment(store):
    assert runs.runs_dir() == store.resolve()


def _configs(**over):
    return settings.resolve(presets.get("smoke"), "alibi", "prose", over)[1:]


def test_the_key_changes_with_every_setting_the_data_and_the_code():
    m, d, t = _configs()
    key = runs.run_key(m, d, t, "fp")
    assert key == runs.run_key(*_configs(), "fp")  # stable
    assert len(key) == runs.KEY_LENGTH
    others = {
        runs.run_key(*_configs(window=4), "fp"),  # model
        runs.run_key(*_configs(max_bytes=1_000_000), "fp"),  # data settings
        runs.run_key(*_configs(steps=31), "fp"),  # training
        runs.run_key(m, d, t, "another fingerprint"),  # the tokens themselves
        runs.run_key(m, d, t, "fp", code="another code version"),
    }
    assert key not in others and len(others) == 5


def test_an_int_for_a_float_setting_is_the_same_run():
    """slope_shift=0 and the default 0.0 are one setting: one run key, not a duplicate model."""
    m, d, t = _configs()
    assert m.replace(slope_shift=0).to_json() == m.to_json()
    assert runs.run_key(m.replace(slope_shift=0), d, t, "fp") == runs.run_key(m, d, t, "fp")
    assert runs.run_key(m.replace(same_slope=8), d, t, "fp") == runs.run_key(m.replace(same_slope=8.0), d, t, "fp")
    assert runs.run_key(m, d, t.replace(lr=1), "fp") == runs.run_key(m, d, t.replace(lr=1.0), "fp")


def test_code_version_ignores_comments_and_docstrings():
    a = 'def f(x):\n    """Doc."""\n    return x + 1  # why\n'
    b = 'def f(x):\n    return x + 1\n'
    c = 'def f(x):\n    return x + 2\n'
    dump = lambda src: ast.dump(runs._strip(ast.parse(src)))  # noqa: E731
    assert dump(a) == dump(b) != dump(c)


def test_the_code_version_reads_every_module_that_shapes_the_weights(monkeypatch):
    """Each module of CODE_MODULES exists where the key looks for it (a moved file must not
    drop out of the key), and one that is missing is an error, never an empty hash."""
    pkg = Path(runs.__file__).resolve().parents[1]
    assert all((pkg / name).is_file() for name in runs.CODE_MODULES)
    from rflens.model import transformer
    from rflens.training import trainer
    assert {Path(m.__file__).resolve() for m in (transformer, trainer)} <= {pkg / n for n in runs.CODE_MODULES}
    monkeypatch.setattr(runs, "_code_version_cache", None)
    monkeypatch.setattr(runs, "CODE_MODULES", (*runs.CODE_MODULES, "model/moved_away.py"))
    with pytest.raises(RuntimeError, match="moved_away.py"):
        runs.code_version()


def test_overrides_go_to_the_settings_that_have_them():
    _, m, d, t = settings.resolve(presets.get("smoke"), "window", "code", {"window": 8, "l_tr": 32, "vocab_size": 600})
    assert (m.pos, m.window, t.l_tr, d.corpus) == ("window", 8, 32, "code")
    assert m.vocab_size == d.vocab_size == 600
    _, m, d, t = settings.resolve(presets.get("smoke"), "alibi", "prose", {"model": {"slope_shift": -3.0}, "train": {"steps": 5}})
    assert (m.slope_shift, t.steps) == (-3.0, 5)


@pytest.mark.parametrize("over, match", [
    ({"windw": 8}, "unknown training setting"),
    ({"n_segments": 8}, "evaluation setting"),
    ({"pos": "t5"}, "own argument"),
    ({"steps": "many"}, "positive integer"),
    ({"model": {"vocab_size": 600}}, "vocabulary"),
])
def test_bad_overrides_are_rejected(over, match):
    with pytest.raises(ConfigError, match=match):
        settings.resolve(presets.get("smoke"), "alibi", "prose", over)


def test_a_missing_model_names_the_command_that_trains_it(store):
    with pytest.raises(UserError, match=r"python -m rflens train --scale smoke --pos window --corpus prose --set window=5"):
        runs.get_run(presets.get("smoke"), "window", "prose", train=False, progress=False, window=5)


def test_get_run_trains_once_then_returns_the_stored_model(smoke_run):
    assert not smoke_run.reused
    for name in ("config.json", "model.safetensors", "manifest.json", "metrics.json"):
        assert (smoke_run.path / name).is_file()
    assert not list(smoke_run.path.glob("checkpoint*"))  # training state is dropped when complete
    m = smoke_run.metrics
    assert len(m["train_loss"]) == m["steps"] == 30
    assert m["tokens_per_s"] > 0 and m["val_loss"] > 0
    t0 = time.perf_counter()
    again = runs.get_run(presets.get("smoke"), "alibi", "prose", progress=False, train=False)
    assert time.perf_counter() - t0 < 1.0
    assert again.reused and again.key == smoke_run.key
    assert (again.scale, again.pos, again.l_tr) == ("smoke", "alibi", 16)


def test_the_stored_model_loads_and_predicts(smoke_run):
    import torch

    model = smoke_run.load_model()
    assert not model.training
    idx = torch.from_numpy(smoke_run.corpus().eval_segments(2, 16)).long()
    logits = model(idx, last_only=True)
    assert logits.shape == (2, 1, smoke_run.model_cfg.vocab_size)
    loss = model.loss(idx[:, :-1], idx[:, 1:]).item()
    assert loss < 6.0  # below the uniform log(512) = 6.24: the weights were trained and stored


def test_results_are_cached_by_name_and_parameters(smoke_run):
    calls = []

    def compute():
        calls.append(1)
        return {"value": len(calls), "lengths": (16, 32)}

    first = smoke_run.cached("demo", {"n": 4}, compute)
    assert first == {"value": 1, "lengths": [16, 32]}
    assert smoke_run.cached("demo", {"n": 4}, compute) == first and len(calls) == 1
    assert smoke_run.cached("demo", {"n": 5}, compute)["value"] == 2


def test_listing_shows_the_run(smoke_run, capsys):
    rows = runs.list_runs()
    row = next(r for r in rows if r["key"] == smoke_run.key)
    assert (row["pos"], row["scale"], row["corpus"], row["steps"], row["status"]) == ("alibi", "smoke", "prose", 30, "complete")
    assert row["final_loss"] == pytest.approx(smoke_run.metrics["val_loss"])
    assert row["size_bytes"] > (smoke_run.path / "model.safetensors").stat().st_size
    assert cli_runs.run(type("A", (), {"json": False})()) == 0
    out = capsys.readouterr().out
    assert smoke_run.key in out and "alibi" in out and "final loss" in out


def test_a_corrupted_checkpoint_is_detected_and_retrain_fixes_it(store):
    run = runs.get_run(presets.get("smoke"), "alibi", "prose", progress=False, steps=3, eval_interval=0, ckpt_interval=0)
    weights = run.path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF  # one flipped byte in the tensors
    weights.write_bytes(bytes(data))
    with pytest.raises(UserError, match="corrupted.*--retrain"):
        runs.get_run(presets.get("smoke"), "alibi", "prose", progress=False, steps=3, eval_interval=0, ckpt_interval=0)
    with pytest.raises(UserError, match="corrupted"):
        run.load_model()
    fixed = runs.get_run(presets.get("smoke"), "alibi", "prose", progress=False, retrain=True, steps=3, eval_interval=0,
                         ckpt_interval=0)
    assert not fixed.reused and fixed.key == run.key
    fixed.verify()
    assert json.loads((fixed.path / "manifest.json").read_text())["sha256"]["model.safetensors"] == \
        runs.sha256_file(weights)


def test_sweep_overrides_reach_the_stored_settings(store):
    entry = presets.get("smoke").sweeps.table2[0]
    over = {presets.FAMILIES[entry.family].setting: entry.value, **entry.training(presets.get("smoke").train.l_tr)}
    pos = entry.pos
    m, d, t = settings.resolve(presets.get("smoke"), pos, "prose", over)[1:]
    assert (m.window, t.l_tr, t.batch_size) == (over["window"], over["l_tr"], over["batch_size"])
    assert "--set l_tr=64" in settings.train_command(presets.get("smoke"), pos, "prose", settings.describe(m, d, t, presets.get("smoke")))


def test_auto_precision_is_resolved_before_the_key():
    """dtype=auto becomes the precision the weights are trained in, so the key (and a run
    store shared between machines) tells a bf16 model from an fp32 one."""
    _, m, d, t = settings.resolve(presets.get("smoke"), "alibi", "prose", {"dtype": "auto"})
    assert t.dtype == settings.native_dtype() in ("fp32", "bf16")
    _, m2, d2, t2 = settings.resolve(presets.get("smoke"), "alibi", "prose", {"dtype": settings.native_dtype()})
    assert runs.run_key(m, d, t, "fp") == runs.run_key(m2, d2, t2, "fp")
    assert "dtype" not in settings.describe(*settings.resolve(presets.get("tiny"), "alibi", "prose", {})[1:], presets.get("tiny"))


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_weights_are_never_listed_complete(damage, store, capsys):
    from rflens.cli import main

    run = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=5 if damage == "truncate" else 6, progress=False)
    assert {r["key"]: r["status"] for r in runs.list_runs()}[run.key] == "complete"
    weights = run.path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    row = {r["key"]: r for r in runs.list_runs()}[run.key]
    assert row["status"] == "damaged" and "model.safetensors" in row["error"]
    assert main(["runs", "--clean"]) == 0
    assert f"removed {run.key} (damaged)" in capsys.readouterr().out and not run.path.exists()
