"""How the book's plotly figures are displayed: in the static HTML book and in a live Jupyter.

Executed by papermill (nbclient), plotly's default renderer emits only the plotly JSON
mime type, which the book builder (myst-nb) cannot draw: the page would show no figure.
:func:`setup_plotly` selects the renderer ``"rflens"``, whose output has two parts:

* ``text/html``: the figure's ``<div>`` and a short script that draws it with
  ``window.Plotly``. The built book loads plotly.js once per page from its own
  ``_static/plotly.min.js`` (see :mod:`rflens.publish.offline`), so figures render offline and pages
  stay small (no 4.6 MB library inlined in every output). Where no plotly.js is on the page
  (Colab, a bare HTML viewer) the script loads the matching version from plotly's CDN first.
* ``application/vnd.plotly.v1+json``: the figure itself, which JupyterLab, Notebook 7 and
  VS Code draw natively (offline too); the book ignores it because it prefers text/html.

Figure ``<div>`` ids are derived from the figure's content, so re-executing a chapter gives
byte-identical outputs (no random uuids in the diff).
"""

from __future__ import annotations

import hashlib
import json

import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer  # the public home of plotly's renderer classes
from plotly.offline import get_plotlyjs_version

RENDERER = "rflens"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
CONFIG = {"displaylogo": False, "responsive": True}

# the draw call runs at once where plotly.js is loaded (the book), else after loading it
_LOADER = """<script>(function () {{
  function draw() {{ {body} }}
  if (window.Plotly) {{ draw(); return; }}
  var s = document.createElement("script");
  s.src = "https://cdn.plot.ly/plotly-{version}.min.js";
  s.onload = draw;
  document.head.appendChild(s);
}})();</script>"""


def figure_html(fig, div_id: str | None = None) -> str:
    """The HTML of one figure without plotly.js or MathJax (``fig``: Figure or dict)."""
    fig_json = pio.to_json(fig, validate=False, remove_uids=True)
    if div_id is None:
        div_id = "rflens-" + hashlib.sha1(fig_json.encode()).hexdigest()[:16]
    html = pio.to_html(fig, include_plotlyjs=False, include_mathjax=False, full_html=False,
                       div_id=div_id, config=CONFIG, validate=False)
    start = html.index("<script")
    body_start = html.index(">", start) + 1
    end = html.rindex("</script>")
    return html[:start] + _LOADER.format(body=html[body_start:end].strip(), version=get_plotlyjs_version()) + html[end + 9:]


def figure_bundle(fig) -> dict:
    """The figure as a display's data (``fig``: Figure or dict): text/html for the book
    plus the plotly JSON for live frontends, as the ``"rflens"`` renderer shows it. The
    explorers set an Output's content to it (rflens.widgets)."""
    data = json.loads(pio.to_json(fig, validate=False, remove_uids=True))
    data["config"] = CONFIG
    return {"text/html": figure_html(fig), PLOTLY_MIME: data}


class BookRenderer(MimetypeRenderer):
    """plotly renderer: text/html for the book plus the plotly JSON for live frontends."""

    def to_mimebundle(self, fig_dict):
        return figure_bundle(fig_dict)


def setup_plotly() -> str:
    """Register and select the ``"rflens"`` renderer (idempotent); returns its name.

    Called at the top of every chapter; figures shown with ``fig.show()`` or as a cell's
    last value then appear both in the built book (offline) and in a live Jupyter.
    """
    if RENDERER not in pio.renderers:
        pio.renderers[RENDERER] = BookRenderer()
    pio.renderers.default = RENDERER
    return RENDERER
