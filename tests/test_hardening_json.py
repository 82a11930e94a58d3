"""Every JSON file rflens reads goes through :func:`rflens.storage.read_json`, which refuses in
one line naming the file what would otherwise end in a traceback far from it: arrays or
objects nested deeper than the parser's stack (RecursionError), a number no float holds
(``1e400``, read as infinity, then an OverflowError at ``int``), and NaN or an infinity where
counts and sizes are read. And ``runs --export`` refuses, before it writes anything, a folder
whose name is not UTF-8 (which the CSV files cannot record)."""

from __future__ import annotations

import json
import math
import os
import shutil

import pytest
from hypothesis import example, given, HealthCheck, settings, strategies as st

from rflens import storage
from rflens.cli import main
from rflens.errors import UserError
from rflens.store import bundle

FAST = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _nested(depth: int, kind: str) -> str:
    opening, closing = ("[", "]") if kind == "array" else ('{"a": ', "}")
    return opening * depth + "1" + closing * depth


def _refused(call, path) -> str:
    with pytest.raises(UserError) as err:
        call()
    assert isinstance(err.value, ValueError)  # readers that take an unreadable file for a damaged one still do
    line = str(err.value)
    assert len(line.splitlines()) == 1 and str(path) in line, line
    return line


@FAST
@given(depth=st.integers(1, 3000), kind=st.sampled_from(["array", "object"]))
@example(depth=200_000, kind="array")
@example(depth=200_000, kind="object")
@example(depth=storage.MAX_JSON_DEPTH, kind="array")
@example(depth=storage.MAX_JSON_DEPTH + 1, kind="object")
def test_a_file_nested_past_the_limit_is_one_line_naming_it(tmp_path, depth, kind):
    path = tmp_path / "manifest.json"
    path.write_text(_nested(depth, kind))
    if depth <= storage.MAX_JSON_DEPTH:
        assert json.dumps(storage.read_json(path)) == json.dumps(json.loads(_nested(depth, kind)))
        return
    for read in (storage.read_json, storage.read_json_cached):
        assert "nests deeper" in _refused(lambda: read(path), path)


@FAST
@given(mantissa=st.integers(1, 99), exponent=st.integers(-400, 400), sign=st.sampled_from(["", "-"]),
       digits=st.integers(1, 420), where=st.sampled_from(["float", "int", "string"]))
def test_a_number_beyond_a_floats_range_is_one_line_naming_the_file(tmp_path, mantissa, exponent, sign, digits, where):
    path = tmp_path / "points.json"
    text = {"float": f"{sign}{mantissa}e{exponent}", "int": sign + "9" * digits,
            "string": json.dumps(f"{mantissa}e{exponent} " + "9" * digits)}[where]  # inside a string: only text
    path.write_text(f'[{{"steps": {text}}}]')
    value = json.loads(text)
    held = {"string": True, "float": where == "float" and math.isfinite(float(text)),
            "int": where == "int" and abs(int(text)) < 2 ** 1024}[where]
    if held:
        assert storage.read_json(path) == [{"steps": value}]
    else:
        assert "beyond a float's range" in _refused(lambda: storage.read_json(path), path)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinities_are_refused_where_counts_are_read_and_kept_in_a_cache(tmp_path, constant):
    path = tmp_path / "checkpoint.json"
    path.write_text(f'{{"step": {constant}}}')
    assert "not a finite number" in _refused(lambda: storage.read_json(path), path)
    assert math.isnan(storage.read_json(path, finite=False)["step"]) or constant != "NaN"  # a computed result's


def test_a_cached_result_holding_nan_is_read_back_not_computed_again(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"r": float("nan")}

    for _ in range(2):
        result, _ = storage.cached_file(tmp_path / "r.json", "r", {"a": 1}, compute)
        assert math.isnan(result["r"])
    assert len(calls) == 1


@pytest.mark.parametrize("text", ["[{\"steps\": 1e400}]", "[{\"steps\": Infinity}]"])
def test_a_kept_state_with_a_number_no_float_holds_reads_as_none(store, text):
    from rflens.store.shipped import kept
    from rflens.training.trainer import CHECKPOINT_POINTER

    work = bundle.emergence_state("deep", "nope")
    work.mkdir(parents=True)
    (work / bundle.KEPT_POINTS).write_text(text)
    assert kept("deep", "nope") == (0, frozenset())  # not an OverflowError: the run starts again
    (work / bundle.KEPT_POINTS).unlink()
    (work / CHECKPOINT_POINTER).write_text('{"step": 1e400}')
    assert kept("deep", "nope") == (0, frozenset())


@pytest.fixture
def deep_copy(tmp_path, monkeypatch):
    """A copy of the shipped deep bundle (hard links), the variable RFLENS_REFERENCE at it."""
    if not bundle.entries("deep"):
        pytest.skip("no shipped deep bundle in this checkout")
    top = tmp_path / "reference" / "deep"
    shutil.copytree(bundle.bundle_dir("deep"), top, copy_function=os.link)
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    return top


def _replace(path, text: str) -> None:
    path.unlink()  # a file of this copy only: the shipped one keeps its link
    path.write_text(text)


@pytest.mark.parametrize("which", ["bundle manifest", "model manifest", "result"])
def test_a_shipped_file_nested_200000_deep_is_one_line(deep_copy, capsys, which):
    name = sorted(bundle.entries("deep"))[0]
    path = {"bundle manifest": deep_copy / bundle.MANIFEST, "model manifest": deep_copy / name / bundle.MANIFEST,
            "result": deep_copy / name / bundle.RESULT}[which]
    _replace(path, _nested(200_000, "array"))
    if which == "result":  # vouched for by both manifests: only what the reader makes of it is left
        listed = storage.read_json(deep_copy / name / bundle.MANIFEST)
        listed["sha256"][bundle.RESULT] = storage.sha256_file(path)
        storage.write_json(deep_copy / name / bundle.MANIFEST, listed, newline=True)
        bundle.seal("deep")
    assert main(["emergence", "--scale", "deep", "--list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged" in err[0], err


@pytest.mark.parametrize("where", ["RFLENS_RUNS", "--export"])
def test_an_export_with_a_folder_name_that_is_not_utf8_writes_nothing(tmp_path, monkeypatch, capsys, where):
    bad = os.fsdecode(os.fsencode(str(tmp_path)) + b"/name\xff")
    runs, target = (bad, str(tmp_path / "out")) if where == "RFLENS_RUNS" else (str(tmp_path / "runs"), bad)
    monkeypatch.setenv("RFLENS_RUNS", runs)
    (tmp_path / "reference").mkdir()
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    assert main(["runs", "--export", target]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and where in err[0] and "UTF-8" in err[0] and "\\xff" in err[0], err
    assert not os.path.lexists(target)  # nothing made: no empty target left behind
