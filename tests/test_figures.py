"""Figures and explorers: plotly sliders and menus that work without a kernel, the book's
renderer, and the ipywidgets explorers for a live kernel."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import plotly.io as pio
import pytest

from rflens.figures import bias as fb, results as fr
from rflens.figures.render import BookRenderer, figure_html, PLOTLY_MIME, setup_plotly
from rflens.model import positional
from rflens.setup.config import ModelConfig
from rflens.widgets import bias as wb, results as wr

SLIDER_FIGURES = {
    "alibi_shift": lambda: fb.alibi_shift_figure(),
    "alibi_same_slope": lambda: fb.alibi_same_slope_figure(),
    "window": lambda: fb.window_figure(),
    "sandwich": lambda: fb.sandwich_figure(),
    "alibi_heatmap": lambda: fb.alibi_heatmap(),
    "window_heatmap": lambda: fb.window_heatmap(),
}


@pytest.mark.parametrize("name", list(SLIDER_FIGURES))
def test_every_slider_step_shows_its_own_traces_and_keeps_the_title(name):
    fig = SLIDER_FIGURES[name]()
    (slider,) = fig.layout.sliders
    n = len(fig.data)
    shown = []
    for step in slider.steps:
        visible, layout = step.args
        assert len(visible["visible"]) == n
        assert any(visible["visible"])
        assert "title" not in layout and "title.text" in layout  # a bare title erases it in plotly.js >= 3
        shown.append(tuple(visible["visible"]))
    assert len(set(shown)) == len(shown), "two slider steps show the same traces"
    assert [tr.visible for tr in fig.data] == list(slider.steps[slider.active].args[0]["visible"])


def test_alibi_slider_curves_are_the_closed_form():
    fig = fb.alibi_shift_figure(shifts=(-3, 0), n_head=4, length=16)
    first = [tr for tr in fig.data if tr.visible][0]  # the figure opens at Delta = 0, head 1
    slopes = positional.alibi_slopes(4, slope_shift=0)
    np.testing.assert_allclose(np.asarray(first.y, dtype=float), -slopes[0].item() * np.arange(16), rtol=1e-6)


def test_renderer_gives_html_for_the_book_and_json_for_jupyter():
    fig = fb.window_figure(windows=(4, 8), length=16)
    bundle = BookRenderer().to_mimebundle(fig.to_dict())
    assert set(bundle) == {"text/html", PLOTLY_MIME}
    html = bundle["text/html"]
    assert "<script" in html and "window.Plotly" in html
    assert "MathJax" not in html
    # deterministic: the same figure gives byte-identical output (clean diffs of executed notebooks)
    assert figure_html(fig) == figure_html(fb.window_figure(windows=(4, 8), length=16))
    assert setup_plotly() == pio.renderers.default


def test_bias_explorer_state_matches_the_closed_form():
    got = wb.explorer_bias({"pos": "alibi", "n_head": 4, "length": 10, "slope_shift": 2.0})
    want = positional.last_query_bias(ModelConfig(pos="alibi", n_head=4, d_model=32, slope_shift=2.0), 10).numpy()
    np.testing.assert_allclose(got, want)
    windowed = wb.explorer_bias({"pos": "sandwich", "n_head": 2, "length": 10, "window": 4})
    assert np.isneginf(windowed[:, 4:]).all() and np.isfinite(windowed[:, :4]).all()


def _figure_in(output_widget) -> dict:
    (out,) = output_widget.outputs
    return out["data"][PLOTLY_MIME]


def test_bias_explorer_redraws_when_a_slider_moves():
    box = wb.bias_explorer(n_head=4, length=32)
    controls, output = box.children
    before = json.dumps(_figure_in(output)["data"])
    slider = next(w for w in controls.children if getattr(w, "description", "") == "ALiBi Δ")
    slider.value = 4.0
    after = json.dumps(_figure_in(output)["data"])
    assert after != before


def test_erf_explorer_recomputes_the_erf_from_the_threshold():
    normalized = np.array([0.5, 0.3, 0.15, 0.05])
    curves = {"m": {"normalized": normalized.tolist(), "cumulative": np.cumsum(normalized).tolist(),
                    "l_tr": 2, "share_in_ltr": 0.8}}
    assert wr.erf_table(curves, ["m"], 0.79)[0]["erf"] == 2
    assert wr.erf_table(curves, ["m"], 0.99)[0]["erf"] == 4
    box = wr.erf_explorer(curves, threshold=0.79)
    controls, output, table = box.children
    assert "<td>2</td>" in table.value
    slider = controls.children[1].children[0]
    slider.value = 0.99
    assert "<td>4</td>" in table.value
    assert _figure_in(output)["layout"]["title"]["text"].startswith("ERF at threshold 0.990")


def test_the_static_threshold_slider_moves_each_models_erf_marker():
    a, b = np.array([0.5, 0.3, 0.15, 0.05]), np.full(4, 0.25)
    curves = {lab: {"normalized": g.tolist(), "cumulative": np.cumsum(g).tolist(), "l_tr": 2, "share_in_ltr": 0.8}
              for lab, g in (("a", a), ("b", b))}
    fig = fr.erf_threshold_figure(curves, thresholds=(0.5, 0.79, 0.99))
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["0.5", "0.79", "0.99"] and fig.layout.sliders[0].active == 2
    # each step rewrites the markers' data (traces 2 and 3) with the ERFs at its threshold
    data, layout, traces = steps[1].args
    assert list(traces) == [2, 3] and data["x"] == [[2], [4]] and data["y"] == [[0.79], [0.79]]
    assert steps[2].args[0]["x"] == [[4], [4]] and steps[0].args[0]["x"] == [[1], [2]]
    assert "threshold 0.79" in layout["title.text"] and fig.data[2].x == (4,)


# ----------------------------------------------------------------------------------------
# chapter 10 and 11's figures as a reader meets them: names in words, no two things alike


def _early_warning_rows():
    import pandas as pd

    rows = []
    for run in ("long", "long-repeated"):
        for model, erf, capped, r, broke in (("ALiBi Δ=-7", 0.5, False, 1.0, False), ("Rotary", 15.8, True, 5.5, True),
                                             ("Sandwich", 14.5, True, 1.01, False), ("window w=30", 1.5, False, 1.5, False)):
            rows.append({"run": run, "name": model, "model": model, "first tokens": 2**19, "ERF / L_tr first": erf,
                         "capped first": capped, "r(16 L_tr) last": r, "breaks": broke})
    return pd.DataFrame(rows)


def test_the_early_warning_figure_names_the_runs_in_words_and_gives_each_its_own_panel():
    fig = fr.early_warning_figure(_early_warning_rows())
    names = [t.name for t in fig.data]
    assert names == ["second long run (new text): broke", "second long run (new text): did not break",
                     "first long run (repeated text): broke", "first long run (repeated text): did not break"]
    assert not any(re.search(r"\blong(-repeated)?\b:", n) for n in names)  # no code name of a run
    # one panel a run, titled in words: no run's markers can hide under the other's
    assert [t.xaxis for t in fig.data] == ["x", "x", "x2", "x2"]
    assert [a.text for a in fig.layout.annotations] == ["second long run (new text)", "first long run (repeated text)"]
    colours = [t.marker.color for t in fig.data]
    assert len(set(colours)) == len(colours)
    base = {t.xaxis: {s for s in t.marker.symbol if not s.endswith("-open")} for t in fig.data}
    assert base["x"].isdisjoint(base["x2"])  # one marker a run


def test_the_early_warning_figure_draws_a_capped_erf_open_at_the_segments_length():
    fig = fr.early_warning_figure(_early_warning_rows())
    broke, flat = fig.data[0], fig.data[1]  # the second run: Rotary (capped) broke; three did not
    assert list(broke.x) == [16.0] and broke.marker.symbol[0].endswith("-open")  # at the cap, not at 15.8
    assert list(flat.x) == [0.5, 16.0, 1.5] and [s.endswith("-open") for s in flat.marker.symbol] == [False, True, False]
    assert "≥ 16 L_tr" in flat.customdata[1] and "%{customdata}" in flat.hovertemplate
    assert "open marker" in fig.layout.title.text and "16 L_tr segment" in fig.layout.title.text
    # the dotted lines at L_tr and at the segment's length, named by each panel's tick labels
    assert sorted(s.x0 for s in fig.layout.shapes if s.x0 == s.x1) == [1.0, 1.0, 16.0, 16.0]
    for axis in (fig.layout.xaxis, fig.layout.xaxis2):
        assert dict(zip(axis.tickvals, axis.ticktext))[16.0] == "16: segment" and "1 = L_tr" in axis.ticktext
    assert fig.layout.yaxis.type == fig.layout.yaxis2.type == "log"


def test_markers_that_would_sit_on_one_another_are_set_side_by_side():
    # three flat models at r = 1 with nearly one ERF, one apart, and two capped at the segment
    x = fr.spread_markers([0.5, 0.51, 0.5, 3.0, 16.0, 16.0], [1.0, 1.0, 1.001, 1.0, 2.5, 2.5])
    assert x[3] == 3.0  # alone: where it is
    assert len({round(v, 6) for v in x[:3]}) == 3 and x[0] < x[1] < x[2]  # side by side, in order
    assert abs(math.log10(x[1] / 0.51)) < 1e-9 or abs(math.log10(x[1] / 0.5)) < 0.03  # centred on their place
    assert x[4] != x[5] and math.sqrt(x[4] * x[5]) == pytest.approx(16.0)
    fig = fr.early_warning_figure(_early_warning_rows())
    for j in (1, 2):  # no two markers of a panel at one point
        points = [(round(a, 6), round(b, 6)) for t in fig.data if t.xaxis == ("x" if j == 1 else "x2")
                  for a, b in zip(t.x, t.y)]
        assert len(points) == len(set(points))


def _seeded():
    import pandas as pd

    rows = []
    for name, label in (("alibi_slope_shift=4_seed=1", "ALiBi Δ=4 seed=1"), ("alibi_slope_shift=4_seed=2", "ALiBi Δ=4 seed=2"),
                        ("rotary_seed=1", "Rotary seed=1"), ("rotary_seed=2", "Rotary seed=2"),
                        ("window_window=30_batch_size=16_l_tr=64_seed=1", "window w=30 L_tr=64 seed=1 batch=16"),
                        ("window_window=30_batch_size=16_l_tr=64_seed=2", "window w=30 L_tr=64 seed=2 batch=16")):
        for i in range(3):
            rows.append({"name": name, "label": label, "l_tr": 32, "tokens": 2**19 * 2**i, "erf": 100 + 200 * i,
                         "erf_length": 512, "erf_capped": i == 2, "r_horizon": 1 + i / 10, "r_horizon_lo": 1 + i / 12,
                         "r_horizon_hi": 1 + i / 8})
    return pd.DataFrame(rows)


def test_the_seeds_figure_gives_each_model_one_colour_and_each_seed_a_marker():
    em = _seeded()
    fig = fr.emergence_figure(em, list(dict.fromkeys(em["name"])), title="Seeds 1, 2")
    shown = [t for t in fig.data if t.visible is None]  # the r(16 L_tr) view
    colours = [t.line.color for t in shown]
    assert colours[0] == colours[1] != colours[2] == colours[3] != colours[4] == colours[5] != colours[0]
    assert [t.marker.symbol[0] for t in shown] == ["circle", "square"] * 3
    # one legend entry a model, named without its seed, that shows or hides every seed of it
    assert [t.name for t in shown if t.showlegend] == ["ALiBi Δ=4", "Rotary", "window w=30 L_tr=64 batch=16"]
    assert shown[0].legendgroup == shown[1].legendgroup != shown[2].legendgroup
    assert fig.layout.legend.groupclick == "togglegroup"
    assert "seed 2" in shown[1].hovertemplate and "● seed 1, ■ seed 2" in fig.layout.title.text
    erf = [t for t in fig.data if t.visible is False]
    assert erf[1].marker.symbol[2] == "square-open"  # a capped ERF: the seed's marker, open
    # labelled by the paper's setting (", seed 1"): the seed is said once, in the hover, not in the legend
    paper = em.assign(label=em["label"].str.replace(r"ALiBi Δ=4 seed=(\d)", r"ALiBi Δ = 8, seed \1", regex=True))
    shown = [t for t in fr.emergence_figure(paper, list(dict.fromkeys(em["name"]))).data if t.visible is None]
    assert shown[0].name == "ALiBi Δ = 8" and "ALiBi Δ = 8, seed 2<" in shown[1].hovertemplate
    assert shown[1].hovertemplate.count("seed") == 1


def test_the_cost_chart_names_schemes_in_words_and_hovers_a_sentence():
    import pandas as pd

    from rflens.setup.schemes import title

    cost = pd.DataFrame([{"experiment": e, "pos": p, "corpus": c, "overrides": o, "l_tr": l_tr, "gpu_hours": h}
                         for e, p, c, o, l_tr, h in (("Table 1", "alibi", "prose", {"slope_shift": -3.0}, 512, 1.4),
                                                  ("Table 1", "window", "prose", {"window": 40}, 512, 1.3),
                                                  ("Table 3", "kerple_log", "code", {}, 512, 1.4),
                                                  ("Table 3", "alibi", "code", {}, 512, 1.4))])
    fig = fr.cost_figure(cost)
    assert [t.name for t in fig.data] == [title("alibi"), title("window"), title("kerple_log")] == \
        ["ALiBi", "Windowed", "KERPLE (log)"]
    assert len({t.marker.color for t in fig.data}) == len(fig.data)
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text == "experiment"
    hover = fig.data[0].hovertemplate
    assert hover.startswith("%{y}: ALiBi on %{customdata[0]}, %{customdata[1]}, L_tr=%{customdata[2]}, ")
    assert "GPU-hours" in hover and "=%{y}" not in hover
    assert list(fig.data[0].customdata[0]) == ["prose", "slope_shift=-3.0", 512]
    assert list(fig.data[2].customdata[0])[1] == "default"


# chapter 2's slider figures, with the settings the chapter draws them at
CHAPTER2_SLIDERS = {
    "alibi_shift": lambda: fb.alibi_shift_figure(shifts=(-3, 0, 3, 6, 8), n_head=12, length=128),
    "alibi_same_slope": lambda: fb.alibi_same_slope_figure(exponents=(0, 2, 4, 6, 8), n_head=12, length=128),
    "window": lambda: fb.window_figure(windows=(8, 16, 32, 64), length=128),
    "window_heatmap": lambda: fb.window_heatmap(windows=(4, 8, 16), length=32),
    "alibi_heatmap": lambda: fb.alibi_heatmap(shifts=(-3, 0, 3, 6), n_head=12, length=32, head=0),
    "sandwich": lambda: fb.sandwich_figure(n_head=12, length=64),
    "kerple": lambda: fb.kerple_figure(r1s=(0.5, 1.0, 2.0), r2s=(0.1, 0.5, 1.0, 2.0, 4.0), length=64),
    "t5_buckets": lambda: fb.t5_bucket_figure(max_distances=(32, 128, 512), num_buckets=32, length=256),
    "scheme_heatmap": lambda: fb.scheme_heatmap(length=32, n_head=12, head=0),
}


@pytest.mark.parametrize("name", list(CHAPTER2_SLIDERS))
def test_every_slider_step_has_room_for_its_label(name):
    """plotly.js labels only every other step where the widest label does not fit between two
    steps: at the book's column each label, in the slider's font, fits (the browser check is
    test_figure_layout's)."""
    fig = CHAPTER2_SLIDERS[name]()
    (slider,) = fig.layout.sliders
    labels = [s.label for s in slider.steps]
    steps = [{"traces": [t for t, o in zip(fig.data, _owners(fig)) if o == i]} for i in range(len(labels))]
    room = fb.slider_spacing(len(labels), right=fb.right_of_plot(steps))
    assert max(fb.label_width(lab, slider.font.size) for lab in labels) + 8 <= room, (labels, slider.font.size)


def _owners(fig):
    """The slider step each trace belongs to."""
    steps = fig.layout.sliders[0].steps
    return [next(i for i, s in enumerate(steps) if s.args[0]["visible"][k]) for k in range(len(fig.data))]


def test_the_scheme_slider_labels_are_short_and_its_titles_name_each_scheme_in_full():
    fig = fb.scheme_heatmap(length=16, n_head=4)
    steps = fig.layout.sliders[0].steps
    assert all(fb.label_width(s.label, 12) <= 60 for s in steps)
    titles = [s.args[1]["title.text"] for s in steps]
    assert titles[1].startswith("ALiBi + window w = 8") and titles[6].startswith("KERPLE (power)")
