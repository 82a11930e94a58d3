"""A property-based fuzz of the command line (``hypothesis``): every command's flags and every
setting of every settings class (``--set key=value``), given wrong types, signs, magnitudes,
non-finite, huge, empty and unicode values. Each call either succeeds (exit 0) with only
finite numbers in its output, or refuses (exit 2) in at most three lines on stderr with no
traceback, within a bounded time and memory.

The commands run in a child process (this file, run as a script) under an address-space
limit and a wall-clock timeout; inside it hypothesis draws argument lists and calls
``rflens.cli.main`` in-process, so the imports are paid once. The child exits non-zero with
the falsifying example when the property fails.

Kept cheap: the smoke scale only, a temporary run store, no command that trains more than a
few smoke steps (``--set steps`` is small or refused), ``reproduce`` only with ``--plan`` and
chapters that need no model, ``emergence`` only with ``--list``, ``claims`` only with a scale
it refuses (with a valid one it trains the scoreboard's models), never ``explore``.

A second run (``inputs``) draws what the measuring commands read from files: Hugging Face
model folders (tiny random ones, and copies whose config.json is edited or is not an
object), ``--text`` files of drawn bytes or text, ``--schemes`` files whose bias fails, is
not finite beyond some length, is not a float tensor or raises, and cached results edited
with a matching checksum; ``evaluate``, ``erf``, ``train`` and ``bias`` run on them under
the same property.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

MEMORY_LIMIT = 4 << 30  # bytes of address space the child may map
TIMEOUT = 240  # seconds for the whole child (it takes well under 90 on one core)
PER_CALL = 30  # seconds one command may take before it counts as a hang
MAX_EXAMPLES = 150
MAX_INPUT_EXAMPLES = 150  # the file inputs: each loads a model or trains a smoke one
INPUTS_TIMEOUT = 600


@pytest.mark.slow
def test_every_command_line_succeeds_with_finite_numbers_or_refuses_in_a_few_lines(tmp_path):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    env = {**os.environ, "RFLENS_RUNS": str(tmp_path / "runs"), "RFLENS_DATA": str(tmp_path / "data"),
           "PYTHONHASHSEED": "0"}
    env.pop("RFLENS_SCHEMES", None)
    work = tmp_path / "cwd"  # relative paths (runs --export DIR) land here, not in the repository
    work.mkdir()
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__)], cwd=work, env=env, preexec_fn=limit,
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the fuzz ran past {TIMEOUT} s:\n{(exc.stdout or '')[-3000:]}\n{(exc.stderr or '')[-3000:]}")
    assert proc.returncode == 0, f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    assert f"checked {MAX_EXAMPLES}" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.slow
def test_every_file_a_measurement_reads_gives_finite_numbers_or_a_few_lines(tmp_path):
    """--hf folders, --text files, --schemes files and stored results, drawn (see ``inputs``)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    env = {**os.environ, "RFLENS_RUNS": str(tmp_path / "runs"), "RFLENS_DATA": str(tmp_path / "data"),
           "PYTHONHASHSEED": "0", "HF_HUB_OFFLINE": "1", "RFLENS_FUZZ_FILES": str(tmp_path / "files")}
    env.pop("RFLENS_SCHEMES", None)
    work = tmp_path / "cwd"
    work.mkdir()
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "inputs"], cwd=work, env=env,
                              preexec_fn=limit, capture_output=True, text=True, timeout=INPUTS_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the fuzz ran past {INPUTS_TIMEOUT} s:\n{(exc.stdout or '')[-3000:]}\n{(exc.stderr or '')[-3000:]}")
    assert proc.returncode == 0, f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    assert f"checked {MAX_INPUT_EXAMPLES}" in proc.stdout, proc.stdout[-2000:]


# --- the child: strategies and the property ------------------------------------------------

EDGE = ["", " ", "nan", "NaN", "inf", "-inf", "+inf", "1e308", "-1e308", "1e-320", "0", "-0", "-1", "1", "2", "3",
        "0.5", "-0.5", "2.0", "1e3", "16", "100000000000000000000", "-100000000000000000000", "4294967296",
        "abc", "None", "null", "true", "false", "0x10", "1_0", "١٢", "１６", "é", "🙂", "1,2", ",", "a=b",
        "x" * 300]


def _values(st):
    return st.one_of(
        st.sampled_from(EDGE),
        st.integers(1, 40).map(str),
        st.integers(-3, 40).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(max_size=6),
    )


def _field_values(st, section, name):
    """Values for one setting. Those whose valid values only take long are drawn so that the
    valid ones are small: the number of training steps, the size of the corpus prefix,
    ``compile`` (torch.compile), and the evaluation's sizes."""
    if name == "steps":
        return st.sampled_from(["1", "2", "3", "0", "-1", "nan", "1e308", "2.5", "", "abc",
                                "100000000000000000000", "１"])
    if name == "max_bytes":  # a valid large prefix builds the whole corpus's tokenizer
        return st.sampled_from(["0", "-1", "nan", "", "None", "abc", "1e308", "2.0", "1", "100", "200000"])
    if name == "compile":  # true: torch.compile, valid but slow
        return st.sampled_from(["false", "0", "no", "off", "maybe", "", "2", "nan", "ｔrue"])
    if section == "eval" and name in ("n_segments", "erf_samples", "erf_length_mult", "batch_size"):
        return st.one_of(st.sampled_from(["0", "-1", "nan", "", "1e3", "abc", "100000000000000000000"]),
                         st.integers(1, 8).map(str))
    if section == "data" and name in ("source", "hub_name", "files"):
        return st.sampled_from(["", "hub", "files", "embedded", "nosuch", "é", "/nonexistent/x.txt", "None"])
    if section == "data" and name == "corpus":
        return st.sampled_from(["", "prose", "code", "math", "nosuch", "é"])
    return _values(st)


def _set_pairs(st, sections=None):
    from rflens.setup.config import SETTINGS

    keys = []
    for section, cls in SETTINGS.items():
        if sections and section not in sections:
            continue
        for f in dataclasses.fields(cls):
            keys.append((section, f.name))
    pair = st.sampled_from(keys).flatmap(lambda k: st.tuples(
        st.sampled_from([k[1], f"{k[0]}.{k[1]}", f" {k[1]} "]), _field_values(st, *k)).map(lambda t: f"{t[0]}={t[1]}"))
    junk = st.sampled_from(["", "=", "=1", "steps", "nosuch=1", "model.=1", "nosuch.window=1", "model.steps=2",
                            "é=1", "window==3", "train.steps.x=1"])
    return st.lists(st.one_of(pair, pair, pair, junk), max_size=3)


def _flag(st, name, values):
    return st.one_of(st.just([]), values.map(lambda v: [name, v]))


def _sets(pairs):
    return [x for p in pairs for x in ("--set", p)]


def _strategies():
    from hypothesis import strategies as st

    from rflens.setup.schemes import TABLE

    schemes = sorted(TABLE)
    pos = st.one_of(st.sampled_from(schemes), st.sampled_from(["", "nosuch", "ALIBI", "é", "window"]))
    ints = st.one_of(st.integers(-3, 40).map(str), st.sampled_from(["", "nan", "1e3", "abc", "100000000000000000000",
                                                                      "-100000000000000000000", "１６", "4294967296"]))
    small_n = st.one_of(st.integers(-2, 4).map(str), st.sampled_from(["", "nan", "abc", "100000000000000000000"]))
    corpus = st.sampled_from(["prose", "code", "math", "", "all", "nosuch", "é"])

    def opt(name):
        return st.booleans().map(lambda b: [name] if b else [])

    def concat(*parts):
        return st.tuples(*parts).map(lambda ps: [x for p in ps for x in p])

    train_like = lambda: concat(  # noqa: E731
        st.just(["--scale", "smoke", "--quiet", "--set", "steps=2"]),
        _flag(st, "--pos", pos), _flag(st, "--corpus", corpus), _set_pairs(st).map(_sets), opt("--json"))
    hf = st.one_of(st.just([]), st.just([]), st.just([]), st.sampled_from([["--hf", "/nonexistent/model"], ["--hf", ""],
                                                 ["--text", "/nonexistent.txt"], ["--revision", "main"]]))
    lengths = st.one_of(st.lists(st.integers(1, 64).map(str), min_size=1, max_size=3).map(",".join), st.lists(st.integers(-2, 64).map(str), min_size=1, max_size=3).map(",".join),
                        st.sampled_from(["", ",", "16,16", "nan", "1e3", "abc", "100000000000000000000", "１６"]))
    threshold = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                          st.sampled_from(["", "abc", "0.5", "1", "0"]))

    commands = {
        "bias": concat(st.just(["bias"]), pos.map(lambda p: ["--pos", p]), _flag(st, "--heads", ints),
                       _flag(st, "--length", ints), _set_pairs(st, ("model",)).map(_sets), opt("--json")),
        "data": concat(st.just(["data", "--scale", "smoke", "--quiet"]), _flag(st, "--corpus", corpus),
                       _flag(st, "--source", st.sampled_from(["embedded", "files", "", "nosuch"])),
                       st.one_of(st.just([]), st.just(["--files", "/nonexistent/a.txt"]), st.just(["--files"])),
                       _flag(st, "--vocab-size", ints), _flag(st, "--max-bytes", ints),
                       _flag(st, "--split-seed", ints), opt("--json")),
        "train": concat(st.just(["train"]), train_like(), opt("--retrain")),
        "runs": concat(st.just(["runs"]), opt("--json"), opt("--clean"),
                       _flag(st, "--export", st.sampled_from(["", "out", "é/out", "/nonexistent/deep/x",
                                                              "/dev/null", "."]))),
        "evaluate": concat(st.just(["evaluate"]), train_like(), _flag(st, "--lengths", lengths),
                           _flag(st, "--protocol", st.sampled_from(["last_token", "non_overlapping", "sliding", "",
                                                                    "nosuch"])),
                           st.one_of(small_n, st.integers(1, 3).map(str)).map(lambda n: ["--n", n]), hf),
        "erf": concat(st.just(["erf"]), train_like(), _flag(st, "--length", ints),
                      st.one_of(small_n, st.integers(1, 3).map(str)).map(lambda n: ["--n", n]),
                      _flag(st, "--threshold", threshold), hf),
        "reproduce": concat(st.just(["reproduce", "--plan", "--quiet"]),
                            st.sampled_from([["--scale", "smoke"], ["--scale", "nosuch"], ["--scale", ""]]),
                            st.sampled_from(["01", "1", "07", "", ",", "99", "abc", "01,01", "١"]).map(
                                lambda c: ["--chapters", c]),
                            _flag(st, "--corpus", corpus),
                            st.lists(st.sampled_from(["progress=maybe", "nosuch=1", "", "=", "scale=7", "n_head=0",
                                                      "progress=false"]), max_size=2).map(
                                lambda ps: [x for p in ps for x in ("-p", p)]),
                            _flag(st, "--workers", ints), _flag(st, "--executor", st.sampled_from(
                                ["processes", "local", "slurm", "nosuch"])),
                            _flag(st, "--gpus-per-job", ints), _flag(st, "--time-limit", ints),
                            _flag(st, "--max-jobs", ints), opt("--no-build")),
        # the settings alone, every other flag valid: so that more of the calls measure and print
        "evaluate --set": concat(st.just(["evaluate", "--scale", "smoke", "--quiet", "--set", "steps=2", "--n", "2",
                                          "--lengths", "16,32"]), _set_pairs(st).map(_sets), opt("--json")),
        "erf --set": concat(st.just(["erf", "--scale", "smoke", "--quiet", "--set", "steps=2", "--n", "2"]),
                            _set_pairs(st).map(_sets), opt("--json")),
        "claims": concat(st.just(["claims"]), st.sampled_from(["nosuch", "", "é", "smoke!"]).map(
            lambda s: ["--scale", s]), _flag(st, "--corpus", corpus), opt("--json")),
        "emergence": concat(st.just(["emergence", "--list", "--quiet"]),
                            _flag(st, "--scale", st.sampled_from(["long", "smoke", "nosuch", ""])),
                            _flag(st, "--only", st.sampled_from(["nope", "nosuch", "", "é"])),
                            _flag(st, "--minutes", threshold)),
    }
    schemes_flag = st.one_of(st.just([]), st.just([]), st.just([]),
                             st.sampled_from([["--schemes", "/nonexistent/s.py"], ["--schemes", ""]]))
    weights = {"bias": 3, "train": 3, "evaluate": 4, "erf": 4, "data": 1, "runs": 1, "reproduce": 1, "claims": 1,
               "emergence": 1, "evaluate --set": 4, "erf --set": 4}  # the commands with the most settings and numbers, more often
    command = st.sampled_from(sorted(n for n in commands for _ in range(weights[n]))).flatmap(lambda name: commands[name])
    return concat(schemes_flag, command)


class Hang(BaseException):
    pass


NUMBER_WORDS = r"(?<![\w.])[-+]?(nan|inf|infinity)(?![\w])"


TALLY: dict[tuple[str, int], int] = {}


def check(argv: list[str]) -> None:
    import contextlib
    import io
    import re
    import signal

    from rflens.cli import COMMANDS, main

    out, err = io.StringIO(), io.StringIO()

    def hang(signum, frame):
        raise Hang(f"{argv} ran past {PER_CALL} s")

    signal.signal(signal.SIGALRM, hang)
    signal.alarm(PER_CALL)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        signal.alarm(0)
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    command = next((a for a in argv if a in COMMANDS), "?")
    TALLY[command, code] = TALLY.get((command, code), 0) + 1
    assert code in (0, 2), (code, lines[-5:])
    assert "Traceback" not in err.getvalue(), lines[-5:]
    if code == 2:
        assert 1 <= len(lines) <= 3, lines
        assert all(len(ln) <= 1000 for ln in lines), [ln[:200] for ln in lines]
    else:
        text = out.getvalue()
        if argv[argv.index("bias") if "bias" in argv else 0:][:1] == ["bias"]:
            text = re.sub(r"(?<![\w.])-inf(?![\w])", "", text)  # masked distances beyond a window
        bad = [m.group(0) for m in re.finditer(NUMBER_WORDS, text, re.IGNORECASE)]
        assert not bad, (bad[:3], text[-500:])


def fuzz() -> None:
    from hypothesis import HealthCheck, given, settings

    count = [0]

    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(argv=_strategies())
    def property_(argv):
        count[0] += 1
        check(argv)

    property_()
    print(f"checked {MAX_EXAMPLES} examples ({count[0]} calls); command, exit: calls")
    for (command, code), n in sorted(TALLY.items()):
        print(f"  {command:10} {code}: {n}")


# --- the second child: the files the measuring commands read ------------------------------

# scheme files: (name, body of bias(distance, n_head)); fine at 8 positions, most of them not beyond
SCHEME_BODIES = {
    "fz_fine": "return (-0.5 * distance).expand(n_head, -1)",
    "fz_nan_beyond": "out = (-0.5 * distance).expand(n_head, -1).clone()\nout[:, 20:] = float('nan')\nreturn out",
    "fz_inf_at_0": "out = (-distance).expand(n_head, -1).clone()\nout[:, 0] = float('-inf')\nreturn out",
    "fz_shape": "return (-distance[:8]).expand(n_head, -1)",
    "fz_int": "return (-distance.long()).expand(n_head, -1)",
    "fz_meta": "return torch.zeros(n_head, distance.numel(), device='meta')",
    "fz_base": "if distance.numel() > 10:\n    raise BaseException('boom')\nreturn (-distance).expand(n_head, -1)",
    "fz_exit": "if distance.numel() == 16:\n    raise SystemExit(0)\nreturn (-distance).expand(n_head, -1)",
    "fz_list": "return [[0.0] * distance.numel()] * n_head",
    "fz_huge": "return (-1e38 * distance * distance).expand(n_head, -1)",
}
ODD_JSON = [None, True, False, 0, -1, 1, 2, 2.5, 1e308, 10 ** 30, "", "1024", "gpt2", [], {}, [1, 2], "é"]


def _input_files(root) -> dict:
    """The files the strategies pick from, written once."""
    from pathlib import Path

    from rflens import hf

    root = Path(root)
    files = {"models": {k: str(v) for k, v in hf.tiny_random_models(root / "hf").items()}, "schemes": {}}
    for name, body in SCHEME_BODIES.items():
        path = root / "schemes" / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = "\n".join("    " + ln for ln in body.splitlines())
        path.write_text(f"import torch\nimport rflens\n\n\n@rflens.register_scheme({name!r})\n"
                        f"def {name}(distance, n_head):\n{lines}\n")
        files["schemes"][name] = str(path)
    bad = root / "schemes" / "fz_syntax.py"
    bad.write_text("def (:\n")
    files["schemes"]["fz_syntax"] = str(bad)
    return files


def _edited_model(root, model: str, edit) -> str:
    """A copy of a tiny model folder with config.json edited (``edit``: (field, value), or a
    whole JSON document that is not an object)."""
    import json
    import shutil
    import uuid
    from pathlib import Path

    dest = Path(root) / "edited" / uuid.uuid4().hex[:12]
    shutil.copytree(model, dest)
    if isinstance(edit, tuple):
        config = json.loads((dest / "config.json").read_text())
        field, value = edit
        config[field] = value
        (dest / "config.json").write_text(json.dumps(config))
    else:
        (dest / "config.json").write_text(json.dumps(edit))
    return str(dest)


def _input_strategies(files: dict, root):
    from hypothesis import strategies as st

    model = st.sampled_from(sorted(files["models"].values()))
    edit = st.one_of(st.tuples(st.sampled_from(["n_positions", "max_position_embeddings", "vocab_size",
                                                 "model_type", "n_head", "n_layer", "eos_token_id"]),
                               st.sampled_from(ODD_JSON)),
                     st.sampled_from([[1, 2], "x", 7, None]))
    hf_path = st.one_of(model, model, st.tuples(model, edit).map(lambda t: _edited_model(root, *t)))
    content = st.one_of(st.binary(max_size=400), st.text(max_size=400),
                        st.lists(st.sampled_from("a window of tokens and the next one".split()), max_size=300).map(
                            " ".join))
    counter = [0]

    def text_file(data):
        from pathlib import Path

        counter[0] += 1
        path = Path(root) / "texts" / f"t{counter[0]}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
        return str(path)

    text = st.one_of(st.just([]), content.map(lambda c: ["--text", text_file(c)]),
                     st.sampled_from([["--text", "/nonexistent.txt"], ["--text", "/dev/null"], ["--text", str(root)]]))
    lengths = st.one_of(st.lists(st.integers(2, 40).map(str), min_size=1, max_size=3).map(",".join),
                        st.sampled_from(["16,2000", "1000,1024", "1025", "16,16"]))
    n = st.one_of(st.integers(1, 6), st.just(64)).map(str)
    opt = lambda name: st.booleans().map(lambda b: [name] if b else [])  # noqa: E731

    def concat(*parts):
        return st.tuples(*parts).map(lambda ps: [x for p in ps for x in p])

    common = st.just(["--scale", "smoke", "--quiet"])
    hf_eval = concat(st.just(["evaluate"]), common, hf_path.map(lambda p: ["--hf", p]), text,
                     lengths.map(lambda v: ["--lengths", v]), n.map(lambda v: ["--n", v]), opt("--json"),
                     st.sampled_from([[], [], ["--revision", "main"]]))
    hf_erf = concat(st.just(["erf"]), common, hf_path.map(lambda p: ["--hf", p]), text,
                    st.integers(1, 40).map(lambda v: ["--length", str(v)]), st.integers(1, 4).map(lambda v: ["--n", str(v)]),
                    opt("--json"))
    scheme = st.sampled_from(sorted(files["schemes"]))
    own = scheme.flatmap(lambda name: concat(
        st.just(["--schemes", files["schemes"][name]]),
        st.sampled_from([
            ["train", "--scale", "smoke", "--quiet", "--set", "steps=2", "--pos", name],
            ["evaluate", "--scale", "smoke", "--quiet", "--set", "steps=2", "--pos", name, "--n", "2"],
            ["evaluate", "--scale", "smoke", "--quiet", "--set", "steps=2", "--pos", name, "--n", "2",
             "--lengths", "16,64"],
            ["erf", "--scale", "smoke", "--quiet", "--set", "steps=2", "--pos", name, "--n", "2", "--length", "40"],
            ["bias", "--pos", name, "--heads", "2", "--length", "30"],
            ["bias", "--pos", name, "--heads", "2", "--length", "8", "--json"],
        ])))
    return st.one_of(hf_eval, hf_erf, own, own)


def _tamper_one(store, data) -> None:
    """Now and then, edit one field of one cached result and write its matching checksum."""
    import json
    from pathlib import Path

    from rflens.storage import _digest

    entries = sorted(Path(store).rglob("*.json"))
    entries = [e for e in entries if e.name.startswith(("perplexity", "input_gradients"))]
    if not entries or data is None:
        return
    path, field, value = entries[data[0] % len(entries)], data[1], data[2]
    try:
        entry = json.loads(path.read_text())
        entry["result"][field] = value
        entry["sha256"] = _digest(entry["result"])
        path.write_text(json.dumps(entry))
    except (OSError, ValueError, KeyError, TypeError):
        pass


def fuzz_inputs() -> None:
    import tempfile

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    root = os.environ.get("RFLENS_FUZZ_FILES") or tempfile.mkdtemp(prefix="rflens-fuzz-")
    files = _input_files(root)
    count = [0]
    tampering = st.one_of(st.none(), st.none(), st.tuples(
        st.integers(0, 50), st.sampled_from(["ppl", "ci_low", "nll", "lengths", "tokens", "normalized", "seconds",
                                             "segment_ends", "n"]),
        st.sampled_from([None, "x", [], [1.0], [float("nan")] * 2, 1e400, -1, [2.0, 3.0], {"a": 1}])))

    @settings(max_examples=MAX_INPUT_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(argv=_input_strategies(files, root), tamper=tampering)
    def property_(argv, tamper):
        count[0] += 1
        _tamper_one(os.environ["RFLENS_RUNS"], tamper)
        check(argv)

    property_()
    print(f"checked {MAX_INPUT_EXAMPLES} examples ({count[0]} calls); command, exit: calls")
    for (command, code), n in sorted(TALLY.items()):
        print(f"  {command:10} {code}: {n}")


if __name__ == "__main__":
    if sys.argv[1:] == ["inputs"]:
        fuzz_inputs()
    else:
        fuzz()
