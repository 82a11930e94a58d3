"""What the long run's models cost on one core here (``emergence --list``, chapter 10): the
FLOPs of a model's run and measurements, and the one-core speed the shipped models reached,
from their wall times."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from rflens.setup import scales
from rflens.setup.config import EvalConfig, ModelConfig, TrainConfig
from rflens.setup.settings import resolve
from rflens.store import bundle
from rflens.training import machine
from rflens.storage import read_json
from rflens.training.trainer import CHECKPOINT_POINTER, cooldown_steps, point_steps


@functools.lru_cache(maxsize=512)  # settings are frozen: the count is theirs
def run_flops(model_cfg: ModelConfig, train_cfg: TrainConfig, ev: EvalConfig,
              sizes: tuple[int, ...] | None = None, done: int = 0,
              measured: frozenset[int] = frozenset()) -> tuple[float, float]:
    """(training, measuring) FLOPs of one model of the long run (:mod:`rflens.longrun.plan`),
    or of what is left of it when a sitting stopped it at step ``done`` with the sizes
    ``measured`` (in steps) measured (:func:`kept`).

    Training: the main run and the cool-down branches of its smaller sizes, at
    :meth:`rflens.model.transformer.TransformerLM.flops_per_token` for L_tr. Measuring, at each of its
    sizes: the last-token NLLs of N segments at every length
    (:func:`rflens.measure.perplexity.last_token_flops`) and the input gradients over the ERF segments
    (forward and backward). The measurement grows with L_tr squared: at L_tr = 512 a size's measurement
    costs as much as about 3M training tokens.
    """
    from rflens.measure.perplexity import last_token_flops

    model = _meta_model(model_cfg)
    sizes = list(sizes) if sizes else point_steps(train_cfg)  # the measured steps (a run's own, when it names them)
    steps = train_cfg.steps - done + sum(cooldown_steps(train_cfg, s) for s in sizes[:-1] if s not in measured)
    train = model.flops_per_token(train_cfg.l_tr) * steps * train_cfg.batch_size * train_cfg.l_tr
    lengths = [train_cfg.l_tr * m for m in ev.length_mults]
    erf_len = train_cfg.l_tr * ev.erf_length_mult
    one = last_token_flops(model, lengths, ev.n_segments) + ev.erf_samples * erf_len * model.flops_per_token(erf_len)
    return train, one * len([s for s in sizes if s not in measured])


@functools.lru_cache(maxsize=64)
def _meta_model(model_cfg: ModelConfig):
    """The model of ``model_cfg`` on the meta device: its sizes, no memory (built once a config)."""
    import torch

    from rflens.model.transformer import TransformerLM

    with torch.device("meta"):
        return TransformerLM(model_cfg)


def kept(scale: str, name: str) -> tuple[int, frozenset[int]]:
    """(the step of the training state a stopped sitting kept for model ``name`` of ``scale``,
    the sizes it measured, in steps): what the next sitting resumes from; (0, {}) when none
    is kept (or it cannot be read: the run then starts again)."""
    work = bundle.emergence_state(scale, name)
    try:
        step = int(read_json(work / CHECKPOINT_POINTER)["step"]) if (work / CHECKPOINT_POINTER).is_file() else 0
        points = read_json(work / bundle.KEPT_POINTS) if (work / bundle.KEPT_POINTS).is_file() else []
        return step, frozenset(int(p["steps"]) for p in points)
    except (ValueError, KeyError, TypeError):
        return 0, frozenset()


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
        train, measure = run_flops(model_cfg, train_cfg, ev, sizes, done, measured)
        return (train / self.train + measure / self.measure) / 60.0


def _rates(scale: str) -> dict[str, list[tuple[float, float]]]:
    """{vector unit: [(training, measuring) FLOP/s of each finished shipped model trained on
    a CPU with it]} from the models' wall times and FLOPs: the models of ``scale``'s bundle,
    or, while it has none, of every shipped preset's (a FLOP rate is the core's, whichever
    run it was measured in). Models whose measurements took no measurable time give no
    measuring speed (nan)."""
    pools: dict[str, list[tuple[float, float]]] = {}
    found = [(scale, name) for name in bundle.complete(scale)] or [
        (other, name) for other in scales.SCALES if scales.get(other).shipped for name in bundle.complete(other)]
    for where, name in found:
        res = bundle.load(name, where)
        if res.get("device", "cpu") != "cpu":  # a GPU's wall time says nothing of a core's
            continue
        measured = sum(p["measure_seconds"] for p in res["points"])
        train, measure = run_flops(ModelConfig.from_dict(res["model"]), TrainConfig.from_dict(res["train"]),
                                   EvalConfig.from_dict(res["eval"]), tuple((res.get("schedule") or {}).get("points") or ()))
        if res["train_seconds"] > measured:
            pools.setdefault(res.get("cpu") or "an unrecorded vector unit", []).append(
                (train / (res["train_seconds"] - measured), measure / measured if measured > 0 else np.nan))
    return pools


def _speed(pool: list[tuple[float, float]], where: str) -> Speed:
    rates = np.array(pool)
    train = float(np.median(rates[:, 0]))
    timed = rates[~np.isnan(rates[:, 1]), 1]
    return Speed(train, float(np.median(timed)) if timed.size else train, len(pool), where)


def core_speeds(scale: str = "long") -> dict[str, Speed]:
    """{vector unit: the one-core speed of the shipped models trained on CPUs with it}."""
    return {cpu: _speed(pool, f"{cpu} CPUs") for cpu, pool in _rates(scale).items()}


def one_core_speed(scale: str = "long") -> Speed | None:
    """The one-core speed of the shipped finished models trained on a CPU with this vector
    unit (else of all of them), from their wall times and FLOPs; None when none is shipped.
    Without any measuring speed, measuring is timed at the training speed."""
    pools = _rates(scale)
    here = machine.cpu_capability()
    pool = pools.get(here) or [r for rs in pools.values() for r in rs]
    if not pool:
        return None
    return _speed(pool, f"{here} CPUs like this one" if here in pools else "other machines")


def one_core_minutes(specs: list, scale: str = "long", at: Speed | None = None, *,
                     resumed: bool = False) -> list[float] | None:
    """The one-core minutes of each model of ``specs`` at ``at`` (default :func:`one_core_speed`,
    the shipped models' speed on this kind of CPU), or, with ``resumed``, of what is left of
    each from its kept state (:func:`kept`); None when no model is shipped to time."""
    at = at or one_core_speed(scale)
    if at is None:
        return None
    preset = scales.get(scale)
    out = []
    for spec in specs:
        r = resolve(scale, spec.pos, spec.corpus, spec.settings())
        out.append(at.minutes(r.model, r.train, preset.eval, preset.measured_points(r.train),
                              *(kept(scale, spec.name) if resumed else ())))
    return out


def one_core_cost(specs: list, scale: str = "long", at: Speed | None = None, *, resumed: bool = False) -> str:
    """One line: the time ``specs`` take to train (with ``resumed``, what is left of them from
    their kept states), on one core and on two, and the speed that times them."""
    if not specs:
        return "nothing: no model is left to train"
    at = at or one_core_speed(scale)
    if at is None:
        return "not timed: no finished model shipped yet"
    minutes = one_core_minutes(specs, scale, at, resumed=resumed)
    hours = sum(minutes) / 60
    two = max(hours / 2, max(minutes) / 60)  # a model trains on one core: two workers share whole models
    return (f"about {hours:.1f} hours on one core, {two:.1f} on 2 (one worker per core; each model's FLOPs at "
            f"the speed of the {at.models} shipped model(s) trained on {at.where}: {at.train / 1e9:.0f} GFLOP/s "
            f"training, {at.measure / 1e9:.0f} measuring)")
