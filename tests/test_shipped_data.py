"""A shipped preset whose corpus built here is other data than the bundle's (another
fingerprint): the model is not missing, so nothing sends the user to train it or to run the
long run (which answers that it is shipped); one line says the data differs and how to rebuild it."""

from __future__ import annotations


import pytest

from rflens.cli import main
from rflens.data import corpus as corpus_module
from rflens.longrun import emergence, plan
from rflens.store import runs
from rflens.setup import presets


@pytest.fixture
def shipped_alibi(tmp_path, monkeypatch):
    """The smoke preset as a shipped preset, its ALiBi model in a bundle, an empty run store."""
    from rflens.setup import presets

    base = presets._BUILDERS["smoke"]

    def smoke():
        sc = base()
        return presets.LongRun.of(sc, train=sc.train.replace(schedule="wsd", warmup=2, steps=32))

    monkeypatch.setitem(presets._BUILDERS, "smoke", smoke)
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "train-store"))
    emergence.run(plan.LongModel("alibi", ()), presets.get("smoke"), progress=False)
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))
    return tmp_path


def other_corpus(monkeypatch):
    """Every corpus loaded from now on has a fingerprint the bundle never measured on."""
    init = corpus_module.Corpus.__init__

    def other(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.fingerprint = "f" * 64

    monkeypatch.setattr(corpus_module.Corpus, "__init__", other)


def test_the_corpus_built_here_differing_from_the_bundles_is_said_once_with_the_rebuild(shipped_alibi, monkeypatch,
                                                                                        capsys):
    from rflens.experiments import tables

    assert main(["evaluate", "--scale", "smoke", "--pos", "alibi", "--quiet"]) == 0  # the bundle's own data: served
    capsys.readouterr()
    with pytest.raises(runs.NotStored, match="train it"):  # a model the bundle lacks is still missing
        runs.get_run(presets.get("smoke"), "rotary", "prose", train=False, progress=False)
    other_corpus(monkeypatch)
    assert main(["evaluate", "--scale", "smoke", "--pos", "alibi", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    assert "ffffffffffff" in err[0] and "rebuild it from the pinned sources" in err[0]
    assert "`python -m rflens data --corpus prose --scale smoke`" in err[0]
    assert "train it" not in err[0] and "emergence" not in err[0]
    tables._RUNS.clear()
    with pytest.raises(runs.OtherData, match="rflens data --corpus prose --scale smoke") as caught:
        tables.run_of(presets.get("smoke"), tables.make_spec("ALiBi", "alibi"))
    assert "emergence" not in str(caught.value)


def test_a_check_on_other_data_is_refused_before_anything_trains(shipped_alibi, monkeypatch, capsys):
    """`emergence --check` on a corpus of another fingerprint: one line, the same as evaluate's,
    before any model is retrained (the retraining compared the fingerprints only at its end)."""
    from rflens.longrun import recheck

    other_corpus(monkeypatch)
    monkeypatch.setattr(emergence, "run", lambda *a, **k: pytest.fail("a model trained"))
    assert main(["emergence", "--scale", "smoke", "--check", "1", "--quiet"]) == 2
    out, err = capsys.readouterr()
    err = err.strip().splitlines()
    assert len(err) == 1 and "ffffffffffff" in err[0] and "rebuild it from the pinned sources" in err[0], err
    assert "retraining" not in out
    with pytest.raises(runs.OtherData, match="rflens data --corpus prose --scale smoke"):
        recheck.check(["alibi"], presets.get("smoke"), progress=False)


def test_the_board_on_other_data_says_it_once(shipped_alibi, monkeypatch, capsys):
    """`claims` on a corpus of another fingerprint: the one line, once (each experiment, then
    each claim reading it, repeated it), and no board."""
    from rflens.claims import gather
    from rflens.experiments import tables

    tables._RUNS.clear()
    other_corpus(monkeypatch)
    assert main(["claims", "--scale", "smoke"]) == 2
    out, err = capsys.readouterr()
    assert err.count("ffffffffffff") == 1 and err.count("error:") == 1, err
    assert "Claims scoreboard" not in out and "rebuild it from the pinned sources" in err
    tables._RUNS.clear()
    res = gather.gather("smoke", compute=False, progress=False)  # a chapter's board, nothing trained: not run
    assert res["table1"] is None
