"""Why a claim does not hold, read from the measurements (rflens.claims.causes)."""

from __future__ import annotations

import pandas as pd

from rflens.claims import causes


def _row(cid: int, result: str, **more) -> dict:
    return {"id": cid, "result": result, "measured": more.pop("measured", f"measured {cid}"), **more}


def test_each_kind_of_cause_is_read_from_what_was_measured():
    board = [_row(1, "pass"), _row(2, "not run", measured="not run: no window shipped yet"),
             _row(4, "not decided", measured="the seeds disagree: ...", seeds={0: "fail", 1: "pass"}),
             _row(10, "not decided", straddling=[{"estimate": 0.99, "low": 0.96, "high": 1.03, "threshold": 1.0,
                                                  "above": False}]),
             _row(12, "fail"), _row(5, "fail")]
    found = causes.causes(board, "tiny")  # a scale whose models are not shipped: no curves to read
    assert 1 not in found  # a claim that holds has no cause
    assert found[2] == ("not run", "no window shipped yet")
    assert found[4] == ("seeds", "the training seeds disagree (seed 0 fail, seed 1 pass)")
    assert found[10][0] == "straddles" and "0.99 [0.96, 1.03] against 1" in found[10][1]
    assert found[12][0] == "construction"  # a closed form: the same at every scale
    assert found[5][0] == "scale" and "4 layers, d = 64 and 0.6M tokens" in found[5][1]
    # a level this book chose decides it when the verdict flips inside the range shown
    lean = {"tol": pd.DataFrame({"flips at": ["", "1.15"]}, index=pd.MultiIndex.from_tuples(
        [("tiny", 1), ("tiny", 5)], names=["scale", "claim"]))}
    assert causes.causes(board, "tiny", lean)[5] == ("level", "set by the flat level r <= 1.10 this book chose: "
                                                              "the verdict changes at 1.15")


def test_the_long_runs_failures_are_traced_to_the_window_map_the_premise_and_the_rise():
    board = [_row(1, "fail"), _row(7, "fail"), _row(2, "fail"), _row(3, "fail")]
    found = causes.causes(board, "long")
    kind, line = found[1]
    # w = 15 and 19 (the paper's 80 and 100) reach past L_tr = 32 through four layers
    assert kind == "mapping" and "w = 15: ERF" in line and "L_tr = 32" in line and "at R = 4" in line
    kind, line = found[7]
    assert kind == "premise" and "window w=30 L_tr=64" in line and "against an ERF of" in line
    kind, line = found[2]
    assert kind == "rising" and line.startswith("still rising when training stops") and "window w=30" in line
    assert found[3][0] == "scale"  # nothing else measured: what is left is size


def test_the_compact_board_fits_a_claim_on_a_line_in_the_papers_values():
    from rflens.claims import scoreboard, statements

    boards = {"tiny": [_row(c.id, "pass") for c in statements.CLAIMS], "long": [_row(c.id, "fail") for c in statements.CLAIMS]}
    df = scoreboard.compact(boards)
    assert list(df.columns) == ["claim", "tiny", "long", "the paper"] and len(df) == 16
    assert df.loc[1, "claim"] == "windows up to w = 100 extrapolate" and df.loc[4, "claim"].startswith("Δ = -3 plateaus")
    assert all(len(text) <= 60 for text in df["claim"])  # a few words each
    # TeX of the paper's sentences goes to MathJax's inline delimiters, which it typesets in tables
    assert scoreboard.math_html("up to $w=100$ and $L_{ex}>L_{tr}$") == r"up to \(w=100\) and \(L_{ex}>L_{tr}\)"
    assert "$" not in "".join(scoreboard.sentences()["the paper"])


def test_the_key_figure_names_the_papers_delta_and_the_depth():
    from rflens.longrun.compare import sweep_ends
    from rflens.publish.reproduce import key_figure

    ends = sweep_ends(("long", "deep"))  # the shipped bundles: the paper's Δ = -3 and 8 at each depth
    assert list(dict.fromkeys(ends["name"])) == ["long/alibi_slope_shift=-7", "long/alibi_slope_shift=4",
                                                 "deep/alibi_slope_shift=-6", "deep/alibi_slope_shift=5"]
    fig = key_figure(ends)
    assert [t.name for t in fig.data if t.name and t.name.startswith("ALiBi")][:4] == [
        "ALiBi Δ = -3, 4 layers", "ALiBi Δ = 8, 4 layers", "ALiBi Δ = -3, 12 layers", "ALiBi Δ = 8, 12 layers"]
    assert "4 and 12 layers" in fig.layout.title.text


def test_a_measurement_alike_at_every_seed_is_said_once():
    from rflens.claims import verdicts

    row = {"result": "not decided", "comparisons": 2, "legacy": None, "straddling": []}
    rows = {0: {**row, "measured": "prose: Sinusoidal 40.47; code: Sinusoidal 15.94"},
            1: {**row, "measured": "prose: Sinusoidal 41.38; code: Sinusoidal 15.94"}}
    measured = verdicts.agree(rows)["measured"]
    assert measured.count("15.94") == 1 and "seed 0 not decided: prose: Sinusoidal 40.47" in measured
    assert measured.startswith("every seed agrees: the same at every seed: code: Sinusoidal 15.94; seed 0")
