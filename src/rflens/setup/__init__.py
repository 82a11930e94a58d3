"""What a run is, before anything is computed: the positional schemes' table, the settings
dataclasses, the presets and the resolution of a run's settings.

- ``schemes``: the table of positional schemes (name, kind, title), one row a scheme.
- ``config``: the settings dataclasses (model, data, training, evaluation), checked when built.
- ``presets``: the size presets (smoke, tiny, small, full) and the long runs (long, deep, ...), with the sweeps each runs.
- ``settings``: a run's settings resolved from a preset, a scheme, a corpus and overrides.
- ``deviations``: where rflens trains differently from the paper's code, and why.

May import: the package root (``errors``, ``paper``, ``storage``, ``terminal``).
"""
