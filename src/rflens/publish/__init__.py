"""The book as a product: chapters executed, the HTML built, its files and assets.

- ``reproduce``: execute the chapters with papermill at a scale, then build the book.
- ``executed``: an executed chapter stamped with its inputs, kept while they are unchanged.
- ``parallel``: train the book's models in parallel worker processes.
- ``notebook``: what every chapter does first (its scale, parameters, display).
- ``csv_files``: the book's tables as CSV files with their provenance.
- ``citation``: the book's "How to cite" block, written from ``CITATION.cff``.
- ``offline``: the built book's offline assets (``book.css``, ``mathjax_shim.js``,
  ``search_math.js`` beside this file).

May import: everything but ``cli``.
"""
