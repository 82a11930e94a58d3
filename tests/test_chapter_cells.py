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
