"""Live ERF explorer for a Jupyter kernel (Chi et al., ACL 2023, Section 4.1).

The static book has plotly menus and sliders over precomputed curves
(:func:`rflens.figures.results.erf_figure` and :func:`rflens.figures.results.erf_threshold_figure`). With a kernel, this explorer recomputes the
effective receptive field from the cached normalised gradients while the threshold slider
moves: choose models, see their normalised-gradient and cumulative curves, their ERF at the
chosen threshold and their L_tr.
"""

from __future__ import annotations

import numpy as np
from plotly.subplots import make_subplots

from rflens.figures.results import _color
from rflens.measure.receptive import erf_from_normalized
from rflens.paper import ERF_THRESHOLD


def erf_table(curves: dict[str, dict], labels, threshold: float) -> list[dict]:
    """ERF of each chosen model at ``threshold``, recomputed from its normalised gradient."""
    rows = []
    for lab in labels:
        rf = curves[lab]
        erf = erf_from_normalized(rf["normalized"], threshold)
        rows.append({"label": lab, "erf": erf, "l_tr": int(rf["l_tr"]), "within_l_tr": erf <= int(rf["l_tr"]),
                     "share_in_ltr": float(rf["share_in_ltr"])})
    return rows


def _box_class():
    import ipywidgets as w

    class Explorer(w.VBox):
        """A VBox whose plain-text form is one line (a saved notebook stays small)."""

        def __repr__(self) -> str:
            return "ERF explorer (interactive in a live Jupyter kernel)"

    return Explorer


def erf_explorer(curves: dict[str, dict], selected=None, threshold: float = ERF_THRESHOLD):
    """An ipywidgets box: model chooser, threshold slider, log-axis switch, the figure and a
    table of ERF vs L_tr. ``curves``: {label: receptive-field result} as from
    :func:`rflens.experiments.tables.erf_curves`."""
    import ipywidgets as w

    from rflens.figures.render import figure_bundle, setup_plotly

    setup_plotly()  # the figure as HTML (static book) and as plotly JSON (live Jupyter)
    labels = list(curves)
    selected = list(selected or labels[: min(3, len(labels))])
    chooser = w.SelectMultiple(options=labels, value=selected, rows=min(8, len(labels)), description="models")
    slider = w.FloatSlider(value=threshold, min=0.5, max=0.999, step=0.001, readout_format=".3f",
                           description="threshold", continuous_update=False)
    log_x = w.Checkbox(value=True, description="log k axis")
    out = w.Output(layout={"min_height": "540px"})
    table = w.HTML()

    def redraw(*_):
        chosen = [lab for lab in labels if lab in chooser.value]
        thr = float(slider.value)
        rows = erf_table(curves, chosen, thr)
        fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
        shapes = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y2", "y0": thr, "y1": thr,
                   "line": {"color": "gray", "dash": "dot"}}]
        for lab, row in zip(chosen, rows):
            rf, color = curves[lab], _color(labels.index(lab))
            k = np.arange(1, len(rf["normalized"]) + 1)
            fig.add_scatter(x=k, y=rf["normalized"], name=lab, line={"color": color}, legendgroup=lab, row=1, col=1)
            fig.add_scatter(x=k, y=rf["cumulative"], name=lab, line={"color": color}, legendgroup=lab,
                            showlegend=False, row=2, col=1)
            for x, dash in ((row["erf"], "solid"), (row["l_tr"], "dash")):
                shapes.append({"type": "line", "xref": "x2", "yref": "y2 domain", "x0": x, "x1": x, "y0": 0,
                               "y1": 1, "line": {"color": color, "dash": dash, "width": 1.5}})
        fig.update_layout(template="plotly_white", height=520, margin={"t": 50}, shapes=shapes,
                          title={"text": f"ERF at threshold {thr:.3f} (solid) and L_tr (dashed)"})
        fig.update_yaxes(type="log", row=1, col=1, exponentformat="power", title_text="normalised gradient")
        fig.update_yaxes(range=[0, 1.02], row=2, col=1, title_text="cumulative, newest first")
        fig.update_xaxes(type="log" if log_x.value else "linear")
        fig.update_xaxes(title_text="k: tokens back from the predicted token", row=2, col=1)
        # the Output's content is set directly (as in rflens.widgets.bias): a plain plotly
        # figure, which the static book can draw too, unlike a FigureWidget
        out.outputs = ({"output_type": "display_data", "data": figure_bundle(fig), "metadata": {}},)
        cells = "".join(f"<tr><td>{r['label']}</td><td>{r['erf']}</td><td>{r['l_tr']}</td>"
                        f"<td>{'yes' if r['within_l_tr'] else 'no'}</td><td>{r['share_in_ltr']:.0%}</td></tr>"
                        for r in rows)
        table.value = ("<table><tr><th>model</th><th>ERF</th><th>L_tr</th><th>ERF ≤ L_tr</th>"
                       "<th>gradient in last L_tr</th></tr>" + cells + "</table>")

    for control in (chooser, slider, log_x):
        control.observe(redraw, names="value")
    redraw()
    return _box_class()([w.HBox([chooser, w.VBox([slider, log_x])]), out, table])
