"""A live explorer of the positional biases (Chi et al., ACL 2023, Sections 2-3, 6-7).

Sliders for every knob the paper turns -- ALiBi's slope shift Delta and same slope h, the
window w, Sandwich's d_bar and compression ratios, KERPLE's r1 and r2 -- redraw the
bias-against-distance curves of every head. It needs a running kernel (Jupyter, Binder,
Colab): in the static book the controls show their last state but do not redraw, which is
what the slider figures of :mod:`rflens.figures.bias` are for.

Only core ipywidgets are used (no FigureWidget), so the stored widget state renders in the
static book with the self-contained widget manager, offline.
"""

from __future__ import annotations

import numpy as np
import torch

from rflens.figures.bias import HEAD_COLORS
from rflens.model.positional import last_query_bias, sandwich_bias, sandwich_compression
from rflens.setup.config import ModelConfig
from rflens.setup.schemes import RELATIVE

# every relative bias; Sandwich with learnable ratios starts as Sandwich, so it is shown once
SCHEMES = tuple(name for name in RELATIVE if name != "sandwich_learned")
DEFAULTS = {"pos": "alibi", "n_head": 12, "length": 256, "slope_shift": 0.0, "use_same_slope": False,
            "same_slope": 4.0, "window": 0, "d_bar": 128, "compression_scale": 1.0, "r1": 1.0, "r2": 1.0}


def explorer_bias(state: dict) -> np.ndarray:
    """(H, L) bias at distances 0..L-1 for the explorer's ``state`` (keys of DEFAULTS).

    ``window`` 0 means no window; ``compression_scale`` multiplies Sandwich's ratios
    h_c = n·8/H (1 = the paper's). -inf marks masked distances.
    """
    s = {**DEFAULTS, **state}
    H, L = int(s["n_head"]), int(s["length"])
    window = int(s["window"]) or None
    if s["pos"] == "sandwich":
        comp = sandwich_compression(H).double() * float(s["compression_scale"])
        bias = sandwich_bias(torch.arange(L, dtype=torch.float64), int(s["d_bar"]), comp)  # (H, L)
        if window is not None:
            bias[:, window:] = float("-inf")
        return bias.numpy()
    kw = {}
    if s["pos"] == "alibi":
        kw = {"slope_shift": float(s["slope_shift"]),
              "same_slope": float(s["same_slope"]) if s["use_same_slope"] else None}
    elif s["pos"] in ("kerple_log", "kerple_power"):
        r2 = float(s["r2"]) if s["pos"] == "kerple_log" else min(float(s["r2"]), 2.0)
        kw = {"kerple_r1": float(s["r1"]), "kerple_r2": r2}
    elif s["pos"] == "window" and window is None:
        window = L  # windowed attention needs a window: the whole range
    # learnable biases at the chosen start values (KERPLE) or at zero (T5), not at random
    cfg = ModelConfig(pos=s["pos"], n_head=H, d_model=8 * H, window=window, kerple_init="fixed", t5_init="zero", **kw)
    return last_query_bias(cfg, L).numpy()


def bias_explorer(n_head: int = 12, length: int = 256):
    """Build the explorer: controls on the left, the curves of every head on the right."""
    import ipywidgets as W
    import plotly.graph_objects as go

    from rflens.figures.render import figure_bundle, setup_plotly

    setup_plotly()
    style = {"description_width": "120px"}
    c = {
        "pos": W.Dropdown(options=SCHEMES, value=DEFAULTS["pos"], description="scheme", style=style),
        "slope_shift": W.FloatSlider(value=0.0, min=-3, max=8, step=0.5, description="ALiBi Δ", style=style),
        "use_same_slope": W.Checkbox(value=False, description="ALiBi: one slope for all heads", indent=False),
        "same_slope": W.FloatSlider(value=4.0, min=0, max=8, step=0.5, description="same slope h", style=style),
        "window": W.IntSlider(value=0, min=0, max=length, step=4, description="window w (0: none)", style=style),
        "d_bar": W.IntSlider(value=128, min=2, max=512, step=2, description="Sandwich d̄", style=style),
        "compression_scale": W.FloatLogSlider(value=1.0, base=2, min=-3, max=3, step=0.25,
                                              description="h_c × (Sandwich)", style=style),
        "r1": W.FloatLogSlider(value=1.0, base=10, min=-2, max=1, step=0.05, description="KERPLE r1", style=style),
        "r2": W.FloatLogSlider(value=1.0, base=10, min=-2, max=1, step=0.05, description="KERPLE r2", style=style),
    }
    out = W.Output(layout={"min_height": "440px"})

    def redraw(_=None):
        state = {k: w.value for k, w in c.items()}
        state.update(n_head=n_head, length=length)
        bias = explorer_bias(state)  # (H, L)
        bias = np.where(np.isfinite(bias), bias, np.nan).astype(np.float32)
        k = np.arange(length, dtype=np.int32)
        fig = go.Figure([go.Scatter(x=k, y=bias[h], mode="lines", name=f"head {h + 1}",
                                    line={"color": HEAD_COLORS[h % len(HEAD_COLORS)]}) for h in range(bias.shape[0])])
        fig.update_layout(template="plotly_white", height=420, title={"text": f"{state['pos']}: bias against distance"},
                          xaxis_title="distance k = m − n", yaxis_title="bias", margin={"t": 50})
        # set the Output's content directly rather than capturing a display() in it: the
        # same result in a live kernel, and no message routing for a batch run to wait on
        out.outputs = ({"output_type": "display_data", "data": figure_bundle(fig), "metadata": {}},)

    for w in c.values():
        w.observe(redraw, names="value")
    redraw()
    # the controls in as many columns of 300 px as the page has room for, the figure below at
    # the full width: side by side, a narrow page column squeezed the controls to nothing
    controls = W.GridBox(list(c.values()), layout=W.Layout(
        width="100%", grid_template_columns="repeat(auto-fill, minmax(300px, 1fr))", grid_gap="4px 16px"))
    return W.VBox([controls, out], layout={"width": "100%"})
