"""A browser check that no plotly menu covers text of its figure.

``OVERLAPS_JS`` is the source of one JavaScript function for Playwright's
``page.evaluate(OVERLAPS_JS)`` (optionally with the tolerance in px as its argument). For
every ``.js-plotly-plot`` on the page it compares the on-screen boxes of the controls
(closed dropdown headers ``.updatemenu-header-group``, menu buttons ``.updatemenu-button``
outside a dropdown, sliders ``.slider-group``) with those of the figure's text: the title
(``.gtitle``), axis titles, annotations (subplot titles included), shape labels
(``.shape-label``), the legend, colour bars and tick labels. It returns one object a figure::

    [{"index": 0, "id": "<div id>", "overlaps": [{"control": "updatemenu 0", "element": "shape label",
      "text": "ERF=126", "width": 12.5, "height": 9.0}, ...], "clipped": ["updatemenu 0", ...]}, ...]

``overlaps`` lists each control / text pair whose boxes intersect by more than the
tolerance (default 2 px) in both directions; ``clipped`` names the controls that stick out
of the figure's own box, where a reader could not reach them.
"""

# the helpers both scripts open with: the tolerance, an element's box, whether it is shown, its text
_PRELUDE = r"""
  const tol = typeof tolerance === "number" ? tolerance : 2;
  const box = el => {
    const r = el.getBoundingClientRect();
    return { left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height };
  };
  const shown = el => {
    if (!el.isConnected) return false;
    for (let e = el; e && e.nodeType === 1; e = e.parentNode) {
      const s = window.getComputedStyle(e);
      if (s.display === "none" || s.visibility === "hidden" || s.opacity === "0") return false;
    }
    const b = box(el);
    return b.width > 0.5 && b.height > 0.5;
  };
  const text = el => (el.textContent || "").replace(/\s+/g, " ").trim().slice(0, 80);
"""

OVERLAPS_JS = "(tolerance) => {\n" + _PRELUDE + r"""  const TEXT_KINDS = [
    ["title", ".infolayer .g-gtitle .gtitle"],
    ["axis title", ".infolayer [class^='g-x'][class$='title'] text, .infolayer [class^='g-y'][class$='title'] text"],
    ["annotation", ".annotation .annotation-text-g"],
    ["shape label", ".shape-label"],
    ["legend", ".infolayer .legend"],
    ["colorbar", ".infolayer .colorbar"],
    ["tick label", ".xtick text, .ytick text"],
  ];
  return Array.from(document.querySelectorAll(".js-plotly-plot")).map((plot, index) => {
    const controls = [];
    plot.querySelectorAll(".updatemenu-container").forEach((menu, i) => {
      // a closed dropdown shows its header; a menu of buttons shows the buttons themselves
      menu.querySelectorAll(".updatemenu-header-group").forEach(el => controls.push([`updatemenu ${i}`, el]));
      menu.querySelectorAll(".updatemenu-button").forEach(el => {
        if (!el.closest(".updatemenu-dropdown-button-group")) controls.push([`updatemenu ${i} button`, el]);
      });
    });
    plot.querySelectorAll(".slider-container .slider-group").forEach((el, i) => controls.push([`slider ${i}`, el]));
    const texts = [];
    for (const [kind, selector] of TEXT_KINDS) {
      plot.querySelectorAll(selector).forEach(el => { if (shown(el) && text(el)) texts.push([kind, el]); });
    }
    const overlaps = [];
    const clipped = [];
    const svg = plot.querySelector(".main-svg");
    const frame = svg ? box(svg) : box(plot);
    for (const [name, ctl] of controls) {
      if (!shown(ctl)) continue;
      const a = box(ctl);
      if (a.left < frame.left - tol || a.right > frame.right + tol || a.top < frame.top - tol || a.bottom > frame.bottom + tol) {
        clipped.push(name);
      }
      for (const [kind, el] of texts) {
        const b = box(el);
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > tol && h > tol) {
          overlaps.push({ control: name, element: kind, text: text(el),
                          width: Math.round(w * 10) / 10, height: Math.round(h * 10) / 10 });
        }
      }
    }
    return { index, id: plot.id || "", overlaps, clipped };
  });
}
"""


# ``TEXT_OVERLAPS_JS``: the text of each figure against its other text. Same call and return
# shape as ``OVERLAPS_JS`` (one object a figure), with ``overlaps`` listing pairs of text
# items whose boxes intersect by more than the tolerance in both directions (the title, axis
# titles, annotations, shape labels, the labels a scatter draws at its points, bar labels,
# the legend and colour bars; tick labels of one axis are not compared with each other, and
# no text is compared with the box that contains it), ``clipped`` the text items that stick
# out of the figure's box, and ``legend`` the legend entries a reader cannot see without
# scrolling, over all its legends (``{"shown": n, "entries": m}``, n < m where some are cut;
# null without a legend).
TEXT_OVERLAPS_JS = "(tolerance) => {\n" + _PRELUDE + r"""  const KINDS = [
    ["title", ".infolayer .g-gtitle .gtitle"],
    ["axis title", ".infolayer [class^='g-x'][class$='title'] text, .infolayer [class^='g-y'][class$='title'] text"],
    ["annotation", ".annotation .annotation-text-g"],
    ["shape label", ".shape-label"],
    ["point label", ".scatterlayer .textpoint text"],
    ["bar label", ".barlayer .bartext"],
    ["legend", ".infolayer > g[class^='legend']"],
    ["colorbar", ".infolayer .colorbar"],
  ];
  return Array.from(document.querySelectorAll(".js-plotly-plot")).map((plot, index) => {
    const items = [];
    for (const [kind, selector] of KINDS) {
      plot.querySelectorAll(selector).forEach(el => { if (shown(el) && text(el)) items.push([kind, el]); });
    }
    // tick labels, named by their axis ("xtick", "x2tick", ...): those of one axis are not compared
    plot.querySelectorAll(".xaxislayer-above text, .yaxislayer-above text").forEach(el => {
      if (shown(el) && text(el)) items.push([`tick label ${el.parentNode.getAttribute("class")}`, el]);
    });
    const svg = plot.querySelector(".main-svg");
    const frame = svg ? box(svg) : box(plot);
    const overlaps = [];
    const clipped = [];
    for (let i = 0; i < items.length; i++) {
      const [ka, ea] = items[i];
      const a = box(ea);
      if (a.left < frame.left - tol || a.right > frame.right + tol || a.top < frame.top - tol || a.bottom > frame.bottom + tol) {
        clipped.push({ element: ka, text: text(ea) });
      }
      for (let j = i + 1; j < items.length; j++) {
        const [kb, eb] = items[j];
        if (ka === kb && ka.startsWith("tick label")) continue;  // one axis's ticks: plotly spaces them itself
        if (ea.contains(eb) || eb.contains(ea)) continue;
        const b = box(eb);
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > tol && h > tol) {
          overlaps.push({ a: ka, a_text: text(ea), b: kb, b_text: text(eb),
                          width: Math.round(w * 10) / 10, height: Math.round(h * 10) / 10 });
        }
      }
    }
    // legend entries a reader sees: inside their legend's (scrolled) frame and the figure, in every legend
    let legend = null;
    plot.querySelectorAll(".infolayer > g[class^='legend']").forEach(lg => {
      if (!shown(lg)) return;
      const bg = lg.querySelector(".bg");
      const frameBox = bg ? box(bg) : box(lg);
      const entries = Array.from(lg.querySelectorAll(".traces"));
      const seen = entries.filter(e => {
        const b = box(e);
        return b.top >= frameBox.top - tol && b.bottom <= frameBox.bottom + tol && b.top >= frame.top - tol
          && b.bottom <= frame.bottom + tol && b.height > 0.5;
      });
      legend = legend || { shown: 0, entries: 0 };
      legend.shown += seen.length;
      legend.entries += entries.length;
    });
    return { index, id: plot.id || "", overlaps, clipped, legend };
  });
}
"""


def figure_page(figures, width: int = 688) -> str:
    """A page of plotly ``figures`` (Figure or dict), each in a div ``width`` px wide (the
    book's content column at a 1280 px window), with plotly.js inlined: for a browser check
    of single figures without building the book."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    divs = []
    for i, fig in enumerate(figures):
        spec = pio.to_json(fig, validate=False)
        divs.append(f'<div id="fig{i}" style="width:{width}px"></div><script>(function () {{ const f = {spec}; '
                    f'Plotly.newPlot("fig{i}", f.data, f.layout, {{responsive: true}}); }})();</script>')
    return (f"<html><head><meta charset='utf-8'><script>{get_plotlyjs()}</script></head>"
            f"<body style='margin:0'>{''.join(divs)}</body></html>")
