"""What the book measures on a model, and how it reads a measurement.

- ``perplexity``: the perplexity protocols (last-token, sliding window, non-overlapping).
- ``receptive``: receptive-field analysis (normalised input gradients, the ERF).
- ``intervals``: resampling, every interval of the book (the paired bootstrap over segments or
  whole documents, a perplexity's interval, a mean over paired rounds).
- ``criterion``: the criterion "extrapolates" and the levels r(L) is read at.
- ``columns``: the wide result table's columns, their readers and how a chapter shows them.
- ``resources``: what a measurement will need, estimated before it allocates.

May import: ``model``, ``data``, ``setup`` and the package root.
"""
