// rflens: let the ipywidgets HTML manager typeset with MathJax 3.
// The widget manager calls the MathJax 2 API (MathJax.Hub.Queue) to typeset widget labels;
// the book loads MathJax 3, which has no Hub. This file gives both the configuration object
// (before MathJax loads) and the loaded MathJax (after start-up) a Hub.Queue that forwards to
// MathJax 3's typesetPromise, and does nothing on pages without MathJax.
(function () {
  function queue(job) {
    var mj = window.MathJax;
    var element = job && job[2];
    if (mj && typeof mj.typesetPromise === "function") {
      mj.typesetPromise(element ? [element] : undefined).catch(function () {});
    }
  }
  var config = window.MathJax = window.MathJax || {};
  config.Hub = config.Hub || { Queue: queue };
  var startup = config.startup = config.startup || {};
  var ready = startup.ready;
  startup.ready = function () {
    if (ready) { ready(); } else { window.MathJax.startup.defaultReady(); }
    window.MathJax.Hub = { Queue: queue };
  };
})();
