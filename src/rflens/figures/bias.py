"""Figures of the positional biases (Chi et al., ACL 2023, Sections 2, 3, 6 and 7).

Every figure is a plain plotly figure whose interaction lives in the figure itself:
a slider (``layout.sliders``) switches between precomputed traces, so it works in the
static HTML book with no kernel. Two views:

* bias against distance k = m - n, one curve per head (what the last query adds to the
  logit of a key k positions back; -inf outside a window is drawn as a gap);
* the (m, n) heat map of one head, with the causal and window masks left blank.

The numbers come from :mod:`rflens.model.positional` (the same code the models train with).
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative, sample_colorscale

from rflens import paper
from rflens.model import analysis
from rflens.model.positional import bias_matrix, last_query_bias, sandwich_compression, t5_bucket
from rflens.setup.config import ModelConfig
from rflens.setup.schemes import title as scheme_title

TEMPLATE = "plotly_white"
HEAD_SCALE = "Viridis"  # heads in order of their slopes: a sequential scale (its pale end left out)
HEIGHT = 440
HEAD_COLORS = qualitative.Dark24  # 24 distinct colours: every head of the paper's H = 12 its own
CONSTANT_COLOR = "#3b8bc2"  # a heat map of one value: attended cells in one colour


def _cfg(pos: str, n_head: int, **kw) -> ModelConfig:
    # the bias does not depend on d, only on H: any d divisible by H will do. Learnable
    # biases are drawn at the start values given (KERPLE) or at zero (T5), not at random.
    kw = {"kerple_init": "fixed", "t5_init": "zero", **kw}
    return ModelConfig(pos=pos, n_head=n_head, d_model=8 * n_head, **kw)


def _finite(values) -> np.ndarray:
    """float32 copy with -inf (masked) -> NaN, so plotly draws a gap (or a blank cell)
    instead of a line to minus infinity. float32 arrays travel as compact typed arrays."""
    out = np.asarray(values, dtype=np.float32).copy()
    out[~np.isfinite(out)] = np.nan
    return out


def _fmt(x) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


# plotly.js labels only every k-th step of a slider when the widest label (plus 8 px) is wider
# than the space between two steps: (plot width - 20 px) / (steps - 1). At the book's column
# (688 px, plotly's margins of 80 px each side) the font is chosen so that every step keeps its label.
BOOK_WIDTH = 688  # px of the book's content column at a 1280 px window
SLIDER_MARGIN = 80  # px, plotly's default left and right margins
SLIDER_FONTS = (12, 11, 10)  # px, the label fonts tried, largest first
SLIDER_CHAR = 0.62  # width of a label character, in font sizes (generous for digits and lower case)


COLORBAR_PX = 100  # px a heat map's colour bar takes at the right of the plot area
LEGEND_PX, LEGEND_CHAR_PX = 40, 6.6  # px a legend entry's sample and gap take; px a character of its name


def right_of_plot(steps: list[dict]) -> float:
    """Px that the legend or a colour bar takes from the plot area's width, at the right."""
    traces = [tr for step in steps for tr in step["traces"]]
    names = [str(tr.name) for tr in traces if isinstance(tr, go.Scatter) and tr.name and tr.showlegend is not False]
    several = any(len(step["traces"]) > 1 for step in steps)  # plotly draws a legend for two shown traces or more
    legend = LEGEND_PX + LEGEND_CHAR_PX * max(map(len, names)) if several and names else 0.0
    scale = COLORBAR_PX if any(isinstance(tr, go.Heatmap) and tr.showscale is not False for tr in traces) else 0.0
    return max(legend, scale)


def slider_spacing(n_steps: int, width: int = BOOK_WIDTH, right: float = 0.0) -> float:
    """Px between two steps of a slider of ``n_steps`` steps as wide as the plot area, in a
    figure ``width`` px wide whose legend or colour bar takes ``right`` px."""
    return (width - 2 * SLIDER_MARGIN - right - 20) / max(1, n_steps - 1)


def label_width(label: str, size: int) -> float:
    """Px of a slider label at font ``size``, its widest line (``<br>`` breaks one)."""
    return max(len(line) for line in str(label).split("<br>")) * SLIDER_CHAR * size


def slider_font(labels: list[str], width: int = BOOK_WIDTH, right: float = 0.0) -> int:
    """The largest of :data:`SLIDER_FONTS` at which every label of a slider fits between its
    steps (plotly.js then draws them all); the smallest where none does."""
    for size in SLIDER_FONTS:
        if max((label_width(lab, size) for lab in labels), default=0) + 8 <= slider_spacing(len(labels), width, right):
            return size
    return SLIDER_FONTS[-1]


def slider_figure(steps: list[dict], *, prefix: str, xaxis: str, yaxis: str, active: int = 0,
                  height: int = HEIGHT) -> go.Figure:
    """A figure whose slider switches between groups of precomputed traces.

    ``steps``: [{"label": str, "title": str, "traces": [go.Scatter | go.Heatmap, ...]}].
    Each slider step makes its own traces visible and sets the title (``title.text``: a
    bare ``title`` would erase the title in plotly.js >= 3).
    """
    fig = go.Figure()
    owner = []
    for i, step in enumerate(steps):
        for tr in step["traces"]:
            tr.visible = i == active
            fig.add_trace(tr)
            owner.append(i)
    slider_steps = []
    for i, step in enumerate(steps):
        visible = [o == i for o in owner]
        slider_steps.append({"method": "update", "label": step["label"],
                             "args": [{"visible": visible}, {"title.text": step["title"]}]})
    fig.update_layout(
        template=TEMPLATE, height=height, title={"text": steps[active]["title"]},
        xaxis_title=xaxis, yaxis_title=yaxis, margin={"t": 60, "b": 40},
        sliders=[{"active": active, "currentvalue": {"prefix": prefix}, "pad": {"t": 50}, "steps": slider_steps,
                  "font": {"size": slider_font([step["label"] for step in steps], right=right_of_plot(steps))}}],
    )
    return fig


def _curves(cfg: ModelConfig, length: int, names=None) -> list[go.Scatter]:
    bias = last_query_bias(cfg, length).numpy()  # (H, L)
    k = np.arange(length, dtype=np.int32)
    names = names or [f"head {h + 1}" for h in range(bias.shape[0])]
    # one colour a head: the default colourway has ten, and twelve heads would share two
    return [go.Scatter(x=k, y=_finite(bias[h]), mode="lines", name=names[h],
                       line={"color": HEAD_COLORS[h % len(HEAD_COLORS)]}) for h in range(bias.shape[0])]


# ----------------------------------------------------------------------------------------
# Bias against distance


def alibi_shift_figure(shifts=paper.SLOPE_SHIFT, n_head: int = 12, length: int = 128) -> go.Figure:
    """ALiBi curves -k / 2^(h + Delta) per head, slider over the slope shift Delta."""
    steps = []
    for d in shifts:
        cfg = _cfg("alibi", n_head, slope_shift=float(d))
        steps.append({"label": _fmt(d), "traces": _curves(cfg, length),
                      "title": f"ALiBi, slope shift Δ = {_fmt(d)} (h = n·8/H + Δ)"})
    active = list(shifts).index(0) if 0 in shifts else 0
    return slider_figure(steps, prefix="Δ = ", xaxis="distance k = m − n", yaxis="bias", active=active)


def alibi_same_slope_figure(exponents=(0, 2, 4, 6, 8), n_head: int = 12, length: int = 128) -> go.Figure:
    """ALiBi with one slope 1/2^h for every head, slider over h (all heads coincide)."""
    steps = []
    for h in exponents:
        cfg = _cfg("alibi", n_head, same_slope=float(h))
        bias = last_query_bias(cfg, length).numpy()[0]
        steps.append({"label": _fmt(h), "traces": [go.Scatter(x=np.arange(length, dtype=np.int32), y=_finite(bias), mode="lines",
                                                               name=f"every head: slope 1/2^{_fmt(h)}")],
                      "title": f"ALiBi, the same slope 1/2^{_fmt(h)} = {2.0 ** -h:.3g} for all {n_head} heads"})
    fig = slider_figure(steps, prefix="h = ", xaxis="distance k = m − n", yaxis="bias")
    fig.update_yaxes(range=[-length * 1.02, 1])  # a fixed axis makes the change of slope visible
    return fig


def window_figure(windows=(8, 16, 32, 64), length: int = 128) -> go.Figure:
    """Windowed attention, Eq. (3): 0 for k < w, masked (-inf, no line) beyond."""
    steps = []
    for w in windows:
        cfg = _cfg("window", 1, window=int(w))
        bias = last_query_bias(cfg, length).numpy()[0]
        allowed = [1.0 if math.isfinite(v) else 0.0 for v in bias]
        steps.append({"label": str(w), "title": f"Windowed attention, w = {w}: keys with m − n ≥ {w} are masked",
                      "traces": [go.Scatter(x=np.arange(length, dtype=np.int32), y=allowed, mode="lines", line_shape="hv",
                                            fill="tozeroy", name="1 = attended, 0 = masked (bias −∞)")]})
    fig = slider_figure(steps, prefix="w = ", xaxis="distance k = m − n", yaxis="attended?")
    fig.update_yaxes(range=[-0.05, 1.1])
    return fig


def sandwich_figure(d_bars=paper.D_BAR, n_head: int = 12, length: int = 512) -> go.Figure:
    """Sandwich, Eq. (5)-(6), per head (compression ratios h_c = n·8/H), slider over d_bar."""
    comp = sandwich_compression(n_head).tolist()
    names = [f"head {h + 1} (h_c = {c:.3g})" for h, c in enumerate(comp)]
    steps = []
    for d in d_bars:
        cfg = _cfg("sandwich", n_head, d_bar=int(d))
        steps.append({"label": str(d), "traces": _curves(cfg, length, names),
                      "title": f"Sandwich, d̄ = {d}: (p_m·p_n − d̄/2) / h_c"})
    active = list(d_bars).index(128) if 128 in d_bars else 0
    return slider_figure(steps, prefix="d̄ = ", xaxis="distance k = m − n", yaxis="bias", active=active)


def d_bar_figure(d_bars=paper.D_BAR, compression: float = paper.SANDWICH_COMPRESSION, length: int = 512) -> go.Figure:
    """Figure 10: one head (h_c fixed), one curve per d_bar; larger d_bar, lower curve."""
    curves = analysis.sandwich_by_d_bar(d_bars, compression, length)
    fig = go.Figure([go.Scatter(x=np.arange(length, dtype=np.int32), y=_finite(curves[d]), mode="lines", name=f"d̄ = {d}")
                     for d in sorted(curves)])
    fig.update_layout(template=TEMPLATE, height=HEIGHT,
                      title={"text": f"Sandwich with h_c = {compression:g}: a larger d̄ gives a more negative bias"},
                      xaxis_title="distance k = m − n", yaxis_title="bias")
    return fig


def log_fit_figure(d_bar: int = paper.SANDWICH_D_BAR, compression: float = paper.SANDWICH_COMPRESSION,
                   max_distance: int = paper.LOG_FIT_LENGTH - 1, smoothed=paper.SMOOTHED_SANDWICH) -> go.Figure:
    """Sandwich (d_bar, h_c) against its least-squares log curve and the paper's smoothed curve."""
    fit = analysis.sandwich_log_fit(d_bar, compression, max_distance)
    near = analysis.sandwich_log_fit(d_bar, compression, max_distance, nearest=50)
    k = np.arange(max_distance + 1)
    y = analysis.sandwich_curve(d_bar, compression, max_distance + 1)
    # a log-spaced subset of distances keeps the page small and is what a log axis shows
    idx = np.unique(np.round(np.geomspace(1, max_distance + 1, 600)).astype(int) - 1)
    x = (k[idx] + 1).tolist()  # plotted against 1 + k on a log axis
    lines = [go.Scatter(x=x, y=_finite(y[idx]), mode="lines", name=f"Sandwich, d̄ = {d_bar}, h_c = {compression:g}")]
    for (a, b), label, dash in (((fit["a"], fit["b"]), "fit over k = 0..%d" % max_distance, "dash"),
                                (smoothed, "the paper's smoothed curve", "dot"),
                                ((near["a"], near["b"]), "fit over the 50 nearest k", "dashdot")):
        lines.append(go.Scatter(x=x, y=_finite(a * np.log1p(k[idx]) + b), mode="lines", line={"dash": dash},
                                name=f"{label}: {a:.3f}·log(1+k) {'+' if b >= 0 else '−'} {abs(b):.3f}"))
    fig = go.Figure(lines)
    fig.update_layout(template=TEMPLATE, height=HEIGHT, title={"text": "Smoothed Sandwich: a log curve through the Sandwich bias"},
                      xaxis={"title": {"text": "1 + k (log scale)"}, "type": "log"}, yaxis_title="bias",
                      legend={"x": 0.01, "y": 0.01, "xanchor": "left", "yanchor": "bottom"})
    return fig


def _smoothed_name(ab) -> str:
    a, b = ab
    return f"smoothed: {a:g}·log(1+k) {'+' if b >= 0 else '−'} {abs(b):g}".replace("-", "−")


def smoothed_figure(length: int = 512, d_bar: int = paper.SANDWICH_D_BAR, n_head: int = 12) -> go.Figure:
    """The smoothed Sandwich (one curve for every head) beside Sandwich's head with h_c = 8."""
    smooth = last_query_bias(_cfg("smoothed", n_head), length).numpy()[0]
    sand = analysis.sandwich_curve(d_bar, paper.SANDWICH_COMPRESSION, length)
    k = np.arange(length, dtype=np.int32)
    fig = go.Figure([go.Scatter(x=k, y=_finite(sand), mode="lines", name=f"Sandwich, d̄ = {d_bar}, h_c = {paper.SANDWICH_COMPRESSION:g}"),
                     go.Scatter(x=k, y=_finite(smooth), mode="lines", name=_smoothed_name(paper.SMOOTHED_SANDWICH))])
    fig.update_layout(template=TEMPLATE, height=HEIGHT, title={"text": "Smoothed Sandwich: the oscillations removed"},
                      xaxis_title="distance k = m − n", yaxis_title="bias")
    return fig


def kerple_figure(r1s=(0.5, 1.0, 2.0), r2s=(0.1, 0.5, 1.0, 2.0, 4.0), length: int = 512) -> go.Figure:
    """KERPLE (log variant) -r1·log(1 + r2·k) at chosen (initial) r1, r2: one curve per r1,
    slider over r2. With r1 = 0.825, r2 = 1 (plus a constant) it is the smoothed Sandwich."""
    steps = []
    for r2 in r2s:
        traces = []
        for r1 in r1s:
            cfg = _cfg("kerple_log", 1, kerple_r1=float(r1), kerple_r2=float(r2))
            traces.append(go.Scatter(x=np.arange(length, dtype=np.int32), y=_finite(last_query_bias(cfg, length).numpy()[0]),
                                     mode="lines", name=f"r1 = {r1:g}"))
        steps.append({"label": _fmt(r2), "traces": traces, "title": f"KERPLE (log): −r1·log(1 + {r2:g}·k)"})
    active = list(r2s).index(1.0) if 1.0 in r2s else 0
    fig = slider_figure(steps, prefix="r2 = ", xaxis="distance k = m − n", yaxis="bias", active=active)
    low = min(float(-max(r1s) * np.log1p(max(r2s) * (length - 1))), -1.0)
    fig.update_yaxes(range=[low * 1.02, 0.2])
    return fig


def t5_bucket_figure(max_distances=(32, 128, 512), num_buckets: int = 32, length: int = 1024) -> go.Figure:
    """T5's causal buckets: exact for short distances, log-spaced up to max_distance, then one
    bucket for everything further (where the learned bias can no longer tell distances apart)."""
    import torch

    k = torch.arange(length)
    steps = []
    for md in max_distances:
        b = t5_bucket(k, num_buckets, int(md)).tolist()
        steps.append({"label": str(md), "title": f"T5 buckets: {num_buckets} buckets, max_distance = {md}",
                      "traces": [go.Scatter(x=k.numpy().astype(np.int32), y=np.asarray(b, dtype=np.int32), mode="lines", line_shape="hv", name="bucket of k")]})
    active = list(max_distances).index(128) if 128 in max_distances else 0
    fig = slider_figure(steps, prefix="max_distance = ", xaxis="distance k = m − n", yaxis="bucket", active=active)
    fig.update_xaxes(type="log")
    return fig


# ----------------------------------------------------------------------------------------
# (m, n) heat maps


def _scheme_name(cfg: ModelConfig) -> str:
    """A scheme as the book prints it, with its window: "Windowed, w = 8", "ALiBi + window w = 8"."""
    if cfg.pos == "window":
        return f"{scheme_title(cfg.pos)}, w = {cfg.window}"
    return scheme_title(cfg.pos) + (f" + window w = {cfg.window}" if cfg.window else "")


def heatmap_figure(configs: dict[str, ModelConfig], *, length: int = 32, head: int = 0, prefix: str = "") -> go.Figure:
    """Heat map of the bias query m gives key n for one head, slider over ``configs``
    ({label: ModelConfig}); masked cells (causal n > m, outside a window) are blank.

    Titles name the scheme in words (:func:`rflens.setup.schemes.title`), then the slider's setting
    (``prefix`` and the label) where a prefix is given, else the scheme's window if any. A bias
    that is one value wherever a key is attended (a window: 0) is drawn in one colour
    without a colour bar, and the title says its value."""
    steps = []
    for label, cfg in configs.items():
        mat = bias_matrix(cfg, length)[head].numpy()  # (L, L)
        z = _finite(mat)
        name = f"{scheme_title(cfg.pos)}, {prefix}{label}" if prefix else _scheme_name(cfg)
        values = z[np.isfinite(z)]
        constant = values.size > 0 and float(values.min()) == float(values.max())
        if constant:  # no range to colour: one colour, the value in the title, no colour bar
            v = float(values[0])
            colour = {"colorscale": [[0, CONSTANT_COLOR], [1, CONSTANT_COLOR]], "zmin": v - 1, "zmax": v + 1,
                      "showscale": False}
            what = f"bias {v:g} wherever attended, blank where masked"
        else:
            colour = {"colorscale": "Viridis", "colorbar": {"title": {"text": "bias"}}}
            what = "bias of query m to key n"
        steps.append({"label": label, "title": f"{name}: {what} (head {head + 1})",
                      "traces": [go.Heatmap(z=z, x=np.arange(length, dtype=np.int32), y=np.arange(length, dtype=np.int32),
                                            hovertemplate="m=%{y}, n=%{x}: %{z:.3f}<extra></extra>", **colour)]})
    fig = slider_figure(steps, prefix=prefix, xaxis="key position n", yaxis="query position m", height=520)
    fig.update_yaxes(autorange="reversed", scaleanchor="x")
    return fig


def alibi_heatmap(shifts=(-3, 0, 3, 6), n_head: int = 12, length: int = 32, head: int = 0) -> go.Figure:
    return heatmap_figure({_fmt(d): _cfg("alibi", n_head, slope_shift=float(d)) for d in shifts},
                          length=length, head=head, prefix="Δ = ")


def window_heatmap(windows=(4, 8, 16), length: int = 32) -> go.Figure:
    return heatmap_figure({str(w): _cfg("window", 1, window=int(w)) for w in windows}, length=length, prefix="w = ")


def scheme_heatmap(length: int = 32, n_head: int = 12, head: int = 0) -> go.Figure:
    """One head of each relative scheme at its default (initial) settings, slider over schemes."""
    # short slider labels, two lines where one would not fit, so that every step keeps its own
    # (the title names the scheme in full)
    configs = {
        "ALiBi": _cfg("alibi", n_head),
        "ALiBi<br>w = 8": _cfg("alibi", n_head, window=8),
        "window<br>w = 8": _cfg("window", n_head, window=8),
        "Sandwich": _cfg("sandwich", n_head),
        "smoothed": _cfg("smoothed", n_head),
        "KERPLE<br>log": _cfg("kerple_log", n_head),
        "KERPLE<br>power": _cfg("kerple_power", n_head),
    }
    return heatmap_figure(configs, length=length, head=head, prefix="")


def attention_reach_figure(length: int = 2048, l_tr: int = 512, n_head: int = 12) -> go.Figure:
    """How far back each head looks from its bias alone: with equal logits q·k for every
    key, the attention of the last query is softmax(b_h(k)) over k = 0..length-1; the
    curves are its cumulative share from the most recent key backwards. A slider switches
    between schemes. Each head has its own colour (a sequential scale, steepest head first) and
    a legend entry; the dotted line, labelled on the plot, marks L_tr."""
    import torch

    configs = {
        "ALiBi": _cfg("alibi", n_head),
        "ALiBi, Δ = 6": _cfg("alibi", n_head, slope_shift=6.0),
        "Sandwich": _cfg("sandwich", n_head),
        f"window w = {l_tr // 4}": _cfg("window", n_head, window=l_tr // 4),
        "no bias": _cfg("window", n_head, window=length),
    }
    idx = np.unique(np.round(np.geomspace(1, length, 160)).astype(np.int32))  # k = 1..length
    # heads ordered by slope (steepest first): one shade each of a sequential scale, named in the legend
    colors = sample_colorscale(HEAD_SCALE, list(np.linspace(0.0, 0.85, n_head)))
    steps = []
    for label, cfg in configs.items():
        b = last_query_bias(cfg, length).double()  # (H, L)
        share = torch.softmax(b, dim=-1).cumsum(-1).numpy()  # (H, L): attention within the k most recent keys
        share = share[:, idx - 1]  # log-spaced k: what a log axis shows, at a fraction of the size
        traces = [go.Scatter(x=idx, y=_finite(share[h]), mode="lines", name=f"head {h + 1}", line={"color": colors[h]},
                             hovertemplate="k=%{x}: %{y:.3f}<extra>head " + str(h + 1) + "</extra>")
                  for h in range(share.shape[0])]
        steps.append({"label": label, "traces": traces,
                      "title": f"{label}: share of attention on the k most recent keys (equal q·k)"})
    fig = slider_figure(steps, prefix="", xaxis="k most recent keys (log scale)", yaxis="cumulative attention",
                        height=HEIGHT + 40)
    fig.update_xaxes(type="log")
    # the training length: a line with its label (a shape takes data coordinates on a log axis;
    # an annotation would need log10(L_tr) and otherwise lands off the plot)
    fig.update_layout(legend={"title": {"text": "head"}, "tracegroupgap": 0}, shapes=[{
        "type": "line", "x0": l_tr, "x1": l_tr, "y0": 0, "y1": 1, "xref": "x", "yref": "paper",
        "line": {"color": "black", "dash": "dot", "width": 1.5},
        "label": {"text": f"L_tr = {l_tr} (training length)", "textposition": "start", "textangle": 0,
                  "xanchor": "right", "yanchor": "bottom", "padding": 6, "font": {"size": 11, "color": "black"}}}])
    return fig
