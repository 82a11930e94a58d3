"""Where the figures' controls sit, from the layout alone (no browser).

Every dropdown must stand outside the plot area, above every subplot title and every label
at the top end of a vertical line (in each of its entries), and below the title and the
mode bar, at the right end of the plot area; sliders below the plot area and its axis
title. Positions are computed in paper coordinates of the plot area (0 at its bottom, 1 at
its top) from the figure's height and margins, with generous estimates of text sizes.
The browser check of the same thing is ``plotly_overlaps.OVERLAPS_JS``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rflens import experiments as ex
from rflens import receptive
from rflens.figures import bias as fb
from rflens.figures import results as fr

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
    notes = [a.text for a in fig.layout.annotations if a.text == fr.INTERVAL_NOTE]
    assert notes and "paired interval of r(L)" in notes[0]
    # under the plot area, in a bottom margin kept for it
    note = next(a for a in fig.layout.annotations if a.text == fr.INTERVAL_NOTE)
    assert note.y == 0 and note.yanchor == "top" and note.yshift < -40 and fig.layout.margin.b >= 90


def test_erf_figures_name_their_panels_on_the_axes_clear_of_the_line_labels():
    fig = fr.erf_figure(curves(), title="Figure 5")
    # nothing shares the band above the plot with the L_tr, ERF and R·w labels
    assert not fig.layout.annotations
    assert fig.layout.yaxis.title.text == "normalised gradient" and fig.layout.yaxis2.title.text.startswith("cumulative")
    threshold = [s for s in fig.layout.shapes if s.label.text and s.label.text.startswith("threshold")]
    assert threshold and threshold[0].label.textposition == "end" and threshold[0].label.yanchor == "top"  # under the line
