"""Which settings a run has, resolved before anything is trained or looked up.

A preset (:mod:`rflens.setup.presets`) with a positional scheme, a corpus and overrides
becomes the model, data and train settings of one run (:func:`resolve`); "auto" precision
becomes the one native to this machine (:func:`native_dtype`); and a run's settings are
read back as what differs from its preset (:func:`describe`) and the command line that
trains it (:func:`train_command`). Like the run store, this module imports neither torch
nor the model.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import fields
from pathlib import Path
from typing import NamedTuple

from rflens.errors import ConfigError
from rflens.setup import presets
from rflens.setup.config import DataConfig, ModelConfig, SETTINGS, TrainConfig


class Resolved(NamedTuple):
    """The settings of one run: its preset, and the model, data and train settings."""

    preset: presets.Preset
    model: ModelConfig
    data: DataConfig
    train: TrainConfig


def resolve(preset: presets.Preset, pos: str = "alibi", corpus: str = "prose",
            overrides: dict | None = None) -> Resolved:
    """The preset ``preset`` with ``pos``, ``corpus`` and the overrides applied; the book's
    corpora (prose, code, math) become the data the preset trains them on
    (:meth:`rflens.setup.presets.Preset.text`).

    ``overrides`` is either flat (``{"window": 8, "l_tr": 256}``: each key goes to every
    settings class that has it, e.g. vocab_size to model and data) or by section
    (``{"model": {...}, "train": {...}}``, as from :func:`rflens.setup.config.parse_overrides`).
    Evaluation settings are rejected here: they do not change a trained model.
    """
    s = preset
    sections = {"model": {}, "data": {}, "train": {}}
    overrides = dict(overrides or {})
    if overrides and set(overrides) <= set(SETTINGS) and all(isinstance(v, dict) for v in overrides.values()):
        if overrides.get("eval"):
            name = next(iter(overrides["eval"]))
            raise ConfigError(name, overrides["eval"][name], "an evaluation setting does not change a trained "
                              "model: pass it to evaluate or erf, not to train")
        for k in sections:
            sections[k].update(overrides.get(k, {}))
    else:
        names = {k: {f.name for f in fields(cls)} for k, cls in SETTINGS.items()}
        for key, value in overrides.items():
            hit = [k for k in sections if key in names[k]]
            if not hit:
                allowed = sorted(names["model"] | names["data"] | names["train"])
                extra = " (an evaluation setting: pass it to evaluate or erf)" if key in names["eval"] else ""
                raise ConfigError(key, value, f"unknown training setting{extra}; known: {', '.join(allowed)}")
            for k in hit:
                sections[k][key] = value
    for key in ("pos", "corpus"):
        for k in sections:
            if key in sections[k]:
                raise ConfigError(key, sections[k][key], f"give {key} as its own argument, not as an override")
    model_cfg = s.model.replace(pos=pos, **sections["model"])
    data_cfg = s.data.replace(corpus=s.text(corpus), **sections["data"])
    train_cfg = s.train.replace(**sections["train"])
    if train_cfg.dtype == "auto":  # the key names the precision the weights are trained in
        train_cfg = train_cfg.replace(dtype=native_dtype())
    if model_cfg.vocab_size != data_cfg.vocab_size:
        raise ConfigError("vocab_size", model_cfg.vocab_size,
                          f"the model's vocabulary must equal the data's ({data_cfg.vocab_size}); set vocab_size once")
    return Resolved(s, model_cfg, data_cfg, train_cfg)


@functools.cache
def native_dtype() -> str:
    """"bf16" where training in bf16 is fast (a GPU, or a CPU with AVX512-BF16 or AMX
    instructions), else "fp32": on other CPUs bf16 is emulated and slower than fp32."""
    if cuda_available():
        return "bf16"
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "fp32"
    return "bf16" if (" avx512_bf16" in flags or " amx_bf16" in flags) else "fp32"


def cuda_available() -> bool:
    """Whether torch sees a GPU, without importing torch when it is not loaded yet (then an
    NVIDIA device node stands in: this module stays quick to import and to query)."""
    if "torch" in sys.modules:
        return sys.modules["torch"].cuda.is_available()
    return Path("/dev/nvidiactl").exists()


def describe(model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig, preset: presets.Preset) -> dict:
    """The settings that differ from the preset (what makes this run special)."""
    s = preset
    train_base = s.train.replace(dtype=native_dtype()) if s.train.dtype == "auto" else s.train
    out = {}
    for base, cfg in ((s.model, model_cfg), (s.data, data_cfg), (train_base, train_cfg)):
        for k, v in cfg.to_dict().items():
            if k in ("pos", "corpus"):
                continue
            if v != getattr(base, k) and not (isinstance(v, list) and tuple(v) == getattr(base, k)):
                out[k] = v
    return out


def train_command(preset: presets.Preset, pos: str, corpus: str, changed: dict, launcher: str = "python -m rflens") -> str:
    """The command line that trains this model (``launcher``: e.g. ``torchrun ... -m rflens``)."""
    sets = " ".join(f"--set {k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                    for k, v in sorted(changed.items()))
    return f"{launcher} train --scale {preset.name} --pos {pos} --corpus {corpus}" + (f" {sets}" if sets else "")
