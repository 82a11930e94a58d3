"""`emergence --adopt DIR` joins the models a worker shipped to DIR/SCALE/, never a hidden
folder beside them (a writer's .NAME.adopting or .NAME.replaced, which a killed one leaves)."""

from __future__ import annotations

from rflens.cli import main
from rflens.store import bundle


def test_a_hidden_folder_of_the_workers_is_not_joined(bundle_copy, tmp_path, capsys):
    top = bundle_copy("deep")
    before = sorted(p.name for p in top.iterdir())
    hidden = tmp_path / "worker" / "deep" / ".window_window=5.adopting"
    hidden.mkdir(parents=True)
    (hidden / bundle.MANIFEST).write_text('{"sha256": {}, "version": 1}\n')  # half a copy: no result
    assert main(["emergence", "--scale", "deep", "--adopt", str(tmp_path / "worker")]) == 0
    assert "0 model(s) joined" in capsys.readouterr().out
    assert sorted(p.name for p in top.iterdir()) == before
