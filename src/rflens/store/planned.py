"""What a long run's plan says a model is, at the level of the stores: the model a name
stands for (:class:`LongModel`), the sizes it is measured at (:func:`measured_steps`), and
the check that a model joining or counted in a bundle is the model its name stands for
(:func:`check_model`, :func:`check_shipped`). Which models a plan trains, and in which order,
is :mod:`rflens.longrun.plan`'s: it reads the bundle, which reads this.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from rflens.errors import UserError
from rflens.setup.config import DataConfig, ModelConfig, TrainConfig
from rflens.setup.presets import LongRun
from rflens.setup.settings import resolve
from rflens.training.trainer import point_steps


@dataclass(frozen=True)
class LongModel:
    """One model of the long run: a scheme, its settings beside the preset's, a corpus
    (the book's experiments name theirs :class:`rflens.experiments.tables.Spec`)."""

    pos: str
    overrides: tuple = ()  # ((setting, value), ...)
    corpus: str = "prose"

    @property
    def name(self) -> str:
        parts = [self.pos] + [f"{k}={v}" for k, v in self.overrides]
        if self.corpus != "prose":
            parts.append(self.corpus)
        return "_".join(parts)

    def settings(self) -> dict:
        return dict(self.overrides)


def measured_steps(run: LongRun, train_cfg: TrainConfig) -> list[int]:
    """The steps at which a model of the ``run`` is branched and measured: where the
    preset fixes them (:meth:`rflens.setup.presets.LongRun.measured_points`: a run extending
    another, a model at another L_tr measured at its end), else
    :func:`rflens.training.trainer.point_steps`."""
    points = run.measured_points(train_cfg)
    return list(points) if points else point_steps(train_cfg)


def check_model(result: dict, run: LongRun, where: Path, spec: LongModel, fix: str | None = None) -> None:
    """UserError unless ``result`` (a model's result.json, read from ``where``) is ``spec``,
    the model its name stands for in the ``run``'s plan: the same scheme, corpus, model,
    data and training settings, and, if it says it is finished, every size of the plan
    measured; the line names the first setting that differs and ``fix`` (default:
    retraining it)."""
    fix = fix or f"retrain it with python -m rflens emergence --scale {run.name} --only {spec.name}"
    _, model_cfg, data_cfg, train_cfg = resolve(run, spec.pos, spec.corpus, spec.settings())
    differs = _difference(result, model_cfg, data_cfg, train_cfg)
    if differs is not None:
        raise UserError(f"{where} is named {spec.name}, but its settings are not that model's in the {run.name} plan "
                        f"({differs}; the plan's {spec.name} is {spec.pos} on {spec.corpus}"
                        f"{''.join(f', {k}={v}' for k, v in spec.settings().items())}): {fix}")
    steps = measured_steps(run, train_cfg)
    if result.get("complete") and [p.get("steps") for p in result.get("points") or []] != steps:
        raise UserError(f"{where} says it is finished, but its measured sizes are not the plan's "
                        f"({', '.join(map(str, steps))} steps): {fix}")




def _difference(result: dict, model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig) -> str | None:
    """The first of ``result``'s settings that is not the plan's (``model.n_layer is 4, the
    plan's 12``), or None when its model, data and training settings are the plan's."""
    try:
        data = DataConfig.from_dict(result.get("data") or {})
    except (TypeError, ValueError, KeyError):
        return "its data settings cannot be read"
    for part, mine, planned in (("model", result.get("model"), model_cfg.to_dict()), ("data", data.to_dict(),
                                data_cfg.to_dict()), ("train", result.get("train"), train_cfg.to_dict())):
        if mine == planned:
            continue
        if not isinstance(mine, dict):
            return f"its {part} settings are {type(mine).__name__}, not a table of settings"
        for key in sorted(set(mine) | set(planned)):
            if key not in planned:
                return f"{part}.{key} is {mine[key]!r}, a setting the plan does not have"
            if key not in mine:
                return f"{part}.{key} is missing, the plan's is {planned[key]!r}"
            if mine[key] != planned[key]:
                return f"{part}.{key} is {mine[key]!r}, the plan's {planned[key]!r}"
    return None


def spec_of(result: dict) -> LongModel | None:
    """The model of a long run that ``result`` says it is, by its own scheme, settings and
    corpus, when its name is that model's (its settings in some order); None otherwise."""
    name, pos, corpus, settings = (result.get(k) for k in ("name", "pos", "corpus", "settings"))
    if not (isinstance(name, str) and isinstance(pos, str) and isinstance(corpus, str) and isinstance(settings, dict)
            and len(settings) <= 6):
        return None
    for order in itertools.permutations(settings.items()):
        spec = LongModel(pos, tuple(order), corpus)
        if spec.name == name:
            return spec
    return None


def check_shipped(result: dict, run: LongRun, where: Path, fix: str) -> None:
    """UserError of one line unless the shipped model ``result`` (of the ``run``'s bundle, in
    the folder ``where``) is the model its name stands for in the plan (:func:`check_model`):
    which setting contradicts it, what the plan says, and the fix. A bundle counts its models
    by name, the run store serves them by settings: a model whose settings are not its
    name's would be counted as shipped and never served. The model is found from its own
    scheme, settings and corpus (:func:`spec_of`), not from the plan's list, which reads the
    bundle. ``fix``: how the bundle is restored."""
    spec = spec_of(result)
    if spec is None:
        raise UserError(f"{where} is named {result.get('name')!r}, but its result says it is {result.get('pos')} on "
                        f"{result.get('corpus')} with {result.get('settings')}: the shipped model is not the one its "
                        f"name stands for: {fix}")
    try:
        check_model(result, run, where, spec, fix)
    except UserError as err:
        raise UserError(f"the shipped {run.name} bundle is damaged: {err}") from None
