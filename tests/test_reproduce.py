"""``python -m rflens reproduce``: the request is checked before anything runs, the chapters
are clean sources with a ``parameters`` cell, and the book's copies keep one figure format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from rflens.claims import scoreboard
from rflens.figures.render import PLOTLY_MIME
from rflens.publish import reproduce
from rflens.setup import presets
from rflens.store import bundle

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = list(reproduce.chapters().values())


def _rflens(*args, env=None):
    return subprocess.run([sys.executable, "-m", "rflens", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args, words", [
    (["--scale", "huge"], "unknown scale"),
    (["--scale", "smoke", "--chapters", "42"], "unknown chapter"),
    (["--scale", "smoke", "--chapters", "03", "-p", "windw=8"], "unknown parameter 'windw'"),
    (["--scale", "smoke", "-p", "scale=tiny"], "--scale"),
    (["--scale", "smoke", "--corpus", "poetry"], "unknown corpus"),
    (["--scale", "smoke", "--workers", "-1"], "--workers"),
    (["--scale", "smoke", "--workers", "-1", "--plan"], "--workers"),
    (["--scale", "smoke", "--executor", "slurm", "--time-limit", "0"], "--time-limit"),
    (["--scale", "smoke", "--executor", "local", "--workers", "0"], "at least 1 with --executor local"),
])
def test_a_bad_request_is_one_line_and_exit_2_before_anything_runs(args, words, capsys, tmp_path, monkeypatch):
    # in this process (the command line's own entry point; a subprocess per case would only add start-up time),
    # with the build folder of its own, so that no other test's book can touch what is checked
    from rflens import cli
    from rflens.publish import reproduce

    monkeypatch.setattr(reproduce, "BUILD", tmp_path / "_build")
    saved = dict(os.environ)
    try:
        code = cli.main(["reproduce", *args])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], err
    assert "Traceback" not in err
    assert not list((tmp_path / "_build").glob("*/notebooks/*.ipynb"))


def test_there_is_one_chapter_per_section_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    # the paper's sections, the long runs (two pages: four layers, then the paper's depth), the full size, and
    # "Beyond the paper"
    assert [reproduce.chapter_key(p) for p in CHAPTERS] == [f"{i:02d}" for i in range(1, 11)] + ["10b", "11", "12"]
    for path in CHAPTERS:
        assert f"file: book/{path.stem}" in toc


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapters_are_output_free_with_a_parameters_cell_declaring_the_scale(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has stored outputs"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
    assert "scale" in reproduce.request("smoke", reproduce.chapter_key(path))["chapters"][reproduce.chapter_key(path)][1]


def test_parameters_are_typed_and_reach_only_the_chapters_that_declare_them():
    request = reproduce.request("smoke", "03,04", ["progress=False"], "code")
    for key in ("03", "04"):
        params = request["chapters"][key][1]
        assert params["scale"] == "smoke" and params["corpus"] == "code" and params["progress"] is False


def test_the_book_copy_keeps_the_html_figure_and_drops_the_duplicate_json(tmp_path):
    nb = nbformat.v4.new_notebook()
    both = nbformat.v4.new_output("display_data", data={"text/html": "<div>fig</div>", PLOTLY_MIME: {"data": []}})
    json_only = nbformat.v4.new_output("display_data", data={PLOTLY_MIME: {"data": []}})
    nb.cells.append(nbformat.v4.new_code_cell("fig", outputs=[both, json_only]))
    src, dst = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    nbformat.write(nb, src)
    reproduce._copy_for_book(src, dst)
    out = json.loads(dst.read_text())["cells"][0]["outputs"]
    assert set(out[0]["data"]) == {"text/html"}
    assert set(out[1]["data"]) == {PLOTLY_MIME}  # a figure with no HTML is not hidden: the build fails on it
    assert dst.stat().st_mtime == src.stat().st_mtime


def test_the_book_copy_folds_a_chapters_set_up_away(tmp_path):
    """The parameters cell and the set-up after it are hidden behind a toggle, papermill's
    injected cell is left out, and every cell that shows something stays as it is."""
    cells = [nbformat.v4.new_markdown_cell("# A chapter"),
             nbformat.v4.new_code_cell("scale = 'tiny'", metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell("scale = 'smoke'", metadata={"tags": ["injected-parameters"]}),
             nbformat.v4.new_code_cell("import x\nsetup(scale)",
                                       outputs=[nbformat.v4.new_output("stream", name="stderr", text="bar")]),
             nbformat.v4.new_code_cell("table", outputs=[nbformat.v4.new_output("execute_result", data={"text/plain": "1"})])]
    nb = nbformat.v4.new_notebook(cells=cells)
    src, dst = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    nbformat.write(nb, src)
    reproduce._copy_for_book(src, dst)
    tags = [c["metadata"].get("tags", []) for c in json.loads(dst.read_text())["cells"]]
    assert tags == [[], ["parameters", "hide-input"], ["injected-parameters", "remove-cell"], ["hide-input"], []]
    # a set-up cell that shows something (a table, a line of text) is not hidden
    nb.cells[3].outputs = [nbformat.v4.new_output("stream", name="stdout", text="scale tiny")]
    nbformat.write(nb, src)
    reproduce._copy_for_book(src, dst)
    assert json.loads(dst.read_text())["cells"][3]["metadata"].get("tags", []) == []


def test_the_scoreboard_lives_in_the_run_store(tmp_path, monkeypatch):
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "store"))
    assert scoreboard.board_path("tiny") == tmp_path / "store" / "scoreboard-tiny.json"
    monkeypatch.delenv("RFLENS_RUNS")
    assert scoreboard.board_path("tiny").parent == ROOT / "runs"


def test_the_index_page_gets_the_this_build_box_under_its_title(tmp_path, store):
    from rflens import storage

    index = tmp_path / "index.md"
    index.write_text("# The book\n\nIts first paragraph.\n")
    reproduce.write_this_build(index, "smoke")
    assert "not computed in this build" in index.read_text()  # no board in this store yet
    board = [{"id": i, "result": r} for i, r in enumerate(["pass", "fail", "not decided", "not run", "pass"], 1)]
    store.mkdir(parents=True, exist_ok=True)
    storage.write_json(scoreboard.board_path("smoke"), {"claims": board})
    index.write_text("# The book\n\nIts first paragraph.\n")
    reproduce.write_this_build(index, "smoke")
    text = index.read_text()
    assert text.startswith("# The book\n\n:::{admonition} What this book finds") and text.endswith("Its first paragraph.\n")
    # then the key figure (the long run's Δ sweep, from its bundle), then the claims, the numbers, the details
    assert text.index("What this book finds") < text.index("{raw} html") < text.index("plotly-graph-div") < \
        text.index("The claims at each scale") < text.index("Reading the numbers") < \
        text.index(":::{admonition} This build")
    assert "2 pass, 1 fail, 1 not decided, 1 not run at this build's scale" in text
    # smoke's model is not the long run's: both are counted, each once
    assert "At this build (`smoke`): R = 2 layers" in text and "in the long run (`long`): R = 4 layers" in text
    # the shipped bundles, zipped beside the index, are linked from it
    zips = reproduce.bundle_downloads(tmp_path)
    assert set(zips) == {name for name in presets.NAMES if presets.get(name).shipped and bundle.entries(name)}
    assert {"long", "long-repeated", "long-extended"} <= set(zips)
    index.write_text("# The book\n")
    reproduce.write_this_build(index, "smoke", downloads=zips)
    for name, path in zips.items():
        assert f"{{download}}`{name} <downloads/{path.name}>`" in index.read_text()
        with zipfile.ZipFile(path) as z:
            assert f"{name}/manifest.json" in z.namelist()
