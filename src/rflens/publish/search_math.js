// rflens: typeset the equations in the search page's snippets.
// Sphinx builds each result's snippet from the page's text, so an inline equation arrives as
// its TeX source, \( ... \); a snippet of 240 characters may cut one in half, and the search
// words are highlighted inside it too. For each snippet this file drops a half equation at
// either end, puts each equation in a span the highlighter skips, highlights the search words
// in the rest again and lets MathJax typeset the equations.
(function () {
  var OPEN = "\\(", CLOSE = "\\)";
  var EQUATION = /(\\\([\s\S]*?\\\))/;

  function whole(text) {
    var close = text.indexOf(CLOSE), open = text.indexOf(OPEN);
    if (close !== -1 && (open === -1 || close < open)) {  // the snippet starts inside an equation
      text = "..." + text.slice(close + CLOSE.length);
    }
    open = text.lastIndexOf(OPEN);
    if (open !== -1 && text.indexOf(CLOSE, open) === -1) {  // it ends inside one
      text = text.slice(0, open) + "...";
    }
    return text;
  }

  function searchWords() {
    var query = new URLSearchParams(window.location.search).get("q") || "";
    return query.toLowerCase().split(/\s+/).filter(function (w) { return w; });
  }

  function rebuild(p, words) {
    var parts = whole(p.textContent).split(EQUATION);
    p.textContent = "";
    parts.forEach(function (part, i) {
      if (i % 2 === 1) {  // an equation (the split's captured group)
        var span = document.createElement("span");
        span.className = "math notranslate nohighlight";
        span.textContent = part;
        p.appendChild(span);
      } else if (part) {
        p.appendChild(document.createTextNode(part));
      }
    });
    if (typeof _highlightText === "function") {  // Sphinx's highlighter (sphinx_highlight.js)
      words.forEach(function (w) { _highlightText(p, w, "highlighted"); });
    }
  }

  function typeset(snippets) {
    var words = searchWords();
    var withMath = snippets.filter(function (p) { return p.textContent.indexOf(OPEN) !== -1; });
    withMath.forEach(function (p) { rebuild(p, words); });
    var mj = window.MathJax;
    if (withMath.length && mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(function () { return mj.typesetPromise(withMath); }).catch(function () {});
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var results = document.getElementById("search-results");
    if (!results) { return; }
    new MutationObserver(function (records) {
      var snippets = [];
      records.forEach(function (record) {
        record.addedNodes.forEach(function (node) {
          if (node.nodeType !== 1) { return; }
          if (node.matches("p.context")) { snippets.push(node); }
          node.querySelectorAll("p.context").forEach(function (p) { snippets.push(p); });
        });
      });
      if (snippets.length) { typeset(snippets); }
    }).observe(results, { childList: true, subtree: true });
  });
})();
