/* On a narrow screen (a phone), a plotly figure's title is wider than the figure and runs past
   its edge: SVG text does not wrap. Each figure's title is broken into lines at spaces, each
   line as long as the figure's width allows, after every drawing of the figure. The title's
   text itself is unchanged on a desktop. */
(function () {
  "use strict";
  var NARROW = 600;      // px: the book's phone width (book.css hides the toolbar there too)
  var CHAR_EM = 0.55;    // the width of an average character, in ems of the title's font

  function wrap(text, perLine) {
    var lines = [], line = "";
    text.split(/\s+/).forEach(function (word) {
      if (line && (line + " " + word).length > perLine) { lines.push(line); line = word; }
      else { line = line ? line + " " + word : word; }
    });
    if (line) lines.push(line);
    return lines.join("<br>");
  }

  function fit(plot) {
    if (window.innerWidth > NARROW || !plot.layout || !plot.layout.title || plot._rflensWrapping) return;
    var title = plot.layout.title, text = typeof title === "string" ? title : title.text;
    if (!text) return;
    var flat = text.replace(/<br\s*\/?>/g, " ");
    var size = (title.font && title.font.size) || (plot._fullLayout && plot._fullLayout.title.font.size) || 17;
    var perLine = Math.max(12, Math.floor((plot.clientWidth - 20) / (size * CHAR_EM)));
    var wrapped = wrap(flat, perLine);
    if (wrapped === text) return;
    var lines = wrapped.split("<br>").length, top = (plot.layout.margin && plot.layout.margin.t) || 80;
    plot._rflensWrapping = true;   // the relayout below draws the figure again: once is enough
    window.Plotly.relayout(plot, {"title.text": wrapped, "margin.t": Math.max(top, 30 + lines * size * 1.25)})
      .then(function () { plot._rflensWrapping = false; });
  }

  function watch() {
    if (!window.Plotly) return;
    document.querySelectorAll(".js-plotly-plot").forEach(function (plot) {
      fit(plot);
      if (plot.on && !plot._rflensTitles) { plot._rflensTitles = true; plot.on("plotly_afterplot", function () { fit(plot); }); }
    });
  }

  window.addEventListener("load", watch);
  window.addEventListener("resize", watch);
})();
