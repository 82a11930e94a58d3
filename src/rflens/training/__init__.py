"""The one training loop, its processes and the machine it runs on.

- ``trainer``: the training loop (schedules, batches, checkpoints, emergence branches).
- ``distributed``: ranks and the process group of a multi-process run.
- ``machine``: the device and the CPU fingerprint that decide whether two runs agree bitwise.

May import: ``model``, ``data``, ``setup`` and the package root.
"""
