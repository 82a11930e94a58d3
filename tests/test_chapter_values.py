"""The values chapters print that a test compares: cells tagged ``values-tested``.

nbval compares a cell's output only where the notebook stores one, and the chapters are
stored without outputs (tests/test_reproduce.py), so the ``nbval-check-output`` tag would
compare nothing. A cell whose printed values must stay the same is tagged ``values-tested``
instead; its code runs here and the table it shows is compared with EXPECTED, and every
such cell needs an entry (a tag without a test fails).
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from rflens import paper
from rflens.measure import columns
from rflens.model import analysis

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb")) + sorted((ROOT / "src" / "rflens").rglob("*.ipynb"))
TAG = "values-tested"

# (chapter, the cell's first line) -> the table it shows, as rendered (columns.readable, 3 digits)
EXPECTED = {
    ("02_alibi_and_relative_biases", "k_max = paper.LOG_FIT_LENGTH - 1"): {
        "index": ["k = 0..8191", "k = 0..49", "the paper"],
        "columns": ["a", "b", "rmse"],
        "data": [["-0.832", "-0.794", "0.514"], ["-1.024", "-0.015", "0.138"], ["-0.825", "-0.800", "–"]],
    },
}
# what the cells may use: the names chapter 2's set-up cell imports
NAMESPACE = {"np": np, "pd": pd, "paper": paper, "analysis": analysis, "columns": columns}


def _tagged(tag: str):
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if tag in cell.metadata.get("tags", []):
                yield path, cell


def _shown(source: str):
    """The value of a cell's last expression, as Jupyter displays it."""
    tree = ast.parse(source)
    last = tree.body.pop()
    namespace = dict(NAMESPACE)
    exec(compile(tree, "<cell>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)


TAGGED = [(path.stem, cell.source.splitlines()[0], cell.source) for path, cell in _tagged(TAG)]


def test_every_cell_tagged_for_its_values_has_them_compared():
    assert {(stem, first) for stem, first, _ in TAGGED} == set(EXPECTED)


@pytest.mark.parametrize("stem, first, source", TAGGED, ids=[f"{s}: {f}" for s, f, _ in TAGGED])
def test_a_tagged_cell_shows_the_values_expected(stem, first, source):
    shown = _shown(source)
    assert shown.to_dict(orient="split") == EXPECTED[(stem, first)]


def test_no_cell_is_tagged_for_an_output_comparison_that_nbval_would_skip():
    """nbval compares only cells with a stored output: a tagged cell without one is never compared."""
    skipped = [f"{path.name}: {cell.source.splitlines()[0]}" for path, cell in _tagged("nbval-check-output")
               if not cell.get("outputs")]
    assert skipped == [], f"tagged nbval-check-output but stored without output (never compared; tag {TAG!r} instead)"
