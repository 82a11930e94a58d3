"""rflens: an executable companion to Chi, Fan, Rudnicky and Ramadge (ACL 2023),
*Dissecting Transformer Length Extrapolation via the Lens of Receptive Field Analysis*.

Modules, one concern each: ``config`` (settings), ``positional`` (every positional scheme),
``attention`` (the attention kernels), ``model`` (the transformer LM), ``data`` (corpora,
tokenizer, token streams), ``scales`` (presets), ``runs`` (the run store), ``train``,
``evaluate`` (perplexity protocols), ``receptive`` (receptive-field analysis),
``experiments`` (the paper's sweeps), ``claims`` (the scoreboard), ``figures``,
``widgets``, ``reproduce`` (papermill + Jupyter Book) and ``cli``.
"""

__version__ = "0.1.0"
