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

OVERLAPS_JS = r"""
(tolerance) => {
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
  const TEXT_KINDS = [
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
