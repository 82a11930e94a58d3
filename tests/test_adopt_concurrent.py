"""Writers of a shipped bundle take turns, and what a writer leaves while it works (or when it
is killed) is never a shipped model: two joins at once both land, a reader that meets a join
half-done waits for it instead of calling the bundle damaged, and a hidden writer's folder
(``.NAME.adopting/``, ``.NAME.replaced/``) is neither listed nor counted."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rflens import storage
from rflens.errors import UserError
from rflens.store import bundle

SCALE = "deep"
MODELS = ("window_window=20_batch_size=8_l_tr=128", "sinusoidal_batch_size=8_l_tr=128")  # two small shipped models

pytestmark = pytest.mark.skipif(not all((bundle.bundle_dir(SCALE) / m / bundle.MANIFEST).is_file() for m in MODELS),
                                reason="the deep bundle's models are not in this checkout")


@pytest.fixture
def workers(tmp_path) -> dict[str, Path]:
    """Two models as two workers left them, each in a bundle folder of its own."""
    out = {}
    for i, name in enumerate(MODELS):
        out[name] = tmp_path / f"worker{i}" / SCALE / name
        shutil.copytree(bundle.bundle_dir(SCALE) / name, out[name])
    return out


@pytest.fixture
def target(tmp_path, monkeypatch) -> Path:
    """An empty bundle root of this test's own (``$RFLENS_REFERENCE``)."""
    root = tmp_path / "reference"
    root.mkdir()
    monkeypatch.setenv("RFLENS_REFERENCE", str(root))
    return root


def test_two_joins_at_once_both_land_and_a_reader_never_sees_damage(workers, target):
    errors, stop = [], threading.Event()

    def join(folder):
        try:
            bundle.adopt(SCALE, folder)
        except Exception as err:  # noqa: BLE001 - any failure fails the test
            errors.append(err)

    def read():
        while not stop.is_set():
            try:
                bundle.check(SCALE)
                bundle.entries(SCALE)
            except Exception as err:  # noqa: BLE001
                errors.append(err)
                return

    for _ in range(3):
        for name in MODELS:
            shutil.rmtree(target / SCALE / name, ignore_errors=True)
        bundle.seal(SCALE)
        reader = threading.Thread(target=read)
        reader.start()
        joins = [threading.Thread(target=join, args=(folder,)) for folder in workers.values()]
        for t in joins:
            t.start()
        for t in joins:
            t.join()
        stop.set()
        reader.join()
        stop.clear()
        assert not errors, errors
        assert set(bundle.entries(SCALE)) == set(MODELS)
        bundle.check(SCALE)


def test_a_reader_waits_for_a_join_half_done_instead_of_calling_it_damage(workers, target):
    first, second = MODELS
    bundle.adopt(SCALE, workers[first])
    seen: list = []
    with bundle.writing(SCALE):
        # a writer mid-join: the model in place, the bundle's seal still to come
        shutil.copytree(workers[second], target / SCALE / second)
        reader = threading.Thread(target=lambda: seen.append(_outcome(lambda: bundle.entries(SCALE))))
        reader.start()
        time.sleep(0.3)
        assert reader.is_alive() and not seen  # it waits for the writer, it does not say "damaged: remove ..."
        bundle.seal(SCALE)
    reader.join(timeout=30)
    assert seen == [set(MODELS)]


def test_a_join_of_a_model_already_joined_is_nothing_to_do(workers, target):
    name = MODELS[0]
    first = bundle.adopt(SCALE, workers[name])
    stamp = bundle.stamp(SCALE)
    assert bundle.adopt(SCALE, workers[name]) == first and bundle.stamp(SCALE) == stamp


def test_damage_that_stays_is_still_named(workers, target):
    bundle.adopt(SCALE, workers[MODELS[0]])
    stray = target / SCALE / MODELS[0] / "notes.txt"
    stray.write_text("x")
    with pytest.raises(UserError, match="notes.txt is not in its manifest"):
        bundle.check(SCALE)


def _outcome(call):
    try:
        return set(call())
    except Exception as err:  # noqa: BLE001
        return err


@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(suffix=st.sampled_from(bundle.PARTIAL + bundle.TAKEN_OUT), which=st.integers(0, len(MODELS) - 1),
       with_manifest=st.booleans())
def test_a_writers_hidden_folder_is_never_a_shipped_model(workers, target, suffix, which, with_manifest):
    shutil.rmtree(target / SCALE, ignore_errors=True)
    for folder in workers.values():
        bundle.adopt(SCALE, folder)
    name = MODELS[which]
    hidden = target / SCALE / f".{name}{suffix}"
    shutil.copytree(target / SCALE / name, hidden)
    if not with_manifest:
        (hidden / bundle.MANIFEST).unlink()
    assert set(bundle.entries(SCALE)) == set(MODELS)  # listed: the models, not the writer's folder
    assert bundle.complete(SCALE) == {m for m in MODELS if bundle.read_result(target / SCALE / m)["complete"]}
    bundle.write_file(SCALE, "notes.json", {"a": 1})  # the next writer cleans it
    assert not hidden.exists() and set(bundle.entries(SCALE)) == set(MODELS)
    bundle.check(SCALE)


@pytest.mark.parametrize("suffix", bundle.TAKEN_OUT)
def test_a_model_a_killed_join_took_out_of_place_goes_back(workers, target, suffix):
    name = MODELS[0]
    bundle.adopt(SCALE, workers[name])
    bundle.write_file(SCALE, "notes.json", {"a": 1})
    place = target / SCALE / name
    place.rename(place.with_name(f".{name}{suffix}"))  # killed between its two renames
    with pytest.raises(UserError, match="is missing"):
        bundle.check(SCALE)
    bundle.adopt(SCALE, workers[MODELS[1]])  # the next writer puts it back
    assert set(bundle.entries(SCALE)) == set(MODELS)
    bundle.check(SCALE)
    assert storage.sha256_file(place / bundle.RESULT) == storage.sha256_file(workers[name] / bundle.RESULT)
