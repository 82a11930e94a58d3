"""The paper's claims, each checked on a scale's results.

- ``statements``: the sixteen claims, each declared once (its sentence, criterion, what the
  paper reports, a short label) beside the check named for what it checks.
- ``outcomes``: what a check concludes: True, False, undecided, ``Missing``; the three-valued
  comparisons and the intervals widened to hold together.
- ``rows``: where a check finds its numbers: a table, a row, r(L) with its paired interval.
- ``legacy``: the earlier criteria of claims whose criterion was reworded.
- ``gather``: every experiment table the checks read, run or read from the run store.
- ``verdicts``: the checks run into one row a claim (its ``result``), at every seed; the
  levels' sensitivity; what would decide a claim not decided.
- ``scoreboard``: the verdicts of a scale, stored and shown as a board.
- ``causes``: why a claim fails or is not decided at a scale, one measured line each.

May import: ``experiments`` and everything below it.
"""
