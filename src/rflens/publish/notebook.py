"""What every chapter of the book does first: the scale it runs at, its parameters checked,
and the display setup.

A chapter's ``parameters`` cell asks :func:`default_scale` for its scale, so a chapter run
by ``python -m rflens reproduce`` (which sets ``RFLENS_SCALE``), by papermill (which injects
``scale`` after that cell) or by hand in Jupyter (the default preset) agrees on one answer.
The next cell passes the parameters to :func:`setup`, which checks their values with
:func:`check_parameters`, the same check ``reproduce`` makes before it runs a chapter.
"""

from __future__ import annotations

import math
import os
from numbers import Real

from rflens.errors import UserError
from rflens.setup.presets import DEFAULT_SCALE


def default_scale() -> str:
    """``$RFLENS_SCALE`` if set, else the default preset."""
    return os.environ.get("RFLENS_SCALE", DEFAULT_SCALE)


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _positive_number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _checks() -> dict:
    """Every chapter parameter: (test, what a valid value is)."""
    from rflens.setup.config import CORPORA
    from rflens.setup.presets import NAMES

    return {
        "scale": (lambda v: v in NAMES, f"one of {', '.join(NAMES)}"),
        "corpus": (lambda v: v in CORPORA, f"one of {', '.join(CORPORA)}"),
        "corpora": (lambda v: v == "all" or v in CORPORA, f"\"all\" or one of {', '.join(CORPORA)}"),
        "progress": (lambda v: isinstance(v, bool), "True or False"),
        "n_head": (_positive_int, "a positive integer"),
        "length": (_positive_int, "a positive integer"),
        "n_gpus": (_positive_int, "a positive integer"),
        "gpu_tflops": (_positive_number, "a positive number"),
        "mfu": (lambda v: _positive_number(v) and v <= 1, "a number in (0, 1]"),
    }


def check_parameters(**params) -> None:
    """UserError (one line) for a chapter parameter whose value is not allowed."""
    checks = _checks()
    for name, value in params.items():
        if name not in checks:
            raise UserError(f"unknown chapter parameter {name!r}: known are {', '.join(checks)}")
        test, allowed = checks[name]
        if not test(value):
            raise UserError(f"chapter parameter {name}={value!r} is not allowed: give {allowed}")


def setup(*, tables_of: str | None = None, **params):
    """Check the chapter's parameters (:func:`check_parameters`), then set up figures that
    render in the static book and in a live Jupyter, tables wide enough for the results
    (a row per model, a column per evaluation length), and, in a chapter run by
    ``reproduce``, a CSV file and a download link for every table shown
    (:func:`rflens.publish.csv_files.offer_tables`), its provenance that of the preset
    ``tables_of`` where the chapter's tables are read from a shipped run (else the scale's).
    Returns the chapter's preset (None for a chapter without one)."""
    import pandas as pd

    check_parameters(**params)

    from rflens.figures import setup_plotly
    from rflens.publish.csv_files import offer_tables

    setup_plotly()
    offer_tables(tables_of or params.get("scale"))  # under reproduce: each table also as CSV, linked below it
    pd.set_option("display.max_columns", 40)
    pd.set_option("display.width", 160)
    pd.set_option("display.max_colwidth", None)  # a table's text is shown whole, never cut with "..."
    if "scale" in params:  # the chapter's preset, resolved once and handed to every experiment
        from rflens.setup import presets

        return presets.get(params["scale"])
    return None
