"""Commands that must work on any valid setting, and refuse every invalid one in one line
(exit 2, no traceback, nothing written)."""

from __future__ import annotations

import json
import re
import os
import stat

import pytest

from rflens import storage
from rflens.cli import main
from rflens.errors import ConfigError, UserError
from rflens.setup import settings
from rflens.setup.config import ModelConfig, parse_overrides, TrainConfig
from rflens.store import runs
from rflens.setup import presets


@pytest.fixture()
def store(store, own_smoke_prose):
    """An empty run store, with a data folder of its own (errors about data are tested here)
    that holds the smoke prose corpus (built once, copied)."""
    return store


def one_line_error(capsys, *argv) -> str:
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


@pytest.mark.slow
def test_a_model_with_non_default_training_settings_can_be_evaluated(store, capsys):
    assert main(["evaluate", "--scale", "smoke", "--set", "l_tr=8", "--set", "steps=5", "--lengths", "16",
                 "--n", "4", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lengths"] == [16] and out["l_tr"] == 8


def test_a_bare_training_key_is_a_training_setting_even_where_evaluation_has_one_of_its_name():
    sections = parse_overrides(["batch_size=4", "seed=1", "n_segments=8"])
    assert sections["train"] == {"batch_size": 4, "seed": 1}
    assert sections["eval"] == {"n_segments": 8}
    assert parse_overrides(["eval.batch_size=2"])["eval"] == {"batch_size": 2}
    _, _, _, t = settings.resolve(presets.get("smoke"), "alibi", "prose", {k: v for k, v in sections.items() if k != "eval"})
    assert (t.batch_size, t.seed) == (4, 1)


def test_claims_on_an_unknown_scale_writes_nothing(store, capsys):
    assert "unknown scale" in one_line_error(capsys, "claims", "--scale", "nosuch")
    assert not list(store.parent.rglob("scoreboard-nosuch*"))


def test_bias_refuses_settings_it_would_ignore(capsys):
    assert "does not change a bias" in one_line_error(capsys, "bias", "--pos", "alibi", "--set", "steps=5")


@pytest.mark.parametrize("pair", ["lr=nan", "lr=inf", "slope_shift=nan", "same_slope=inf", "warmup_frac=-inf"])
def test_non_finite_numbers_are_config_errors(pair, store, capsys):
    assert "finite" in one_line_error(capsys, "train", "--scale", "smoke", "--set", pair)
    assert not store.exists() or not any(store.iterdir())  # no orphan run folder
    with pytest.raises(ConfigError, match="finite"):
        settings.resolve(presets.get("smoke"), "alibi", "prose", {k: v for k, v in parse_overrides([pair]).items() if k != "eval"})


def test_non_finite_numbers_are_refused_from_python_too():
    with pytest.raises(ConfigError, match="finite"):
        ModelConfig(pos="alibi", slope_shift=float("nan"))
    with pytest.raises(ConfigError, match="finite"):
        TrainConfig(lr=float("inf"))


def test_bias_json_never_turns_nan_into_minus_infinity(capsys):
    assert "finite" in one_line_error(capsys, "bias", "--pos", "alibi", "--set", "same_slope=nan", "--json")


def test_a_negative_evaluation_seed_is_one_line_before_anything_trains(store, capsys):
    assert "seed" in one_line_error(capsys, "evaluate", "--scale", "smoke", "--set", "eval.seed=-1")
    assert not store.exists() or not any(store.iterdir())


@pytest.mark.slow
def test_stored_weights_get_the_usual_file_mode(store):
    run = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)
    expected = 0o666 & ~_umask()
    for name in ("model.safetensors", "config.json", "metrics.json", "manifest.json"):
        assert stat.S_IMODE(os.stat(run.path / name).st_mode) == expected, name


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_user_errors_are_the_ones_the_cli_turns_into_one_line():
    assert issubclass(ConfigError, UserError)


@pytest.mark.parametrize("params, words", [
    ({"scale": 7}, "scale=7"), ({"corpus": 5}, "corpus=5"), ({"progress": "maybe"}, "progress='maybe'"),
    ({"corpora": "poetry"}, "corpora"), ({"mfu": 2.0}, "mfu"), ({"n_head": 0}, "n_head"), ({"windw": 8}, "windw"),
])
def test_chapter_parameters_are_checked_by_value(params, words):
    from rflens.publish.notebook import check_parameters

    with pytest.raises(UserError, match=words):
        check_parameters(**params)


def test_reproduce_checks_parameter_values_before_anything_runs(capsys):
    assert "progress='maybe'" in one_line_error(capsys, "reproduce", "--scale", "smoke", "--chapters", "03",
                                                "-p", "progress=maybe")


def test_two_identical_measurements_at_once_compute_once(store):
    import threading
    import time

    run = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)
    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.3)
        return {"value": 1}

    threads = [threading.Thread(target=run.cached, args=("probe", {"p": 1}, compute)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and run.cached("probe", {"p": 1}, compute) == {"value": 1} and len(calls) == 1


@pytest.mark.parametrize("name, text", [
    ("manifest.json", "{not json"), ("manifest.json", '{"sha256": {}}'), ("manifest.json", "[]"),
    ("config.json", "{"), ("metrics.json", "null"), ("metrics.json", "{oops"), ("metrics.json", '{"val_loss": 1}'),
])
def test_a_damaged_run_file_is_one_line_and_the_store_still_lists(name, text, store, capsys):
    good = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)
    bad = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=4, progress=False)
    (bad.path / name).write_text(text)
    listed = {r["key"]: r for r in runs.list_runs()}
    # a config.json that no longer carries its run key is not known to be rflens's: never cleaned
    assert listed[good.key]["status"] == "complete"
    assert listed[bad.key]["status"] == (runs.NOT_A_RUN if name == "config.json" else "damaged")
    assert main(["evaluate", "--scale", "smoke", "--set", "steps=4", "--lengths", "16", "--n", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad.path) in err[0]
    assert main(["runs"]) == 0 and good.key in capsys.readouterr().out


def test_a_failed_training_is_listed_as_failed_and_cleaned(store, monkeypatch, capsys):
    from rflens.training import trainer as training

    def boom(*args, **kwargs):
        raise RuntimeError("loss is nan at step 3")

    monkeypatch.setattr(training, "train", boom)
    with pytest.raises(RuntimeError):
        runs.get_run(presets.get("smoke"), "alibi", "prose", steps=5, progress=False)
    monkeypatch.undo()
    monkeypatch.setenv("RFLENS_RUNS", str(store))
    monkeypatch.setenv("RFLENS_DATA", str(store.parent / "data"))
    good = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)
    (row,) = [r for r in runs.list_runs() if r["key"] != good.key]
    assert row["status"] == "failed" and "loss is nan" in row["error"]
    assert main(["runs", "--clean"]) == 0
    out = capsys.readouterr().out
    assert f"removed {row['key']} (failed)" in out and good.key in out
    assert [r["key"] for r in runs.list_runs()] == [good.key]


def test_a_store_that_cannot_be_written_still_prints_the_result(store, monkeypatch, capsys):
    import errno

    runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)

    def read_only(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(storage, "write_json", read_only)  # where cached results are written
    assert main(["evaluate", "--scale", "smoke", "--set", "steps=3", "--lengths", "16", "--n", "2", "--json",
                 "--quiet"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["lengths"] == [16] and "could not be cached" in captured.err


@pytest.mark.parametrize("variable", ["RFLENS_RUNS", "RFLENS_DATA"])
def test_a_store_path_that_is_a_file_is_one_line(variable, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("RFLENS_DATA", str(tmp_path / "data"))
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    monkeypatch.setenv(variable, str(blocker / "sub"))
    line = one_line_error(capsys, "train", "--scale", "smoke", "--set", "steps=2", "--quiet")
    assert "blocker" in line and "RFLENS" in line


def test_a_diverged_training_stops_with_the_step_and_stores_nothing_complete(store):
    with pytest.raises(UserError, match=r"diverged: the (training|validation) loss is (nan|inf) at step \d+"):
        runs.get_run(presets.get("smoke"), "alibi", "prose", lr=1e30, steps=20, progress=False)
    (row,) = runs.list_runs()
    assert row["status"] == "failed" and "diverged" in row["error"]
    assert not (store / row["key"] / "manifest.json").exists()


@pytest.mark.parametrize("edit", ["ppl", "{}", "null", "[]"])
def test_an_edited_or_damaged_result_is_recomputed_not_trusted(edit, store, capsys):
    from rflens.measure import perplexity

    run = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)
    first = perplexity.perplexity(run, lengths=[16], n=4, progress=False)
    (path,) = (run.path / "results").glob("perplexity*.json")
    if edit == "ppl":
        entry = json.loads(path.read_text())
        entry["result"]["ppl"][0] = 1.0
        path.write_text(json.dumps(entry))
    else:
        path.write_text(edit)
    again = perplexity.perplexity(run, lengths=[16], n=4, progress=False)
    assert again["ppl"] == first["ppl"] and again["ppl"][0] != 1.0
    if edit == "ppl":
        assert "fails its checksum" in capsys.readouterr().err


def test_a_finished_run_holds_only_what_it_needs(store):
    run = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)
    (run.path / "checkpoint-2.pt").write_bytes(b"left by a kill")
    (run.path / ".model.safetensors.123.tmp").write_bytes(b"half")
    again = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)
    assert again.reused and not list(run.path.glob("checkpoint*")) and not list(run.path.glob(".*.tmp"))


@pytest.mark.parametrize("argv, words", [
    (["evaluate", "--scale", "smoke", "--lengths", "16", "--n", "100000000", "--quiet"], "segments"),
    (["bias", "--pos", "alibi", "--length", "100000000"], "bias over"),
    (["train", "--scale", "smoke", "--set", "l_tr=30000", "--quiet"], "training step"),
    (["erf", "--scale", "smoke", "--length", "1000000", "--quiet"], "receptive field"),
])
def test_a_command_that_would_not_fit_in_memory_is_refused_before_it_allocates(argv, words, store, monkeypatch,
                                                                              capsys):
    from rflens.measure import resources

    monkeypatch.setattr(resources, "available_bytes", lambda: 2 * 10**9)  # a 2 GB machine
    line = one_line_error(capsys, *argv)
    assert words in line and "GB" in line


def test_a_training_length_too_long_for_memory_is_refused_before_any_work_that_grows_with_it(store, monkeypatch,
                                                                                         capsys):
    """l_tr = 10^9 once built 4 GB bias tables for minutes (the nan check of the scheme's bias)
    before the memory estimate refused it; the estimate comes first."""
    from rflens.model import positional

    def check_bias(cfg, length, scheme=None):
        raise AssertionError(f"the bias was built over {length} distances before the memory check")

    monkeypatch.setattr(positional, "check_bias", check_bias)
    line = one_line_error(capsys, "train", "--scale", "smoke", "--set", "l_tr=1000000000", "--quiet")
    assert "training step" in line and "GB" in line

@pytest.mark.slow
def test_the_memory_limit_of_the_process_is_honoured(store):
    """Under an address-space limit (``ulimit -v``), a command that would need more is one
    line, not a MemoryError traceback."""
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (12 * 10**9, 12 * 10**9))

    proc = subprocess.run([sys.executable, "-m", "rflens", "bias", "--pos", "alibi", "--length", "1000000000"],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "bias over" in lines[0], proc.stderr


def test_a_full_disk_while_checkpointing_is_one_line_and_the_next_try_is_not_blocked(store, monkeypatch, capsys):
    import torch

    real_save = torch.save

    def full_disk(obj, f, *args, **kwargs):
        f.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 148032 vs 147920")

    monkeypatch.setattr(torch, "save", full_disk)
    line = one_line_error(capsys, "train", "--scale", "smoke", "--quiet", "--set", "steps=12", "--set", "ckpt_interval=5")
    assert "No space left" in line and "checkpoint" in line
    assert not list(store.rglob("*.tmp"))  # the partial file is gone
    monkeypatch.setattr(torch, "save", real_save)
    assert main(["train", "--scale", "smoke", "--quiet", "--set", "steps=12", "--set", "ckpt_interval=5"]) == 0


# ----------------------------------------------------------------------------- bounds, and messages that name the fix

def test_a_learning_rate_past_float32_is_one_line_and_stores_nothing(store, capsys):
    line = one_line_error(capsys, "train", "--scale", "smoke", "--quiet", "--set", "lr=1e308")
    assert line.startswith("error: invalid lr=") and "float32" in line
    assert not store.exists() or not any(store.iterdir())


def test_a_weight_decay_that_flips_the_weights_names_weight_decay_not_the_learning_rate(store, capsys):
    line = one_line_error(capsys, "train", "--scale", "smoke", "--quiet", "--set", "weight_decay=1e308")
    assert "weight_decay" in line and "lower learning rate" not in line
    assert not store.exists() or not any(store.iterdir())


@pytest.mark.parametrize("pair, name", [("slope_shift=-200", "slope_shift"), ("slope_shift=1e308", "slope_shift"),
                                        ("slope_shift=-1e308", "slope_shift"), ("same_slope=1e308", "same_slope"),
                                        ("same_slope=-500", "same_slope")])
def test_alibi_slopes_that_overflow_or_vanish_are_refused_before_anything_is_computed(pair, name, store, capsys):
    line = one_line_error(capsys, "bias", "--pos", "alibi", "--heads", "2", "--length", "4", "--set", pair)
    assert f"invalid {name}=" in line and "64" in line
    assert not capsys.readouterr().out
    line = one_line_error(capsys, "train", "--scale", "smoke", "--quiet", "--set", pair)
    assert name in line and "learning rate" not in line
    assert not store.exists() or not any(store.iterdir())


@pytest.mark.parametrize("pos, pairs, words", [
    ("kerple_log", ["kerple_init=fixed", "kerple_r1=1e308"], "float32"),  # torch cannot even hold it
    ("smoothed", ["smooth_a=1e308"], "float32"),
    ("smoothed", ["smooth_a=3e38"], "inf at head 0, distance 3"),  # finite, but its bias overflows
])
def test_a_bias_that_is_not_finite_names_the_setting(pos, pairs, words, store, capsys):
    name = pairs[-1].split("=")[0]
    sets = [x for pair in pairs for x in ("--set", pair)]
    line = one_line_error(capsys, "bias", "--pos", pos, "--heads", "2", "--length", "4", *sets)
    assert name in line and words in line
    assert not capsys.readouterr().out
    line = one_line_error(capsys, "train", "--scale", "smoke", "--pos", pos, "--quiet", *sets)
    assert name in line
    assert not store.exists() or not any(store.iterdir())


def test_absurd_steps_are_refused_with_the_bound_named(store, capsys):
    from rflens.setup.config import MAX_STEPS

    line = one_line_error(capsys, "train", "--scale", "smoke", "--quiet", "--set", "steps=99999999999999999999")
    assert "steps" in line and f"{MAX_STEPS:,}" in line
    assert not store.exists() or not any(store.iterdir())
    TrainConfig(steps=MAX_STEPS)  # the bound itself is allowed


def test_reproduce_refuses_more_workers_than_cores(monkeypatch, capsys):
    from rflens.publish import parallel

    monkeypatch.setattr(parallel, "default_workers", lambda: 4)
    line = one_line_error(capsys, "reproduce", "--scale", "smoke", "--chapters", "03", "--workers", "1000", "--plan")
    assert "--workers 1000" in line and "4 core" in line


@pytest.mark.parametrize("pair, words", [("d_model=65536", "d_model"), ("n_layer=100000", "n_layer"),
                                         ("vocab_size=100000000", "vocab_size")])
def test_a_memory_refusal_names_the_setting_that_caused_it(pair, words, store, monkeypatch, capsys):
    from rflens.measure import resources

    monkeypatch.setattr(resources, "available_bytes", lambda: 2 * 10**9)
    line = one_line_error(capsys, "train", "--scale", "smoke", "--quiet", "--set", pair)
    fix = line.rsplit(":", 1)[1]
    assert words in fix and "eval_batches" not in fix, line


def test_a_receptive_field_over_too_many_segments_names_n(store, monkeypatch, capsys):
    from rflens.measure import resources

    monkeypatch.setattr(resources, "available_bytes", lambda: 2 * 10**9)
    line = one_line_error(capsys, "erf", "--scale", "smoke", "--quiet", "--n", "100000000")
    assert "--n" in line and "--length" not in line


def test_a_long_value_is_cut_in_the_message(store, capsys):
    line = one_line_error(capsys, "train", "--scale", "smoke", "--quiet", "--set", "corpus=" + "x" * 5000)
    assert len(line) < 400 and "5,002 characters" in line


def test_runs_refuses_a_store_path_that_is_a_file(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    for path in (blocker, blocker / "sub"):
        monkeypatch.setenv("RFLENS_RUNS", str(path))
        for argv in (["runs"], ["runs", "--json"], ["runs", "--clean"]):
            line = one_line_error(capsys, *argv)
            assert "blocker" in line and "RFLENS_RUNS" in line


def test_runs_export_refuses_an_empty_folder_name_and_a_file(store, tmp_path, capsys):
    assert "--export" in one_line_error(capsys, "runs", "--export", "")
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    for target in (blocker, blocker / "sub"):
        line = one_line_error(capsys, "runs", "--export", str(target))
        assert "--export" in line and "RFLENS" not in line


def test_a_killed_training_is_listed_as_interrupted_and_a_live_one_as_in_progress(store, monkeypatch, capsys):
    from rflens.training import trainer as training

    def killed(*args, out_dir, **kwargs):  # a kill -9 after the checkpoint of step 30: no failure mark
        storage.write_json(out_dir / "checkpoint.json", {"step": 30})
        (out_dir / "checkpoint-30.pt").write_bytes(b"state")
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "train", killed)
    with pytest.raises(KeyboardInterrupt):
        runs.get_run(presets.get("smoke"), "alibi", "prose", steps=400, progress=False)
    (row,) = runs.list_runs()
    assert row["status"] == "interrupted (30/400)" and "--set steps=400" in row["resume"]
    assert main(["runs"]) == 0 and "interrupted (30/400)" in capsys.readouterr().out
    with storage.locked(store / f".{row['key']}.lock"):  # a training that holds the lock is alive
        (row,) = runs.list_runs()
        assert row["status"] == "in progress (30/400)"
    assert main(["runs", "--clean"]) == 0  # it has a checkpoint to resume: kept
    assert [r["key"] for r in runs.list_runs()] == [row["key"]]


def test_the_evaluation_estimate_counts_every_allocation_that_grows_with_n(store):
    """Without a ulimit, the estimate is all that stands between --n 100000000 and the kernel's
    out-of-memory killer: it must hold for the segment draw, the NLLs, the bootstrap
    replicates and the cached per-segment NLLs."""
    import tracemalloc

    from rflens.measure import perplexity, resources
    from rflens.measure.intervals import N_BOOTSTRAP

    run = runs.get_run(presets.get("smoke"), "alibi", "prose", steps=3, progress=False)
    n = 20_000
    estimate = resources.evaluation_bytes(n, 16, 1, 8, run.model_cfg)
    assert estimate > 3 * 8 * N_BOOTSTRAP * n  # the bootstrap's resample indices and what they gather
    run.load_model(), run.corpus()  # loaded before measuring: not part of the estimate
    tracemalloc.start()
    try:
        perplexity.perplexity(run, lengths=[16], n=n, progress=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= estimate, (peak, estimate)


def test_an_evaluation_whose_bootstrap_would_not_fit_is_refused(store, monkeypatch, capsys):
    from rflens.measure import resources

    assert resources.evaluation_bytes(10**8, 16, 1, 8, ModelConfig()) > 2.4e12  # before anything runs
    monkeypatch.setattr(resources, "available_bytes", lambda: 24 * 10**9)  # the machine of the report
    line = one_line_error(capsys, "evaluate", "--scale", "smoke", "--lengths", "16", "--n", "100000000", "--quiet")
    assert "segments" in line and "--n" in line


def test_a_length_given_twice_is_one_row_and_an_edited_result_warns_once(store, capsys):
    argv = ["evaluate", "--scale", "smoke", "--set", "steps=3", "--lengths", "16,16", "--n", "4", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lengths"] == [16]
    (path,) = (store / runs.list_runs()[0]["key"] / "results").glob("perplexity*.json")
    entry = json.loads(path.read_text())
    entry["result"]["ppl"][0] = 1.0
    path.write_text(json.dumps(entry))
    assert main(argv) == 0
    captured = capsys.readouterr()
    timing = re.compile(r"[\d.]+ s to compute")  # a recomputation takes its own time
    assert captured.err.count("fails its checksum") == 1 and timing.sub("", captured.out) == timing.sub("", out)


def test_the_claims_help_says_that_it_trains_what_the_store_lacks():
    from rflens.cli import COMMANDS

    assert "stored results" not in COMMANDS["claims"] and "training" in COMMANDS["claims"]


@pytest.mark.parametrize("argv", [["evaluate", "--n", "x"], ["data", "--split-seed", ""], ["bias"], ["nosuch"],
                                  ["runs", "--bogus"]])
def test_a_refusal_of_the_argument_parser_is_one_line_too(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("error:") and "--help" in err[0], err


def test_a_terminal_that_cannot_write_a_character_gets_an_escape_not_a_traceback(store, tmp_path, monkeypatch):
    """Under LC_ALL=C the streams are ASCII: a path with 雪 in it is printed escaped."""
    import io
    import sys

    out, err = io.BytesIO(), io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out, encoding="ascii", errors="strict", write_through=True))
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(err, encoding="ascii", errors="strict", write_through=True))
    assert main(["runs", "--export", str(tmp_path / "x雪")]) == 0
    assert b"x\\u96ea" in out.getvalue() and (tmp_path / "x雪" / "runs.csv").is_file()
    assert main(["evaluate", "--hf", str(tmp_path / "no-model-雪"), "--text", str(tmp_path / "t.txt")]) == 2
    lines = err.getvalue().decode("ascii").strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "no-model-\\u96ea" in lines[0], lines
