"""Several processes, one model: the rank, the world size, the process group, a barrier.

``torchrun --nproc_per_node N -m rflens train ...`` starts N processes and tells each its
place through the environment (RANK, WORLD_SIZE, LOCAL_RANK). Without torchrun every
function here describes a single process: rank 0 of 1.

torch is imported inside the functions, so reading the rank costs nothing.
"""

from __future__ import annotations

import os


def rank() -> int:
    """This process's rank (0 without torchrun)."""
    return int(os.environ.get("RANK", 0))


def world_size() -> int:
    """The number of processes (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", 1))


def local_rank() -> int:
    """This process's rank on its machine: the GPU it uses."""
    return int(os.environ.get("LOCAL_RANK", 0))


def is_main() -> bool:
    """Whether this process writes files (rank 0)."""
    return rank() == 0


def init() -> None:
    """Join the process group torchrun set up: gloo on CPUs, nccl on GPUs. Idempotent."""
    import torch
    import torch.distributed as dist

    if world_size() <= 1 or dist.is_initialized():
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank())
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank()))
    else:
        dist.init_process_group("gloo")


def barrier() -> None:
    """Wait for every process (nothing to wait for in a single process)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def all_mean(values: list) -> list[float]:
    """Mean over processes of per-process values (0-d tensors of equal weight), as floats."""
    import torch

    t = torch.stack(values).float()
    if world_size() > 1:
        import torch.distributed as dist

        dist.all_reduce(t)
        t /= world_size()
    return t.tolist()
