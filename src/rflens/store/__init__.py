"""Where trained models live: the run store and the shipped bundles.

- ``runs``: the run store (a model's key, training or reusing it, listing and cleaning).
- ``bundle``: the shipped bundle's file format, written, read and checked here only.
- ``shipped``: the bundle's models served as a read-only layer of the run store, and the one-core
  speed they reached (what ``emergence --list`` times a model by).
- ``trained``: what a trained model's settings say of it, for both stores (``TrainedModel``).
- ``planned``: the model a long run's name stands for, the sizes it is measured at, and the check
  that a model joining or counted in a bundle is that model.

May import: ``training``, ``measure``, ``model``, ``data``, ``setup`` and the package root.
"""
