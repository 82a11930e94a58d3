// rflens: search results that read as the book's prose, with their equations typeset.
// Sphinx builds each result's snippet from the text of the result's page: all of its main
// block, so a snippet could quote the page's header buttons (".ipynb .pdf"), its printed table
// of contents ("Contents"), code cells (the parameters cell's comments, shell commands) and the
// TeX of equations, and a page found by its title and by a section was listed twice.
// This file (loaded on the search page, before Sphinx's searchtools.js) makes the snippet from
// the article alone, without its code, one result a page (its best), and typesets the equations:
// an inline equation arrives as its TeX source, \( ... \) (or $ ... $ from a table's text); a
// snippet of 240 characters may cut one in half, and the search words are highlighted inside it
// too. For each snippet it drops a half equation at either end, puts each equation in a span
// the highlighter skips, highlights the search words in the rest again and lets MathJax
// typeset the equations.
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
    var withMath = snippets.filter(function (p) {  // an equation, or the end of one cut at the start
      return p.textContent.indexOf(OPEN) !== -1 || p.textContent.indexOf(CLOSE) !== -1;
    });
    withMath.forEach(function (p) { rebuild(p, words); });
    var mj = window.MathJax;
    if (withMath.length && mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(function () { return mj.typesetPromise(withMath); }).catch(function () {});
    }
  }

  // what a snippet leaves out: the article's code, its outputs printed as code and its tables of
  // contents, and, where the theme puts them inside the main block, the header buttons, the
  // printed table of contents, the secondary sidebar, figures and widgets
  var LEFT_OUT = [".headerlink", "script", "style", ".cell_input", "div.highlight", "pre", "nav",
                  ".bd-header-article", "#jb-print-docs-body", ".onlyprint", ".bd-sidebar-secondary",
                  "#searchbox", ".prev-next-area", "footer", ".js-plotly-plot", ".jupyter-widgets",
                  ".widget-area", ".toggle-details", ".toctree-wrapper"].join(", ");
  // $...$ in a text (a table cell's TeX): no space inside either dollar
  var DOLLARS = /\$(?=\S)([^$\n]{1,200}?\S)\$|\$(\S)\$/g;

  function pageText(htmlString, anchor) {
    var doc = new DOMParser().parseFromString(htmlString, "text/html");
    var root = doc.querySelector("article.bd-article") || doc.querySelector('[role="main"]');
    if (!root) { return ""; }
    root.querySelectorAll(LEFT_OUT).forEach(function (el) { el.remove(); });
    if (anchor) {
      try {
        var part = root.querySelector(anchor);
        // an index entry's target is an empty mark at the head of the section it names: that section
        if (part && !part.textContent.trim()) { part = part.closest("section") || part.parentElement; }
        if (part) { root = part; }
      } catch (err) { /* an anchor that is not a selector: the whole article */ }
    }
    return root.textContent.replace(/\s+/g, " ").trim()
      .replace(DOLLARS, function (all, a, b) { return OPEN + (a || b) + CLOSE; });
  }

  function onePerPage(results) {
    // the results are shown from the end of the list: keep each page's last (best) entry
    var seen = {}, kept = [];
    for (var i = results.length - 1; i >= 0; i--) {
      if (!seen[results[i][0]]) { seen[results[i][0]] = true; kept.push(results[i]); }
    }
    return kept.reverse();
  }

  var patched = false;
  function patch() {
    if (patched || typeof Search === "undefined") { return; }
    patched = true;
    Search.htmlToText = pageText;
    var perform = Search._performSearch;
    Search._performSearch = function () { return onePerPage(perform.apply(Search, arguments)); };
  }
  patch();  // where searchtools.js came first; else before it runs its query, below

  document.addEventListener("DOMContentLoaded", function () {
    patch();
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
