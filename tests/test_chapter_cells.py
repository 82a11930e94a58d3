"""What a chapter's code cells leave on the page besides what they mean to show."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from rflens.publish import reproduce

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = list(reproduce.chapters().values())
# calls whose value is an exit status, not a result: as a cell's last line it prints a stray "0"
STATUS_CALLS = {"main"}


def _last_call(source: str) -> str | None:
    """The name of the function a cell's last statement calls, where that statement is a bare call."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython syntax: not checked
        return None
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        func = last.value.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return None


def test_a_bare_call_to_main_is_found():
    assert _last_call('from rflens.cli import main\n\nmain(["bias"])') == "main"
    assert _last_call('status = main(["bias"])') is None


@pytest.mark.parametrize("path", CHAPTERS, ids=reproduce.chapter_key)
def test_no_cell_shows_a_commands_exit_status(path):
    """A cell that runs the command line keeps its exit status (an int) off the page."""
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            called = _last_call("".join(cell["source"]))
            assert called not in STATUS_CALLS, (path.name, cell.get("id"), "".join(cell["source"])[-80:])


# a module the chapters draw their figures with, or glue's: a cell of only such calls shows its
# figure or nothing, so its code is folded away (a toggle shows it)
DRAWING = {"fr", "fb", "figs"}


def _only_draws_or_glues(source: str) -> bool:
    """Whether every statement of a cell is a call of a figure module's function (possibly
    inside ``display``) or of ``glue``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False

    def drawing(call) -> bool:
        if not isinstance(call, ast.Call):
            return False
        f = call.func
        if isinstance(f, ast.Name) and f.id == "display":
            return len(call.args) == 1 and drawing(call.args[0])
        return (isinstance(f, ast.Name) and f.id == "glue") or (
            isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in DRAWING)

    return bool(tree.body) and all(isinstance(s, ast.Expr) and drawing(s.value) for s in tree.body)


def test_a_cell_that_only_draws_or_glues_is_found():
    assert _only_draws_or_glues('fr.ppl_curves(t1)') and _only_draws_or_glues('display(fb.kerple_figure())')
    assert _only_draws_or_glues('glue("ch06_speed", rd.speed(x), display=False)  # for the sentence')
    assert not _only_draws_or_glues('t1 = ex.table1(preset)\nfr.ppl_curves(t1)')
    assert not _only_draws_or_glues('columns.display_table(t1, "r")')


@pytest.mark.parametrize("path", CHAPTERS, ids=reproduce.chapter_key)
def test_a_cell_that_only_draws_or_glues_hides_its_code(path):
    shown = [ "".join(cell["source"])[:60] for cell in json.loads(path.read_text())["cells"]
             if cell["cell_type"] == "code" and _only_draws_or_glues("".join(cell["source"]))
             and not {"hide-input", "remove-input", "remove-cell"} & set(cell.get("metadata", {}).get("tags", []))]
    assert shown == [], shown
