"""ipywidgets explorers of the book (Chi et al., ACL 2023), for a live kernel.

:mod:`rflens.widgets.bias` explores the positional biases; :mod:`rflens.widgets.results`
the experiments' results. Explorers use core ipywidgets only (no FigureWidget, whose
front end the static book cannot load offline) and draw plotly figures into an Output;
``explore`` puts them on one page for ``python -m rflens explore``.

May import: ``figures``, ``experiments`` and everything below them.
"""
