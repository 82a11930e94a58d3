"""The paper's experiments as functions of a scale, each returning a table.

- ``tables``: Tables 1-3 and Figures 7-11 at a scale (trained or read from the store).
- ``from_bundle``: which of them a shipped preset's bundle can build, read from it.
- ``book_models``: every model the book trains at a scale, and what training them costs.
- ``beyond``: beyond the paper (stretched rotary, FIRE) under the same lens.
- ``speed``: training speed of several schemes, timed side by side.

May import: ``longrun``, ``store``, ``training``, ``measure``, ``model``, ``data``, ``setup``
and the package root.
"""
