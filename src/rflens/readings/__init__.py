"""The book's sentences about its own results, each computed from the table it describes.

A chapter never states a measured fact in fixed prose: it shows the reading of this package
for the tables it has just computed, so the text agrees with the numbers on the page at
whatever scale the chapter was built. Every function returns :class:`Prose`, a Markdown
string that a notebook displays as formatted text (with the book's notation typeset by
MathJax); the tests call the same functions on synthetic tables. Chapters reach them all
from here (``from rflens import readings as rd``).

Readings by chapter: :func:`verdicts` and :func:`held` (every chapter with claims),
:func:`table1` (3), :func:`erf_agreement` and :func:`table2` (4), :func:`figure7` (5),
:func:`table3` (6), :func:`log_fit` and :func:`log_like` (7), :func:`protocols` (8),
:func:`board` (9). By module: ``notation`` (:class:`Prose`, :func:`tex` and the shared
number formats), ``claim_verdicts`` (the claims' verdicts), ``paper_results`` (chapters 3
to 7), ``protocols`` (chapter 8), ``long_runs`` (chapter 10), ``full_size`` (chapter 11's
pilot and presets), ``pilot`` (the bench's measured pilots as tables, for chapter 11),
``beyond`` (chapter 12) and ``index_box`` (the index page's first screen, its key figure's
reading, and its "this build" box).

May import: ``claims`` and everything below it.
"""

from __future__ import annotations

from rflens.measure.criterion import EXTRAPOLATION_HORIZON as HORIZON, EXTRAPOLATION_TOLERANCE as TOL
from rflens.readings.beyond import thesis_verdict
from rflens.readings.claim_verdicts import (at_each_scale, board, by_scale, held, long_failures, long_run, sensitivity,
    verdicts)
from rflens.readings.full_size import board_by_size, long_design, pilot_findings, pilot_rule, tiny_design
from rflens.readings.index_box import (first_screen, reading_notes, sweep_states, this_build, claims_at_each_scale,
    under_the_figure)
from rflens.readings.long_runs import (at_paper_ratio, clock_outcome, early_warning, emergence, forecast_outcome,
    schedule_check, share_and_r, table2_designed, table2_protocols, two_runs, agreement_by_size, erf_spread,
    paper_embeddings)
from rflens.readings.notation import Prose, tex
from rflens.readings.paper_results import (erf_agreement, figure7, log_fit, log_like, pilot_growth, speed, table1,
    table2, table3)
from rflens.readings.protocols import protocols

__all__ = [
    "TOL", "HORIZON", "Prose", "tex",
    "verdicts", "at_each_scale", "held", "long_failures", "board", "by_scale", "long_run", "sensitivity",
    "table1", "pilot_growth", "erf_agreement", "table2", "figure7", "table3", "speed", "log_fit", "log_like",
    "protocols", "emergence", "forecast_outcome", "schedule_check", "thesis_verdict", "two_runs", "table2_designed", "early_warning",
    "clock_outcome", "at_paper_ratio", "table2_protocols", "share_and_r", "agreement_by_size", "erf_spread", "paper_embeddings",
    "pilot_rule", "pilot_findings", "tiny_design", "long_design", "board_by_size",
    "first_screen", "under_the_figure", "reading_notes", "claims_at_each_scale", "sweep_states",
    "this_build",
]
