"""Progress lines: tqdm's updates cut into lines and thinned, the log written, stderr kept
out of executed chapters."""

import nbformat

from rflens.terminal import LineStream, Log, model_label
from rflens.publish import reproduce


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_stream_passes_lines_and_thins_a_bars_updates():
    got, clock = [], Clock()
    stream = LineStream(got.append, "alibi on prose: ", every=5.0, clock=clock)
    stream.write("resuming from step 3\n")
    stream.write("\rtrain alibi:  10%|#         | 60/600 [00:01<00:09, 60.0step/s]")
    clock.now = 1.0
    stream.write("\rtrain alibi:  20%|##        | 120/600 [00:02<00:08, 60.0step/s]")  # too soon: dropped
    clock.now = 6.0
    stream.write("\rtrain alibi:  30%|###       | 180/600 [00:03<00:07, 60.0step/s, tok_s=61,000]\r")
    clock.now = 6.5
    stream.write("\x1b[Atrain alibi: 100%|##########| 600/600 [00:10<00:00, 60.0step/s]\n")  # done: always
    stream.write("no newline yet")
    assert got == ["alibi on prose: resuming from step 3",
                   "alibi on prose: train alibi:  10%|#         | 60/600 [00:01<00:09, 60.0step/s]",
                   "alibi on prose: train alibi:  30%|###       | 180/600 [00:03<00:07, 60.0step/s, tok_s=61,000]",
                   "alibi on prose: train alibi: 100%|##########| 600/600 [00:10<00:00, 60.0step/s]"]
    stream.close()
    assert got[-1] == "alibi on prose: no newline yet"


def test_the_log_is_time_stamped_and_quiet_keeps_the_terminal_empty(tmp_path, capsys):
    with Log(tmp_path / "sub" / "run.log", quiet=True) as log:
        log("first line")
        log("   ")
        log.put("second line")
    text = (tmp_path / "sub" / "run.log").read_text().splitlines()
    assert [ln.split(" ", 2)[2] for ln in text] == ["first line", "second line"]
    assert capsys.readouterr().err == ""
    with Log(None) as log:
        log("to the terminal")
    assert "to the terminal" in capsys.readouterr().err


def test_model_labels_name_the_settings():
    assert model_label("alibi", "code", {}) == "alibi on code"
    assert model_label("window", "prose", {"window": 4, "l_tr": 64}) == "window on prose (l_tr=64, window=4)"


def test_executed_chapters_keep_no_stderr(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="train: 50%|#####     | 1/2\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="a result\n")]
    nb.cells = [cell, nbformat.v4.new_markdown_cell("text")]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, str(path))
    assert reproduce.drop_stderr(path) == 1
    kept = nbformat.read(str(path), 4)
    assert [o["name"] for o in kept.cells[0].outputs] == ["stdout"]
    assert "widgets" not in kept.metadata  # a static page shows no widget: their state goes too
    assert reproduce.drop_stderr(path) == 0


def test_chapters_kernels_draw_bars_as_text_on_stderr(tmp_path, monkeypatch):
    import json

    import tqdm.auto
    import tqdm.std

    from rflens import terminal

    monkeypatch.setattr(reproduce, "BUILD", tmp_path)
    env = reproduce.kernel_env()
    spec = json.loads((tmp_path / "jupyter" / "kernels" / "python3" / "kernel.json").read_text())
    assert env["JUPYTER_PATH"].split(":")[0] == str(tmp_path / "jupyter")
    assert any("rflens.terminal.plain_bars()" in a for a in spec["argv"])
    monkeypatch.setattr(tqdm.auto, "tqdm", tqdm.auto.tqdm)  # restored afterwards
    monkeypatch.setattr(tqdm.auto, "trange", tqdm.auto.trange)
    terminal.plain_bars()
    assert tqdm.auto.tqdm is tqdm.std.tqdm and tqdm.auto.trange is tqdm.std.trange
