"""The long run's commands are bounded, say their cost before starting, and lock their models."""

from __future__ import annotations

import shutil

import pytest

from rflens.cli import main
from rflens.errors import UserError
from rflens.longrun import emergence, plan, recheck

from test_emergence import WSD
from rflens.setup import presets


@pytest.fixture
def no_training(monkeypatch, tmp_path):
    """Record what would be trained or checked instead of doing it."""
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    calls = []
    monkeypatch.setattr(recheck, "check", lambda names, scale="long", **kw: calls.append(("check", names, kw)) or [])
    monkeypatch.setattr(emergence, "run", lambda spec, scale="long", **kw: calls.append(("run", spec.name, kw)) or "x")
    return calls


@pytest.mark.parametrize("argv", [["--check", "999"], ["--check", "41"], ["--check", "0"],
                                  ["--check", "1", "--minutes", "-5"], ["--check", "1", "--minutes", "nan"],
                                  ["--check", "1", "--minutes", "inf"], ["--minutes", "nan"], ["--minutes", "0"],
                                  ["--only", "nope", "--check", "2"]])
def test_check_and_minutes_out_of_bounds_start_nothing(no_training, capsys, argv):
    assert main(["emergence", "--scale", "long-repeated", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("--check" in err or "--minutes" in err), err
    assert no_training == []


def test_check_says_its_cost_first_and_honours_minutes(no_training, capsys):
    assert main(["emergence", "--scale", "long-repeated", "--only", "nope", "--check", "1", "--minutes", "3"]) == 0
    out = capsys.readouterr().out
    assert "hours on one core" in out.splitlines()[0]
    [(kind, names, kw)] = no_training
    assert kind == "check" and names == ["nope"] and kw["deadline"] is not None


def test_a_model_another_process_trains_is_one_line_and_not_trained_twice(tmp_path, monkeypatch, capsys):
    import subprocess
    import sys

    from rflens import data

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setattr(data, "prepare", lambda *a, **k: None)
    monkeypatch.setattr(emergence, "train", lambda *a, **k: pytest.fail("trained a model another process holds"))
    spec = plan.LongModel("alibi", WSD)
    name = spec.name
    lock = tmp_path / "runs" / "emergence" / "smoke" / f".{name}.lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from filelock import FileLock\n"
                               f"with FileLock({str(lock)!r}):\n print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError) as err:
            emergence.run(spec, presets.get("smoke"), progress=False)
    finally:
        holder.kill()
        holder.wait()
    line = str(err.value)
    assert len(line.splitlines()) == 1 and "another process" in line and name in line, line


@pytest.mark.parametrize("damage", ["checkpoint", "points.npz", "points.json"])
def test_a_damaged_emergence_state_names_a_fix_that_works(store, reference, monkeypatch, damage):
    import shutil

    from rflens.store import bundle
    from rflens.training import trainer as training
    from rflens.training.trainer import OutOfTime

    spec = plan.LongModel("alibi", WSD)
    checks = iter(range(100))
    monkeypatch.setattr(training, "_past", lambda deadline: deadline is not None and next(checks) >= 4)
    monkeypatch.setattr(training, "_late", lambda deadline: False)  # the checkpoints alone decide here
    with pytest.raises(OutOfTime):
        emergence.run(spec, presets.get("smoke"), progress=False, deadline=1.0)
    monkeypatch.setattr(training, "_past", lambda deadline: False)
    work = bundle.emergence_state("smoke", spec.name)
    if damage == "checkpoint":
        target = work / training.read_checkpoint_pointer(work)["file"]
    else:
        target = work / damage
    target.write_bytes(b"\0" + target.read_bytes()[1:])
    with pytest.raises(UserError) as err:
        emergence.run(spec, presets.get("smoke"), progress=False)
    line = str(err.value)
    assert len(line.splitlines()) == 1 and "--retrain" not in line and f"remove {work}" in line, line
    shutil.rmtree(work)  # what it advises
    emergence.run(spec, presets.get("smoke"), progress=False)
    assert spec.name in bundle.complete("smoke")


# --- a property-based fuzz of the long run's command (hypothesis): nothing is ever trained ----

FUZZ_SCALES = ["long", "long-repeated", "smoke", "tiny", "nosuch", "", "é"]
FUZZ_JUNK = ["nosuch", "", "é", "NOPE", "nope ", "alibi_slope_shift=99"]
FUZZ_MINUTES = ["nan", "NaN", "inf", "-inf", "-5", "0", "-0", "1e-300", "0.001", "3", "1e308", "abc", "", "１"]
FUZZ_CHECK = ["abc", "", "1.5", "nan", "１", "99999999999999999999999", "-99999999999999999999999"]
NUMBER_WORDS = r"(?<![\w.])[-+]?(nan|inf|infinity)(?![\w])"


def _emergence_argv(st):
    """``emergence`` with a drawn --scale, --only, --check, --minutes, --list and --quiet."""
    names = sorted({s.name for s in plan.models(presets.get("long"))})
    only = st.lists(st.one_of(st.sampled_from(names), st.sampled_from(FUZZ_JUNK)), min_size=0, max_size=3)
    check = st.one_of(st.integers(-3, 45).map(str), st.integers(-2 ** 70, 2 ** 70).map(str), st.sampled_from(FUZZ_CHECK))

    def flag(name, values):
        return st.one_of(st.just([]), values.map(lambda v: [name, v]))

    def concat(*parts):
        return st.tuples(*parts).map(lambda ps: [x for p in ps for x in p])

    return concat(st.just(["emergence"]), flag("--scale", st.sampled_from(FUZZ_SCALES)),
                  st.one_of(st.just([]), only.map(lambda ns: ["--only", *ns])), flag("--check", check),
                  flag("--minutes", st.sampled_from(FUZZ_MINUTES)),
                  st.booleans().map(lambda b: ["--list"] if b else []),
                  st.booleans().map(lambda b: ["--quiet"] if b else []))


def _asked(argv, flag):
    """The values given to ``flag`` (None when it is not given)."""
    if flag not in argv:
        return None
    rest = argv[argv.index(flag) + 1:]
    return rest[:next((i for i, a in enumerate(rest) if a.startswith("--")), len(rest))]


def test_the_long_run_s_command_refuses_in_one_line_or_says_its_cost_before_any_model(monkeypatch, tmp_path):
    """Any combination of the flags: exit 0 (or 1: a check failed) with no non-finite number
    printed, or exit 2 with exactly one line on stderr and nothing started; never a
    traceback, never a model trained or checked before its cost is printed, never more
    models than asked (``--only``, ``--check K``), nothing at all with ``--list``."""
    import contextlib
    import io
    import re

    from hypothesis import HealthCheck, Phase, example, given, settings
    from hypothesis import strategies as st

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    out = io.StringIO()
    calls = []

    def record(kind, names):  # what was printed before this model started
        calls.append((kind, list(names), out.getvalue()))

    monkeypatch.setattr(recheck, "check", lambda names, scale="long", **kw: record("check", names) or [
        {"reproduced": True, "name": n} for n in names])
    monkeypatch.setattr(recheck, "render", lambda row: f"ok {row['name']}")
    monkeypatch.setattr(emergence, "run", lambda spec, scale="long", **kw: record("run", [spec.name]) or "x")

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None, print_blob=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])  # no shrinking: slow
    @given(argv=_emergence_argv(st), empty=st.sampled_from([False, False, False, True]))
    @example(argv=["emergence", "--scale", "long", "--only", "nope", "nope"], empty=False)  # one model, asked twice
    @example(argv=["emergence", "--scale", "long-repeated", "--check", "999"], empty=False)
    @example(argv=["emergence", "--scale", "long-repeated", "--only", "nope", "nope", "--check", "2"], empty=False)
    @example(argv=["emergence", "--scale", "long", "--minutes", "nan"], empty=False)
    @example(argv=["emergence", "--scale", "long-repeated", "--list", "--minutes", "nan"], empty=False)
    @example(argv=["emergence", "--scale", "long-repeated"], empty=True)  # nothing trains into the control
    def property_(argv, empty):
        if empty:  # a reference folder without the bundles
            (tmp_path / "empty").mkdir(exist_ok=True)
            monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "empty"))
        else:
            monkeypatch.delenv("RFLENS_REFERENCE", raising=False)
        calls.clear()
        out.seek(0)
        out.truncate()
        err = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's refusals
                code = exc.code
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        assert "Traceback" not in err.getvalue(), lines[-5:]
        if code == 2:
            assert len(lines) == 1 and lines[0].startswith("error:"), lines
            assert calls == [], calls
            return
        assert code in (0, 1), (code, lines)
        bad = re.findall(NUMBER_WORDS, out.getvalue(), re.IGNORECASE)
        assert not bad, out.getvalue()[-500:]
        if "--list" in argv:
            assert calls == []
            minutes = _asked(argv, "--minutes")
            assert minutes is None or 0 < float(minutes[-1]) < float("inf"), argv  # else refused
        started = [n for _, names, _ in calls for n in names]
        assert not (started and _asked(argv, "--scale") == ["long-repeated"] and _asked(argv, "--check") is None), \
            argv  # the read-only control is never trained into
        assert len(started) == len(set(started)), started  # no model twice
        for kind, names, before in calls:
            assert "hours on one core" in before or "not timed" in before, (kind, names, before)
        only = _asked(argv, "--only")
        if only is not None:
            assert set(started) <= set(only), (started, only)
        if any(kind == "check" for kind, _, _ in calls):
            [(_, names, _)] = calls
            assert len(names) == int(_asked(argv, "--check")[-1]), names

    property_()


FUZZ_EXAMPLES = 25  # and the explicit examples; 150 drawn examples passed when the fuzz was written


def test_adopt_joins_a_workers_finished_models_checked_and_once(tmp_path, monkeypatch, capsys, smoke_long_run):
    from rflens.store import bundle

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "worker"))
    spec = plan.LongModel("alibi", WSD)
    monkeypatch.setattr(plan, "models", lambda scale="long": [spec])  # the plan: this model
    emergence.run(spec, presets.get("smoke"), progress=False)
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    assert main(["emergence", "--scale", "smoke", "--adopt", str(tmp_path / "worker")]) == 0
    assert bundle.complete("smoke") == {spec.name} and "1 model(s) joined" in capsys.readouterr().out
    assert main(["emergence", "--scale", "smoke", "--adopt", str(tmp_path / "worker")]) == 0  # already joined
    assert "0 model(s) joined" in capsys.readouterr().out
    bundle.check("smoke")  # the bundle's manifest lists what joined
    # a damaged model is refused in one line, and nothing joins
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "other"))
    (tmp_path / "worker" / "smoke" / spec.name / "nll.npz").write_bytes(b"damaged")
    assert main(["emergence", "--scale", "smoke", "--adopt", str(tmp_path / "worker")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nll.npz" in err[0] and not bundle.entries("smoke")
    # a file its manifest does not list, or a link (to anywhere), is refused: nothing joins
    (tmp_path / "worker" / "smoke" / spec.name / "nll.npz").unlink()
    shutil.copytree(tmp_path / "reference" / "smoke" / spec.name, tmp_path / "clean")
    for extra in ("notes.txt", "link"):
        folder = tmp_path / "worker" / "smoke" / spec.name
        shutil.rmtree(folder)
        shutil.copytree(tmp_path / "clean", folder)
        if extra == "link":
            (folder / extra).symlink_to(tmp_path / "clean" / "result.json")
        else:
            (folder / extra).write_text("not the model's")
        assert main(["emergence", "--scale", "smoke", "--adopt", str(tmp_path / "worker")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and extra in err[0] and not bundle.entries("smoke"), err
    for argv in (["--adopt", str(tmp_path / "nowhere")], ["--adopt", str(tmp_path / "worker"), "--list"],
                 ["--scale", "long-repeated", "--adopt", str(tmp_path / "worker")]):
        assert main(["emergence", *argv]) == 2, argv
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_adopt_joins_an_unfinished_model_and_replaces_it_by_its_continuation_only(tmp_path, monkeypatch, capsys, smoke_long_run):
    """A worker stopped at its deadline ships the sizes it measured: they join the bundle,
    and the same run trained on to its end replaces them. A finished model is never
    replaced, and a run that does not continue the bundle's sizes is refused in one line."""
    from rflens import storage
    from rflens.store import bundle
    from rflens.training import trainer as training
    from rflens.training.trainer import OutOfTime

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "worker"))
    spec = plan.LongModel("alibi", WSD)
    monkeypatch.setattr(plan, "models", lambda scale="long": [spec])
    checks = iter(range(100))
    monkeypatch.setattr(training, "_past", lambda deadline: deadline is not None and next(checks) >= 4)
    monkeypatch.setattr(training, "_late", lambda deadline: False)  # the checkpoints alone decide here
    with pytest.raises(OutOfTime):
        emergence.run(spec, presets.get("smoke"), progress=False, deadline=1.0)
    worker = tmp_path / "worker" / "smoke" / spec.name
    early = bundle.read_result(worker)
    assert not early["complete"] and 0 < len(early["points"]) < len(plan.measured_steps(presets.get("smoke"), _train_cfg(spec)))
    adopt = ["emergence", "--scale", "smoke", "--adopt", str(tmp_path / "worker")]
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    assert main(adopt) == 0 and "unfinished" in capsys.readouterr().out
    assert set(bundle.entries("smoke")) == {spec.name} and bundle.complete("smoke") == set()
    assert main(adopt) == 0 and "0 model(s) joined" in capsys.readouterr().out  # no further along: nothing
    shutil.copytree(worker, tmp_path / "stopped")
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "worker"))
    monkeypatch.setattr(training, "_past", lambda deadline: False)
    emergence.run(spec, presets.get("smoke"), progress=False)  # resumed from the kept state to its end
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    assert main(adopt) == 0 and "(finished)" in capsys.readouterr().out
    assert bundle.complete("smoke") == {spec.name}
    assert bundle.read_result(bundle.entries("smoke")[spec.name])["points"][:len(early["points"])] == early["points"]
    bundle.check("smoke")
    assert not [p for p in (tmp_path / "reference" / "smoke").iterdir() if p.name.startswith(".")]
    assert main(adopt) == 0 and "0 model(s) joined" in capsys.readouterr().out  # a finished model stays
    # the bundle unfinished again, and a worker's run that changed its first size: refused, nothing replaced
    shutil.rmtree(tmp_path / "reference" / "smoke" / spec.name)
    shutil.copytree(tmp_path / "stopped", tmp_path / "reference" / "smoke" / spec.name)
    bundle.seal("smoke")
    result = bundle.read_result(worker)
    result["points"][0] = {**result["points"][0], "erf": result["points"][0]["erf"] + 1}
    storage.write_json(worker / bundle.RESULT, result, newline=True)
    listed = storage.read_json(worker / bundle.MANIFEST)
    listed["sha256"][bundle.RESULT] = storage.sha256_file(worker / bundle.RESULT)
    storage.write_json(worker / bundle.MANIFEST, listed, newline=True)
    assert main(adopt) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "neither continues it" in err[0], err
    assert bundle.complete("smoke") == set() and bundle.read_result(bundle.entries("smoke")[spec.name]) == early


def _train_cfg(spec):
    from rflens.setup.settings import resolve

    return resolve(presets.get("smoke"), spec.pos, spec.corpus, spec.settings())[3]


def test_adopt_refuses_a_model_under_a_name_whose_settings_it_does_not_have(tmp_path, monkeypatch, capsys, smoke_long_run):
    """A worker's folder renamed (or its result.json's name edited with a manifest to match)
    would join the bundle as another model of the plan: refused in one line, nothing joins."""
    from rflens import storage
    from rflens.store import bundle

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "worker"))
    spec, planned = plan.LongModel("alibi", WSD), plan.LongModel("alibi", (*WSD, ("slope_shift", 1)))
    monkeypatch.setattr(plan, "models", lambda scale="long": [spec, planned])  # the plan: these two
    emergence.run(spec, presets.get("smoke"), progress=False)
    other = planned.name
    top = tmp_path / "worker" / "smoke"
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    shutil.move(top / spec.name, top / other)  # renamed: the folder and the result disagree
    assert main(["emergence", "--scale", "smoke", "--adopt", str(tmp_path / "worker")]) == 2
    assert "joins under its own name" in capsys.readouterr().err and not bundle.entries("smoke")
    folder = top / other  # forged: the result renamed, its checksum made to match
    result = storage.read_json(folder / bundle.RESULT)
    storage.write_json(folder / bundle.RESULT, {**result, "name": other}, newline=True)
    listed = storage.read_json(folder / bundle.MANIFEST)
    listed["sha256"][bundle.RESULT] = storage.sha256_file(folder / bundle.RESULT)
    storage.write_json(folder / bundle.MANIFEST, listed, newline=True)
    assert main(["emergence", "--scale", "smoke", "--adopt", str(tmp_path / "worker")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not that model's in the smoke plan" in err[0] and not bundle.entries("smoke")
    result = storage.read_json(top / other / bundle.RESULT)  # its own name again, one measured size dropped
    storage.write_json(folder / bundle.RESULT, {**result, "name": spec.name, "points": result["points"][:-1]},
                       newline=True)
    listed["sha256"][bundle.RESULT] = storage.sha256_file(folder / bundle.RESULT)
    storage.write_json(folder / bundle.MANIFEST, listed, newline=True)
    shutil.move(folder, top / spec.name)
    assert main(["emergence", "--scale", "smoke", "--adopt", str(tmp_path / "worker")]) == 2
    assert "its measured sizes are not the plan's" in capsys.readouterr().err and not bundle.entries("smoke")



def test_a_check_kept_with_more_joins_in_place_of_the_shipped_model(tmp_path, monkeypatch, capsys, smoke_long_run):
    """`emergence --check 1 --keep DIR` retrains a shipped model to the bit with its weights (and, for
    a Table 2 model, its NLLs on every test document); `--adopt DIR` puts that copy in its place, once."""
    from rflens.store import bundle

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    spec = plan.LongModel("alibi", WSD)
    monkeypatch.setattr(plan, "models", lambda scale="long": [spec])
    emergence.run(spec, presets.get("smoke"), progress=False, keep_weights=False)
    shipped = bundle.bundle_dir("smoke") / spec.name
    assert not (shipped / bundle.WEIGHTS).is_file()
    monkeypatch.setattr(emergence, "every_document_lengths", lambda run, s: [16, 32])  # as Table 2's models are
    assert main(["emergence", "--scale", "smoke", "--check", "1", "--keep", str(tmp_path / "keep"), "--quiet"]) == 0
    assert "reproduced" in capsys.readouterr().out
    adopt = ["emergence", "--scale", "smoke", "--adopt", str(tmp_path / "keep")]
    assert main(adopt) == 0 and "retrained to the bit, with more kept" in capsys.readouterr().out
    assert (shipped / bundle.WEIGHTS).is_file() and "every_document" in bundle.read_result(shipped)["points"][-1]
    assert main(adopt) == 0 and "0 model(s) joined" in capsys.readouterr().out  # joined already: nothing
