"""What every chapter of the book does first: the scale it runs at, and the display setup.

A chapter's ``parameters`` cell asks :func:`default_scale` for its scale, so a chapter run
by ``python -m rflens reproduce`` (which sets ``RFLENS_SCALE``), by papermill (which injects
``scale`` after that cell) or by hand in Jupyter (the default preset) agrees on one answer.
"""

from __future__ import annotations

import os

from .scales import DEFAULT_SCALE


def default_scale() -> str:
    """``$RFLENS_SCALE`` if set, else the default preset."""
    return os.environ.get("RFLENS_SCALE", DEFAULT_SCALE)


def setup() -> None:
    """Figures that render in the static book and in a live Jupyter, and tables wide enough
    for the results (a row per model, a column per evaluation length)."""
    import pandas as pd

    from .figures import setup_plotly

    setup_plotly()
    pd.set_option("display.max_columns", 40)
    pd.set_option("display.width", 160)
