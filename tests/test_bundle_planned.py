"""A shipped model whose settings contradict its name and the run's plan (resealed, so its
checksums hold) is named in one line wherever the bundle's models are counted or read:
which model, which setting, what the plan says, the fix. It was counted as shipped by its
name and never served by its settings: the board said "not run" and `emergence --only`
answered that it was shipped, a loop."""

from __future__ import annotations

import pytest

from rflens import storage
from rflens.cli import main
from rflens.errors import UserError
from rflens.longrun import plan
from rflens.setup import presets
from rflens.store import bundle

NAME = "window_window=5"


def _edit(top, change):
    """Model NAME of the copy at ``top`` changed by ``change`` and resealed as the bundle's
    writers seal it (its manifest's sha256, then the bundle's)."""
    result = storage.read_json(top / NAME / bundle.RESULT, finite=False)
    change(result)
    bundle.rewrite_result(top.name, NAME, result, top.parent)


def _set(part, key, value):
    return lambda result: result[part].__setitem__(key, value)


@pytest.mark.parametrize("change, setting, planned", [
    (_set("model", "n_layer", 4), "model.n_layer is 4", "the plan's 12"),
    (_set("train", "lr", 0.001), "train.lr is 0.001", "the plan's 0.002"),
    (_set("model", "window", 10), "model.window is 10", "the plan's 5"),
])
@pytest.mark.parametrize("command", [["--list"], ["--only", NAME], ["--check", "1", "--only", NAME]])
def test_a_model_contradicting_its_name_is_named_in_one_line(bundle_copy, capsys, monkeypatch, change, setting, planned,
                                                             command):
    from rflens.longrun import emergence, recheck

    _edit(bundle_copy("deep"), change)
    for module, what in ((recheck, "check"), (emergence, "run")):  # named before anything trains
        monkeypatch.setattr(module, what, lambda *a, **k: pytest.fail("it trained"))
    assert main(["emergence", "--scale", "deep", *command]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert NAME in err[0] and setting in err[0] and planned in err[0] and "git checkout -- reference" in err[0], err


def test_every_reader_of_the_bundle_names_it(bundle_copy):
    from rflens.store import shipped

    _edit(bundle_copy("deep"), _set("model", "n_layer", 4))
    run = presets.long_run("deep")
    for read in (lambda: bundle.entries("deep"), lambda: bundle.complete("deep"), lambda: bundle.load(NAME, "deep"),
                 lambda: shipped.index("deep"), lambda: plan.table1_names(run)):
        with pytest.raises(UserError, match=r"window_window=5 is named window_window=5, but .*model\.n_layer is 4"):
            read()


def test_a_name_its_own_settings_contradict_is_named(bundle_copy):
    def rename(result):
        result["settings"] = {"window": 10}
    _edit(bundle_copy("deep"), rename)
    with pytest.raises(UserError, match=r"is named 'window_window=5', but its result says it is window on prose "
                                        r"with \{'window': 10\}"):
        bundle.entries("deep")


def test_the_shipped_bundles_hold_every_model_as_planned():
    for name in presets.LONG_RUNS:
        bundle.entries(name)  # no contradiction in what the repository ships


def test_a_joining_model_that_contradicts_the_plan_names_the_setting(tmp_path):
    result = storage.read_json(bundle.bundle_dir("deep") / NAME / bundle.RESULT, finite=False)
    result["model"]["n_layer"] = 4
    with pytest.raises(UserError, match=r"model\.n_layer is 4, the plan's 12; .*emergence --scale deep --only "
                                        r"window_window=5"):
        plan.check_planned(result, presets.long_run("deep"), tmp_path)
