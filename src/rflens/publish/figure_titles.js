/* On a narrow screen (a phone), a plotly figure's title is wider than the figure and runs past
   its edge: SVG text does not wrap. Each figure's title is broken into lines at spaces, each
   line as long as the figure's width allows, after every drawing of the figure, and again,
   measured, where wide letters still reach past the edge. The title's text is unchanged on a
   desktop. A figure in a fold is resized to its column when the fold opens. */
(function () {
  "use strict";
  var NARROW = 600;      // px: the book's phone width (book.css hides the toolbar there too)
  var CHAR_EM = 0.58;    // the width of an average character, in ems of the title's font

  // the visible length of a piece of plotly's pseudo-HTML (its tags take no room)
  function visible(html) { return html.replace(/<[^>]*>/g, "").length; }

  // each of the title's lines (its own <br>s kept) broken at spaces outside tags, a line at
  // most perLine visible characters where its words allow
  function wrap(text, perLine) {
    return text.split(/<br\s*\/?>/i).map(function (segment) {
      var lines = [], line = "";
      (segment.match(/(?:<[^>]*>|[^\s<])+/g) || []).forEach(function (word) {
        if (line && visible(line) + 1 + visible(word) > perLine) { lines.push(line); line = word; }
        else { line = line ? line + " " + word : word; }
      });
      if (line) lines.push(line);
      return lines.join("<br>");
    }).join("<br>");
  }

  // how far the title reaches past the figure's right edge, in px (0: it fits)
  function overflow(plot) {
    var t = plot.querySelector(".gtitle");
    if (!t) return 0;
    return Math.max(0, t.getBoundingClientRect().right - plot.getBoundingClientRect().right + 4);
  }

  // drawn where a reader sees it: not in a closed fold, whose content the browser lays out anyway
  function shown(plot) {
    return plot.clientWidth > 0 && (plot.checkVisibility ? plot.checkVisibility({contentVisibilityAuto: true})
                                                          : !plot.closest("details:not([open])"));
  }

  function fit(plot, tries) {
    if (window.innerWidth > NARROW || !plot.layout || !plot.layout.title || plot._rflensWrapping || !shown(plot)) return;
    var title = plot.layout.title, text = typeof title === "string" ? title : title.text;
    var over = overflow(plot);
    if (!text || !over) return;
    var size = (title.font && title.font.size) || (plot._fullLayout && plot._fullLayout.title.font.size) || 17;
    var t = plot.querySelector(".gtitle"), left = t ? t.getBoundingClientRect().left - plot.getBoundingClientRect().left : 20;
    var room = plot.clientWidth - left - 8;
    var perLine = Math.max(12, Math.floor(room / (size * CHAR_EM)) - 3 * (tries || 0));
    var wrapped = wrap(text, perLine);
    if (wrapped === text && !tries) return;
    var lines = wrapped.split("<br>").length, top = (plot.layout.margin && plot.layout.margin.t) || 80;
    plot._rflensWrapping = true;   // the relayout below draws the figure again: it is measured after
    window.Plotly.relayout(plot, {"title.text": wrapped, "margin.t": Math.max(top, 30 + lines * size * 1.25)})
      .then(function () {
        plot._rflensWrapping = false;
        if (overflow(plot) && (tries || 0) < 4) fit(plot, (tries || 0) + 1);   // wide letters: shorter lines
      });
  }

  function watch() {
    if (!window.Plotly) return;
    document.querySelectorAll(".js-plotly-plot").forEach(function (plot) {
      fit(plot);
      if (plot.on && !plot._rflensTitles) { plot._rflensTitles = true; plot.on("plotly_afterplot", function () { fit(plot); }); }
    });
  }

  // a figure in a closed fold (<details>) is drawn before it can be measured: when the fold
  // opens, it takes its column's width and its title is fitted then
  document.addEventListener("toggle", function (event) {
    var fold = event.target;
    if (!fold.open || !window.Plotly) return;
    fold.querySelectorAll(".js-plotly-plot").forEach(function (plot) {
      window.Plotly.Plots.resize(plot).then(function () { fit(plot); });
    });
  }, true);
  window.addEventListener("load", watch);
  window.addEventListener("resize", watch);
})();
