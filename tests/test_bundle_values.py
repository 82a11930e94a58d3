"""What a reader is shown from a resealed bundle is checked, not only its checksums: speeds
are rounds of finite positive numbers, and a model's NLLs are finite and give the
perplexities its result.json shows. A file edited and resealed otherwise is one line."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rflens import storage
from rflens.errors import UserError
from rflens.experiments import speed
from rflens.store import bundle
from rflens.setup import presets

CONTROL = "long-repeated"
MODEL = "nope"
SOURCE = bundle.bundle_dir(CONTROL)  # the repository's, read before a test points $RFLENS_REFERENCE elsewhere


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """One model of the control and its speed record, as a sealed bundle of this module's own."""
    root = tmp_path_factory.mktemp("values") / "reference"
    top = root / CONTROL
    shutil.copytree(SOURCE / MODEL, top / MODEL, ignore=shutil.ignore_patterns(bundle.WEIGHTS))
    man = storage.read_json(top / MODEL / bundle.MANIFEST)
    man["sha256"].pop(bundle.WEIGHTS, None)
    storage.write_json(top / MODEL / bundle.MANIFEST, man, newline=True)
    shutil.copy(SOURCE / speed.RECORD_FILE, top / speed.RECORD_FILE)
    bundle.seal(CONTROL, root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RFLENS_REFERENCE", str(root))
        yield root


def _original(root):
    path = root / CONTROL / MODEL
    result = json.loads((path / bundle.RESULT).read_text())
    with np.load(path / bundle.NLL) as z:
        arrays = {k: z[k].copy() for k in z.files}
    return result, arrays


def test_the_copy_reads_as_shipped(copy):
    assert bundle.load(MODEL, CONTROL)["points"] and speed.load_speed_record(presets.get(CONTROL))["tokens_per_s"]["t5"]


_BAD_SPEED = st.sampled_from([float("nan"), float("inf"), float("-inf"), -1.0, 0.0, "fast", None, True, [1.0]])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scheme=st.sampled_from(["t5", "sandwich", "alibi"]), at=st.integers(0, 11), bad=_BAD_SPEED,
       how=st.sampled_from(["value", "drop-round", "not-a-list", "empty"]))
def test_a_resealed_speed_record_with_values_no_timing_gives_is_one_line(copy, scheme, at, bad, how):
    original = json.loads((copy / CONTROL / speed.RECORD_FILE).read_text())
    rec = json.loads(json.dumps(original))
    rounds = rec["tokens_per_s"][scheme]
    if how == "value":
        rounds[at] = bad
    elif how == "drop-round":
        rounds.pop(at)
    elif how == "not-a-list":
        rec["tokens_per_s"][scheme] = bad
    else:
        rec["tokens_per_s"][scheme] = []
    try:
        bundle.write_file(CONTROL, speed.RECORD_FILE, rec, copy)  # edited and resealed
        with pytest.raises(UserError, match="speed record .* is damaged"):
            speed.load_speed_record(presets.get(CONTROL))
    finally:
        bundle.write_file(CONTROL, speed.RECORD_FILE, original, copy)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(point=st.integers(0, 20), row=st.integers(0, 20),
       how=st.sampled_from(["scale", "nan", "inf", "drop", "shape", "ppl", "ppl-nan", "ppl-negative", "ppl-string"]),
       factor=st.floats(1.05, 10.0))
def test_nlls_and_perplexities_that_disagree_are_one_line(copy, point, row, how, factor):
    result, arrays = _original(copy)
    keys = sorted(arrays)
    key = keys[point % len(keys)]
    p = next(q for q in result["points"] if f"steps_{q['steps']}" == key)
    i = row % arrays[key].shape[0]
    edited_r, edited_a = json.loads(json.dumps(result)), {k: v.copy() for k, v in arrays.items()}
    ep = next(q for q in edited_r["points"] if q["steps"] == p["steps"])
    if how == "scale":
        edited_a[key][i] *= factor
    elif how in ("nan", "inf"):
        edited_a[key][i, 0] = np.nan if how == "nan" else np.inf
    elif how == "drop":
        del edited_a[key]
    elif how == "shape":
        edited_a[key] = edited_a[key][:-1]
    elif how == "ppl":
        ep["ppl"][i] = round(ep["ppl"][i] * factor, 4)
    else:
        ep["ppl"][i] = {"ppl-nan": float("nan"), "ppl-negative": -ep["ppl"][i], "ppl-string": "48.69"}[how]
    try:
        bundle.write_model(CONTROL, MODEL, edited_r, edited_a, root=copy)  # edited and resealed
        with pytest.raises(UserError, match=r"damaged \(.*(nll\.npz|result\.json)"):
            bundle.load(MODEL, CONTROL)
    finally:
        bundle.write_model(CONTROL, MODEL, result, arrays, root=copy)
    bundle.load(MODEL, CONTROL)  # restored
