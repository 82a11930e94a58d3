"""rflens: an executable companion to Chi, Fan, Rudnicky and Ramadge (ACL 2023),
*Dissecting Transformer Length Extrapolation via the Lens of Receptive Field Analysis*.

Modules, one concern each: ``schemes`` (the table of positional schemes), ``config``
(settings), ``positional`` (every scheme's implementation), ``attention`` (the attention
kernels), ``model`` (the transformer LM), ``storage`` (folders, atomic writes, checksums,
locks), ``distributed`` (ranks and the process group), ``data`` (corpora, tokenizer, token
streams), ``scales`` (presets and their sweeps), ``train`` (the training loop), ``runs``
(the run store), ``evaluate`` (perplexity protocols), ``receptive`` (receptive-field
analysis), ``results`` (the result tables and the criterion "extrapolates"), ``speed``
(training speed side by side), ``experiments`` (the paper's sweeps), ``analysis`` (closed
forms of the biases), ``claims`` (the scoreboard), ``figures``, ``widgets``, ``notebook``
(what every chapter does first), ``reproduce`` (papermill + Jupyter Book) and ``cli`` (the
commands), ``hf`` (the same lens on Hugging Face models).

A positional scheme of one's own: ``rflens.register_scheme`` (a decorator) in a file of
one's own, loaded with ``rflens.load_schemes(path)``; see :mod:`rflens.positional`.
"""

__version__ = "0.1.0"


def __getattr__(name):  # the extension point, without importing torch with the package
    if name in ("register_scheme", "RelativeScheme"):
        from . import positional

        return getattr(positional, name)
    if name == "load_schemes":
        from .schemes import load_files

        return load_files
    raise AttributeError(f"module 'rflens' has no attribute {name!r}")
