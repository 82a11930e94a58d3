"""The one training loop, its processes, the machine it runs on, and what a model costs.

- ``trainer``: the training loop (schedules, batches, checkpoints, emergence branches).
- ``distributed``: ranks and the process group of a multi-process run.
- ``machine``: the device and the CPU fingerprint that decide whether two runs agree bitwise.
- ``cost``: FLOPs of training and measuring a model, and the hours they take at a speed (one core, GPUs).

May import: ``model``, ``data``, ``setup`` and the package root.
"""
