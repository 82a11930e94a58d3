"""What a model costs: the FLOPs of its training and its measurements, and the hours they
take at a speed (one core's, or a GPU's peak at a utilisation).

Every FLOP count and every time estimate of the package is computed here, from
:meth:`rflens.model.transformer.TransformerLM.flops_per_token`. What reads stored models to
find a speed stays with them: the one-core speed the shipped models reached
(:func:`rflens.store.shipped.one_core_speed`, ``emergence --list``, chapter 10), a training's
announced hours (:func:`rflens.store.runs.hours_to_train`), the book's models on GPUs
(:func:`rflens.experiments.book_models.training_cost`, chapter 11) and what ``reproduce`` would
train first (:func:`rflens.publish.parallel.missing_cost`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from rflens.setup.config import EvalConfig, ModelConfig, TrainConfig
from rflens.training.trainer import cooldown_steps, point_steps

ANNOUNCED_FLOPS = 1e13  # a few minutes of one core: a training at least this long says its hours before it starts
GPU_TFLOPS = 312.0  # an A100's bf16 peak: chapter 11's GPU-hours
MFU = 0.4  # the share of that peak a training reaches


@functools.lru_cache(maxsize=64)
def meta_model(model_cfg: ModelConfig):
    """The model of ``model_cfg`` on the meta device: its sizes, no memory (built once a config)."""
    import torch

    from rflens.model.transformer import TransformerLM

    with torch.device("meta"):
        return TransformerLM(model_cfg)


def training_flops(model_cfg: ModelConfig, train_cfg: TrainConfig, steps: int | None = None) -> float:
    """The FLOPs of ``steps`` training steps of this model (default: its whole training from
    the start; its validation passes aside)."""
    steps = train_cfg.steps if steps is None else steps
    return meta_model(model_cfg).flops_per_token(train_cfg.l_tr) * steps * train_cfg.batch_size * train_cfg.l_tr


def last_token_flops(model, lengths, n_segments: int) -> float:
    """FLOPs of :func:`rflens.measure.perplexity.last_token_nll` over ``n_segments`` segments at
    each of ``lengths``: a forward pass over every token of each segment, a third of the
    training FLOPs a token."""
    return sum(n_segments * L * model.flops_per_token(L) / 3.0 for L in lengths)


def eval_flops(model_cfg: ModelConfig, l_tr: int, ev: EvalConfig) -> float:
    """FLOPs of one last-token evaluation: N segments at every L_ex = L_tr x length_mults."""
    return last_token_flops(meta_model(model_cfg), [l_tr * m for m in ev.length_mults], ev.n_segments)


def erf_flops(model_cfg: ModelConfig, l_tr: int, ev: EvalConfig) -> float:
    """FLOPs of one ERF measurement: the input gradients (forward and backward) over
    ``erf_samples`` segments of erf_length_mult x L_tr tokens."""
    erf_len = l_tr * ev.erf_length_mult
    return ev.erf_samples * erf_len * meta_model(model_cfg).flops_per_token(erf_len)


@functools.lru_cache(maxsize=512)  # settings are frozen: the count is theirs
def run_flops(model_cfg: ModelConfig, train_cfg: TrainConfig, ev: EvalConfig,
              sizes: tuple[int, ...] | None = None, done: int = 0,
              measured: frozenset[int] = frozenset()) -> tuple[float, float]:
    """(training, measuring) FLOPs of one model of the long run (:mod:`rflens.longrun.plan`),
    or of what is left of it when a sitting stopped it at step ``done`` with the sizes
    ``measured`` (in steps) measured (:func:`rflens.store.shipped.kept`).

    Training: the main run and the cool-down branches of its smaller sizes. Measuring, at
    each of its sizes: :func:`eval_flops` and :func:`erf_flops`. The measurement grows with
    L_tr squared: at L_tr = 512 a size's measurement costs as much as about 3M training tokens.
    """
    sizes = list(sizes) if sizes else point_steps(train_cfg)  # the measured steps (a run's own, when it names them)
    steps = train_cfg.steps - done + sum(cooldown_steps(train_cfg, s) for s in sizes[:-1] if s not in measured)
    one = eval_flops(model_cfg, train_cfg.l_tr, ev) + erf_flops(model_cfg, train_cfg.l_tr, ev)
    return training_flops(model_cfg, train_cfg, steps), one * len([s for s in sizes if s not in measured])


def gpu_hours(flops: float, gpu_tflops: float = GPU_TFLOPS, mfu: float = MFU) -> float:
    """The hours ``flops`` take on a GPU of ``gpu_tflops`` peak at ``mfu`` utilisation."""
    return flops / (gpu_tflops * 1e12 * mfu) / 3600.0


@dataclass(frozen=True)
class Speed:
    """One core's FLOP/s when training and when measuring, the medians over ``models``
    finished shipped models trained on ``where``."""

    train: float
    measure: float
    models: int
    where: str

    def minutes(self, model_cfg: ModelConfig, train_cfg: TrainConfig, ev: EvalConfig,
                sizes: tuple[int, ...] | None = None, done: int = 0, measured: frozenset[int] = frozenset()) -> float:
        """The minutes one model of the long run (:func:`run_flops`) takes at this speed."""
        train, measure = run_flops(model_cfg, train_cfg, ev, sizes, done, measured)
        return (train / self.train + measure / self.measure) / 60.0

    def train_hours(self, flops: float) -> float:
        """The hours training ``flops`` takes at this speed."""
        return flops / self.train / 3600


def rates(result: dict) -> tuple[float, float] | None:
    """The (training, measuring) FLOP/s one finished long-run model reached on its core, from
    its wall times and its FLOPs (:func:`run_flops`); measuring nan when its measurements took
    no measurable time; None when its wall time says nothing of a core (trained on a GPU, or
    no training time beside the measurements)."""
    if result.get("device", "cpu") != "cpu":  # a GPU's wall time says nothing of a core's
        return None
    measured = sum(p["measure_seconds"] for p in result["points"])
    train, measure = run_flops(ModelConfig.from_dict(result["model"]), TrainConfig.from_dict(result["train"]),
                               EvalConfig.from_dict(result["eval"]),
                               tuple((result.get("schedule") or {}).get("points") or ()))
    if result["train_seconds"] <= measured:
        return None
    return train / (result["train_seconds"] - measured), measure / measured if measured > 0 else np.nan


def median_speed(pool: list[tuple[float, float]], where: str) -> Speed:
    """The median of the models' :func:`rates` ``pool``; without any measuring rate,
    measuring is timed at the training speed."""
    speeds = np.array(pool)
    train = float(np.median(speeds[:, 0]))
    timed = speeds[~np.isnan(speeds[:, 1]), 1]
    return Speed(train, float(np.median(timed)) if timed.size else train, len(pool), where)


def one_core_line(minutes: list[float], at: Speed) -> str:
    """One line: the time models of ``minutes`` (one core each) take on one core and on two,
    and the speed ``at`` that timed them."""
    hours = sum(minutes) / 60
    two = max(hours / 2, max(minutes) / 60)  # a model trains on one core: two workers share whole models
    return (f"about {hours:.1f} hours on one core, {two:.1f} on 2 (one worker per core; each model's FLOPs at "
            f"the speed of the {at.models} shipped model(s) trained on {at.where}: {at.train / 1e9:.0f} GFLOP/s "
            f"training, {at.measure / 1e9:.0f} measuring)")
