"""The machine a run computes on, as far as its numbers depend on it: the device, and the
CPU's fingerprint (vector unit and instruction-set extensions) that decides whether two
machines compute to the same bits (a shipped result records them; :func:`same_machine`)."""

from __future__ import annotations

import re
from pathlib import Path

from rflens.setup.settings import cuda_available


def device():
    """Where the long run trains and measures: the GPU when torch sees one (as the trainer
    does), else the CPU. Only numbers of one kind of device compare bitwise."""
    import torch

    return torch.device("cuda") if cuda_available() else torch.device("cpu")


def device_name(where) -> str:
    """"cpu", or the GPU's name (a shipped result records it)."""
    import torch

    return torch.cuda.get_device_name(where) if where.type == "cuda" else "cpu"


def cpu_capability() -> str:
    """The vector unit torch's CPU kernels were chosen for (``AVX2``, ``AVX512``, ...): two
    machines that differ in it round differently, so their numbers agree only to ~1e-5."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def cpu_features() -> str:
    """The instruction-set extensions that pick the math libraries' kernels (the AVX-512
    subsets, AMX, FMA), read from ``/proc/cpuinfo``; empty where that file is missing. Two
    machines of the same :func:`cpu_capability` can still round apart: NLLs re-measured on an
    AVX-512 machine with AMX moved by 3.3e-5 from those measured on one without."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return " ".join(sorted(f for f in flags if re.fullmatch(r"avx\w*|amx\w*|fma|f16c", f)))


def same_machine(result: dict) -> bool:
    """Whether this machine's CPU computes as the one that produced ``result`` did: a result
    measured on a CPU, the same torch, vector unit and instruction-set extensions (a result
    that did not record them, or a machine that cannot read its own, is taken as another)."""
    import torch

    features = cpu_features()
    return (result.get("device", "cpu") == "cpu" and result.get("torch") == torch.__version__
            and result.get("cpu") == cpu_capability() and bool(features)
            and result.get("cpu_features") == features)
