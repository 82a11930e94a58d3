"""The forecast of when a rising curve reaches r = 2: both curve models on curves whose
answer is known, and the sealed forecast of the long run."""

import math

import numpy as np
import pytest

from rflens.longrun import forecast, plan
from rflens.store import bundle

TOKENS = np.array([2.0 ** 22, 2.0 ** 23, 2.0 ** 24, 2.0 ** 25])


def test_a_power_law_curve_is_forecast_where_it_reaches_the_level():
    # r - 1 doubles each doubling of tokens from 0.25 at the last size: 2 doublings to r = 2
    r = 1 + 0.25 * 2.0 ** np.arange(-3, 1)
    p = forecast.fit(TOKENS, r)
    d = forecast.doublings_to(p)
    assert d["power"][0] == pytest.approx(2.0)
    assert d["decelerating"][0] == pytest.approx(2.0)  # constant growth: q = 1, the same law
    assert forecast.predict(p, 1.0)["power"][0] == pytest.approx(1.5)


def test_a_decelerating_curve_that_levels_off_below_the_level_never_breaks():
    # log(r - 1) gains 1.0 then 0.5 per doubling: q = 0.5, at most 0.5 more, so r - 1 stays
    # below 0.1 e^0.5 < 1
    y = np.log(0.1) + np.array([-2.5, -1.5, -0.5, 0.0])
    p = forecast.fit(TOKENS, 1 + np.exp(y))
    assert p["decelerating"][2][0] == pytest.approx(0.5)
    assert math.isinf(forecast.doublings_to(p)["decelerating"][0])
    assert forecast.doublings_to(p)["power"][0] < math.inf  # the power law does reach it
    far = forecast.predict(p, 50.0)["decelerating"][0]
    assert far == pytest.approx(1 + 0.1 * math.exp(0.5), rel=1e-6)


def test_a_curve_already_past_the_level_needs_no_more_tokens():
    r = np.array([1.5, 1.8, 2.1, 2.4])
    assert forecast.doublings_to(forecast.fit(TOKENS, r))["power"][0] == 0.0


def test_a_flat_curve_is_not_rising():
    result = {"train": {"l_tr": 32}, "points": [
        {"tokens": int(t), "lengths": [32, 512], "r": [1.0, v], "r_low": [1.0, v - 0.05]}
        for t, v in zip(TOKENS, [1.0, 1.01, 1.02, 1.02])]}
    assert not forecast.is_rising(result)
    result["points"][-1]["r"][1], result["points"][-1]["r_low"][1] = 1.3, 1.2
    assert forecast.is_rising(result)


def test_the_long_run_carries_its_forecast_sealed_before_the_test():
    f = forecast.read("long")
    if f is None:
        pytest.skip("the long bundle has no forecast")
    bundle.check("long")
    assert f["tested"] and set(f["tested"]) <= set(bundle.entries("long"))
    for name in f["tested"]:
        base = name.partition("_seed=")[0]
        assert base in f["models"], name
    # the forecast is what the code computes from the shipped curves now
    again = forecast.forecast("long", f["test_tokens"], names=[n for m in f["models"] for n in _names(m, f)])
    assert again["models"] == f["models"]


def _names(model: str, f: dict) -> list[str]:
    return [model if s == "0" else f"{model}_seed={s}" for s in f["models"][model]["seeds"]]


def test_the_extension_trains_the_models_the_forecast_named_in_its_order():
    from rflens.setup import presets

    f = forecast.read("long")
    assert f is not None and tuple(f["tested"]) == presets.get("long-extended").models
    assert [m.name for m in plan.models(presets.get("long-extended"))] == f["tested"]
    assert f["test_tokens"] == plan.sizes(presets.get("long-extended"))[1:]


def test_the_outcome_sets_each_tested_model_beside_its_forecast():
    out = forecast.outcome("long")
    f = forecast.read("long")
    assert list(out["model"]) == f["tested"]
    done = out[out["r"].notna()]
    for _, row in done.iterrows():  # the retrained 33.6M point is the shipped one measured again
        again, shipped = row["again at 33.6M"].split(" (shipped ")
        assert abs(float(again) - float(shipped.rstrip(")"))) < 0.02
        assert row["r low"] <= row["r"] <= row["r high"]
    assert (out.loc[out["r"].isna(), "measured"] == "not trained yet").all()


def test_the_outcome_reading_counts_what_fell_inside_and_what_broke():
    import numpy as np
    import pandas as pd

    from rflens import readings as rd

    out = pd.DataFrame({"model": ["a", "b", "c", "d"], "tokens": "49.2M", "measured": ["2.5 [2.2, 2.8]", "2.1 [1.9, 2.3]",
                        "1.5 [1.4, 1.6]", "not trained yet"], "r": [2.5, 2.1, 1.5, np.nan], "r low": [2.2, 1.9, 1.4, np.nan],
                        "r high": [2.8, 2.3, 1.6, np.nan], "inside (power)": [True, False, True, None],
                        "inside (decelerating)": [True, True, False, None],
                        "growth before": [2.0, 1.8, 1.5, np.nan], "growth in the test": [1.5, 1.2, 1.6, np.nan]})
    text = str(rd.forecast_outcome(out))
    assert "3 of the 4 models" in text and "power law's range for 2 of 3" in text
    assert "decelerating model's for 2 of 3" in text and "Broken by 49.2M" in text
    assert "Still below 2: c" in text
    assert "a median ×1.50 in the test's last step, against ×1.80" in text and "slower for 2 of the 3" in text
    assert "The rise is slowing" in text
    faster = str(rd.forecast_outcome(out.assign(**{"growth in the test": [2.5, 1.9, 1.0, np.nan]})))
    assert "slower for 1 of the 3" in faster and "is not slowing" in faster
    assert "trained to 49.2M yet" in str(rd.forecast_outcome(out.assign(r=np.nan)))
    assert "All 4 models the forecast named are trained to 49.2M." in str(rd.forecast_outcome(out.assign(r=2.5)))


def test_growth_per_doubling_is_the_geometric_factor_of_r_minus_1():
    assert forecast.growth_per_doubling(2**20, 1.1, 2**22, 1.4) == pytest.approx(2.0)  # 0.1 -> 0.4 over two doublings
    assert forecast.growth_per_doubling(2**20, 1.2, 1.5 * 2**20, 1.2) == pytest.approx(1.0)
    assert math.isnan(forecast.growth_per_doubling(2**20, 1.0, 2**21, 1.3))  # r - 1 = 0 has no growth factor


def test_the_pilot_and_the_runs_are_read_one_knob_at_a_time():
    from rflens.readings import long_runs, pilot

    table = long_runs.pilot_and_runs(pilot.pilot_table())
    assert {"long-repeated", "long"} <= set(table["source"])
    text = str(long_runs.pilot_reconciled(table))
    assert "`long-repeated` at d = 64" in text and "the text (" in text


def test_the_extension_has_no_board_of_its_own(capsys):
    from rflens.cli import main

    assert main(["claims", "--scale", "long-extended"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--scale long" in err[0]


def test_the_outcome_names_each_model_by_the_papers_setting():
    from rflens.longrun.compare import paper_label

    assert paper_label("alibi_slope_shift=4_seed=2", "long") == "ALiBi Δ = 8, seed 2"
    assert paper_label("window_window=19", "long") == "window w = 100"
    assert paper_label("nope", "long") == "NoPE"
    assert paper_label("alibi_slope_shift=3", "deep") == "ALiBi Δ = 6"  # the same setting, mapped by L_tr alone
    named = forecast.outcome("long")["the paper's"]
    assert "ALiBi Δ = 8, seed 1" in set(named) and "window w = 160" in set(named)


def test_the_naive_forecasts_are_the_last_value_and_the_line_through_the_last_two_sizes():
    import numpy as np

    tokens, r = np.array([2.0**20, 2.0**21, 2.0**22]), np.array([1.0, 1.2, 1.5])
    assert forecast.naive(tokens, r, 2.0**22) == {"no change": 1.5, "line": 1.5}
    assert forecast.naive(tokens, r, 2.0**23)["line"] == pytest.approx(1.8)  # +0.3 a doubling
    assert forecast.naive(tokens, r, 2.0**22.5)["line"] == pytest.approx(1.65)
    assert forecast.naive(tokens, r, 2.0**23)["no change"] == 1.5


def test_the_outcome_scores_the_naive_forecasts_against_the_measured_interval():
    out = forecast.outcome("long")
    done = out[out["r"].notna()]
    assert {"no change", "line", "inside (no change)", "inside (line)", "doublings past the fit"} <= set(out)
    for _, row in done.iterrows():
        for cm in ("no change", "line"):
            assert row[f"inside ({cm})"] == (row["r low"] <= row[cm] <= row["r high"])
    f = forecast.read("long")
    assert out["doublings past the fit"].iloc[0] == pytest.approx(np.log2(f["test_tokens"][-1] / 2**25), abs=1e-9)


def test_the_outcome_reading_names_the_baselines_and_how_far_the_test_reached():
    import pandas as pd

    from rflens import readings as rd

    out = pd.DataFrame({"model": ["a", "b"], "tokens": "49.2M", "measured": ["2.5 [2.2, 2.8]", "1.5 [1.4, 1.6]"],
                        "r": [2.5, 1.5], "r low": [2.2, 1.4], "r high": [2.8, 1.6], "inside (power)": [True, False],
                        "inside (decelerating)": [True, True], "inside (no change)": [False, True],
                        "inside (line)": [True, True], "doublings past the fit": [0.55, 0.55],
                        "growth before": [2.0, 1.5], "growth in the test": [1.5, 1.6]})
    text = str(rd.forecast_outcome(out))
    assert "0.55 of a doubling" in text and "last shipped size, 1 of 2" in text and "last two sizes, 2 of 2" in text
    assert "no evidence for its model" in text  # the line scored as well as the best curve model
    worse = str(rd.forecast_outcome(out.assign(**{"inside (line)": [False, True]})))
    assert "no evidence" not in worse
