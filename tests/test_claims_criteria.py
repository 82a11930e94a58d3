"""Each reworded criterion decides fabricated tables the way its sentence of Chi et al.
(ACL 2023) says: a table that bears the sentence out passes, one that contradicts it fails,
and one whose intervals cannot tell is not decided (where the criterion reads intervals).
The earlier criteria stay on the board as legacy checks; some tests show where the two part.
"""

import json

import numpy as np
import pandas as pd
import pytest

from rflens import paper
from rflens.claims import gather, rows, scoreboard, statements, verdicts
from rflens.claims.outcomes import simultaneous
from rflens.experiments import tables as ex
from rflens.measure import columns, receptive
from rflens.setup.presets import mapped_windows
from rflens.setup import presets

L_TR, R, N = 32, 4, 400
LENGTHS = [L_TR * m for m in (1, 2, 4, 8, 16)]


def noisy(label, ratios, spread=0.01, seed=0, l_tr=L_TR, **extra):
    """A wide-table row built from per-segment NLLs: r(L) = ratios[i] on average, with
    per-segment differences of sd ``spread`` (the paired interval's width follows)."""
    rng = np.random.default_rng(seed)
    base = rng.gamma(2.0, 2.0, size=N)
    nll = np.stack([base + np.log(r) + (rng.normal(0, spread, N) if i else 0) for i, r in enumerate(ratios)])
    res = {"lengths": [l_tr * m for m in (1, 2, 4, 8, 16)], "ppl": list(np.exp(nll.mean(1))),
           "nll_per_segment": nll.tolist(), "seed": 0}
    out = {"label": label, "l_tr": l_tr, **extra}
    columns.add_ppl_columns(out, res, l_tr)
    out["nll"] = columns.segment_nlls(res)
    return out


FLAT, DOUBLING = [1, 1, 1, 1, 1], [1, 2, 4, 8, 16]


def result(cid, res):
    return {c["id"]: c for c in verdicts.check(res, [cid])}[cid]


# ----------------------------------------------------------------------------- intervals that hold together
def test_simultaneous_intervals_widen_with_the_number_read_and_keep_one_alone():
    assert simultaneous(1.2, 1.1, 1.3, 1) == (1.1, 1.3)
    lo4, hi4 = simultaneous(1.2, 1.1, 1.3, 4)
    lo12, hi12 = simultaneous(1.2, 1.1, 1.3, 12)
    assert lo12 < lo4 < 1.1 and 1.3 < hi4 < hi12
    # Bonferroni over 4: z(1 - 0.05/8) / z(0.975) = 2.498 / 1.960 on the log scale
    assert np.log(hi4 / 1.2) / np.log(1.3 / 1.2) == pytest.approx(2.4977 / 1.95996, rel=1e-3)


def test_a_claim_reading_many_intervals_is_undecided_where_one_alone_would_decide():
    """ALiBi rising by a margin that one 95% interval resolves but four together do not."""
    rows = [noisy("Δ=-7", FLAT, family="slope_shift", value=-7),
            noisy("Δ=-4", [1, 1.05, 1.05, 1.05, 1.05], family="slope_shift", value=-4)]
    t1 = pd.DataFrame(rows)
    for L in LENGTHS[1:]:  # each 95% interval alone: [1.015, 1.08], above 1.01
        t1.loc[1, [f"r@{L}", f"r_lo@{L}", f"r_hi@{L}"]] = 1.05, 1.015, 1.08
    c3 = result(3, {"table1": t1})
    assert c3["comparisons"] == 4 and c3["result"] == "not decided" and c3["legacy"]["result"] == "pass", c3
    t1.loc[1, [f"r_lo@{L}" for L in LENGTHS[1:]]] = 1.025  # wide enough apart to hold together
    assert result(3, {"table1": t1})["result"] == "pass"


# ----------------------------------------------------------------------------- claim 1
def windows(ratios_by_w, spread=0.01):
    return pd.DataFrame([noisy(f"w={w}", r, spread, seed=w, family="window", value=w, theoretical=R * w, erf=R * w,
                               share_in_ltr=0.99) for w, r in ratios_by_w.items()])


def test_claim1_reads_every_window_up_to_the_papers_w_100():
    mapped = mapped_windows(paper.WINDOW, R, L_TR)
    assert mapped[:3] == (8, 15, 19) and mapped_windows((paper.WINDOW_STABLE,), R, L_TR) == (19,)
    rising = [1, 1.2, 1.4, 1.5, 1.5]
    passing = windows({8: FLAT, 15: FLAT, 19: FLAT, 22: DOUBLING})
    failing = windows({8: FLAT, 15: FLAT, 19: rising, 22: DOUBLING})  # w = 19 is the paper's 100
    shaky = windows({8: FLAT, 15: [1, 1.08, 1.08, 1.08, 1.08], 19: FLAT, 22: DOUBLING}, spread=0.3)
    assert result(1, {"table1": passing})["result"] == "pass"
    c1 = result(1, {"table1": failing})
    assert c1["result"] == "fail" and c1["legacy"]["result"] == "pass"  # the earlier check read w = 8 alone
    assert c1["comparisons"] == 12 and "w=19" in c1["measured"] and "w=22" not in c1["measured"]
    assert result(1, {"table1": shaky})["result"] == "not decided"


def test_claim1_not_run_without_the_depth_of_the_windows():
    t1 = windows({8: FLAT, 22: DOUBLING}).drop(columns=["theoretical"])
    assert result(1, {"table1": t1})["result"] == "not run"


# ----------------------------------------------------------------------------- claim 3
@pytest.mark.parametrize("ratios, spread, expected", [
    ([1, 1.2, 1.3, 1.4, 1.5], 0.05, "pass"),  # every length rises
    ([1, 1.2, 1.3, 1.0, 1.5], 0.01, "fail"),  # one length stays the same: not "all increase"
    ([1, 1.02, 1.02, 1.02, 1.02], 0.4, "not decided"),
])
def test_claim3_every_length_rises(ratios, spread, expected):
    t1 = pd.DataFrame([noisy("Δ=-7", FLAT, family="slope_shift", value=-7),
                       noisy("Δ=-4", ratios, spread, family="slope_shift", value=-4)])
    c3 = result(3, {"table1": t1})
    assert c3["result"] == expected, c3
    assert "Δ=-4" in c3["measured"]  # the paper's Δ = 0 mapped to L_tr = 32, not the steepest


def test_claim3_names_why_it_reads_the_mapped_row():
    assert "slope x distance" in rows.alibi_row.__doc__ and "Table 3" in rows.alibi_row.__doc__


# ----------------------------------------------------------------------------- claim 8
def curve(l_tr, drop_at, length=512, seed=0, bumps=()):
    """A normalised gradient (index 0 = most recent) by absolute position: 0.004 up to
    ``drop_at`` (0-based, inclusive), 0.001 after, small noise, and optional bumps."""
    rng = np.random.default_rng(seed)
    g = np.where(np.arange(length) <= drop_at, 0.004, 0.001) + rng.uniform(0, 1e-4, length)
    for p, h in bumps:
        g[p] += h
    g = g[::-1].copy()
    g[0] = 0.3
    return list(g / g.sum())


def f7(curves, r4=4.0):
    rows = [noisy(f"Sinusoidal, L_tr={l_tr}", [1, 2, r4, r4, r4], l_tr=l_tr, pos="sinusoidal",
                  default_l_tr=l_tr == L_TR, normalized=c, jump_ok=True, jump_abs_pos=l_tr)
            for l_tr, c in curves.items()]
    return pd.DataFrame(rows)


def test_claim8_a_step_at_l_tr_is_a_jump_both_readings_of_the_position():
    for drop_at in (L_TR - 1, L_TR):  # the L_tr-th token, 1-based or 0-based
        s = receptive.step_at_l_tr(curve(L_TR, drop_at), L_TR)
        assert s["jump"] is True and s["step"] > s["neighbour_step"]
    assert result(8, {"figure7": f7({32: curve(32, 31), 64: curve(64, 63)})})["result"] == "pass"


def test_claim8_fails_when_the_largest_step_nearby_is_elsewhere():
    # the drop 10 tokens early, as a peak at 29 would be read: no jump at L_tr itself
    early = curve(32, 21)
    assert receptive.step_at_l_tr(early, 32)["jump"] is False
    c8 = result(8, {"figure7": f7({32: early, 64: curve(64, 63)})})
    assert c8["result"] == "fail"
    # a step at L_tr, but a larger bump among its neighbours (both sides are read)
    bumped = curve(64, 63, bumps=[(90, 0.01)])
    assert receptive.step_at_l_tr(bumped, 64)["jump"] is False
    assert receptive.step_at_l_tr(curve(64, 63, bumps=[(40, 0.01)]), 64)["jump"] is False


def test_claim8_undecided_when_the_perplexity_interval_straddles_2_and_not_run_without_curves():
    t = f7({32: curve(32, 31), 64: curve(64, 63)}, r4=2.0)
    t.at[0, "r_lo@128"], t.at[0, "r_hi@128"] = 1.8, 2.2
    assert result(8, {"figure7": t})["result"] == "not decided"
    assert result(8, {"figure7": t.drop(columns=["normalized"])})["result"] == "not run"


# ----------------------------------------------------------------------------- claim 10
def t3(sandwich_by_corpus, spread=0.01, lacking=()):
    rows = [noisy("Sandwich", r, spread, seed=i, pos="sandwich", corpus=c)
            for i, (c, r) in enumerate(sandwich_by_corpus.items())]
    out = pd.DataFrame(rows)
    out.attrs["lacking_corpora"] = list(lacking)
    return out


DIPS = [1, 0.97, 0.98, 1.0, 1.02]


def test_claim10_lower_perplexity_beyond_l_tr_on_every_corpus():
    good = t3({"prose": DIPS, "code": DIPS, "math": DIPS})
    assert result(10, {"table3": good})["result"] == "pass"
    # math never goes below ppl(L_tr): every lower bound is at or above 1
    flat_math = t3({"prose": DIPS, "code": DIPS, "math": [1, 1.01, 1.02, 1.03, 1.04]})
    c10 = result(10, {"table3": flat_math, "corpus": "prose"})
    assert c10["result"] == "fail" and c10["legacy"]["result"] == "pass"  # the earlier one read prose alone
    # a dip of 0.2% that the paired interval cannot tell from no dip (the earlier point comparison passed it)
    tiny_dip = t3({c: [1, 0.998, 1.0, 1.0, 1.0] for c in ("prose", "code", "math")}, spread=0.05)
    c10 = result(10, {"table3": tiny_dip, "corpus": "prose"})
    assert c10["result"] == "not decided" and c10["legacy"]["result"] == "pass"
    assert c10["comparisons"] == 3 * 4


def test_claim10_does_not_ask_sandwich_to_stay_flat():
    """The sentence is about a dip below ppl(L_tr), not about flatness up to 16 L_tr: a
    Sandwich that dips and then rises (as the paper reports on ArXiv) still passes."""
    dip_then_rise = t3({c: [1, 0.95, 0.97, 1.3, 1.8] for c in ("prose", "code", "math")})
    assert result(10, {"table3": dip_then_rise})["result"] == "pass"


def test_claim10_not_run_on_part_of_the_corpora():
    assert result(10, {"table3": t3({"prose": DIPS}, lacking=["code"])})["result"] == "not run"


# ----------------------------------------------------------------------------- claim 11
def fig11_and_table1(sandwich, alibi, windows_share):
    f11 = pd.DataFrame([{"label": "Sandwich", "pos": "sandwich", "share_in_ltr": sandwich}])
    rows = [noisy("Δ=-4", FLAT, family="slope_shift", value=-4, share_in_ltr=alibi)]
    rows += [noisy(f"w={w}", FLAT, family="window", value=w, theoretical=R * w, share_in_ltr=s)
             for w, s in zip((8, 15, 19, 30), windows_share)]
    return {"figure11": f11, "table1": pd.DataFrame(rows)}


@pytest.mark.parametrize("sandwich, alibi, wins, expected", [
    (0.60, 0.95, (1.0, 1.0, 0.99, 0.5), "pass"),  # about 60%, distinct (w = 30 is beyond the paper's 100)
    (0.73, 0.70, (1.0, 1.0, 0.99, 0.5), "fail"),  # not distinct from ALiBi (and not about 60%)
    (0.60, 0.95, (1.0, 0.65, 0.99, 0.5), "fail"),  # a window within 10 points
    (0.45, 0.95, (1.0, 1.0, 0.99, 0.5), "fail"),  # distinct, but not about 60%
])
def test_claim11_distinct_from_alibi_and_the_windows(sandwich, alibi, wins, expected):
    c11 = result(11, fig11_and_table1(sandwich, alibi, wins))
    assert c11["result"] == expected, c11
    assert c11["comparisons"] == 0 and "w=30" not in c11["measured"]


def test_claim11_the_earlier_band_let_alibi_like_shares_pass():
    c11 = result(11, fig11_and_table1(0.73, 0.70, (1.0, 1.0, 0.99, 0.5)))
    assert c11["legacy"]["result"] == "pass" and c11["result"] == "fail"


def test_claim11_not_run_without_table1():
    assert result(11, {"figure11": fig11_and_table1(0.6, 0.9, (1, 1, 1, 1))["figure11"]})["result"] == "not run"


# ----------------------------------------------------------------------------- claim 14
def t3_full(code_ratio=1.1, math_ratio=1.1, spread=0.01):
    """Table 3 on code and math: each baseline's perplexity = ratio x Sandwich's at every
    L > L_tr, the same segments (a shared difficulty) for every scheme."""
    rng = np.random.default_rng(1)
    hard = rng.gamma(2.0, 2.0, size=N)
    rows = []
    for corpus, ratio in (("prose", 1.1), ("code", code_ratio), ("math", math_ratio)):
        for pos in ("sandwich", "sinusoidal", "rotary", "alibi"):
            steps = [0.0] + [0.0 if pos == "sandwich" else np.log(ratio)] * 4
            nll = np.stack([hard + s + rng.normal(0, spread, N) for s in steps])
            res = {"lengths": LENGTHS, "ppl": list(np.exp(nll.mean(1))), "nll_per_segment": nll.tolist()}
            row = {"label": pos, "pos": pos, "corpus": corpus, "l_tr": L_TR}
            columns.add_ppl_columns(row, res, L_TR)
            row["nll"] = columns.segment_nlls(res)
            rows.append(row)
    return pd.DataFrame(rows)


def test_claim14_on_github_and_arxiv():
    assert result(14, {"table3": t3_full()})["result"] == "pass"
    c14 = result(14, {"table3": t3_full(math_ratio=0.9)})  # worse than the baselines on ArXiv (math)
    assert c14["result"] == "fail" and c14["legacy"]["result"] == "pass"  # the earlier one read code alone
    assert c14["comparisons"] == 2 * 3 * 4
    assert result(14, {"table3": t3_full(code_ratio=1.01, spread=0.3)})["result"] == "not decided"
    assert result(14, {"table3": t3_full()[lambda d: d.corpus != "math"]})["result"] == "not run"


# ----------------------------------------------------------------------------- claim 16
def test_claim16_reads_the_record_and_never_times(monkeypatch, tmp_path):
    from rflens.experiments import speed

    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path))
    monkeypatch.setattr(speed, "time_steps", lambda *a, **k: pytest.fail("the board timed something"))
    for name in ("table1", "table2", "figure7", "figure11", "table3", "table3_stored"):
        monkeypatch.setattr(ex, name, lambda *a, **k: pd.DataFrame())
    assert speed.load_speed_record(presets.get("smoke")) is None
    res = gather.gather("smoke", compute=False, progress=False)
    assert res["speed_record"] is None and result(16, res)["result"] == "not run"
    # a record written once, with the machine named: the board reads it
    monkeypatch.setattr(speed, "time_steps", lambda cfgs, *a, **k: {p: [0.010] * 12 if p == "t5" else [0.009] * 12
                                                                       for p in cfgs})
    rec = speed.record_speed(presets.get("smoke"), progress=False)
    assert speed.speed_record_path(presets.get("smoke")) == tmp_path / "speed" / "record-smoke.json"
    stored = json.loads(speed.speed_record_path(presets.get("smoke")).read_text())
    assert stored["machine"] == rec["machine"] and "cores" in stored["machine"] and stored["recorded"]
    monkeypatch.setattr(speed, "time_steps", lambda *a, **k: pytest.fail("the board timed something"))
    c16 = result(16, gather.gather("smoke", compute=False, progress=False))
    assert c16["result"] == "pass" and stored["machine"] in c16["measured"]  # T5 at 0.9 of Sandwich's speed


def test_a_shipped_preset_keeps_its_record_beside_its_models():
    from rflens.experiments import speed
    from rflens.store.bundle import bundle_dir

    assert speed.speed_record_path(presets.get("long")) == bundle_dir("long") / speed.RECORD_FILE


# ----------------------------------------------------------------------------- every claim
def test_every_claim_quotes_the_papers_sentence_and_its_check_says_whether_it_holds_by_construction():
    for c in statements.CLAIMS:
        assert c.sentence.startswith('"') and "(Section" in c.sentence, c.id
        assert c.check.__doc__ and ("construction" in c.check.__doc__), c.id  # says whether it holds by construction


def test_the_board_stores_both_verdicts_and_the_comparisons(tmp_path, monkeypatch):
    monkeypatch.setenv("RFLENS_RUNS", str(tmp_path))
    res = {"table1": windows({8: FLAT, 15: FLAT, 19: [1, 1.2, 1.4, 1.5, 1.5], 22: DOUBLING}),
           "log_fit": gather.log_fit()}
    board = scoreboard.scoreboard("smoke", results=res)
    stored = json.loads((tmp_path / "scoreboard-smoke.json").read_text())["claims"]
    one = {c["id"]: c for c in stored}
    assert one[1]["legacy"]["result"] == "pass" and one[1]["result"] == "fail" and one[1]["comparisons"] == 12
    assert one[12]["legacy"]["result"] == "pass" and one[12]["result"] == "fail"
    assert one[2]["legacy"] is None and one[2]["sentence"] == statements.BY_ID[2].sentence
    df = scoreboard.changes({"smoke": board})
    assert list(df.loc[1, ["earlier (smoke)", "now (smoke)"]]) == ["pass", "fail"]
    assert df.loc[2, "earlier (smoke)"] == "–" and "w=100" in df.loc[1, "the paper"]
    text = scoreboard.render_scoreboard("smoke", board=board)
    assert "earlier criterion: pass" in text and "intervals read: 12 (widened" in text
