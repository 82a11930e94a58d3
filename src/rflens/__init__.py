"""rflens: an executable companion to Chi, Fan, Rudnicky and Ramadge (ACL 2023),
*Dissecting Transformer Length Extrapolation via the Lens of Receptive Field Analysis*.

The package in folders by concern, each folder importing only the ones listed before it
(its ``__init__`` says what it owns and what it may import):

- the root: ``errors`` (one-line errors for users), ``paper`` (the paper's constants),
  ``storage`` (folders, atomic writes, checksums, locks, caches), ``terminal`` (what long
  work says while it runs: lines on the terminal, the same lines in a log);
- ``setup``: the schemes' table, the settings, the presets, a run's resolved settings;
- ``data``: corpora, tokenizer and token streams;
- ``model``: the positional schemes, attention and the transformer LM;
- ``measure``: perplexity protocols, receptive fields, intervals and "extrapolates";
- ``training``: the one training loop, its processes, the machine, what a model costs;
- ``store``: the run store and the shipped bundles;
- ``longrun``: the long runs' plan, training, recheck, comparison and forecast;
- ``experiments``: the paper's experiments as functions of a scale;
- ``claims``: the paper's claims, checked, and their scoreboard;
- ``readings``, ``figures``, ``hf``: the book's sentences, its plotly figures, and the same
  lens on Hugging Face models;
- ``widgets``: ipywidgets explorers for a live kernel;
- ``publish``: chapters executed, the book built, its files;
- ``cli``: the commands (``python -m rflens --help``).

A positional scheme of one's own: ``rflens.register_scheme`` (a decorator) in a file of
one's own, loaded with ``rflens.load_schemes(path)``; see :mod:`rflens.model.positional`.
"""

__version__ = "0.1.0"


def __getattr__(name):  # the extension point, without importing torch with the package
    if name in ("register_scheme", "RelativeScheme"):
        from rflens.model import positional

        return getattr(positional, name)
    if name == "load_schemes":
        from rflens.setup.schemes import load_files

        return load_files
    raise AttributeError(f"module 'rflens' has no attribute {name!r}")
