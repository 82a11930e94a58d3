"""Where the figures' controls sit, from the layout alone (no browser).

Every dropdown must stand outside the plot area, above every subplot title and every label
at the top end of a vertical line (in each of its entries), and below the title and the
mode bar, at the right end of the plot area; sliders below the plot area and its axis
title. Positions are computed in paper coordinates of the plot area (0 at its bottom, 1 at
its top) from the figure's height and margins, with generous estimates of text sizes.
The browser check of the same thing is ``plotly_overlaps.OVERLAPS_JS``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rflens.experiments import tables as ex
from rflens.figures import bias as fb, results as fr
from rflens.measure import receptive
from rflens.measure.criterion import EXTRAPOLATION_TOLERANCE

from test_experiments import LENGTHS, wide
from test_experiments import synthetic_t1 as t1

CHAR = 0.65  # width of a character, in font sizes (wider than any the figures use)
LINE = 1.4  # height of a text line, in font sizes
MENU_HEIGHT = 34  # px of a closed dropdown
MODEBAR = 34  # px at the top right that plotly's mode bar covers while the mouse is over the figure
DEFAULT_MARGIN = 80  # plotly's default margin, px


def curves(labels=("Δ=-7 (paper's -3)", "Sinusoidal, L_tr=1024", "w=16"), length=2048):
    out = {}
    for i, lab in enumerate(labels):
        g = np.exp(-np.arange(length) / (3 + 50 * i))
        g /= g.sum()
        out[lab] = {"normalized": g.tolist(), "cumulative": np.cumsum(g).tolist(), "erf": 2000 - i, "l_tr": 1024,
                    "threshold": 0.99, "share_in_ltr": 0.9, "theoretical": 1536 if i == 2 else None, "length": length}
    return out


def f7(c):
    return pd.DataFrame([{"label": lab, "l_tr": 1024, **receptive.gradient_jump(c[lab]["normalized"], 1024)} for lab in c])


def t3():
    return pd.DataFrame([wide(p, [10, 10, 11, 12, 13], pos=p, corpus=c, learnable=p == "t5", tokens_per_s=1000.0)
                         for c in ("prose", "code") for p in ("alibi", "sandwich", "t5")])


def protocols():
    return pd.DataFrame([{"label": m, "protocol": p, "l_tr": 16, "l_ex": L, "ppl": 10.0, "ci_low": 9.0, "ci_high": 11.0}
                         for m in ("ALiBi", "Sandwich") for p in ex.PROTOCOLS for L in LENGTHS])


def emergence():
    return pd.DataFrame([{"name": f"m{m}", "label": f"ALiBi Δ={m}", "l_tr": 32, "tokens": 2**19 * 2**i, "erf": 100 * m,
                          "erf_length": 512, "erf_capped": False, "r_horizon": 1 + m * i / 10,
                          "r_horizon_lo": 1 + m * i / 12, "r_horizon_hi": 1 + m * i / 8}
                         for m in (1, 2) for i in range(4)])


MENU_FIGURES = {
    "ppl_curves": lambda: fr.ppl_curves(t1()),
    "ratio_heatmap": lambda: fr.ratio_heatmap(t1()),
    "table2": lambda: fr.table2_figure(t1(), pd.DataFrame([wide("w=16, L_tr=64", [11, 10, 10, 10, 10], l_tr=64,
                                                                 family="window", value=16)])),
    "erf": lambda: fr.erf_figure(curves(), title="Figure 5"),
    "erf_one_model": lambda: fr.erf_figure(curves(("ALiBi",)), title="Rotary stretched: receptive fields"),
    "gradient_jump": lambda: fr.gradient_jump_figure(curves(), f7(curves())),
    "table3": lambda: fr.table3_figure(t3(), title="FIRE beside Sandwich, KERPLE and T5"),
    "protocol": lambda: fr.protocol_figure(protocols()),
    "emergence": lambda: fr.emergence_figure(emergence(), title="Table 1: ALiBi, slope exponents shifted by Δ"),
}


def _plot_height(fig) -> tuple[float, float, float]:
    """(figure height, top margin, plot-area height) in px."""
    m = fig.layout.margin
    top = DEFAULT_MARGIN if m.t is None else m.t
    bottom = DEFAULT_MARGIN if m.b is None else m.b
    return fig.layout.height, top, fig.layout.height - top - bottom


def _shape_sets(fig, menu) -> list[list[dict]]:
    """The shapes of the figure and of every menu entry, as dicts."""
    sets = [[s.to_plotly_json() for s in fig.layout.shapes]]
    for b in menu.buttons:
        layout = b.args[1] if len(b.args) > 1 else {}
        if "shapes" in layout:
            sets.append(list(layout["shapes"]))
    return sets


def _text_tops(fig, menu) -> list[tuple[str, float]]:
    """(text, top) of every subplot title and vertical line label, top in paper coordinates."""
    _, _, plot = _plot_height(fig)
    out = []
    for a in fig.layout.annotations:  # subplot titles: at the top of their subplot, anchored at the bottom
        if a.yref == "paper" and a.text:
            size = (a.font.size if a.font and a.font.size else 16)
            out.append((a.text, a.y + (size * LINE + (a.yshift or 0)) / plot))
    for shapes in _shape_sets(fig, menu):
        for s in shapes:
            text = (s.get("label") or {}).get("text")
            if not text or s.get("x0") != s.get("x1") or s.get("yref") not in ("paper", "y domain", "y2 domain"):
                continue
            size = s["label"].get("font", {}).get("size", 12)
            # a vertical label runs along its line, centred on the end it is drawn at
            out.append((text, max(s["y0"], s["y1"]) + (len(text) * CHAR * size / 2 + 3) / plot))
    return out


@pytest.mark.parametrize("name", list(MENU_FIGURES))
def test_dropdowns_sit_above_the_plot_area_and_every_label(name):
    fig = MENU_FIGURES[name]()
    height, top, plot = _plot_height(fig)
    assert fig.layout.updatemenus, "the figure has no menu"
    for menu in fig.layout.updatemenus:
        assert menu.yanchor == "bottom" and menu.y >= 1, "the menu must stand above the plot area"
        assert menu.xanchor == "right" and menu.x == 1, "the menu must end at the right end of the plot area"
        bottom = menu.y + (menu.pad.b or 0) / plot  # paper coordinates
        for text, text_top in _text_tops(fig, menu):
            assert bottom > text_top, f"the menu comes down to {bottom:.3f}, over {text!r} (top {text_top:.3f})"
        # and below the title and the mode bar: px from the top edge of the figure
        menu_top = top - (bottom - 1) * plot - MENU_HEIGHT
        assert menu_top >= MODEBAR, "the menu runs under the mode bar"
        title = fig.layout.title
        assert title.yref == "container" and title.yanchor == "top"
        texts = [title.text] + [b.args[1]["title.text"] for b in menu.buttons]
        lines = max(t.count("<br>") + 1 for t in texts)
        title_top = (1 - title.y) * height - (12 if lines > 1 else 0)  # plotly.js lifts a title of several lines
        title_bottom = title_top + lines * 17 * LINE
        assert title_bottom <= menu_top, f"the title (bottom {title_bottom:.0f} px) runs into the menu ({menu_top:.0f} px)"
        assert title_top >= 0, "the title's first line is cut at the top edge"


def test_long_titles_are_wrapped():
    """The per-model details of an ERF figure and of Figure 7 go on a second, smaller line."""
    c = curves()
    for fig in (fr.erf_figure(c, title="Figure 5"), fr.gradient_jump_figure(c, f7(c))):
        for b in fig.layout.updatemenus[0].buttons[:len(c)]:
            first = b.args[1]["title.text"].split("<br>")[0]
            assert len(first) <= 60, first


def test_the_label_band_grows_with_long_line_labels():
    short = fr._label_band([fr._vline(16, "L_tr=16")])
    long = fr._label_band([fr._vline(16, "L_tr=16")], [fr._vline(8, "a label of many characters")])
    assert short == fr.LABEL_BAND and long > short
    assert fr._label_band([fr._hline(0.99, "threshold of a very long horizontal line")]) == fr.LABEL_BAND


SLIDER_FIGURES = {
    "alibi_shift": lambda: fb.alibi_shift_figure(shifts=(-3, 0), n_head=4, length=16),
    "window_heatmap": lambda: fb.window_heatmap(windows=(4, 8), length=16),
    "attention_reach": lambda: fb.attention_reach_figure(length=64, l_tr=16, n_head=4),
    "erf_threshold": lambda: fr.erf_threshold_figure(curves()),
}


@pytest.mark.parametrize("name", list(SLIDER_FIGURES))
def test_sliders_sit_below_the_plot_area_and_its_axis_title(name):
    fig = SLIDER_FIGURES[name]()
    _, _, plot = _plot_height(fig)
    for slider in fig.layout.sliders:
        assert (slider.y if slider.y is not None else 0) <= 0 and (slider.yanchor or "top") == "top"
        # tick labels (about 20 px) and the axis title (about 20 px) come first
        assert (slider.pad.t or 0) >= 45
    assert not fig.layout.updatemenus


@pytest.mark.parametrize("name", ["ppl_curves", "table3", "protocol"])
def test_figures_with_perplexity_error_bars_say_they_are_unpaired(name):
    fig = MENU_FIGURES[name]()
    assert any(t.error_y is not None and t.error_y.array is not None for t in fig.data)
    notes = [a for a in fig.layout.annotations if a.text in (fr.INTERVAL_NOTE, fr.PROTOCOL_NOTE)]
    assert notes and "paired interval of r(L)" in notes[0].text
    # under the plot area, in a bottom margin kept for it (every line of it)
    note = notes[0]
    lines = note.text.count("<br>") + 1
    assert note.y == 0 and note.yanchor == "top" and note.yshift < -40
    assert fig.layout.margin.b >= -note.yshift + lines * 11 * LINE


# ----------------------------------------------------------------------------------------
# r(L) under the perplexity: the paired interval the verdicts read


def paired_rows():
    """Two models whose per-segment losses rise by 2% and 0% beyond L_tr: their perplexity
    intervals (over segments) overlap, the paired intervals of r(L) do not."""
    from rflens.measure import columns

    rng = np.random.default_rng(0)
    base = rng.normal(4.0, 1.0, size=200)  # each segment's loss at L_tr: a wide spread between segments
    rows = []
    for label, rise in (("rises 2%", np.log(1.02)), ("flat", 0.0)):
        nll = np.stack([base + (rise if L > 16 else 0.0) + rng.normal(0, 0.05, size=200) for L in LENGTHS])
        ppl = np.exp(nll.mean(1))
        res = {"lengths": LENGTHS, "ppl": ppl.tolist(), "ci_low": (ppl * 0.85).tolist(),
               "ci_high": (ppl * 1.15).tolist(), "nll_per_segment": nll.tolist()}
        rows.append(columns.add_ppl_columns({"label": label, "family": "slope_shift", "l_tr": 16}, res, 16))
    return pd.DataFrame(rows)


def _r_traces(fig, yaxis="y2"):
    return [t for t in fig.data if t.yaxis == yaxis and t.visible is not False]


def test_perplexity_curves_show_r_with_its_paired_interval_under_them():
    df = paired_rows()
    fig = fr.ppl_curves(df)
    assert fig.layout.yaxis2.title.text == "r(L)" and fig.layout.yaxis.title.text == "perplexity"
    traces = _r_traces(fig)
    assert [t.name for t in traces] == list(df["label"])
    for t, (_, row) in zip(traces, df.iterrows()):
        np.testing.assert_allclose(t.y, [row[f"r@{L}"] for L in LENGTHS])
        # the package's paired interval, nothing else: r_hi - r above, r - r_lo below
        np.testing.assert_allclose(t.error_y.array, [row[f"r_hi@{L}"] - row[f"r@{L}"] for L in LENGTHS])
        np.testing.assert_allclose(t.error_y.arrayminus, [row[f"r@{L}"] - row[f"r_lo@{L}"] for L in LENGTHS])
        assert t.showlegend is False and t.legendgroup == t.name  # one legend entry hides both curves
    # the difference the verdict reads is visible there: the 2% rise clears 1 at 4 L_tr, the flat model does not
    rise, flat = df.iloc[0], df.iloc[1]
    assert rise["r_lo@64"] > 1 >= flat["r_lo@64"] and rise["ci_low@64"] < flat["ci_high@64"]
    # the lines at 1 and at the 1.10 limit on the r panel, for every menu entry
    for b in fig.layout.updatemenus[0].buttons:
        ys = {s["y0"] for s in b.args[1]["shapes"] if s.get("yref") == "y2"}
        assert ys == {1.0, EXTRAPOLATION_TOLERANCE}


def test_table3_and_protocol_figures_show_r_under_the_perplexity():
    fig = fr.table3_figure(t3())
    assert fig.layout.yaxis3.title.text == "r(L)"
    r = _r_traces(fig, "y3")
    assert len(r) == 3 and all(t.showlegend is False for t in r)
    assert all(t.error_y is None or t.error_y.array is None for t in r)  # synthetic rows: no per-segment losses, no interval
    prot = fr.protocol_figure(protocols())
    r = _r_traces(prot)
    assert len(r) == len(ex.PROTOCOLS) and all(t.y[0] == 1 for t in r)
    assert all(t.error_y is None or t.error_y.array is None for t in r)  # the table carries no per-segment losses
    assert any(a.text == fr.PROTOCOL_NOTE for a in prot.layout.annotations)


def test_table3_note_stands_below_the_upright_bar_labels():
    long = t3().assign(label=lambda d: d["label"].map({"alibi": "ALiBi", "sandwich": "Smoothed Sandwich", "t5": "KERPLE (log)"}))
    fig = fr.table3_figure(long)
    assert fig.layout.xaxis2.tickangle == -90
    note = next(a for a in fig.layout.annotations if a.text == fr.INTERVAL_NOTE)
    label_px = len("Smoothed Sandwich") * CHAR * 12  # a tick label stands upright: its width is its height
    assert -note.yshift >= label_px + 10, "the note runs into the labels under the bars"


def test_erf_figures_name_their_panels_on_the_axes_clear_of_the_line_labels():
    fig = fr.erf_figure(curves(), title="Figure 5")
    # nothing shares the band above the plot with the L_tr, ERF and R·w labels
    assert not fig.layout.annotations
    assert fig.layout.yaxis.title.text == "normalised gradient" and fig.layout.yaxis2.title.text.startswith("cumulative")
    threshold = [s for s in fig.layout.shapes if s.label.text and s.label.text.startswith("threshold")]
    assert threshold and threshold[0].label.textposition == "end" and threshold[0].label.yanchor == "top"  # under the line


# ----------------------------------------------------------------------------------------
# the ERF-against-threshold figure: fifteen models of three families


def table1_curves(per_family=5, length=512):
    """Fifteen models in three families whose ERFs at 0.99 crowd into one stretch of the axis."""
    out = {}
    for f, (family, symbol) in enumerate((("slope_shift", "Δ"), ("same_slope", "h"), ("window", "w"))):
        for i in range(per_family):
            g = np.exp(-np.arange(length) / (4 + 3 * i + f))
            g /= g.sum()
            out[f"{symbol}={i - 2} (paper's {i})"] = {"normalized": g.tolist(), "cumulative": np.cumsum(g).tolist(),
                                                      "l_tr": 32, "share_in_ltr": 0.9, "family": family}
    return out


def test_erf_threshold_figure_writes_no_number_in_the_plot_and_gives_each_erf_in_the_legend():
    from rflens.measure.receptive import erf_from_normalized

    c = table1_curves()
    fig = fr.erf_threshold_figure(c)
    assert not any("text" in (t.mode or "") for t in fig.data), "numbers written at the dots run into each other"
    entries = [t for t in fig.data if t.showlegend is not False]
    assert len(entries) == len(c)
    for t, lab in zip(entries, c):
        assert t.name.startswith(f"{lab}: ERF {erf_from_normalized(c[lab]['normalized'], 0.99)}")
    # each slider step renames the entries with the ERFs at its threshold
    step = fig.layout.sliders[0].steps[0]
    lab = next(iter(c))
    assert step.args[0]["name"][0].startswith(f"{lab}: ERF {erf_from_normalized(c[lab]['normalized'], 0.5)}")


def test_erf_threshold_figure_groups_models_by_family_in_a_legend_and_a_hue_each():
    c = table1_curves()
    fig = fr.erf_threshold_figure(c)
    entries = [t for t in fig.data if t.showlegend is not False]
    colours = [t.line.color for t in entries]
    assert len(set(colours)) == len(colours), "two models share a colour"
    legends = {}
    for t, lab in zip(entries, c):
        legends.setdefault(c[lab]["family"], set()).add(t.legend)
    assert all(len(v) == 1 for v in legends.values()) and len({next(iter(v)) for v in legends.values()}) == 3
    titles = [fig.layout[name].title.text.replace("<br>", " ") for name in ("legend", "legend2", "legend3")]
    assert titles == [ex.FAMILY_TITLES[f] for f in ("slope_shift", "same_slope", "window")]
    # a family's shades come from one sequential scale: red, green and blue rank the same way within it
    rgb = [tuple(int(v) for v in col[4:-1].split(",")) for col in colours]
    hues = [max(range(3), key=lambda i: sum(col[i] - min(col) for col in rgb[f * 5:(f + 1) * 5])) for f in range(3)]
    assert len(set(hues)) >= 2, "the families are not told apart by hue"


def test_erf_threshold_figure_is_tall_enough_for_every_legend_entry():
    for n in (1, 5, 8):
        fig = fr.erf_threshold_figure(table1_curves(per_family=n))
        _, _, plot = _plot_height(fig)
        names = [k for k in ("legend", "legend2", "legend3") if fig.layout[k] is not None and fig.layout[k].y is not None]
        lowest = min(fig.layout[k].y for k in names)  # paper coordinates of the last legend's top
        last = fig.layout[names[-1]]
        rows = n + last.title.text.count("<br>") + 1
        assert lowest * plot - rows * fr.LEGEND_ENTRY >= -2, "the last legend runs out of the plot area"


# ----------------------------------------------------------------------------------------
# chapter 1's heads and chapter 2's heat maps


def test_attention_reach_gives_every_head_a_colour_and_a_legend_entry_and_labels_L_tr():
    fig = fb.attention_reach_figure(length=64, l_tr=16, n_head=12)
    shown = [t for t in fig.data if t.visible]
    colours = [t.line.color for t in shown]
    assert len(shown) == 12 and None not in colours and len(set(colours)) == 12
    assert all(t.showlegend is not False for t in shown) and shown[0].name == "head 1"
    (line,) = fig.layout.shapes
    assert line.x0 == line.x1 == 16 and line.xref == "x" and "L_tr = 16" in line.label.text
    assert not fig.layout.annotations, "an annotation at x = L_tr lands off a log axis"


def test_heat_maps_name_schemes_in_words_and_draw_a_constant_bias_without_a_colour_bar():
    from rflens.setup import schemes

    figs = [fb.window_heatmap(windows=(4, 8), length=16), fb.scheme_heatmap(length=16, n_head=4),
            fb.alibi_heatmap(shifts=(0, 3), n_head=4, length=16)]
    for fig in figs:
        for step, tr in zip(fig.layout.sliders[0].steps, fig.data):
            head = step.args[1]["title.text"]
            scheme = head.split(":")[0]
            # no code name: none starts the title ("alibi, ...", "window, ..."), none has an underscore
            assert not re.match(r"[a-z]", scheme) and not re.search(r"[a-z]_[a-z]", scheme), head
            assert any(scheme.startswith(schemes.title(p)) for p in schemes.TABLE), head
            z = np.asarray(tr.z, dtype=float)
            if np.nanmin(z) == np.nanmax(z):  # one value wherever attended: nothing for a colour bar to say
                assert tr.showscale is False and f"bias {np.nanmin(z):g}" in head
            else:
                assert tr.showscale is not False


# ----------------------------------------------------------------------------------------
# the same figures in headless Chromium: no text runs into other text, no legend is cut


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def chromium_page():
    if not Path(CHROMIUM).exists():
        if os.environ.get("RFLENS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium (make browser)")
        pytest.skip("Chromium not installed (make browser installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        yield page
        browser.close()


def _drawn(page, tmp_path, fig) -> dict:
    from plotly_overlaps import TEXT_OVERLAPS_JS, figure_page

    html = tmp_path / "figure.html"
    html.write_text(figure_page([fig]), encoding="utf-8")
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(html.as_uri(), wait_until="load")
    page.wait_for_timeout(300)
    (found,) = page.evaluate(TEXT_OVERLAPS_JS)
    assert errors == []
    return found


DRAWN_FIGURES = {
    "erf_threshold, fifteen models": lambda: fr.erf_threshold_figure(table1_curves()),
    "table3, long scheme names": lambda: fr.table3_figure(t3().assign(label=lambda d: d["label"].map(
        {"alibi": "ALiBi", "sandwich": "Smoothed Sandwich", "t5": "KERPLE (log)"}))),
    "ppl_curves with r(L)": lambda: fr.ppl_curves(paired_rows()),
    "protocol": lambda: fr.protocol_figure(protocols()),
    "attention_reach, twelve heads": lambda: fb.attention_reach_figure(length=256, l_tr=64, n_head=12),
    "window_heatmap": lambda: fb.window_heatmap(windows=(4, 8), length=16),
    "erf_figure, two panels on a log axis": lambda: fr.erf_figure(curves()),
    "emergence, Table 3's seven schemes on math": lambda: _emergence_math(),
    "emergence_pair, fifteen models in two rows or more": lambda: _pair_of_many(),
    "early_warning": lambda: fr.early_warning_figure(_early_warning()),
    "early_warning, two runs side by side": lambda: fr.early_warning_figure(_early_warning(("long", "long-repeated"))),
    "seeds, one colour a model": lambda: _seeds(),
}


def _control():
    from rflens.store import bundle

    return bundle.table("long-repeated")  # the shipped first long run


def _emergence_math():
    em = _control()
    names = [n for n in dict.fromkeys(em["name"]) if n.endswith("_math")]
    return fr.emergence_figure(em, names, title="Table 3 on math")


def _pair_of_many():
    em = _control()
    names = list(dict.fromkeys(em["name"]))[:15]
    return fr.emergence_pair(em, em.iloc[0:0], names)


def _early_warning(runs=("long-repeated",)):
    from rflens.longrun import compare as lr

    return lr.early_warning(runs)


def _seeds():
    from rflens.store import bundle

    em = bundle.table("long")  # the shipped second long run: its models of seeds 1 and 2
    names = [n for n in dict.fromkeys(em["name"]) if "_seed=" in n]
    return fr.emergence_figure(em, names, title="Seeds 1, 2: the models that decide claims 2, 4, 5, 7, 8 and 9")


def test_a_legend_of_many_models_lies_at_the_foot_and_the_figure_grows_by_its_rows():
    em = _control()
    one = fr.emergence_figure(em, ["nope"])
    many = _pair_of_many()
    assert one.layout.legend.yref == many.layout.legend.yref == "container" and many.layout.legend.y == 0
    assert one.layout.height == fr.HEIGHT and many.layout.height >= fr.HEIGHT + 2 * fr.LEGEND_ROW


@pytest.mark.browser
@pytest.mark.parametrize("name", list(DRAWN_FIGURES))
def test_drawn_figures_keep_their_text_apart_and_show_every_legend_entry(chromium_page, tmp_path, name):
    found = _drawn(chromium_page, tmp_path, DRAWN_FIGURES[name]())
    assert found["overlaps"] == [], f"{name}: text runs into text: {found['overlaps'][:3]}"
    assert found["clipped"] == [], f"{name}: text sticks out of the figure: {found['clipped'][:3]}"
    if found["legend"] is not None:
        assert found["legend"]["shown"] == found["legend"]["entries"], f"{name}: the legend is cut: {found['legend']}"


def test_erf_threshold_legends_name_scheme_families_in_words():
    c = {lab: {**rf, "family": fam} for (lab, rf), fam in zip(curves(("Sinusoidal, L_tr=8", "Rotary, L_tr=8")).items(),
                                                             ("sinusoidal", "rotary"))}
    fig = fr.erf_threshold_figure(c)
    assert [fig.layout[k].title.text for k in ("legend", "legend2")] == ["Sinusoidal", "Rotary"]


@pytest.mark.browser
def test_erf_threshold_text_stays_apart_at_every_step_of_the_slider(chromium_page, tmp_path):
    from plotly_overlaps import TEXT_OVERLAPS_JS

    fig = fr.erf_threshold_figure(table1_curves())
    _drawn(chromium_page, tmp_path, fig)
    for j, step in enumerate(fig.layout.sliders[0].steps):
        chromium_page.evaluate(f"""() => {{ const gd = document.getElementById("fig0");
            const a = gd.layout.sliders[0].steps[{j}].args; return Plotly.update(gd, a[0], a[1], a[2]); }}""")
        (found,) = chromium_page.evaluate(TEXT_OVERLAPS_JS)
        assert found["overlaps"] == [] and found["clipped"] == [], f"threshold {step.label}: {found}"
        assert found["legend"]["shown"] == found["legend"]["entries"] == 15


@pytest.mark.browser
def test_every_slider_step_of_chapter_2_is_labelled_at_the_books_width(chromium_page, tmp_path):
    """plotly.js leaves out every other label of a slider whose labels do not fit between its
    steps: drawn at the book's column width, each figure shows one label a step."""
    from plotly_overlaps import figure_page
    from test_figures import CHAPTER2_SLIDERS

    figures = {name: make() for name, make in CHAPTER2_SLIDERS.items()}
    html = tmp_path / "sliders.html"
    html.write_text(figure_page(list(figures.values())), encoding="utf-8")
    chromium_page.goto(html.as_uri(), wait_until="load")
    chromium_page.wait_for_timeout(300)
    drawn = chromium_page.evaluate("""n => Array.from({length: n}, (_, i) =>
        document.getElementById('fig' + i).querySelectorAll('.slider-label-group').length)""", len(figures))
    steps = [len(fig.layout.sliders[0].steps) for fig in figures.values()]
    assert dict(zip(figures, drawn)) == dict(zip(figures, steps))
