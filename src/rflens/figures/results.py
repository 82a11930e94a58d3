"""Figures of the experiments' results (Chi et al., ACL 2023, Tables 1-3, Figures 5, 7, 11).

Each builder takes the tables of :mod:`rflens.experiments.tables` (or its receptive-field curves)
and returns a plotly figure whose interaction lives in the figure itself: dropdown menus
(``layout.updatemenus``) or sliders switch between precomputed traces, so the static HTML
book needs no kernel. Menu arguments set ``title.text``, never ``title`` (plotly.js >= 3
erases the whole title for a bare ``title``).

- :func:`ppl_curves`      perplexity against L_ex and r(L) with its paired interval, one menu entry
                          per family of models
- :func:`ratio_heatmap`   the r(L) = ppl(L) / ppl(L_tr) table as a heat map (menu: r or ppl)
- :func:`erf_figure`      normalised gradient and cumulative curves, L_tr, ERF and threshold
- :func:`erf_threshold_figure` a slider over the threshold, moving every model's ERF (in its legend entry)
- :func:`gradient_jump_figure` Figure 7: normalised gradient against absolute position
- :func:`table2_figure`   Table 2: each retrained model beside its Table 1 original
- :func:`table3_figure`   Table 3 by corpus: perplexity and r(L) curves, training speed
- :func:`protocol_figure` the three evaluation protocols on the same models: perplexity and r(L)
- :func:`emergence_figure` the long run: r(16 L_tr) and the ERF against training tokens (seeds of a
                          model: one colour, a marker each)
- :func:`emergence_pair`  each model in both long runs
- :func:`early_warning_figure` the ERF at the first size against r(16 L_tr) at the last, a panel a run
- :func:`cost_figure`     chapter 11's estimated GPU-hours, a colour a scheme
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from rflens.experiments import tables as ex
from rflens.measure.columns import lengths_of
from rflens.measure.criterion import BREAKS, erf_text, EXTRAPOLATION_HORIZON, EXTRAPOLATION_TOLERANCE, flag

TEMPLATE = "plotly_white"
HEIGHT = 460
ERF_HEIGHT = 580
R_HEIGHT = 220  # px added to a perplexity figure for its r(L) panel
COLORS = qualitative.Plotly + qualitative.D3 + qualitative.Dark24  # 44 distinct: the long run's every model its own


def _color(i: int) -> str:
    return COLORS[i % len(COLORS)]


# The top of a figure with a menu, from the top edge down: the title (one or more lines),
# a row for the dropdown at the right end of the plot area, then a band that subplot titles
# and the labels at the top end of vertical lines reach into (a vertical label is centred on
# the line's end, so half of it stands above the plot area). The dropdown sits in its own
# row, so no label, subplot title or title runs under it whatever the page width; its row
# starts below plotly's mode bar, which covers the top right corner while the mouse is over
# the figure.
TITLE_TOP = 10  # px from the top edge of the figure to the title
TITLE_LINE = 24  # px a title line takes (title font 17 px)
MENU_ROW = 34  # px a closed dropdown takes (its header box is about 33 px high)
MENU_GAP = 8  # px between the title and the dropdown
LABEL_BAND = 32  # px above the plot area kept for subplot titles and vertical line labels
LABEL_FONT = 11  # px, the font of the line labels
LABEL_CHAR = 0.7  # width of a label character, in units of the font size (generous: about 0.6)


def _label_band(*shape_sets) -> int:
    """Px above the plot area that subplot titles and the labels of the vertical lines
    in ``shape_sets`` (every menu entry's shapes) may take: at least ``LABEL_BAND``."""
    half = 0.0
    for shapes in shape_sets:
        for s in shapes or ():
            text = (s.get("label") or {}).get("text")
            if text and s.get("x0") == s.get("x1"):  # vertical: drawn along the line, centred on its end
                half = max(half, len(text) * LABEL_CHAR * LABEL_FONT / 2 + 4)
    return int(max(LABEL_BAND, math.ceil(half)))


# A legend of many models lies under the x axis, one row or several: anchored at the foot of
# the figure (plotly widens the bottom margin to keep it clear of the axis title), and the
# figure grows by the rows past the first so that the plot keeps its area.
LEGEND_WIDTH = 560  # px of a legend row at the book's column width (688 px)
LEGEND_ENTRY = 40  # px an entry takes besides its text: the line sample and the gap
LEGEND_CHAR = 6.6  # px a character of the legend's text takes (12 px font)
LEGEND_ROW = 29  # px a row of the legend takes


def _legend_below(names: list[str], height: int = HEIGHT) -> tuple[int, dict]:
    """The figure's height for a horizontal legend of ``names`` (each once) at its foot, and
    that legend."""
    rows, used = 1, 0.0
    for name in dict.fromkeys(names):  # a model's traces in other menu entries share its row
        width = LEGEND_ENTRY + LEGEND_CHAR * len(name)
        if used and used + width > LEGEND_WIDTH:
            rows, used = rows + 1, 0.0
        used += width
    return height + LEGEND_ROW * (rows - 1), {"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0}


def _menu(buttons: list[dict], active: int = 0, band: int = LABEL_BAND) -> dict:
    """A dropdown in its own row above the plot area, at its right end: ``band`` px above
    the plot area (clear of subplot titles and line labels) and below the title."""
    return {"buttons": buttons, "active": active, "direction": "down", "showactive": True,
            "x": 1.0, "xanchor": "right", "y": 1.0, "yanchor": "bottom",
            "pad": {"t": 0, "r": 0, "b": band, "l": 0}}


def _top_margin(band: int = LABEL_BAND, lines: int = 1) -> int:
    """Px above the plot area for a title of ``lines`` lines, the dropdown's row and ``band``."""
    return TITLE_TOP + lines * TITLE_LINE + MENU_GAP + MENU_ROW + band


def _top(text: str, height: int, band: int = LABEL_BAND, lines: int | None = None) -> dict:
    """Layout of the title and the top margin of a figure ``height`` px high with a
    ``_menu(band=band)``: the title (``lines`` lines, counted from its ``<br>`` if not
    given) at the top edge, the dropdown's row under it, then the band above the plot area."""
    lines = lines or text.count("<br>") + 1
    # plotly.js draws a title of several lines about half a line higher than a one-line title
    # at the same y (yanchor "top"): the same offset down keeps its first line on the page
    y = TITLE_TOP + (TITLE_LINE // 2 if text.count("<br>") else 0)
    return {"title": {"text": text, "yref": "container", "y": 1 - y / height, "yanchor": "top"},
            "margin": {"t": _top_margin(band, lines)}}


def _subtitle(text: str) -> str:
    """A second, smaller title line (plotly titles do not wrap by themselves)."""
    return f'<br><span style="font-size:13px">{text}</span>'


def _button(label: str, visible: list[bool], title: str, extra: dict | None = None) -> dict:
    return {"label": label, "method": "update", "args": [{"visible": visible}, {"title.text": title, **(extra or {})}]}


def _vline(x: float, text: str, color: str = "gray", dash: str = "dash", yref: str = "paper", xref: str = "x",
           y0: float = 0, y1: float = 1) -> dict:
    return {"type": "line", "x0": x, "x1": x, "y0": y0, "y1": y1, "xref": xref, "yref": yref,
            "line": {"color": color, "dash": dash, "width": 1.5},
            "label": {"text": text, "textposition": "end", "font": {"size": 11, "color": color}}}


def _hline(y: float, text: str, color: str = "gray", xref: str = "paper", yref: str = "y", at: str = "start",
           side: str = "bottom") -> dict:
    """A dotted horizontal line, its label at the ``at`` end, above it (``side`` "bottom",
    the label's bottom on the line) or below it ("top")."""
    return {"type": "line", "x0": 0, "x1": 1, "y0": y, "y1": y, "xref": xref, "yref": yref,
            "line": {"color": color, "dash": "dot", "width": 1.5},
            "label": {"text": text, "textposition": at, "yanchor": side, "font": {"size": 11, "color": color}}}


INTERVAL_NOTE = ("Top: each perplexity with its own 95% interval, which the spread between segments makes wide.<br>"
                 "Bottom: r(L) = ppl(L) / ppl(L_tr) with the paired interval of r(L) on the same tokens, what the "
                 "verdicts read.")
# the table of protocols carries no per-segment losses (the protocols other than last-token
# keep none): its r(L) has no interval
PROTOCOL_NOTE = ("Top: each perplexity with its own 95% interval. Bottom: r(L) = ppl(L) / ppl(L_tr) of each "
                 "protocol,<br>without an interval: the paired interval of r(L) needs per-segment losses, "
                 "which this table does not carry.")
NOTE_LINE = 15  # px a line of the note under the plot takes (font 11)
R_PANEL = 0.45  # share of the plot height the r(L) panel takes, under the perplexity panel


def _interval_note(fig: go.Figure, text: str = INTERVAL_NOTE, below: int = 58) -> go.Figure:
    """Say under the plot what its error bars are: ``below`` px under the plot area (clear
    of the axis's tick labels and title), in a bottom margin kept for it."""
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0, y=0, xanchor="left", yanchor="top",
                       yshift=-below, showarrow=False, align="left", font={"size": 11, "color": "#555"})
    fig.update_layout(margin={"b": below + NOTE_LINE * (text.count("<br>") + 1) + 16})
    return fig


def _limit_lines(yref: str, xref: str = "paper") -> list[dict]:
    """The r(L) panel's reference lines: 1 (as at L_tr) and the 1.10 limit of "extrapolates"."""
    return [_hline(1.0, "", "gray", yref=yref, xref=xref),
            _hline(EXTRAPOLATION_TOLERANCE, f"{EXTRAPOLATION_TOLERANCE:.2f}: extrapolation limit", "seagreen",
                   yref=yref, xref=xref, at="end", side="top")]  # under the line: above it may be off the axis


def _log2_axis(lengths) -> dict:
    return {"type": "log", "tickvals": list(lengths), "ticktext": [str(L) for L in lengths]}


def _curve_trace(row, lengths, name, color, visible=True, dash=None) -> go.Scatter:
    y = [row.get(f"ppl@{L}") for L in lengths]
    lo = [row.get(f"ci_low@{L}") for L in lengths]
    hi = [row.get(f"ci_high@{L}") for L in lengths]
    err = None
    if all(v is not None and np.isfinite(float(v)) for v in lo + hi + y):
        err = {"type": "data", "array": [h - v for h, v in zip(hi, y)],
               "arrayminus": [v - lo_ for v, lo_ in zip(y, lo)], "visible": True, "thickness": 1}
    return go.Scatter(x=list(lengths), y=y, mode="lines+markers", name=name, visible=visible, error_y=err,
                      line={"color": color, "dash": dash}, legendgroup=name,
                      hovertemplate="L_ex=%{x}<br>ppl=%{y:.2f}<extra>" + name + "</extra>")


def _ratio_trace(row, lengths, name, color, visible=True, dash=None) -> go.Scatter:
    """r(L) of a row of a wide table with its paired interval (``r_lo@L``, ``r_hi@L``) where the
    table has one; no legend entry of its own (it shares the perplexity curve's)."""
    y = [row.get(f"r@{L}") for L in lengths]
    lo = [row.get(f"r_lo@{L}") for L in lengths]
    hi = [row.get(f"r_hi@{L}") for L in lengths]
    err, hover = None, "L_ex=%{x}<br>r=%{y:.3f}"
    if all(v is not None and np.isfinite(float(v)) for v in lo + hi + y):
        err = {"type": "data", "array": [h - v for h, v in zip(hi, y)],
               "arrayminus": [v - lo_ for v, lo_ in zip(y, lo)], "visible": True, "thickness": 1}
        hover += " [%{customdata[0]:.3f}, %{customdata[1]:.3f}]"
    return go.Scatter(x=list(lengths), y=y, mode="lines+markers", name=name, visible=visible, error_y=err,
                      customdata=np.array([lo, hi], dtype=float).T if err else None, showlegend=False,
                      legendgroup=name, line={"color": color, "dash": dash},
                      hovertemplate=hover + "<extra>" + name + "</extra>")


# --------------------------------------------------------------------------------------
def ppl_curves(df: pd.DataFrame, *, group: str = "family", titles: dict | None = None,
               title: str = "Last-token perplexity against L_ex", dash_col: str | None = None) -> go.Figure:
    """Perplexity (with its confidence interval) against L_ex, one line per model, and under
    it r(L) = ppl(L) / ppl(L_tr) with its paired interval (what the verdicts read: a rise of
    a few percent that the perplexity's own interval hides shows there), the 1.10 limit
    dotted; a dropdown shows one ``group`` (e.g. Table 1's family) at a time. A dashed line
    marks L_tr."""
    titles = titles or ex.FAMILY_TITLES
    lengths = lengths_of(df)
    groups = list(dict.fromkeys(df[group]))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.07, row_heights=[1 - R_PANEL, R_PANEL])
    owner = []
    for gi, g in enumerate(groups):
        sub = df[df[group] == g]
        for i, (_, row) in enumerate(sub.iterrows()):
            dash = "dash" if dash_col and bool(row.get(dash_col)) else None
            fig.add_trace(_curve_trace(row, lengths, str(row["label"]), _color(i), visible=gi == 0, dash=dash), row=1, col=1)
            fig.add_trace(_ratio_trace(row, lengths, str(row["label"]), _color(i), visible=gi == 0, dash=dash), row=2, col=1)
            owner += [gi, gi]
    shapes = {g: [_vline(float(x), f"L_tr = {int(x)}") for x in sorted(set(df[df[group] == g]["l_tr"]))] + _limit_lines("y2")
              for g in groups}
    buttons = [_button(titles.get(g, str(g)), [o == gi for o in owner], f"{title}: {titles.get(g, g)}",
                       {"shapes": shapes[g]}) for gi, g in enumerate(groups)]
    band = _label_band(*shapes.values())
    height = HEIGHT + R_HEIGHT
    fig.update_layout(template=TEMPLATE, height=height, **_top(f"{title}: {titles.get(groups[0], groups[0])}", height, band),
                      shapes=shapes[groups[0]], updatemenus=[_menu(buttons, band=band)])
    fig.update_xaxes(**_log2_axis(lengths))
    fig.update_xaxes(title_text="L_ex (tokens of context)", row=2, col=1)
    fig.update_yaxes(title_text="perplexity", type="log", row=1, col=1)
    fig.update_yaxes(title_text="r(L)", type="log", row=2, col=1)
    return _interval_note(fig)


def ratio_heatmap(df: pd.DataFrame, *, title: str = "r(L) = ppl(L) / ppl(L_tr)", limit: float = EXTRAPOLATION_TOLERANCE) -> go.Figure:
    """The r(L) table as a heat map (rows: models, columns: L_ex / L_tr); cells above the
    1.10 limit turn red. A dropdown switches to the raw perplexities."""
    lengths = lengths_of(df)
    l_tr = int(df["l_tr"].iloc[0])
    cols = [f"{L // l_tr}×L_tr" if L % l_tr == 0 else str(L) for L in lengths]
    labels = [str(x) for x in df["label"]]
    r = np.array([[row.get(f"r@{L}", math.nan) for L in lengths] for _, row in df.iterrows()], dtype=float)
    p = np.array([[row.get(f"ppl@{L}", math.nan) for L in lengths] for _, row in df.iterrows()], dtype=float)
    # colour on log r, clipped at r = 4: 1.0 white-ish, the 1.10 limit green to orange, >= 2 dark red
    z = np.log2(np.clip(np.nan_to_num(r, nan=1.0, posinf=4.0), 0.5, 4.0))
    lim = math.log2(limit)
    scale = [[0.0, "#2b83ba"], [(1.0 + 0) / 3, "#f7f7f7"], [(1.0 + lim) / 3, "#a6d96a"],
             [(1.0 + lim) / 3 + 1e-6, "#fdae61"], [1.0, "#b2182b"]]
    heat_r = go.Heatmap(z=z, x=cols, y=labels, text=np.vectorize(lambda v: "inf" if not np.isfinite(v) else f"{v:.2f}")(r),
                        texttemplate="%{text}", zmin=-1, zmax=2, colorscale=scale, showscale=False,
                        hovertemplate="%{y}, L_ex=%{x}: r=%{text}<extra></extra>", name="r(L)")
    heat_p = go.Heatmap(z=np.log(p), x=cols, y=labels, text=np.vectorize(lambda v: f"{v:.1f}")(p),
                        texttemplate="%{text}", colorscale="Viridis", showscale=False, visible=False,
                        hovertemplate="%{y}, L_ex=%{x}: ppl=%{text}<extra></extra>", name="ppl")
    fig = go.Figure([heat_r, heat_p])
    buttons = [_button("r(L)", [True, False], f"{title} (green: <= {limit}, red: above)"),
               _button("perplexity", [False, True], "Last-token perplexity")]
    # the plot area keeps its height (about 34 px a row); the title and menu rows come on top
    band = 12  # no subplot titles, no line labels: a small gap above the heat map will do
    height = max(300, 60 + 34 * len(labels)) + _top_margin(band) - 110
    fig.update_layout(template=TEMPLATE, height=height, **_top(f"{title} (green: <= {limit}, red: above)", height, band),
                      yaxis={"autorange": "reversed"}, xaxis={"title": {"text": "L_ex"}, "side": "bottom"},
                      updatemenus=[_menu(buttons, band=band)])
    return fig


def erf_figure(curves: dict[str, dict], *, title: str = "Receptive field", log_x: bool = True) -> go.Figure:
    """Normalised gradient (top) and cumulative curve (bottom) against "tokens back" k from
    the predicted token, with L_tr, the ERF and the threshold marked; a dropdown selects
    the model, and a last entry overlays every model's curves."""
    labels = list(curves)
    # the panels are named by their y axes: a subplot title would sit in the band above the plot
    # where the labels of the L_tr, ERF and R·w lines are, and run into them
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    owner = []
    for i, lab in enumerate(labels):
        rf = curves[lab]
        k = np.arange(1, len(rf["normalized"]) + 1)
        fig.add_trace(go.Scatter(x=k, y=np.asarray(rf["normalized"], dtype=np.float32), name=lab, mode="lines",
                                 line={"color": _color(i)}, visible=i == 0, legendgroup=lab,
                                 hovertemplate="k=%{x}: %{y:.4f}<extra>" + lab + "</extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(x=k, y=np.asarray(rf["cumulative"], dtype=np.float32), name=lab, mode="lines",
                                 line={"color": _color(i)}, visible=i == 0, legendgroup=lab, showlegend=False,
                                 hovertemplate="k=%{x}: %{y:.4f}<extra>" + lab + "</extra>"), row=2, col=1)
        owner += [i, i]

    def shapes(rf) -> list[dict]:
        out = [_vline(rf["l_tr"], f"L_tr = {rf['l_tr']}", "black", "dash"),
               _vline(rf["erf"], f"ERF{'≥' if flag(rf.get('capped')) else '='}{rf['erf']}", "firebrick", "solid"),
               _hline(rf["threshold"], f"threshold {rf['threshold']:g}", "gray", yref="y2", at="end", side="top")]
        if rf.get("theoretical"):
            out.append(_vline(rf["theoretical"], f"R·w={rf['theoretical']}", "seagreen", "dot"))
        return out

    def head(lab, rf) -> str:
        return (f"{title}: {lab}" + _subtitle(f"ERF {erf_text(rf['erf'], rf.get('capped'))} on segments of "
                                              f"{len(rf['normalized'])} tokens, L_tr {rf['l_tr']}, "
                                              f"{rf['share_in_ltr']:.0%} of the gradient in the last L_tr tokens"))

    buttons = [_button(lab, [o == i for o in owner], head(lab, curves[lab]), {"shapes": shapes(curves[lab])})
               for i, lab in enumerate(labels)]
    if len(labels) > 1:  # every model's two curves, named in the legend (click an entry to hide it)
        thr = curves[labels[0]]["threshold"]
        buttons.append(_button("all", [True] * len(owner), f"{title}: every model",
                               {"shapes": [_hline(thr, f"threshold {thr:g}", yref="y2", at="end", side="top")]}))
    first = curves[labels[0]]
    band = _label_band(*(shapes(rf) for rf in curves.values()))
    fig.update_layout(template=TEMPLATE, height=ERF_HEIGHT, **_top(head(labels[0], first), ERF_HEIGHT, band, lines=2),
                      shapes=shapes(first), updatemenus=[_menu(buttons, band=band)])
    fig.update_xaxes(type="log" if log_x else "linear", row=1, col=1)
    fig.update_xaxes(type="log" if log_x else "linear", title_text="k: tokens back from the predicted token", row=2, col=1)
    fig.update_yaxes(type="log", row=1, col=1, exponentformat="power", title_text="normalised gradient")
    fig.update_yaxes(range=[-0.04, 1.04], row=2, col=1, title_text="cumulative, newest first")
    return fig


# one hue a family of models (Table 1's three sweeps, ...), a shade a model: sequential scales
FAMILY_SCALES = ("Blues", "Oranges", "Greens", "Purples", "Reds", "Greys")
LEGEND_ENTRY = 20  # px a legend entry takes (font 12)
LEGEND_TITLE = 20  # px a line of a legend's title takes
LEGEND_TITLE_CHARS = 24  # characters of a legend title's line
LEGEND_GAP = 14  # px between two legends stacked at the right
FIGURE_SPACE = "\u2007"  # as wide as a digit: pads a number so that its legend entry keeps its width


def family_groups(curves: dict[str, dict]) -> list[tuple[str, list[str]]]:
    """The models of ``curves`` by family (``rf["family"]``, in order of appearance):
    [(family, [label, ...]), ...]; one group with the family "" where they are of one family."""
    groups: dict[str, list[str]] = {}
    for lab, rf in curves.items():
        groups.setdefault(str(rf.get("family") or ""), []).append(lab)
    return list(groups.items()) if len(groups) > 1 else [("", list(curves))]


def family_colors(groups: list[tuple[str, list[str]]]) -> dict[str, str]:
    """{label: colour}: one sequential scale a family (its models from lighter to darker, the
    lightest still readable on white), or the qualitative colours for a single group. No two
    models share a colour."""
    from plotly.colors import sample_colorscale

    if len(groups) == 1:
        return {lab: _color(i) for i, lab in enumerate(groups[0][1])}
    out = {}
    for j, (_, labels) in enumerate(groups):
        scale = FAMILY_SCALES[j % len(FAMILY_SCALES)]
        where = [0.75] if len(labels) == 1 else list(np.linspace(0.45, 0.95, len(labels)))
        out.update(zip(labels, sample_colorscale(scale, where)))
    return out


def _wrap(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` characters (at spaces) with ``<br>``."""
    import textwrap

    return "<br>".join(textwrap.wrap(text, width)) or text


def _family_title(family: str) -> str:
    """A family as the book names it: a Table 1 sweep's title, a scheme's printed name, else the name in words."""
    from rflens.setup.schemes import TABLE, title

    if family in ex.FAMILY_TITLES:
        return ex.FAMILY_TITLES[family]
    return title(family) if family in TABLE else family.replace("_", " ")


# the thresholds of the static ERF slider: the paper's 0.99 and a spread around it
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999)


def erf_threshold_figure(curves: dict[str, dict], *, thresholds=THRESHOLDS, title: str = "ERF against the threshold",
                         log_x: bool = True) -> go.Figure:
    """The static form of the ERF explorer: every model's cumulative curve, and a slider over
    ``thresholds`` that moves each model's ERF marker (where its curve reaches the
    threshold), precomputed so that it works without a kernel.

    No number is written in the plot (fifteen ERFs at one threshold fall on one line and
    run into each other): each model's legend entry gives its ERF at the slider's threshold
    (``≥`` where the segment caps it). Models of one family (``rf["family"]``) share a hue and
    a legend of their own, titled with the family; the figure is tall enough for every legend
    entry to show without scrolling. Click a legend entry to hide a model."""
    from rflens.measure.receptive import erf_capped, erf_from_normalized

    labels = list(curves)
    thresholds = [float(t) for t in thresholds]
    start = min(range(len(thresholds)), key=lambda i: abs(thresholds[i] - 0.99))
    length = max(len(rf["cumulative"]) for rf in curves.values())
    erfs = {lab: [erf_from_normalized(curves[lab]["normalized"], t) for t in thresholds] for lab in labels}
    texts = {lab: [erf_text(e, erf_capped(e, len(curves[lab]["normalized"]), curves[lab].get("theoretical")))
                   for e in erfs[lab]] for lab in labels}
    width = {lab: max(len(t) for t in texts[lab]) for lab in labels}

    def name(lab, j):  # padded to the model's widest number: the legend keeps its width as the slider moves
        return f"{lab}: ERF {texts[lab][j].ljust(width[lab], FIGURE_SPACE)}"

    groups = family_groups(curves)
    colors = family_colors(groups)
    legend_of = {lab: ("legend" if g == 0 else f"legend{g + 1}") for g, (_, labs) in enumerate(groups) for lab in labs}
    fig = go.Figure()
    for lab in labels:
        rf = curves[lab]
        k = np.arange(1, len(rf["cumulative"]) + 1)
        fig.add_trace(go.Scatter(x=k, y=np.asarray(rf["cumulative"], dtype=np.float32), mode="lines", name=lab,
                                 legendgroup=lab, legend=legend_of[lab], showlegend=False,
                                 line={"color": colors[lab], "width": 1.8},
                                 hovertemplate="k=%{x}: %{y:.4f}<extra>" + lab + "</extra>"))
    for lab in labels:  # the legend entries: a model's marker, its name and its ERF
        fig.add_trace(go.Scatter(x=[erfs[lab][start]], y=[thresholds[start]], mode="lines+markers", name=name(lab, start),
                                 legendgroup=lab, legend=legend_of[lab], line={"color": colors[lab], "width": 1.8},
                                 marker={"color": colors[lab], "size": 10, "line": {"color": "white", "width": 1}},
                                 text=[texts[lab][start]], hovertemplate=f"{lab}: ERF %{{text}}<extra></extra>"))
    markers = list(range(len(labels), 2 * len(labels)))
    steps = []
    for j, t in enumerate(thresholds):
        head = f"{title}: threshold {t:g}" + _subtitle(
            f"dots and legend: where each curve reaches {t:g}, its ERF (the paper's threshold: 0.99); "
            f"{length}-token segments")
        steps.append({"method": "update", "label": f"{t:g}",
                      "args": [{"x": [[erfs[lab][j]] for lab in labels], "y": [[t]] * len(labels),
                                "text": [[texts[lab][j]] for lab in labels], "name": [name(lab, j) for lab in labels]},
                               {"title.text": head, "shapes": [_hline(t, "", "gray", yref="y")]}, markers]})
    # the legends, one a family, stacked at the right from the top of the plot area down;
    # the plot area (its height fixed by the margins, which leave the slider its room) is at
    # least as tall as they are, so that none is cut or scrolls
    titles = [_wrap(_family_title(fam), LEGEND_TITLE_CHARS) if fam else "" for fam, _ in groups]
    sizes = [LEGEND_TITLE * (t.count("<br>") + 1 if t else 0) + LEGEND_ENTRY * len(labs)
             for t, (_, labs) in zip(titles, groups)]
    top, bottom = 80, 150
    plot = max(HEIGHT + 60 - top - bottom, sum(sizes) + LEGEND_GAP * (len(sizes) - 1) + 10)
    height = top + plot + bottom
    legends, y = {}, 0
    for g, (text, size) in enumerate(zip(titles, sizes)):
        legends["legend" if g == 0 else f"legend{g + 1}"] = {
            "title": {"text": text}, "tracegroupgap": 0, "y": 1 - y / plot, "yanchor": "top", "x": 1.02,
            "xanchor": "left", "font": {"size": 12}}
        y += size + LEGEND_GAP
    first = steps[start]["args"][1]["title.text"]
    fig.update_layout(template=TEMPLATE, height=height, title={"text": first}, margin={"t": top, "b": bottom},
                      shapes=[_hline(thresholds[start], "", "gray", yref="y")], **legends,
                      xaxis={"type": "log" if log_x else "linear", "title": "k: tokens back from the predicted token"},
                      # from a little below 0: the y axis's 0 stands clear of the x axis's first tick label
                      yaxis={"title": "cumulative normalised gradient", "range": [-0.04, 1.05]},
                      sliders=[{"active": start, "currentvalue": {"prefix": "threshold = "}, "pad": {"t": 50},
                                "steps": steps}])
    return fig


def gradient_jump_figure(curves: dict[str, dict], f7: pd.DataFrame, *, title: str = "Normalised gradient by absolute position") -> go.Figure:
    """Figure 7: the normalised gradient against the absolute (0-based) position of each
    input token, the dashed line at each model's L_tr and a marker at the largest
    gradient outside the most recent few tokens; a dropdown selects the model."""
    fig = go.Figure()
    info = f7.set_index("label")
    labels = [lab for lab in curves if lab in info.index]
    owner = []
    for i, lab in enumerate(labels):
        g = np.asarray(curves[lab]["normalized"], dtype=np.float64)
        L = len(g)
        pos = L - 1 - np.arange(L)  # index k from the most recent token -> absolute position
        fig.add_trace(go.Scatter(x=pos[::-1], y=g[::-1].astype(np.float32), mode="lines", name=lab,
                                 line={"color": _color(i)}, visible=i == 0,
                                 hovertemplate="position %{x}: %{y:.4f}<extra>" + lab + "</extra>"))
        owner.append(i)
        row = info.loc[lab]
        if row.get("jump_abs_pos") is not None and not pd.isna(row.get("jump_abs_pos")):
            fig.add_trace(go.Scatter(x=[int(row["jump_abs_pos"])], y=[float(g[int(row["jump_index"])])],
                                     mode="markers", marker={"size": 11, "symbol": "x", "color": "firebrick"},
                                     name=f"peak outside the last {int(row['few'])} tokens", visible=i == 0))
            owner.append(i)

    def shapes(lab):
        return [_vline(int(info.loc[lab, "l_tr"]), f"L_tr = {int(info.loc[lab, 'l_tr'])}", "black")]

    def head(lab):
        row = info.loc[lab]
        where = "" if pd.isna(row.get("jump_abs_pos")) else f": peak at position {int(row['jump_abs_pos'])}"
        return f"{title}" + _subtitle(f"{lab}{where}")

    buttons = [_button(lab, [o == i for o in owner], head(lab), {"shapes": shapes(lab)}) for i, lab in enumerate(labels)]
    band = _label_band(*(shapes(lab) for lab in labels))
    fig.update_layout(template=TEMPLATE, height=HEIGHT + TITLE_LINE, **_top(head(labels[0]), HEIGHT + TITLE_LINE, band, lines=2),
                      shapes=shapes(labels[0]),
                      xaxis={"title": {"text": "absolute position of the input token (0 = first)"}},
                      yaxis={"title": {"text": "normalised gradient"}, "type": "log", "exponentformat": "power"},
                      updatemenus=[_menu(buttons, band=band)])
    return fig


BAR_LABEL_CHAR = 0.62  # width of a bar label's character (tick font 12, turned upright), in font sizes


def table3_figure(t3: pd.DataFrame, *, title: str = "Table 3") -> go.Figure:
    """Table 3, one corpus at a time (dropdown): perplexity against L_ex per scheme
    (learnable schemes dashed), r(L) with its paired interval under it, and the training
    speed in tokens/s at the right. The scheme names under the bars stand upright; the bottom
    margin is sized to the longest, with the note under the plot below them."""
    lengths = lengths_of(t3)
    corpora = list(dict.fromkeys(t3["corpus"]))
    fig = make_subplots(rows=2, cols=2, column_widths=[0.68, 0.32], row_heights=[1 - R_PANEL, R_PANEL],
                        horizontal_spacing=0.1, vertical_spacing=0.07, shared_xaxes=True,
                        specs=[[{}, {"rowspan": 2}], [{}, None]],
                        subplot_titles=("last-token perplexity", "training tokens/s"))
    owner = []
    for ci, c in enumerate(corpora):
        sub = t3[t3["corpus"] == c]
        for i, (_, row) in enumerate(sub.iterrows()):
            dash = "dash" if row.get("learnable") else None
            fig.add_trace(_curve_trace(row, lengths, str(row["label"]), _color(i), visible=ci == 0, dash=dash), row=1, col=1)
            fig.add_trace(_ratio_trace(row, lengths, str(row["label"]), _color(i), visible=ci == 0, dash=dash), row=2, col=1)
            owner += [ci, ci]
        fig.add_trace(go.Bar(x=[str(x) for x in sub["label"]], y=sub["tokens_per_s"],
                             marker={"color": [_color(i) for i in range(len(sub))]}, showlegend=False,
                             visible=ci == 0, hovertemplate="%{x}: %{y:,.0f} tokens/s<extra></extra>"), row=1, col=2)
        owner.append(ci)
    l_tr = int(t3["l_tr"].iloc[0])
    buttons = [_button(c, [o == ci for o in owner], f"{title}: {c} corpus") for ci, c in enumerate(corpora)]
    lines = [_vline(l_tr, f"L_tr = {l_tr}", xref="x")] + _limit_lines("y3", xref="x3 domain")
    band = _label_band(lines)
    height = HEIGHT + R_HEIGHT
    fig.update_layout(template=TEMPLATE, height=height, **_top(f"{title}: {corpora[0]} corpus", height, band),
                      shapes=lines, updatemenus=[_menu(buttons, band=band)])
    fig.update_xaxes(row=1, col=1, **_log2_axis(lengths))
    fig.update_xaxes(title_text="L_ex", row=2, col=1, **_log2_axis(lengths))
    fig.update_xaxes(tickangle=-90, row=1, col=2)
    fig.update_yaxes(type="log", title_text="perplexity", row=1, col=1)
    fig.update_yaxes(type="log", title_text="r(L)", row=2, col=1)
    # the upright scheme names reach this far under the bars; the note goes below them
    longest = max(len(str(x)) for x in t3["label"])
    return _interval_note(fig, below=max(58, int(longest * BAR_LABEL_CHAR * 12) + 24))


def protocol_figure(df: pd.DataFrame, *, title: str = "Evaluation protocols") -> go.Figure:
    """One model at a time (dropdown): perplexity against L_ex under the last-token,
    non-overlapping and sliding-window protocols, and under it each protocol's
    r(L) = ppl(L) / ppl(L_tr) (:func:`rflens.measure.criterion.ratio`; no interval: the table carries
    no per-segment losses, which a paired interval needs)."""
    from rflens.measure.criterion import ratio

    labels = list(dict.fromkeys(df["label"]))
    protos = list(dict.fromkeys(df["protocol"]))
    lengths = sorted(set(df["l_ex"]))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.07, row_heights=[1 - R_PANEL, R_PANEL])
    owner = []
    for li, lab in enumerate(labels):
        for pi, proto in enumerate(protos):
            sub = df[(df["label"] == lab) & (df["protocol"] == proto)].sort_values("l_ex")
            name = proto.replace("_", "-")
            err = {"type": "data", "array": (sub["ci_high"] - sub["ppl"]).tolist(),
                   "arrayminus": (sub["ppl"] - sub["ci_low"]).tolist(), "thickness": 1}
            fig.add_trace(go.Scatter(x=sub["l_ex"], y=sub["ppl"], mode="lines+markers", name=name, legendgroup=name,
                                     line={"color": _color(pi)}, visible=li == 0, error_y=err,
                                     hovertemplate="L_ex=%{x}: ppl=%{y:.2f}<extra>" + proto + "</extra>"), row=1, col=1)
            r = ratio(dict(zip(sub["l_ex"].astype(int), sub["ppl"].astype(float))), int(sub["l_tr"].iloc[0]))
            fig.add_trace(go.Scatter(x=list(r), y=list(r.values()), mode="lines+markers", name=name, legendgroup=name,
                                     showlegend=False, line={"color": _color(pi)}, visible=li == 0,
                                     hovertemplate="L_ex=%{x}: r=%{y:.3f}<extra>" + proto + "</extra>"), row=2, col=1)
            owner += [li, li]
    l_tr = int(df["l_tr"].iloc[0])
    buttons = [_button(lab, [o == li for o in owner], f"{title}: {lab}") for li, lab in enumerate(labels)]
    lines = [_vline(l_tr, f"L_tr = {l_tr}")] + _limit_lines("y2")
    band = _label_band(lines)
    height = HEIGHT + R_HEIGHT
    fig.update_layout(template=TEMPLATE, height=height, **_top(f"{title}: {labels[0]}", height, band),
                      shapes=lines, updatemenus=[_menu(buttons, band=band)])
    fig.update_xaxes(**_log2_axis(lengths))
    fig.update_xaxes(title_text="L_ex", row=2, col=1)
    fig.update_yaxes(title_text="perplexity", type="log", row=1, col=1)
    fig.update_yaxes(title_text="r(L)", type="log", row=2, col=1)
    return _interval_note(fig, PROTOCOL_NOTE)


def table2_figure(t1: pd.DataFrame, t2: pd.DataFrame, *, title: str = "Table 2: retrained with a longer L_tr") -> go.Figure:
    """Each retrained model beside its Table 1 original, at the same absolute L_ex
    (dropdown over models; the original solid, the retrained dashed)."""
    rows = []
    for _, new in t2.iterrows():
        old = t1[(t1["family"] == new["family"]) & (t1["value"].astype(float) == float(new["value"]))].iloc[0]
        rows.append({**dict(old), "group": str(new["label"]), "retrained": False})
        rows.append({**dict(new), "group": str(new["label"]), "retrained": True})
    df = pd.DataFrame(rows)
    return ppl_curves(df, group="group", titles={g: g for g in df["group"]}, title=title, dash_col="retrained")


RESULT_COLORS = {"pass": "#d9f2d9", "fail": "#f8d7d7", "not decided": "#fdf1c9", "not run": "#eeeeee"}


def result_color(value) -> str:
    """The CSS of a board's cell by the claim's result (:data:`RESULT_COLORS`; any other
    value is left plain): chapters 9 and 10 colour their boards with it,
    ``df.style.map(result_color, subset=...)``."""
    return f"background-color: {RESULT_COLORS[value]}" if value in RESULT_COLORS else ""


def cost_figure(cost: pd.DataFrame, *, title: str = "Estimated GPU-hours per model") -> go.Figure:
    """Chapter 11: stacked bars of the estimated GPU-hours of each model
    (rows of :func:`rflens.experiments.book_models.training_cost`), one bar per experiment,
    one colour a scheme, named in the legend as the book prints it
    (:func:`rflens.setup.schemes.title`); hovering a segment names its model."""
    from rflens.setup.schemes import title as scheme_title

    cost = cost.copy()
    cost["settings"] = cost["overrides"].map(lambda o: ", ".join(f"{k}={v}" for k, v in o.items()) or "default")
    experiments = list(dict.fromkeys(cost["experiment"]))
    fig = go.Figure()
    for i, pos in enumerate(dict.fromkeys(cost["pos"])):
        d = cost[cost["pos"] == pos]
        name = scheme_title(pos)
        fig.add_trace(go.Bar(
            x=d["gpu_hours"], y=d["experiment"], orientation="h", name=name,
            marker={"color": _color(i), "line": {"color": "white", "width": 0.5}},
            customdata=np.array([d["corpus"], d["settings"], d["l_tr"]], dtype=object).T,
            hovertemplate="%{y}: " + name + " on %{customdata[0]}, %{customdata[1]}, L_tr=%{customdata[2]}, "
                          "%{x:.1f} GPU-hours<extra></extra>"))
    fig.update_layout(template=TEMPLATE, height=max(380, 120 + 40 * len(experiments)), barmode="stack",
                      title={"text": title}, legend={"title": {"text": "scheme"}, "traceorder": "normal"},
                      xaxis={"title": {"text": "GPU-hours (estimate)"}},
                      yaxis={"title": {"text": "experiment"}, "categoryorder": "array",
                             "categoryarray": experiments[::-1], "automargin": True})
    return fig


SEED_NAME = re.compile(r"^(?P<model>.+)_seed=(?P<seed>\d+)$")  # a model trained from another seed
SEED_LABEL = re.compile(r",?\s*\bseed[= ]\d+")  # "seed=1" (code) or ", seed 1" (the paper's names)
SEED_SYMBOLS = ("circle", "square", "diamond", "triangle-down", "cross")  # one marker a seed, in order


def seed_groups(names: list[str], labels: dict[str, str]) -> dict[str, dict]:
    """Each of ``names`` (in order) as one seed of its model: {name: {"model": the model's name
    without ``_seed=N``, "label": its label without ``seed=N``, "seed": N (0 for none),
    "index": the model's place among the models, "symbol": the seed's marker}}."""
    out, models, seeds = {}, {}, {}
    for name in names:
        m = SEED_NAME.match(name)
        model, seed = (m["model"], int(m["seed"])) if m else (name, 0)
        models.setdefault(model, len(models))
        seeds.setdefault(seed, None)
        out[name] = {"model": model, "seed": seed, "index": models[model],
                     "label": SEED_LABEL.sub("", labels[name]).strip()}
    order = {seed: i for i, seed in enumerate(sorted(seeds))}
    for g in out.values():
        g["symbol"] = SEED_SYMBOLS[order[g["seed"]] % len(SEED_SYMBOLS)]
    return out


def emergence_figure(em: pd.DataFrame, names: list[str] | None = None, *, title: str = "The long run") -> go.Figure:
    """Chapter 10: each long-run model's r(16 L_tr) with its paired 95% interval against its
    training tokens, each at its own L_tr (``r_horizon``), on logarithmic axes; a model that
    breaks (the lower end reaches 2) is drawn solid with a star at the first size it does,
    one that never breaks dotted. A menu switches to the ERF in units of L_tr (the segment is
    16 L_tr for every model). ``em``: rows of :func:`rflens.store.bundle.table`; ``names``: the
    models to draw, in this order (default: all of them).

    Models trained from several seeds (``name_seed=N``) are drawn one colour a model, one
    marker a seed (the subtitle says which), with one legend entry a model that shows or
    hides all its seeds."""
    fig = go.Figure()
    names = list(dict.fromkeys(em["name"])) if names is None else [n for n in names if n in set(em["name"])]
    labels = {n: str(em.loc[em["name"] == n, "label"].iloc[0]) for n in names}
    groups = seed_groups(names, labels)
    seeded = any(g["seed"] for g in groups.values()) and len({g["model"] for g in groups.values()}) < len(names)

    def look(name):
        """(colour, legend name, legend group, shown in the legend, the seed's marker or None)."""
        g = groups[name]
        if not seeded:
            return _color(names.index(name)), labels[name], name, True, None
        first = next(n for n in names if groups[n]["model"] == g["model"]) == name
        return _color(g["index"]), g["label"], g["model"], first, g["symbol"]

    def hover_name(name):
        g = groups[name]
        return f"{g['label']}, seed {g['seed']}" if seeded else labels[name]

    lows, highs = [], []
    for name in names:
        d = em[em["name"] == name].sort_values("tokens")
        colour, label, group, shown, symbol = look(name)
        r, lo, hi = d["r_horizon"], d["r_horizon_lo"], d["r_horizon_hi"]
        lows.append(float(lo.min()))
        highs.append(float(hi.max()))
        broke = list(lo >= BREAKS)
        first = broke.index(True) if True in broke else None
        fig.add_trace(go.Scatter(
            x=d["tokens"], y=r, mode="lines+markers", name=label, legendgroup=group, showlegend=shown,
            line={"color": colour, "dash": "solid" if first is not None else "dot"},
            marker={"symbol": ["star" if k == first else (symbol or "circle") for k in range(len(d))],
                    "size": [15 if k == first else (8 if symbol else 6) for k in range(len(d))]},
            error_y={"type": "data", "symmetric": False, "array": hi - r, "arrayminus": r - lo},
            hovertemplate=f"%{{x:.3s}} tokens: r({EXTRAPOLATION_HORIZON} L_tr) = %{{y:.3f}}"
                          f"<extra>{hover_name(name)}</extra>"))
    segments, ratios = set(), []
    for name in names:
        d = em[em["name"] == name].sort_values("tokens")
        colour, label, group, shown, symbol = look(name)
        capped = d["erf_capped"].map(flag)  # a lower bound: an open marker (an open triangle pointing up)
        segments |= set(d["erf_length"] / d["l_tr"])
        ratios += list(d["erf"] / d["l_tr"])
        fig.add_trace(go.Scatter(
            x=d["tokens"], y=d["erf"] / d["l_tr"], mode="lines+markers", name=label, legendgroup=group,
            showlegend=shown, visible=False, line={"color": colour},
            marker={"symbol": [(f"{symbol}-open" if symbol else "triangle-up-open") if c else (symbol or "circle")
                               for c in capped],
                    "size": [10 if c else (8 if symbol else 6) for c in capped]},
            text=[f"{erf_text(e, c)} of L_tr = {l_tr}" for e, c, l_tr in zip(d["erf"], capped, d["l_tr"])],
            hovertemplate="%{x:.3s} tokens: ERF %{text}<extra>" + hover_name(name) + "</extra>"))
    n = len(names)
    breaks = _hline(2.0, "2: breaks", color="firebrick")
    breaks["label"]["textposition"] = "end"
    r_lines = [_hline(EXTRAPOLATION_TOLERANCE, f"{EXTRAPOLATION_TOLERANCE:.2f}: extrapolates"), breaks]
    erf_lines = [_hline(1, "L_tr")]
    for seg in sorted(segments):  # 16 for every model of the long run
        erf_lines.append(_hline(seg, f"segment length ({seg:g} L_tr)", color="firebrick"))
        erf_lines[-1]["label"]["textposition"] = "end"
    seeds = ""
    if seeded:  # which marker is which seed
        marks = {"circle": "●", "square": "■", "diamond": "◆", "triangle-down": "▼", "cross": "✚"}
        kinds = dict.fromkeys((g["seed"], g["symbol"]) for g in sorted(groups.values(), key=lambda g: g["seed"]))
        seeds = _subtitle("one colour a model, one marker a seed: "
                          + ", ".join(f"{marks[sym]} seed {seed}" for seed, sym in kinds))
    r_title = title + _subtitle("r(16 L_tr) as training grows; ★ where a model breaks, dotted if it never does") + seeds
    erf_title = title + _subtitle("ERF (99% of the gradient) as training grows") + seeds
    r_axis = "r(16 L_tr) = ppl(16 L_tr) / ppl(L_tr)"
    erf_axis = "ERF / L_tr (open: ≥, capped by the segment)" if seeded else "ERF / L_tr (▵ ≥: capped by the segment)"
    # a log axis takes its range in decades: from below 1 (or the lowest bar) to above the break line
    r_range = [math.log10(min(0.95, min(lows) * 0.97)), math.log10(max(2.3, max(highs) * 1.1))]
    # a log axis takes its range in decades: from below the smallest ERF to above the segment's line
    erf_range = [math.log10(min(min(ratios), 1.0) / 1.5), math.log10(max(segments) * 2.0)]
    buttons = [_button("r(16 L_tr)", [True] * n + [False] * n, r_title,
                       {"yaxis.title.text": r_axis, "shapes": r_lines, "yaxis.range": r_range,
                        "yaxis.autorange": False, "yaxis.type": "log"}),
               _button("ERF", [False] * n + [True] * n, erf_title,
                       {"yaxis.title.text": erf_axis, "shapes": erf_lines, "yaxis.autorange": False,
                        "yaxis.type": "log", "yaxis.range": erf_range})]
    height, legend = _legend_below([t.name for t in fig.data if t.showlegend is not False])
    if seeded:
        legend["groupclick"] = "togglegroup"  # a click shows or hides every seed of the model
    head = _top(r_title, height)
    fig.update_layout(template=TEMPLATE, height=height, title=head["title"], margin=head["margin"],
                      xaxis={"type": "log", "title": "training tokens"},
                      yaxis={"title": r_axis, "range": r_range, "type": "log"}, shapes=r_lines,
                      updatemenus=[_menu(buttons)], showlegend=True, legend=legend)
    return fig


def emergence_pair(new: pd.DataFrame, old: pd.DataFrame, names: list[str], *, labels=("new text", "repeated text"),
                   title: str = "Two long runs") -> go.Figure:
    """Chapter 10: each model's r(16 L_tr) with its paired 95% interval against its training
    tokens in two long runs, one colour a model: solid lines for ``new`` (rows of
    :func:`rflens.store.bundle.table`), dashed for ``old``. Both axes are logarithmic, with the
    lines at which a model extrapolates (1.10) and breaks (2)."""
    fig = go.Figure()
    highs = []
    for i, name in enumerate(names):
        legend = True  # one legend entry a model (its colour): the line style tells the runs apart
        for em, label, dash in ((new, labels[0], "solid"), (old, labels[1], "dash")):
            d = em[em["name"] == name].sort_values("tokens") if not em.empty else em
            if d.empty:
                continue
            r, lo, hi = d["r_horizon"], d["r_horizon_lo"], d["r_horizon_hi"]
            highs.append(float(hi.max()))
            model = d["label"].iloc[0]
            fig.add_trace(go.Scatter(
                x=d["tokens"], y=r, mode="lines+markers", name=model, legendgroup=name, showlegend=legend,
                line={"color": _color(i), "dash": dash},
                error_y={"type": "data", "symmetric": False, "array": hi - r, "arrayminus": r - lo},
                hovertemplate=f"%{{x:.3s}} tokens: r({EXTRAPOLATION_HORIZON} L_tr) = %{{y:.3f}}<extra>{model}, "
                              f"{label}</extra>"))
            legend = False
    breaks = _hline(2.0, "2: breaks", color="firebrick", yref="y")
    breaks["label"]["textposition"] = "end"
    lines = [_hline(EXTRAPOLATION_TOLERANCE, f"{EXTRAPOLATION_TOLERANCE:.2f}: extrapolates"), breaks]
    height, legend = _legend_below([t.name for t in fig.data if t.showlegend])
    head = _top(title + _subtitle(f"r(16 L_tr) as training grows: solid, {labels[0]}; dashed, {labels[1]}"), height)
    top = max([2.5, *highs]) * 1.2
    fig.update_layout(template=TEMPLATE, height=height, title=head["title"], margin=head["margin"],
                      xaxis={"type": "log", "title": "training tokens"},
                      yaxis={"type": "log", "title": "r(16 L_tr) = ppl(16 L_tr) / ppl(L_tr)",
                             "range": [math.log10(0.9), math.log10(top)]},
                      shapes=lines, showlegend=True, legend=legend)
    return fig


# the long runs named in words (legends, subplot titles): which run, and the text it trained on
# (the presets' ``about`` in :mod:`rflens.setup.presets` says the same at length)
EW_SYMBOLS = ("circle", "diamond", "square", "triangle-up")  # one marker a run (capped: its open form)
# one pair of colours a run: broke (warm), did not break (cool); no two traces share one
EW_COLORS = (("#d62728", "#1f77b4"), ("#ff7f0e", "#17becf"), ("#8c564b", "#2ca02c"), ("#e377c2", "#7f7f7f"))


def run_name(run: str) -> str:
    """A long run in words: its preset's ``title`` (``"second long run (new text)"`` for
    ``long``), else its name."""
    from rflens.setup import presets

    try:
        return presets.get(run).title or run
    except Exception:  # noqa: BLE001 - not a preset (a test's run): its name will do
        return run


def _segment_cap(run: str, ratios) -> float:
    """The ERF's cap in units of L_tr: the length of the run's measuring segment (its preset's
    ``erf_length_mult``), else the largest ERF drawn."""
    from rflens.setup import presets

    try:
        return float(presets.get(run).eval.erf_length_mult)
    except Exception:  # noqa: BLE001 - not a preset
        return float(max(ratios))


def spread_markers(x: list[float], y: list[float], close: float = 0.03, step: float = 0.025) -> list[float]:
    """``x`` with the points that would sit on one another on log-log axes (within ``close``
    decades on both) set side by side, ``step`` decades apart and centred on their place, in
    the order given: so that a marker never hides another. ``y`` is left as it is."""
    out = list(map(float, x))
    logs = [(math.log10(max(a, 1e-12)), math.log10(max(b, 1e-12))) for a, b in zip(x, y)]
    seen: list[list[int]] = []
    for i, (lx, ly) in enumerate(logs):
        group = next((g for g in seen if abs(logs[g[0]][0] - lx) < close and abs(logs[g[0]][1] - ly) < close), None)
        if group is None:
            seen.append([i])
        else:
            group.append(i)
    for group in seen:
        for k, i in enumerate(group):
            out[i] = float(x[i]) * 10 ** (step * (k - (len(group) - 1) / 2))
    return out


def early_warning_figure(ew: pd.DataFrame) -> go.Figure:
    """Chapter 10: every finished long-run model's ERF at its first measured size (in units
    of its L_tr) against its r(16 L_tr) at its last size, both logarithmic; one panel a run
    (titled with the run in words), so that no run's markers hide the other's. Colour: the
    model broke at some size or did not; one marker a run. An ERF the segment capped is a
    lower bound: drawn at the cap (the segment's length), with the run's marker open, as the
    note under the plot says. ``ew``: rows of :func:`rflens.longrun.compare.early_warning`."""
    runs = list(dict.fromkeys(ew["run"]))
    titles = [run_name(r) for r in runs]
    fig = make_subplots(rows=1, cols=max(1, len(runs)), shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=titles or None)
    caps, lines, lows = {}, [], []
    for j, run in enumerate(runs):
        d = ew[ew["run"] == run]
        ratios = d["ERF / L_tr first"].astype(float)
        cap = caps[run] = _segment_cap(run, ratios)
        lows.append(float(ratios.min()))
        symbol = EW_SYMBOLS[j % len(EW_SYMBOLS)]
        axis = "x" if j == 0 else f"x{j + 1}"
        at = [cap if flag(c) else float(v) for v, c in zip(d["ERF / L_tr first"], d["capped first"])]
        # markers at one place (the flat models at r = 1, the capped ones at the segment's end)
        # set side by side, so that none hides another; the hover gives each its own values
        drawn = dict(zip(d.index, spread_markers(at, d["r(16 L_tr) last"].astype(float).tolist())))
        for broke in (True, False):
            e = d[d["breaks"].astype(bool) == broke]
            if e.empty:
                continue
            capped = [flag(c) for c in e["capped first"]]
            x = [drawn[i] for i in e.index]
            erf = [f"≥ {cap:g} L_tr (capped by the segment)" if c else f"{float(v):.2f} L_tr"
                   for v, c in zip(e["ERF / L_tr first"], capped)]
            colour = EW_COLORS[j % len(EW_COLORS)][0 if broke else 1]
            name = f"{titles[j]}: {'broke' if broke else 'did not break'}"
            fig.add_trace(go.Scatter(
                x=x, y=e["r(16 L_tr) last"], mode="markers", name=name, legendgroup=name,
                marker={"color": colour, "size": [11 if c else 9 for c in capped],
                        "symbol": [f"{symbol}-open" if c else symbol for c in capped],
                        "line": {"width": 1.5, "color": colour}},
                text=e["model"], customdata=erf,
                hovertemplate="%{text}: ERF %{customdata} at the first size, r(16 L_tr) %{y:.2f} at the last"
                              f"<extra>{titles[j]}</extra>"), row=1, col=j + 1)
        for x, colour in ((1.0, "gray"), (cap, "firebrick")):  # named by the axis's tick labels
            lines.append({"type": "line", "x0": x, "x1": x, "y0": 0, "y1": 1, "xref": axis, "yref": "paper",
                          "line": {"color": colour, "dash": "dot", "width": 1.5}})
    lines.append(_hline(2.0, "2: breaks", color="firebrick", xref="paper"))
    height, legend = _legend_below([t.name for t in fig.data], HEIGHT + TITLE_LINE)  # a title of three lines
    cap_text = " or ".join(sorted({f"{c:g} L_tr" for c in caps.values()})) or "its"
    head = _top("Does an early ERF warn of a later break?"
                + _subtitle("ERF at the first measured size against r(16 L_tr) at the last")
                + _subtitle(f"open marker: capped by the {cap_text} segment (a lower bound), drawn at its end"),
                height)
    first = int(ew["first tokens"].min()) if not ew.empty else 0
    # no menu: the subplot titles come right under the title
    fig.update_layout(template=TEMPLATE, height=height, title=head["title"], margin={"t": head["margin"]["t"] - MENU_ROW},
                      shapes=lines, legend=legend, showlegend=True)
    low = min([1.0, *lows]) / 1.5
    for j, run in enumerate(runs):
        # the lines at L_tr and at the segment's length named by their tick labels
        ticks = [t for t in (0.01, 0.03, 0.1, 0.3) if t >= low] + [1.0, caps[run]]
        fig.update_xaxes(type="log", range=[math.log10(low), math.log10(caps[run] * 1.6)], row=1, col=j + 1,
                         tickvals=ticks, ticktext=[f"{t:g}" for t in ticks[:-2]] + ["1 = L_tr", f"{caps[run]:g}: segment"],
                         title_text=f"ERF / L_tr at {first / 1e6:.1f}M tokens" if first else "ERF / L_tr, first size")
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="r(16 L_tr) at the last size", row=1, col=1)
    return fig


def clock_figure(curves: pd.DataFrame, ladder: str, base: str, clocks: list[str], *,
                 title: str = "What sets the clock of failure") -> go.Figure:
    """Chapter 10: a ladder's models beside the base run's, r(16 L_tr) against the tokens on
    the left and against the base tokens the ladder's other clock reads them at on the right
    (``curves``: :func:`rflens.longrun.clock.curves`; ``clocks``: its clocks, tokens first).
    Where a clock holds, the ladder's curves (solid) lie on the base's (dotted) in its panel.
    One colour a setting; every seed is a line."""
    other = clocks[1]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=["at the same tokens", f"at the same {other}"])
    settings = list(dict.fromkeys(curves["model"]))
    named = set()  # one legend entry a setting (one colour): it shows or hides both runs' curves
    for (run, model, seed), d in curves.groupby(["run", "model", "seed"], sort=False):
        d = d.sort_values("tokens")
        mine = run == ladder
        colour = _color(settings.index(model))
        name = d["label"].iloc[0] if "label" in d else model  # the paper's setting where the rows name it
        for col, x in ((1, "tokens"), (2, other)):
            fig.add_trace(go.Scatter(
                x=d[x], y=d["r"], mode="lines+markers" if mine else "lines", name=name,
                legendgroup=model, showlegend=model not in named,
                line={"color": colour, "dash": "solid" if mine else "dot", "width": 2.5 if mine else 1.2},
                marker={"size": 7}, customdata=d["tokens"],
                hovertemplate=f"{run}, seed {seed}: %{{customdata:.3s}} tokens, r = %{{y:.3f}}<extra>{name}</extra>"),
                row=1, col=col)
            named.add(model)
    subtitle = _subtitle(f"{ladder} (solid) beside {base} (dotted): r(16 L_tr) of every seed; x: the {base} tokens "
                         "each clock reads a size at")
    height, legend = _legend_below([t.name for t in fig.data if t.showlegend])
    head = _top(title + subtitle, height)
    fig.update_layout(template=TEMPLATE, height=height, title=head["title"], margin=head["margin"],
                      showlegend=True, legend=legend)
    fig.update_xaxes(type="log", title_text=f"{base} tokens")
    fig.update_yaxes(type="log", title_text="r(16 L_tr)", col=1)
    for line in (_hline(EXTRAPOLATION_TOLERANCE, f"{EXTRAPOLATION_TOLERANCE:.2f}"), _hline(BREAKS, f"{BREAKS:g}: breaks")):
        fig.add_shape(line)
    return fig
