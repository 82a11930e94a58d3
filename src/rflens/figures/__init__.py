"""Plotly figures of the book (Chi et al., ACL 2023), interactive in the static HTML.

``setup_plotly()`` (:mod:`rflens.figures.render`) selects a renderer whose figures show
both in the built book, offline, and in a live Jupyter. :mod:`rflens.figures.bias` draws
the positional biases; :mod:`rflens.figures.results` the experiments' results.

May import: ``experiments`` and everything below it.
"""

from rflens.figures.render import figure_html, setup_plotly

__all__ = ["setup_plotly", "figure_html"]
