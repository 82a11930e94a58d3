"""The sealed forecast is checked where it is read: its test sizes are sizes the test run
measures (a size between them would be set beside the nearest measured one) and every model it
names as tested is one it forecast; anything else is one line naming the file and the fix."""

from __future__ import annotations

import pytest
from hypothesis import given, HealthCheck, settings, strategies as st

from rflens.errors import UserError
from rflens.longrun import forecast, plan
from rflens.setup import presets
from rflens.store import bundle

TEST = "long-extended"
SIZES = plan.sizes(presets.long_run(TEST))
MODELS = {"alibi_slope_shift=4": ("0", "1"), "nope": ("0",)}  # model -> its seeds


def _seed(tokens: list[int]) -> dict:
    at = {str(t): {"r": 1.5, "range": [1.2, 1.8]} for t in tokens}
    curve = {"tokens_to_break": 10**8, "tokens_to_break_range": [5 * 10**7, 2 * 10**8],
             "tokens_to_lower_end_break": 3 * 10**8, "at": at}
    return {"fit_tokens": [1, 2, 3], "fit_r": [1.1, 1.2, 1.3], "last_r": 1.3, "last_r_low": 1.2,
            "power": curve, "decelerating": dict(curve)}


def _forecast(tokens: list[int], tested: list[str]) -> dict:
    return {"scale": "long", "test_tokens": tokens, "tested": tested,
            "models": {m: {"seeds": {s: _seed(tokens) for s in seeds}} for m, seeds in MODELS.items()}}


@pytest.fixture
def sealed(tmp_path, monkeypatch):
    """A long bundle of this test's own that holds a forecast only (its tested models not trained)."""
    monkeypatch.setenv("RFLENS_REFERENCE", str(tmp_path / "reference"))
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path / "runs"))

    def seal(f: dict) -> None:
        bundle.write_file("long", forecast.FORECAST, f)

    return seal


NAMES = [m if s == "0" else f"{m}_seed={s}" for m, seeds in MODELS.items() for s in seeds]


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens=st.lists(st.sampled_from(SIZES) | st.integers(1, 10**9), min_size=1, max_size=3, unique=True),
       tested=st.lists(st.sampled_from(NAMES) | st.sampled_from(["window_window=30", "nope_seed=3", "alibi"]),
                       min_size=1, max_size=4, unique=True))
def test_the_outcome_reads_only_a_forecast_of_the_tests_sizes_and_its_own_models(sealed, tokens, tested):
    sealed(_forecast(tokens, tested))
    wrong = [n for n in tested if n not in NAMES] or [t for t in tokens if t not in SIZES]  # read() names a model first
    if not wrong:
        out = forecast.outcome("long", TEST)
        assert list(out["model"]) == [n for n in tested for _ in tokens]
        assert (out["measured"] == "not trained yet").all()
        return
    with pytest.raises(UserError) as err:
        forecast.outcome("long", TEST)
    line = str(err.value)
    assert len(line.splitlines()) == 1 and str(bundle.bundle_dir("long") / forecast.FORECAST) in line, line
    assert "forecast.write" in line and str(wrong[0]) in line, line


@pytest.mark.parametrize("edit", [
    {"test_tokens": "49152000"}, {"test_tokens": [True]}, {"test_tokens": [0]}, {"test_tokens": [4.9e7]},
    {"tested": "nope"}, {"tested": [1]}, {"models": []}, {"models": {"nope": {"seeds": []}}},
])
def test_a_forecast_of_the_wrong_shape_is_one_line(sealed, edit):
    sealed(_forecast([SIZES[-1]], ["nope"]) | edit)
    for read in (lambda: forecast.read("long"), lambda: forecast.table("long"), lambda: forecast.outcome("long", TEST)):
        with pytest.raises(UserError) as err:
            read()
        assert len(str(err.value).splitlines()) == 1 and forecast.FORECAST in str(err.value)


def test_a_forecast_that_lacks_a_test_size_of_a_seed_is_named(sealed):
    f = _forecast([SIZES[-1]], ["nope"])
    del f["models"]["alibi_slope_shift=4"]["seeds"]["1"]["power"]["at"][str(SIZES[-1])]
    sealed(f)
    with pytest.raises(UserError, match=r"lacks the forecast of alibi_slope_shift=4_seed=1 at a test size"):
        forecast.read("long")
