"""Executed chapters are kept while their inputs are unchanged (rflens.publish.executed): the
stamp, what changes it and what does not, and the notebook written from another runner's
outputs, as papermill writes it."""

from __future__ import annotations

import nbformat
import pytest

from rflens.publish import executed, reproduce
from rflens.publish.csv_files import CHAPTER_ENV, TABLES_ENV


def _chapter(folder, name="98_demo.ipynb", extra=""):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# Demo"),
                nbformat.v4.new_code_cell('scale = "tiny"', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("import sys\nprint(scale)\nprint('bar', file=sys.stderr)" + extra),
                nbformat.v4.new_code_cell("1 + 1")]
    folder.mkdir(exist_ok=True)
    path = folder / name
    nbformat.write(nb, str(path))
    return path


OUTPUTS = [[], [{"output_type": "stream", "name": "stdout", "text": "smoke\n"},
                {"output_type": "stream", "name": "stderr", "text": "bar\n"}],
           [{"output_type": "execute_result", "data": {"text/plain": "2"}, "metadata": {}, "execution_count": 7}]]


@pytest.fixture
def written(tmp_path, monkeypatch):
    monkeypatch.delenv("RFLENS_SCHEMES", raising=False)  # an earlier test's scheme files, named as they loaded
    source = _chapter(tmp_path / "book")
    out, tables = tmp_path / "out", tmp_path / "out" / "tables"
    tables.mkdir(parents=True)
    (tables / "98_demo-table1.csv").write_text("a,b\n1,2\n")
    path = executed.write_from_cells(source, OUTPUTS, {"scale": "smoke"}, "smoke", out, tables)
    return source, path, tables


def test_a_chapter_written_from_cells_is_the_notebook_papermill_writes(written):
    source, path, tables = written
    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.metadata.get("tags") for c in code] == [["parameters"], ["injected-parameters"], [], []]
    assert 'scale = "smoke"' in code[1].source
    assert [c.execution_count for c in code] == [1, 2, 3, 4]
    assert code[2].outputs == [{"output_type": "stream", "name": "stdout", "text": "smoke\n"}]  # stderr dropped
    assert code[3].outputs[0]["execution_count"] == 4
    assert nb.metadata[executed.KEY]["tables"] == executed.tables_of(tables, "98_demo")
    assert executed.reusable(source, path, {"scale": "smoke"}, "smoke", tables)


def test_outputs_for_another_number_of_cells_are_refused(tmp_path):
    source = _chapter(tmp_path)
    with pytest.raises(ValueError, match="3 code cells but outputs for 2"):
        executed.write_from_cells(source, OUTPUTS[:2], {}, "smoke", tmp_path / "out", tmp_path)


def test_what_the_outputs_depend_on_changes_the_stamp_and_where_things_are_does_not(written, monkeypatch, tmp_path):
    source, path, tables = written
    args = (source, path, {"scale": "smoke"}, "smoke", tables)
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("RFLENS_DATA", str(tmp_path / "data"))
    assert executed.reusable(*args)
    assert not executed.reusable(source, path, {"scale": "smoke", "corpus": "code"}, "smoke", tables)
    assert not executed.reusable(source, path, {"scale": "smoke"}, "tiny", tables)
    monkeypatch.setenv("RFLENS_HF_MODELS", "gpt2")
    assert not executed.reusable(*args)
    monkeypatch.delenv("RFLENS_HF_MODELS")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert not executed.reusable(*args)
    monkeypatch.undo()
    monkeypatch.delenv("RFLENS_SCHEMES", raising=False)
    assert executed.reusable(*args)
    # a scheme file a process names as it loads it: the book's own (among the book's files) leaves the stamp be
    (source.parent / "schemes").mkdir()
    (source.parent / "schemes" / "mine.py").write_text("x = 1\n")
    assert not executed.reusable(*args)  # a new book file
    executed.stamp(path, executed.inputs(*args[:1], {"scale": "smoke"}, "smoke"), executed.tables_of(tables, "98_demo"))
    monkeypatch.setenv("RFLENS_SCHEMES", str(source.parent / "schemes" / "mine.py"))
    assert executed.reusable(*args)
    other = tmp_path / "elsewhere.py"
    other.write_text("y = 2\n")
    monkeypatch.setenv("RFLENS_SCHEMES", str(other))
    assert executed.changed(*args) == ["schemes"]


def test_a_changed_cell_table_or_bundle_is_executed_again(written, monkeypatch, tmp_path):
    source, path, tables = written
    args = (source, path, {"scale": "smoke"}, "smoke", tables)
    bundles = tmp_path / "bundles"
    (bundles / "long").mkdir(parents=True)
    (bundles / "long" / "manifest.json").write_text("{}")
    monkeypatch.setenv("RFLENS_REFERENCE", str(bundles))
    digest = executed.inputs(source, {"scale": "smoke"}, "smoke")
    (bundles / "long" / "manifest.json").write_text('{"a": 1}')
    now = executed.inputs(source, {"scale": "smoke"}, "smoke")
    assert [k for k in now if now[k] != digest[k]] == ["bundles"]
    monkeypatch.undo()
    monkeypatch.delenv("RFLENS_SCHEMES", raising=False)
    assert executed.reusable(*args)
    (tables / "98_demo-table2.csv").write_text("x\n")  # a table the stamp does not list
    assert not executed.reusable(*args)
    (tables / "98_demo-table2.csv").unlink()
    (tables / "98_demo-table1.csv").write_text("a,b\n1,3\n")
    assert not executed.reusable(*args)
    (tables / "98_demo-table1.csv").write_text("a,b\n1,2\n")
    (source.parent / "99_other.ipynb").write_text("{}")  # another chapter is not this one's input
    assert executed.reusable(*args)
    (source.parent / "references.bib").write_text("@misc{x}")  # the book's other files are
    assert not executed.reusable(*args)
    (source.parent / "references.bib").unlink()
    _chapter(source.parent, extra="\nprint(2)")
    assert not executed.reusable(*args)
    nb = nbformat.read(str(source), as_version=4)  # a tag alone (it folds or hides a cell in the page) is a change
    changed = executed.inputs(source, {"scale": "smoke"}, "smoke")
    nb.cells[-1].metadata["tags"] = ["hide-output"]
    nbformat.write(nb, str(source))
    assert executed.inputs(source, {"scale": "smoke"}, "smoke")["cells"] != changed["cells"]


def test_a_damaged_or_unstamped_notebook_is_executed_again(written):
    source, path, tables = written
    nb = nbformat.read(str(path), as_version=4)
    del nb.metadata[executed.KEY]
    nbformat.write(nb, str(path))
    assert not executed.reusable(source, path, {"scale": "smoke"}, "smoke", tables)
    path.write_text("{not json")
    assert not executed.reusable(source, path, {"scale": "smoke"}, "smoke", tables)
    assert not executed.reusable(source, path.with_name("missing.ipynb"), {"scale": "smoke"}, "smoke", tables)


@pytest.mark.slow
def test_reproduce_executes_a_chapter_once_and_again_with_rerun(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce, "BUILD", tmp_path / "_build")
    for var in (TABLES_ENV, CHAPTER_ENV):  # set by execute for the kernel: undone afterwards
        monkeypatch.setenv(var, "")
    source = _chapter(tmp_path)
    assert reproduce.execute("98", source, {"scale": "smoke"}, "smoke")
    path = reproduce.notebooks_dir("smoke") / source.name
    first = path.read_bytes()
    assert reproduce.changes("smoke", {"98": (source, {"scale": "smoke"})}) == {"98": []}
    assert not reproduce.execute("98", source, {"scale": "smoke"}, "smoke")
    assert path.read_bytes() == first
    assert reproduce.execute("98", source, {"scale": "smoke"}, "smoke", rerun=True)
    nb = nbformat.read(str(path), as_version=4)
    assert [o.get("text") for o in nb.cells[3].outputs] == ["smoke\n"]  # injected, stderr dropped
    assert executed.reusable(source, path, {"scale": "smoke"}, "smoke", reproduce.notebooks_dir("smoke") / "tables")
