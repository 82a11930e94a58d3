"""Where trained models live: the run store, the shipped bundles, and what training costs.

- ``runs``: the run store (a model's key, training or reusing it, listing and cleaning).
- ``bundle``: the shipped bundle's file format, written, read and checked here only.
- ``shipped``: the bundle's models served as a read-only layer of the run store.
- ``core_cost``: what a long-run model costs on one core here, from the shipped models' speed.

May import: ``training``, ``measure``, ``model``, ``data``, ``setup`` and the package root.
"""
