"""The book's computed sentences (rflens.readings), on synthetic tables: each says what the
numbers say, whichever way they fall; and the chapters state no measured number in fixed
prose."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from rflens import readings as rd
from rflens.claims import statements, verdicts
from rflens.setup.presets import BOOK_LONG
from rflens.setup.schemes import title
from rflens.publish import reproduce

from test_claims import DOUBLING, FLAT, L_TR, row, table1

BOOK = Path(__file__).resolve().parents[1] / "book"


def with_interval(r: dict, half: float) -> dict:
    """Give a synthetic row a paired interval of +-half around each r(L)."""
    for key in [k for k in r if k.startswith("r@")]:
        L = key[2:]
        r[f"r_lo@{L}"], r[f"r_hi@{L}"] = r[key] - half, r[key] + half
    return r


def _no_plain_notation(text: str) -> bool:
    outside = re.sub(r"`[^`]*`|\$[^$]*\$", "", text)
    return "L_tr" not in outside and "L_ex" not in outside and "<=" not in outside


# ----------------------------------------------------------------------------- notation
def test_tex_typesets_the_books_notation_but_not_code():
    assert rd.tex("r(16 L_tr) <= 1.10, d_bar = 128, `l_tr`") == r"r(16 $L_{tr}$) ≤ 1.10, $\bar d$ = 128, `l_tr`"
    assert rd.tex("`--set L_tr=4`") == "`--set L_tr=4`"


def test_prose_displays_as_markdown():
    assert rd.Prose("**x**")._repr_markdown_() == "**x**"


# ----------------------------------------------------------------------------- claims
def test_verdicts_and_summary_follow_the_results():
    rows = verdicts.check({"table1": table1(window=((4, FLAT), (64, FLAT)))}, [1, 2, 7])
    text = rd.verdicts(rows, "tiny")
    assert "**Claim 1 holds.**" in text and "**Claim 2 does not hold.**" in text
    assert "**Claim 7 was not run.**" in text and _no_plain_notation(text)
    assert "It holds by construction" not in text.split("**Claim 2")[0] and "The paper reports:* w" in text
    summary = rd.held(rows, "tiny")
    assert summary == "- At the `tiny` scale, held: claim 1; did not hold: claim 2; not run: claim 7."
    assert rows[0]["statement"] not in summary  # stated once, with its verdict


def test_board_counts_each_result_by_number():
    rows = [{"id": 13, "result": "pass"}, {"id": 2, "result": "fail"}, {"id": 3, "result": "pass"},
            {"id": 4, "result": "not decided"}]
    assert rd.board(rows, "tiny") == ("At the `tiny` scale, of 4 claims: 2 pass (claims 13 and 3); 1 fail (claim 2); "
                                      "1 not decided (claim 4); "
                                      "0 were not run. Claim 13 rests on a closed form, the same verdict at every "
                                      "scale; of the 3 that rest on trained models, 1 pass, 1 fail, 1 are not decided "
                                      "and 0 were not run.")


def test_claim_statements_name_what_their_criterion_tests():
    """A criterion of r >= 2 is a claim that a model "breaks"; one of r <= 1.10 up to
    16 L_tr, that it "extrapolates"."""
    for c in statements.CLAIMS:
        if f">= {statements.BREAKS:g}" in c.criterion and "r(" in c.criterion:
            assert "breaks" in c.statement, c.id
        if f"r(L) <= {statements.TOL:.2f}" in c.criterion:
            assert "extrapolate" in c.statement, c.id


# ----------------------------------------------------------------------------- chapter 3
def _t1(rise: float, half: float) -> pd.DataFrame:
    t1 = table1(window=((4, FLAT), (64, FLAT)), shift=((-3, FLAT), (6, [1, rise, rise, rise, rise])),
                same=((0, FLAT), (8, FLAT)))
    return pd.DataFrame([with_interval(r, half) for r in t1.to_dict("records")])


def test_table1_reading_counts_the_flat_models_and_names_the_failures():
    t1 = _t1(1.5, 0.05)
    text = rd.table1(t1, "tiny", n_layer=2, pilot=pd.DataFrame())
    n_flat = int(t1["extrapolates"].sum())
    assert text.startswith(f"- At the `tiny` scale {n_flat} of the {len(t1)} models extrapolate")
    assert "Δ = 6" in text and "1.500 [1.450, 1.550]" in text
    assert "None breaks" in text  # 1.45 on the lower bound is no break


def test_table1_reading_says_breaks_when_the_lower_bound_reaches_2():
    text = rd.table1(_t1(2.5, 0.1), "tiny", n_layer=2, pilot=pd.DataFrame())
    assert "None breaks" not in text and "(r ≥ 2 on the lower bound)" in text


def test_table1_reading_names_the_windows_that_cannot_fail():
    # R = 2 layers, L_tr = 16: w = 4 has R(w - 1) + 1 = 7 <= 16; w = 64 does not
    text = rd.table1(_t1(1.5, 0.05), "tiny", n_layer=2, pilot=pd.DataFrame())
    assert "w = 4 has a theoretical field" in text and "w = 64" not in text


def test_table1_reading_quotes_the_pilots_growth_with_tokens():
    pilot = pd.DataFrame([{"model": "alibi_max", "R": 4, "d": 128, "l_tr": L_TR, "tokens": t, "r(16 L_tr)": r}
                          for t, r in (("1M", 1.11), ("3M", 1.32))])
    text = rd.table1(_t1(1.5, 0.05), "tiny", n_layer=2, pilot=pilot)
    assert "r(16 $L_{tr}$) = 1.11 after 1M and 1.32 after 3M" in text
    other = pilot.assign(l_tr=2 * L_TR)  # another L_tr: not this scale's configuration
    assert "pilot" not in rd.table1(_t1(1.5, 0.05), "tiny", n_layer=2, pilot=other)


# ----------------------------------------------------------------------------- chapter 4
def test_erf_agreement_counts_and_sorts_the_misses():
    erf = {("window", 4): 8, ("window", 64): 100, ("slope_shift", -3): 100, ("slope_shift", 6): 100,
           ("same_slope", 0): 8, ("same_slope", 8): 8}
    t1 = table1(shift=((-3, FLAT), (6, DOUBLING)), erf=lambda fam, v: erf[(fam, v)])
    text = rd.erf_agreement(t1)
    assert "agree for 4 of the 6 models (67%)" in text
    assert "1 model extrapolates with an ERF beyond $L_{tr}$ (Δ = -3: ERF 100)" in text
    assert "1 fails with an ERF within $L_{tr}$ (h = 8: ERF 8)" in text


def test_table2_reading_says_when_nothing_was_retrained():
    text = rd.table2(table1(), pd.DataFrame(), ["w=4"])
    assert "Not retrained, because it already extrapolates in Table 1: w=4." in text
    assert "nothing was retrained" in text


def test_table2_reading_compares_the_retrained_model_at_the_same_lengths():
    t1 = table1()
    old = t1[t1["label"] == "Δ = 6"].iloc[0]
    new = row("Δ = 6, L_tr = 64", [1, 1, 1], family="slope_shift", value=6, l_tr=4 * L_TR,
              base=0.5 * float(old[f"ppl@{4 * L_TR}"]), old_erf=100)
    text = rd.table2(t1, pd.DataFrame([new]), [])
    assert "is flat from its new $L_{tr}$ = 64 on" in text and "(ERF 100 before)" in text
    assert "its perplexity is 0.125 to 0.500 times as large, lower" in text  # the old Δ=6 doubles at each length


def test_table2_reading_gives_the_retrained_models_own_erf_and_its_bound():
    t1 = table1()
    new = row("Δ = 6, L_tr = 64", [1, 1, 1], family="slope_shift", value=6, l_tr=4 * L_TR, old_erf=127,
              old_erf_capped=True, erf=495, erf_capped=False)
    text = rd.table2(t1, pd.DataFrame([new]), [])
    assert "(ERF ≥ 127 before)" in text and "its own ERF is 495, beyond its new $L_{tr}$" in text


# ----------------------------------------------------------------------------- chapter 5
def test_figure7_reading_places_the_peak_against_its_window():
    base = {"pos": "sinusoidal", "few": 4, "jump_tolerance": 1.6}
    near = with_interval(row("Sinusoidal, L_tr=32", [1, 2.5, 2.5, 2.5, 2.5], l_tr=32, **base, jump_abs_pos=32, jump_ok=True), 0.2)
    early = with_interval(row("Sinusoidal, L_tr=16", [1, 1.5, 1.7, 1.8, 1.8], **base, jump_abs_pos=11, jump_ok=False), 0.1)
    rot = with_interval(row("Rotary", [1, 1.1, 1.2, 1.3, 1.3], pos="rotary"), 0.05)
    text = rd.figure7(pd.DataFrame([near, early, rot]))
    assert "absolute position 32, inside the window 31–33" in text and "(it breaks)" in text
    assert "absolute position 11, outside the window 15–17 around $L_{tr}$ (-5)" in text
    assert "a rise that stays below a break" in text


# ----------------------------------------------------------------------------- chapter 6
def test_table3_reading_sorts_the_schemes_of_each_corpus():
    rows = []
    for corpus in ("prose", "code"):
        for pos, ratios, base in (("sandwich", [1, 0.98, 0.99, 1, 1], 10.0), ("alibi", FLAT, 9.5),
                                  ("sinusoidal", DOUBLING, 9.0), ("rotary", [1, 1.2, 1.3, 1.4, 1.5], 11.0)):
            r = row(title(pos), ratios, base=base, pos=pos, corpus=corpus)
            rows.append(with_interval(r, 0.05))
    t3 = pd.DataFrame(rows)
    text = rd.table3(t3)
    prose, code = text.split("**Code:**")
    assert "break:" in prose and re.search(r"rise without breaking: [^;]*rotary", prose.lower())
    assert "Lowest ppl($L_{tr}$): Sinusoidal (9.00)" in prose
    assert "r(2 $L_{tr}$) = 0.980 [0.930, 1.030]: no gain is established (the paired interval contains 1)" in prose
    assert re.search(r"below sandwich at some length beyond \$l_\{tr\}\$: alibi", code.lower())


def test_speed_sentence_follows_the_interval():
    assert rd.speed({"result": "pass", "measured": "T5 / Sandwich = 0.9"}).endswith("T5 is the slower")
    assert rd.speed({"result": "fail", "measured": "x"}).endswith("no difference is established")


# ----------------------------------------------------------------------------- chapters 7, 8
def test_log_fit_reading_names_the_closer_fit():
    text = rd.log_fit({"a": -0.83, "b": -0.79}, {"a": -1.0, "b": 0.0}, (-0.825, -0.8))
    assert "closer to the fit over all distances" in text
    text = rd.log_fit({"a": -1.0, "b": 0.0}, {"a": -0.83, "b": -0.79}, (-0.825, -0.8))
    assert "closer to the fit over the nearest distances" in text


def test_log_like_reading_splits_the_family():
    fam = pd.DataFrame([{"label": "Sandwich", "extrapolates": True, "max_r": 1.01},
                        {"label": "T5", "extrapolates": False, "max_r": 1.2}])
    assert "Sandwich extrapolates, while T5 (largest r 1.200) does not" in rd.log_like(fam, "tiny")
    assert "all 1 log-like" in rd.log_like(fam.iloc[:1], "tiny")


def test_log_like_reading_gives_each_corpus_its_sentence():
    fam = pd.DataFrame([{"corpus": "prose", "label": "Sandwich", "extrapolates": True, "max_r": 1.01},
                        {"corpus": "prose", "label": "T5", "extrapolates": False, "max_r": 2.5},
                        {"corpus": "code", "label": "Sandwich", "extrapolates": True, "max_r": 1.0},
                        {"corpus": "code", "label": "T5", "extrapolates": True, "max_r": 1.02}])
    text = rd.log_like(fam, "long")
    assert text.index("on prose the log-like schemes split") < text.index("on code all 2 log-like schemes")
    assert "on prose" not in rd.log_like(fam[fam.corpus == "prose"], "long")  # one corpus: no corpus named


def _protocol_rows(label, last, non, non_top):
    out = [{"label": label, "protocol": "last_token", "l_tr": 16, "l_ex": 16, "ppl": last, "ci_low": last - 1, "ci_high": last + 1}]
    for L, p in ((16, non), (256, non_top)):
        out.append({"label": label, "protocol": "non_overlapping", "l_tr": 16, "l_ex": L, "ppl": p,
                    "ci_low": p - 0.1, "ci_high": p + 0.1})
    return out


def test_protocols_reading_reads_the_early_token_curse():
    pr = pd.DataFrame(_protocol_rows("ALiBi", 10.0, 12.0, 11.0) + _protocol_rows("Sinusoidal", 10.0, 9.0, 20.0))
    text = rd.protocols(pr)
    assert "above the last-token one for 1 of 2 models" in text and "does not show for every model" in text
    assert "ALiBi: at $L_{ex}$ = $L_{tr}$ the non-overlapping perplexity is +20.0%" in text
    assert "from $L_{ex}$ = 16 to 256 it falls by 8.3%, beyond the overlap" in text
    assert "it rises by 122.2%" in text
    assert rd.protocols(pr, brief=True).count("\n") == 0


# ----------------------------------------------------------------------------- the chapters
CHAPTERS_WITH_CLAIMS = ("03", "04", "05", "06", "07", "09")
# Numbers fixed prose may state: the criteria (1.10, 95% intervals, the 0.99 threshold), the
# paper's reported values (0.825 and 0.8 of its log curve, T5 10% slower, 60% of the
# gradient), preset facts (0.6M training tokens, 2% of the segment) and YaRN's published
# temperature (0.1 ln s + 1).
FIXED_NUMBERS = {"1.10", "95%", "0.99", "99%", "0.825", "0.8", "10%", "60%", "0.6", "2%", "0.1"}


def _cells(chapter):
    return json.loads(next(BOOK.glob(f"{chapter}_*.ipynb")).read_text())["cells"]


@pytest.mark.parametrize("chapter", list(reproduce.chapters()))
def test_chapter_prose_states_no_measured_number(chapter):
    """Numbers a build measures, and the presets' design numbers, are computed into the page
    (rflens.readings), never typed into its prose."""
    for cell in _cells(chapter):
        if cell["cell_type"] == "markdown":
            text = re.sub(r"`[^`]*`", "", "".join(cell["source"]))
            assert set(re.findall(r"\d+\.\d+|\d+%", text)) <= FIXED_NUMBERS, (chapter, cell["id"])


@pytest.mark.parametrize("chapter", CHAPTERS_WITH_CLAIMS)
def test_a_chapter_summary_lists_its_claims(chapter):
    cells = _cells(chapter)
    summary = max(i for i, c in enumerate(cells) if "## Summary" in "".join(c["source"]))
    after = "".join("".join(c["source"]) for c in cells[summary:] if c["cell_type"] == "code")
    assert "rd.held(" in after
    assert all(c["metadata"].get("tags") == ["remove-input"] for c in cells[summary:]
               if c["cell_type"] == "code" and "rd." in "".join(c["source"]))


@pytest.mark.parametrize("chapter", list(reproduce.chapters()))
def test_chapter_prose_typesets_its_notation(chapter):
    for cell in _cells(chapter):
        if cell["cell_type"] == "markdown":
            text = re.sub(r"```.*?```", "", "".join(cell["source"]), flags=re.S)
            assert _no_plain_notation(re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)), (chapter, cell["id"])


def test_the_this_build_box_is_computed_from_the_board_and_the_long_run():
    # the rows of bundle.table: r_horizon_lo is each model's lower bound of r(16 L_tr) at its own L_tr
    long = pd.DataFrame([{"name": "c", "complete": True, "l_tr": 512, "tokens": 2_097_152, "r_lo@512": 1.0,
                          "r_horizon_lo": 1.2},
                         {"name": "a", "complete": True, "l_tr": 32, "tokens": 8_388_608, "r_lo@512": 2.1,
                          "r_horizon_lo": 2.1},
                         {"name": "a", "complete": True, "l_tr": 32, "tokens": 4_194_304, "r_lo@512": 1.5,
                          "r_horizon_lo": 1.5},
                         {"name": "b", "complete": False, "l_tr": 32, "tokens": 1_048_576, "r_lo@512": 1.0,
                          "r_horizon_lo": 1.0}])
    box = rd.this_build("tiny", {"pass": 5, "fail": 7, "not decided": 2, "not run": 2}, long, 40,
                        {"pass": 3, "fail": 7, "not decided": 1, "not run": 2})
    assert "of the 13 that rest on trained models (the others on a closed form, the same at every scale): 3 pass, 7 fail" in box
    assert box.startswith(":::{admonition} This build") and box.rstrip().endswith(":::")
    assert "5 pass, 7 fail, 2 not decided, 2 not run" in box and "16 claims" in box
    assert "needed 8.4M training tokens; a model here sees 0.6M" in box and "2 of its 40 models shipped" in box
    assert "trained on 2.1M tokens each (a on 8.4M)" in box and "second long run" not in box
    # a model on more tokens because it trained the same steps at a longer L_tr says so
    runs = pd.DataFrame([{"name": n, "label": n.upper(), "complete": True, "l_tr": lt, "tokens": t, "r_horizon_lo": 1.0}
                         for n, lt, t in [("x", 32, 2_097_152), ("y", 32, 2_097_152), ("z", 64, 4_194_304)]])
    assert "2.1M tokens each (Z on 4.2M: the same steps at a longer $L_{tr}$)" in rd.this_build("tiny", None, runs, 3)
    assert "second long run, on text it repeats at most 4 times" in rd.this_build("tiny", None, long, 40, second=(3, 62))
    assert "3 of its 62 models shipped" in rd.this_build("tiny", None, long, 40, second=(3, 62))
    # a preset with another L_tr reads the long run's breaks at the long run's own 16 L_tr
    assert "needed 8.4M training tokens; a model here sees 4k" in rd.this_build("smoke", None, long, 40)
    assert "blow-ups" not in rd.this_build("smoke", None, long.assign(r_horizon_lo=1.5), 40)
    # a model at L_tr = 512 breaks at r(16 x 512), not at its r(512) = r(L_tr)
    wide = long.assign(r_horizon_lo=[2.5, 1.5, 1.5, 1.0])
    assert "needed 2.1M training tokens" in rd.this_build("tiny", None, wide, 40)
    linked = rd.this_build("tiny", None, long, 40, downloads={"long-repeated": ("downloads/a.zip", 11_000_000)})
    assert "{download}`long-repeated <downloads/a.zip>` (11.0 MB)" in linked
    assert "download" not in rd.this_build("tiny", None, long, 40)
    empty = rd.this_build("smoke", None, long.iloc[0:0], 40)
    assert "not computed in this build" in empty and "0 of its 40 models shipped." in empty and "blow-ups" not in empty


def _board(results: dict[int, str]) -> list[dict]:
    return [{"id": i, "result": r, "statement": f"claim {i}", "measured": f"measured {i}"} for i, r in results.items()]


def test_the_first_screen_says_what_training_further_did_to_the_rising_models():
    import numpy as np

    out = pd.DataFrame({"model": ["a", "a_seed=2", "n", "w", "w_seed=1", "x"], "tokens": "49.2M",
                        "the paper's": ["ALiBi Δ = 8", "ALiBi Δ = 8, seed 2", "NoPE", "window w = 160",
                                        "window w = 160, seed 1", "window w = 80"],
                        "r": [2.1, 2.4, 2.9, 1.6, 1.7, np.nan], "r low": [1.9, 2.1, 2.5, 1.5, 1.6, np.nan],
                        "growth before": [1.6, 1.9, 1.7, 1.7, 1.6, np.nan],
                        "growth in the test": [1.5, 1.2, 2.0, 1.3, 1.4, np.nan]})
    line = rd.index_box.more_training(out)
    assert "5 trained on to 49.2M tokens (1 still training)" in line
    assert "1 broke (NoPE); 2 reached 2" not in line  # seed 2 of Δ = 8 broke too
    assert "2 broke (ALiBi Δ = 8 (seed 2) and NoPE)" in line
    assert "1 reached 2 with an interval still below it (ALiBi Δ = 8)" in line
    assert "2 stayed below 2 (window w = 160 (seeds 0 and 1))" in line and "for 4 of 5" in line
    assert line in rd.under_the_figure({}, pd.DataFrame(), out)
    assert "More training" not in rd.under_the_figure({}, pd.DataFrame(), out.assign(r=np.nan))


def test_the_first_screen_reads_the_boards_the_model_and_the_sweep_from_their_sources():
    rows = [("alibi_slope_shift=4", "ALiBi Δ=4", t, lo) for t, lo in [(1_048_576, 1.5), (2_097_152, 2.2), (4_194_304, 2.6)]]
    rows += [("alibi_slope_shift=2", "ALiBi Δ=2", t, lo) for t, lo in [(1_048_576, 1.01), (4_194_304, 1.3)]]
    rows += [("alibi_slope_shift=-4", "ALiBi Δ=-4", 4_194_304, 0.99)]
    sweep = pd.DataFrame([{"name": n, "label": lab, "tokens": t, "r_horizon_lo": lo, "r_horizon_hi": lo + 0.02}
                          for n, lab, t, lo in rows])
    here = _board({1: "pass", 2: "fail", 6: "not decided", 7: "not run"})
    long = _board({1: "fail", 2: "fail", 6: "fail", 7: "pass"})
    boards = {"long-repeated": _board({1: "pass", 2: "pass", 6: "pass", 7: "pass"}), "long": long}
    screen, under = rd.first_screen(boards), rd.under_the_figure(boards, sweep)
    assert screen.startswith(":::{admonition} What this book finds")
    assert under.startswith(":::{admonition} Reading the key figure")
    # the thesis, in defined words where it is first stated, as the long run on new text decides it
    assert ("**At 4 layers** (`long`, the book's long run on new text) **The paper's thesis** (" in screen
            and "that a model extrapolates when its *effective receptive field* (ERF: the span of recent tokens that "
                "holds 99% of the gradient of its last prediction) fits inside its training length L_tr (claim 6; in "
                "short, an ERF within L_tr predicts extrapolation), does not hold: measured 6." in
            screen.replace("$L_{tr}$", "L_tr"))
    # r(16 L_tr), breaking and Δ are defined where the key figure's line first uses them
    assert "r(16 $L_{tr}$), the perplexity at 16 times $L_{tr}$ over that at $L_{tr}$" in under
    assert "Δ shifts every head's slope exponent" in under
    # claim 6's measurement, said in a clause: the share of models the ERF predicts against the criterion's
    said = rd.index_box._agreement("every seed agrees: seed 0 fail: 10/15 models = 67% (mispredicted: Δ=-7); "
                                   "seed 1 fail: 11/15 models = 73% (mispredicted: Δ=-4)")
    assert said == ("the ERF's side of L_tr agrees with whether a model extrapolates for 10 to 11 of its 15 Table 1 "
                    "models (67% to 73% over 2 seeds), where the criterion asks 80%")
    assert "ALiBi Δ=4 breaks (from 2.1M training tokens), ALiBi Δ=2 rises without breaking (the lower end of its " \
           "interval below 2, whatever the estimate) while ALiBi Δ=-4 extrapolates" in under
    assert "**The key figure**" not in rd.under_the_figure({}, sweep.iloc[0:0]) and "thesis" not in rd.first_screen({})
    # which claims, not only how many: by number here, in a few words in the book's long run, listed first
    board = rd.claims_at_each_scale("tiny", here, boards).replace("$L_{tr}$", "L_tr")
    assert "1 pass, 1 fail, 1 not decided, 1 not run at this build's scale (`tiny`, 0.6M training tokens a model): " \
           "hold 1; fail 2; not decided 6; not run 7." in board
    assert "1 pass, 3 fail, 0 not decided, 0 not run in the long run (`long`, 4 layers, 33.6M tokens a model): " \
           "hold 7 (an L_tr " \
           in board
    assert "fail 1 (windows up to w = 100 extrapolate), 2 (the widest window of the sweep breaks)" in board
    assert "in the long run (`long-repeated`, 4 layers, 33.6M tokens a model): hold 1, 2, 6, 7." in board
    assert board.index("(`long`") < board.index("(`long-repeated`")
    assert "12 layers trained on 819.2M tokens each" in board  # the full preset's tokens, the paper's setting
    assert "not computed in this build at this build's scale" in rd.claims_at_each_scale("smoke", None, {})
    notes = rd.reading_notes("tiny", {"tiny": (462_208, 200_064)})
    assert "0.46M parameters (0.20M outside the token embedding)" in notes
    assert "Δ = 8 makes every slope 2^8 times flatter" in notes and "r(16 $L_{tr}$) is the perplexity" in notes
    both = rd.reading_notes("smoke", {"smoke": (60_000, 30_000), "long": (462_208, 200_064)})
    assert "**The models.** At this build (`smoke`): R = 2 layers" in both and "0.06M parameters" in both
    assert "in the long run (`long`): R = 4 layers, H = 4 heads, d = 64: 0.46M parameters" in both
    # the long run's corpora, in words
    assert "trained at $L_{tr}$ = 32 on prose (the State of the Union addresses, non-spam mails" in both


def test_a_chapter_opens_with_its_claims_at_each_scale(monkeypatch):
    def rows(results):
        return [{"id": i, "statement": f"claim {i} | said", "result": r, "measured": f"m{i}"} for i, r in results.items()]

    here = rows({1: "pass", 3: "fail", 4: "fail", 5: "not decided", 12: "fail"})
    there = rows({1: "fail", 3: "fail", 4: "pass", 12: "fail", 13: "pass"})
    text = rd.at_each_scale(here, "tiny", {"long-repeated": there})
    table = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert table[0] == "| claim | `tiny` (0.6M tokens a model) | `long-repeated` (33.6M) | the paper |"
    assert "| 4: claim 4 / said | fail | pass |" in text  # a "|" inside a cell cannot split the table
    assert "| 5: claim 5 / said | not decided | not run |" in text  # a claim the long run did not read
    assert len(table) == 2 + len(here)  # only this chapter's claims
    # each move named by what it is: never "still fails" for a claim that held at the build's scale
    assert "Claim 4: not held at `tiny`, held in `long-repeated`, as the paper reports." in text
    undecided = rd.at_each_scale(here, "tiny", {"long-repeated": rows({5: "pass", 1: "not decided"})})
    assert "Claim 5: not decided at `tiny`, held in `long-repeated`, as the paper reports." in undecided
    assert "Claim 1: held at `tiny`, not decided in `long-repeated`." in undecided  # never "not held" for either
    assert "Claim 1: held at `tiny`, not held in `long-repeated`." in text
    assert "Claim 3: not held at `tiny` and still not held in `long-repeated`." in text
    assert "Claim 12 rests on a closed form, not on training: the same verdict at every scale." in text
    assert "still" not in text.split("Claim 3:")[0]
    # one line of cause for every claim a long run does not hold
    assert "- Claim 1 in `long-repeated` (" in text and "- Claim 12 in `long-repeated` (construction)" in text
    built_here = rd.at_each_scale(here, "long-repeated", {"long-repeated": there})
    assert table[0] != built_here.splitlines()[0] and "still" not in built_here
    unchecked = there + [{"id": 5, "statement": "claim 5", "result": "not run",
                          "measured": "not run: Table 1's lengths end at 512, none beyond L_tr"}]
    assert ("Claim 5 in `long-repeated` (not run): Table 1's lengths end at 512, none beyond $L_{tr}$."
            in rd.at_each_scale(here, "tiny", {"long-repeated": unchecked}))
    training = [{**c, "result": "not run", "measured": "not run: table1 not run"} for c in there]
    from rflens.readings import claim_verdicts

    assert claim_verdicts._training("long-3m") is False  # every model of its plan is shipped finished
    assert claim_verdicts._training("deep-d128") is True  # the width ladder trains for several sittings
    for unfinished, said in ((True, "`deep` reads none of these claims yet: its models are still training"),
                             (False, "`deep` reads none of these claims: it trains none of the models they read.")):
        monkeypatch.setattr(claim_verdicts, "_training", lambda run, unfinished=unfinished: unfinished)
        waiting = rd.at_each_scale(here, "tiny", {"deep": training})
        assert said in waiting and "Claim 1 in `deep`" not in waiting
    none = [{**c, "measured": "not run: the deep run trains no Table 3 model"} for c in training]
    assert "it trains none of the models they read" in rd.at_each_scale(here, "tiny", {"deep": none})  # still training


def test_a_chapter_summary_lists_its_claims_at_every_scale():
    here = [{"id": 1, "result": "pass"}, {"id": 2, "result": "fail"}, {"id": 3, "result": "not decided"}]
    there = [{"id": 1, "result": "fail"}, {"id": 2, "result": "fail"}, {"id": 3, "result": "pass"}, {"id": 9, "result": "pass"}]
    text = rd.held(here, "tiny", {"long": there, "tiny": here})
    assert text.splitlines() == ["- At the `tiny` scale, held: claim 1; did not hold: claim 2; not decided: claim 3.",
                                 "- At the `long` scale, held: claim 3; did not hold: claims 1 and 2."]


def test_the_long_runs_failures_are_read_with_what_sets_the_run_apart():
    board = [{"id": 10, "result": "fail", "measured": "prose: r = 1.0; math: r = 1.09"},
             {"id": 12, "result": "fail", "measured": "a = -1.0"},  # by construction: not a trained model's failure
             {"id": 9, "result": "pass", "measured": "r = 5"},
             {"id": 5, "result": "not decided", "measured": "h=4: r = 1.35"}]
    overfit = pd.DataFrame({"corpus": ["math", "math", "prose"], "rise": [0.7, 1.5, 0.0]})
    text = rd.long_failures(board, overfit, "long-repeated")
    assert "2 claims that rest on trained models fail or are not decided" in text
    assert "- Claim 10 (fail): prose: r = 1.0; math: r = 1.09." in text and "Claim 12" not in text and "Claim 9" not in text
    assert "4 layers and d = 64 against the paper's 12 and 768" in text and "33.6M training tokens against 819.2M" in text
    assert "every one of its 2 math models ended with a validation loss 0.70 to 1.50 nats above its lowest" in text
    assert "claim 10 reads those models" in text and "prose text" not in text  # prose did not rise
    assert "The second long run (chapter 10)" in text  # the control points to the run on new text
    assert "second long run" not in rd.long_failures(board, overfit, "long")  # which points nowhere else
    # one math model that did not overfit: the corpus is not said to be memorised
    assert "memorised" not in rd.long_failures(board, overfit.assign(rise=[0.7, 0.05, 0.0]), "long-repeated")
    assert "every claim that rests on trained models was decided" in rd.long_failures(board[2:3], overfit, "long-repeated")


# ----------------------------------------------------------------------------- chapter 10
def _pilot_row(model, tokens, r16, R=4, d=128, l_tr=32, lo=None, hi=None, minutes=3.0):
    return {"stage": "s", "R": R, "d": d, "l_tr": l_tr, "tokens": tokens, "model": model, "pos": "alibi",
            "ppl(L_tr)": 50.0, "r(2 L_tr)": 1 + (r16 - 1) / 4, "r(16 L_tr)": r16,
            "r(16 L_tr) low": r16 - 0.1 if lo is None else lo, "r(16 L_tr) high": r16 + 0.1 if hi is None else hi,
            "max r high": r16 + 0.1 if hi is None else hi, "ERF": 100, "minutes": minutes}


def test_pilot_findings_read_the_token_trend_and_the_knobs():
    sweep = pd.DataFrame([
        _pilot_row("alibi_max", "1M", 1.1), _pilot_row("alibi_max", "4M", 1.4, minutes=12.0),
        _pilot_row("alibi_max", "1M", 1.15, R=6), _pilot_row("alibi_min", "1M", 1.0, hi=1.002),
        _pilot_row("win1", "1M", 1.0, hi=1.001), _pilot_row("win3", "1M", 1.03), _pilot_row("win45", "1M", 1.05),
        _pilot_row("nope", "1M", 1.2), _pilot_row("nope", "4M", 1.5)])
    text = rd.pilot_findings(sweep)
    assert "No configuration within reach of two CPU cores meets the rule." in text
    assert "highest upper bound of r is 1.002" in text
    assert "r(16 $L_{tr}$) = 1.10 at 1M and 1.40 at 4M tokens (the last [1.30, 1.50])" in text
    assert "two more layers +0.05" in text
    # r - 1 goes 0.1 -> 0.4 over 4x the tokens: as tokens^1.0, so r = 2 at 10M, 30 minutes at 12 min per 4M
    assert "tokens$^{1.0}$" in text and "near 10.0M tokens, about 30 minutes" in text
    assert "NoPE rises the same way: 1.20 at 1M and 1.50 at 4M tokens" in text
    assert "between 1.03 and 1.05" in text and _no_plain_notation(re.sub(r"\$[^$]*\$", "", text))
    assert "not in this checkout" in rd.pilot_findings(pd.DataFrame())


def test_the_presets_design_is_read_from_the_presets():
    from rflens.setup import presets

    tiny, long = presets.get("tiny"), presets.get("long")
    text = rd.tiny_design()
    assert f"R = {tiny.model.n_layer} layers" in text and f"d = {tiny.model.d_model}" in text
    assert f"{tiny.train.steps} steps of {tiny.train.batch_size} × {tiny.train.l_tr} tokens" in text
    text = rd.long_design()
    tokens = long.train.steps * long.train.batch_size * long.train.l_tr
    assert f"{tokens / 1e6:.1f}M tokens" in text and f"fixed {long.train.warmup}-step warm-up" in text
    assert f"last {long.train.cooldown_frac:.0%} of the steps" in text
    assert f"segments of {long.eval.erf_length_mult} $L_{{tr}}$ = {long.eval.erf_length_mult * long.train.l_tr} tokens" in text


def test_the_board_by_size_says_when_each_claim_is_decided():
    sizes = [2**19, 2**20, 2**21]
    grown = pd.DataFrame({sizes[0]: ["pass", "fail", "not run", "pass"], sizes[1]: ["pass", "not decided", "not run", "pass"],
                          sizes[2]: ["pass", "pass", "not run", "pass"]}, index=pd.Index([13, 4, 7, 12], name="claim"))
    text = rd.board_by_size(grown)
    assert "Claim 4 (" in text and "fail at 0.5M; not decided at 1.0M; pass at 2.1M tokens." in text
    assert "Claim 13 (" not in text and "Claim 12" not in text  # by construction: the same at every size
    assert "Claim 7" not in text  # not run at any size
    assert "No claim" in rd.board_by_size(grown.loc[[13, 7, 12]])


def test_the_long_run_section_points_up_in_a_chapter_built_at_long():
    rows = verdicts.check({"table1": table1()}, [1])
    assert "**Claim 1 holds.**" in rd.long_run("Table 1", rows, [], "tiny")
    text = rd.long_run("Table 1", rows, [], BOOK_LONG)  # the long run the chapters read, whichever it is
    assert f"built at the `{BOOK_LONG}` scale" in text and "Claim 1" not in text
    assert "built at" in rd.long_run("Table 1", rows, [], "long", run="long")
    assert "not complete yet" in rd.long_run("Table 1", rows, ["w=8"], "tiny")


def test_a_long_run_still_lacking_models_gives_the_verdicts_it_can_decide():
    rows = verdicts.check({"table1": table1()}, [1, 15])  # 15 needs Table 3: not run
    text = rd.long_run("Table 3", rows, ["ALiBi (math)", "T5 (math)"], "tiny")
    assert "lacks ALiBi (math) and 1 more" in text and "Claim 15 waits for it" in text
    assert "**Claim 1 holds.**" in text and "**Claim 15" not in text
    not_run = [r for r in rows if r["result"] == "not run"]
    assert "appear here once" in rd.long_run("Table 3", not_run, ["T5 (math)"], "tiny")


@pytest.mark.parametrize("chapter", list(reproduce.chapters()))
def test_chapter_prose_names_a_column_as_its_table_shows_it(chapter):
    """A sentence that points at a table's column uses the header the reader sees
    (rflens.measure.columns.HEADERS), not the name of the code."""
    from rflens.measure.columns import HEADERS

    for cell in _cells(chapter):
        if cell["cell_type"] == "markdown":
            named = set(re.findall(r"`([A-Za-z_]+)`", "".join(cell["source"])))
            coded = {n for n in named if n in HEADERS and HEADERS[n].lower() != n.lower()}
            assert not coded, (chapter, cell["id"], {n: HEADERS[n] for n in coded})


def _grown(name, label, r16, erf, l_tr=32, complete=True):
    """Rows of rflens.store.bundle.table for one long-run model: (r, low, high) of r(16 L_tr) at each size."""
    return [{"name": name, "label": label, "l_tr": l_tr, "tokens": 2**19 * 2**i, "complete": complete, "erf": erf,
             "erf_length": 16 * l_tr, "erf_capped": erf >= 16 * l_tr, f"r@{l_tr}": 1.0, f"r_lo@{l_tr}": 1.0,
             f"r_hi@{l_tr}": 1.0, f"r@{16 * l_tr}": r, f"r_lo@{16 * l_tr}": lo, f"r_hi@{16 * l_tr}": hi}
            for i, (r, lo, hi) in enumerate(r16)]


def test_the_long_run_reading_is_one_paragraph_of_the_pattern_and_its_exceptions():
    flat, rising = [(1.0, 0.99, 1.01)] * 3, [(1.1, 1.05, 1.15), (1.3, 1.2, 1.4), (1.5, 1.3, 1.7)]
    em = pd.DataFrame(
        _grown("a", "ALiBi Δ=4", [(1.2, 1.1, 1.3), (2.4, 2.1, 2.7), (3.0, 2.6, 3.4)], erf=600)
        + _grown("b", "NoPE", [(1.9, 1.8, 2.0), (2.2, 1.9, 2.5), (2.9, 2.4, 3.3)], erf=300)
        + _grown("c", "window w=30", rising, erf=95)
        + _grown("d", "window w=8", flat, erf=18) + _grown("e", "ALiBi Δ=-7", flat, erf=16)
        + _grown("f", "ALiBi Δ=-1", flat, erf=399)
        + _grown("g", "ALiBi h=0", [(1.2, 1.1, 1.3), (1.05, 1.0, 1.09), (1.0, 0.99, 1.01)], erf=20)
        + _grown("h", "window w=22", [(1.0, 0.99, 1.02), (1.0, 0.99, 1.02)], erf=10, complete=False))
    text = rd.emergence(em)
    assert "\n" not in text and "- " not in text  # one paragraph, not a line a model
    assert "Of the 8 models" in text
    assert "read by r(16 $L_{tr}$) and its paired interval" in text
    assert "2 break (the lower end reaches 2), the earliest first" in text
    assert "ALiBi Δ=4 (from 1.0M tokens) and NoPE (at 2.1M tokens, its last size)" in text
    assert "1 rises without breaking: window w=30" in text
    assert "5 stay within 1.10, 4 of them at every size and ALiBi h=0 (from 1.0M tokens)" in text
    # the ERF against the state: w=8, Δ=-7, h=0 and w=22 inside and flat, Δ=4, NoPE and w=30 beyond and not
    assert "The ERF sides with 7 of them" in text
    assert "The exception: ALiBi Δ=-1 (ERF 399) stays within 1.10 with an ERF beyond $L_{tr}$ = 32." in text
    assert "Read where it stopped part-way: window w=22 (1.0M tokens)." in text
    assert "≥ N" in text  # Δ=4's ERF reached the end of its segment
    assert "No long-run model" in rd.emergence(em[:0])


def test_the_first_screen_leaves_a_run_whose_models_are_still_training_to_one_clause():
    board = [{"id": i, "result": "not run", "statement": "", "measured": "not run"} for i in range(1, 17)]
    board[11] = {**board[11], "result": "fail"}  # claim 12 rests on a closed form: decided without a model
    screen = rd.claims_at_each_scale("tiny", None, {"deep": board})
    assert "in the long run (`deep`" not in screen
    assert "The claims of `deep` wait for models still training" in screen


def test_the_first_screen_says_what_the_paper_s_depth_reads_beside_the_long_run():
    long = _board({1: "fail", 4: "not decided", 6: "fail", 7: "fail", 8: "fail", 13: "pass", 15: "not decided"})
    long[2]["measured"] = "every seed agrees: seed 0 fail: 10/15 models = 67% (x); seed 1 fail: 11/15 models = 73% (y)"
    deep = _board({1: "pass", 4: "pass", 6: "pass", 7: "not decided", 8: "fail", 13: "pass", 15: "not run"})
    deep[2]["measured"] = "10/11 models = 91% (mispredicted: h=-3 (paper's 0))"
    boards = {"long": long, "deep": deep}
    line = rd.index_box.at_depth(boards)
    assert line.startswith("**At the paper's depth** (12 layers; [chapter 10](10b_paper_depth.ipynb)), the paper's thesis")
    assert "*effective receptive field* (ERF:" in line and "(claim 6), holds: it predicts 10 of 11 Table 1 models " \
           "(91%; the criterion asks 80%)" in line
    assert line.endswith("Its claims there: held 1, 4, 6 and 13; not held 8; not decided 7.")  # 15: not run, not said
    screen = rd.first_screen(boards)
    assert line in screen and screen.index(line) < screen.index("**At 4 layers**")  # the paper's depth first
    assert "**At 4 layers** (`long`, the book's long run on new text) the thesis does not hold: it predicts 10 to 11 " \
           "of 15" in screen
    both = rd.index_box.both_depths(boards)
    assert ("pass at 12 layers and fail at 4: claims 1 and 6; pass at 12 layers and not decided at 4: claim 4; not "
            "decided at 12 layers and fail at 4: claim 7; the same at both depths: claims 8 and 13.") in both
    assert "15" not in both.split("(`deep`, `long`)")[1]  # not run at 12 layers: not read at both depths
    assert both in rd.under_the_figure(boards, pd.DataFrame())
    # the deep run says nothing while its thesis is not run, or without its board
    assert rd.index_box.at_depth({"long": long, "deep": _board({6: "not run"})}) == ""
    assert rd.index_box.at_depth({"long": long}) == "" and "paper's depth" not in rd.first_screen({"long": long})
    assert rd.index_box.both_depths({"long": long}) == ""


def test_the_first_screen_says_why_the_depths_differ_from_each_depths_erf_per_window():
    from rflens.longrun import compare

    dp = compare.depths("long", "deep")  # the shipped bundles
    said = rd.index_box.why_depths(dp)
    low, high = (dp[dp["layers"] == n]["ERF / w"].dropna() for n in (4, 12))
    assert f"{low.min():.1f} to {low.max():.1f} times w at 4 layers and {high.min():.1f} to {high.max():.1f} at 12" in said
    assert "for 3 times the depth" in said and said.startswith(" Why the depths differ")
    assert rd.index_box.why_depths(dp[dp["layers"] == 4]) == "" and rd.index_box.why_depths(None) == ""
