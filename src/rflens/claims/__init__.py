"""The paper's claims, each checked on a scale's results.

- ``checks``: the sixteen claims and their checks.
- ``shared``: what the checks share: outcomes, readers of the tables, three-valued comparisons.
- ``legacy``: the earlier criteria of claims whose criterion was reworded.
- ``scoreboard``: the checks run on a scale, stored and shown as a board.
- ``causes``: why a claim fails or is not decided at a scale, one measured line each.

May import: ``experiments`` and everything below it.
"""
