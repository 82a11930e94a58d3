"""Emergence: one long training run per model, measured as it grows, shipped as a bundle.

The failures Chi et al. (ACL 2023) explain need training: at the tiny preset's 0.6M tokens a
model whose receptive field outgrows L_tr still extrapolates. Here each model of the
``long`` preset (:func:`models`: what is trained, in which order) is trained once to its full
budget with a warmup-stable-decay schedule by the book's one training loop,
:func:`rflens.train.train`, which branches it at each of its log-spaced sizes
(:func:`rflens.train.point_steps`: the budget / 2^6 .. the budget): a copy of its state is
cooled down over the last ``cooldown_frac`` of that size, which is exactly the finished
shorter run (same batches, same rates, bitwise), and handed here to be measured; then the
main run continues from where it branched. One run thus gives every point of an emergence
curve at about 1.2 times the cost of its last point.

A point's measurement is what the book reads: per-segment last-token NLLs at L_tr x
length_mults on the preset's N segments (so r(L) and its paired intervals can be computed
against any other point or model), the normalised input gradient over segments of
``erf_length_mult`` x L_tr (the receptive field), and the validation loss.

The results go to the shipped bundle, ``reference/<scale>/<name>/``, written by
:func:`rflens.bundle.write_model` (:mod:`rflens.bundle` owns its files). A model being trained
keeps its state in the run store's ``emergence/`` folder, checkpointed at every branch and
every ``ckpt_interval`` steps, so a sitting that ends (``--minutes``) or a kill loses at most
that much work.
"""

from __future__ import annotations

import contextlib
import io
import platform
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import bundle, data, machine, scales, storage
from .config import DataConfig, EvalConfig, ModelConfig, TrainConfig
from .errors import UserError
from .runs import code_version, get_run
from .settings import resolve
from .shipped_runs import at_seed, served_seed
from .train import OutOfTime, point_steps, train


# ----------------------------------------------------------------------------- what is trained

@dataclass(frozen=True)
class LongModel:
    """One model of the long run: a scheme, its settings beside the preset's, a corpus
    (the book's experiments name theirs :class:`rflens.experiments.Spec`)."""

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


def by_experiment(scale: str = "long") -> dict[str, list[LongModel]]:
    """The long run's models by the experiment they answer, failing and stable sides
    together: Table 1's three sweeps (of :data:`rflens.scales.FAMILIES`), Table 2's
    retrainings, NoPE with Figure 7's absolute positions, Table 3 on each corpus, and the
    further seeds of the models that decide claims (:func:`seeded`). A model may answer
    two (Figure 7's Sinusoidal is also Table 3's on prose).

    A Table 2 entry with its training length fixed (``l_tr`` or ``l_tr_mult``) is trained
    whatever its Table 1 model does, as the paper designed Table 2; one whose length covers
    the Table 1 model's ERF waits for that model to be shipped and to fail."""
    sc = scales.get(scale)
    sw, l_tr = sc.sweeps, sc.train.l_tr
    out = {f"Table 1: {f.title}": specs for f, specs in _table1(scale).items()}
    table2 = []
    for entry in sw.table2:
        setting = ((scales.FAMILIES[entry.family].setting, entry.value),)
        if entry.l_tr is not None or entry.l_tr_mult is not None:
            table2.append(LongModel(entry.pos, (*setting, *sorted(entry.training(l_tr).items()))))
            continue
        failing = _failing(LongModel(entry.pos, setting), scale)
        if failing is not None:
            over = entry.training(l_tr, sc.train.batch_size, failing)
            table2.append(LongModel(entry.pos, (*setting, *sorted(over.items()))))
    if table2:
        out["Table 2: the failures retrained on a longer L_tr"] = table2
    out["NoPE and Figure 7: no bias, absolute positions"] = (
        [LongModel("nope")] + [LongModel("sinusoidal", tuple(sorted(over.items()))) for _, over in sc.sinusoidal_runs()]
        + [LongModel("rotary")])
    for c in sw.corpora:
        out[f"Table 3 on {c}"] = [LongModel(p, (), c) for p in sw.table3_pos]
    if sw.seeds:
        out[f"Seeds {', '.join(map(str, sw.seeds))}: the models that decide claims 2, 4, 5, 7, 8 and 9"] = [
            seeds for spec in _deciding(out) for seeds in with_seeds(spec, sw.seeds)]
    return out


def _deciding(groups: dict[str, list[LongModel]]) -> list[LongModel]:
    """The models whose verdicts decide claims 2, 4, 5, 7, 8 and 9: the two ends of each
    Table 1 sweep, Table 2's retrained models, Sinusoidal at both L_tr and Rotary."""
    out = []
    for family, specs in groups.items():
        if family.startswith("Table 1"):
            out += [specs[0], specs[-1]]
        elif family.startswith("Table 2"):
            out += specs
        elif family.startswith("NoPE"):
            out += [s for s in specs if s.pos in ("sinusoidal", "rotary")]
    return list(dict.fromkeys(out))


def with_seeds(spec: LongModel, seeds) -> list[LongModel]:
    """``spec`` trained from each of ``seeds`` (the training seed: initialisation and the
    order of the batches)."""
    return [LongModel(spec.pos, (*spec.overrides, ("seed", int(s))), spec.corpus) for s in seeds]


def seeded(name: str, scale: str = "long") -> list[str]:
    """The names of ``name``'s model trained from every seed the preset has (its own first)."""
    spec = named(name, scale)
    return [name] + [s.name for s in with_seeds(spec, scales.get(scale).sweeps.seeds)]


def further_seeds(scale: str = "long") -> list[LongModel]:
    """The plan's models trained from a further seed (the group of :func:`by_experiment`
    that holds them; empty for a preset without further seeds)."""
    if not scales.get(scale).sweeps.seeds:
        return []
    return next((specs for group, specs in by_experiment(scale).items() if group.startswith("Seeds")), [])


_SEEDED: dict[str, tuple] = {}


def _seeded(scale: str) -> frozenset:
    """The (model, data, train) settings of every model the preset's plan trains from a
    further seed (:func:`by_experiment`)."""
    stamp = bundle.stamp(scale)  # a plan's Table 2 may follow from the shipped Table 1
    if _SEEDED.get(scale, (None,))[0] != stamp:
        out = set()
        with at_seed(0):  # the plan itself is read at the first seed
            for spec in further_seeds(scale):
                r = resolve(scale, spec.pos, spec.corpus, spec.settings())
                out.add((r.model, r.data, r.train))
        _SEEDED[scale] = (stamp, frozenset(out))
    return _SEEDED[scale][1]


def served_settings(scale: str, pos: str, corpus: str, settings: dict) -> dict:
    """``settings`` with the seed of :func:`rflens.shipped_runs.at_seed` when the preset
    trains this model from that seed too, else as they are."""
    seed = served_seed()
    if not seed or settings.get("seed", 0):
        return settings
    seeded = {**settings, "seed": seed}
    r = resolve(scale, pos, corpus, seeded)
    return seeded if (r.model, r.data, r.train) in _seeded(scale) else settings


def _table1(scale: str) -> dict:
    """{family: its sweep's models}, Table 1's three sweeps in their order."""
    sw = scales.get(scale).sweeps
    return {f: [LongModel(f.pos, ((f.setting, v),)) for v in getattr(sw, f.setting)] for f in scales.FAMILIES.values()}


def models(scale: str = "long") -> list[LongModel]:
    """The models of the long run, in the order they are trained: the failing side of
    Table 1 and NoPE first (the thesis), then Table 2's retrainings and the Table 1 models
    they are compared with, the rest of Table 1, Figure 7's Sinusoidal and Rotary, Table 3
    on every corpus, and the further seeds (:func:`by_experiment`)."""
    sw = scales.get(scale).sweeps
    first = [LongModel("alibi", (("slope_shift", max(sw.slope_shift)),)), LongModel("window", (("window", max(sw.window)),)),
             LongModel("alibi", (("same_slope", max(sw.same_slope)),)), LongModel("nope")]
    groups = by_experiment(scale)
    table2 = [spec for family, specs in groups.items() if family.startswith("Table 2") for spec in specs]
    partners = [LongModel(spec.pos, spec.overrides[:1]) for spec in table2]
    rest = [spec for specs in groups.values() for spec in specs]
    return list(dict.fromkeys(first + [s for pair in zip(table2, partners) for s in pair] + rest))


def sizes(scale: str = "long") -> list[int]:
    """The training tokens of the measured sizes of the preset's models
    (:func:`rflens.train.point_steps`)."""
    t = scales.get(scale).train
    return [steps * t.batch_size * t.l_tr for steps in point_steps(t)]


LAST_SIZE_COLUMNS = ["l_tr", "tokens", "ppl_l_tr", "r_horizon", "r_horizon_lo", "r_horizon_hi", "erf", "erf_capped",
                     "erf_length", "val_loss"]


def last_sizes(em, scale: str = "long"):
    """One row per shipped model at its largest measured size, indexed by (family, label) in
    the order of :func:`by_experiment`. ``em``: rows of :func:`rflens.bundle.table`."""
    import pandas as pd

    rows = [em[em["name"] == spec.name].sort_values("tokens").iloc[-1].to_dict() | {"family": family}
            for family, specs in by_experiment(scale).items() for spec in specs if (em["name"] == spec.name).any()]
    if not rows:
        return pd.DataFrame(columns=["family", "label", *LAST_SIZE_COLUMNS]).set_index(["family", "label"])
    return pd.DataFrame(rows).set_index(["family", "label"])[LAST_SIZE_COLUMNS]


def _failing(spec: LongModel, scale: str) -> int | None:
    """The ERF of a shipped, complete model that does not extrapolate at its last point;
    None otherwise (not shipped, unfinished, or it extrapolates)."""
    from .results import extrapolates  # pandas: not on the command line's startup path

    if spec.name not in bundle.complete(scale):
        return None
    result = bundle.load(spec.name, scale)
    last, l_tr = result["points"][-1], result["train"]["l_tr"]
    lengths = last["lengths"]
    ok = extrapolates(dict(zip(lengths, last["ppl"])), l_tr, upper=dict(zip(lengths, last["r_high"])))
    return None if ok else int(last["erf"])


def named(name: str, scale: str = "long") -> LongModel:
    """The model of the long run called ``name``; UserError listing the names otherwise."""
    for spec in models(scale):
        if spec.name == name:
            return spec
    raise UserError(f"no model named {name!r} in the {scale} run: choose from {', '.join(s.name for s in models(scale))}")


def check_planned(result: dict, scale: str, where: Path) -> None:
    """UserError unless ``result`` (a model's result.json, read from ``where``) is the model
    its name stands for in the ``scale`` run's plan: the same scheme, corpus, model, data and
    training settings, and, if it says it is finished, every size of the plan measured. A
    worker's folder joins the bundle only as what it is."""
    spec = named(str(result.get("name")), scale)  # a name outside the plan: the names to choose from
    _, model_cfg, data_cfg, train_cfg = resolve(scale, spec.pos, spec.corpus, spec.settings())
    try:
        same = (result.get("model") == model_cfg.to_dict() and result.get("train") == train_cfg.to_dict()
                and DataConfig.from_dict(result.get("data") or {}) == data_cfg)
    except (TypeError, ValueError, KeyError):
        same = False
    if not same:
        raise UserError(f"{where} is named {spec.name}, but its settings are not that model's in the {scale} plan "
                        f"({spec.pos} on {spec.corpus}{''.join(f', {k}={v}' for k, v in spec.settings().items())}): "
                        "retrain it with emergence --only " + spec.name)
    steps = point_steps(train_cfg)
    if result.get("complete") and [p.get("steps") for p in result.get("points") or []] != steps:
        raise UserError(f"{where} says it is finished, but its measured sizes are not the plan's "
                        f"({', '.join(map(str, steps))} steps): retrain it with emergence --only {spec.name}")


def command_for(scale: str, model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig) -> str:
    """The command that trains the model of these settings: for a model of the run's plan,
    the long run's, with its emergence points; otherwise (or at a read-only control, whose
    bundle nothing trains into) ``train``, into the run store, where it is read first."""
    from .settings import describe, train_command

    if not scales.get(scale).read_only:
        for spec in models(scale):
            r = resolve(scale, spec.pos, spec.corpus, spec.settings())
            if (r.model, r.data, r.train) == (model_cfg, data_cfg, train_cfg):
                return f"python -m rflens emergence --scale {scale} --only {spec.name}"
    return train_command(scale, model_cfg.pos, data_cfg.corpus, describe(model_cfg, data_cfg, train_cfg, scale))


# ----------------------------------------------------------------------------- measuring

def measure(model, corpus, ev: EvalConfig, l_tr: int) -> dict:
    """Per-segment last-token NLLs at L_tr x length_mults (float64, (lengths, N)), the
    test-split document of each segment's scored token, and the normalised input gradient
    over segments of erf_length_mult x L_tr."""
    from .evaluate import last_token_nll
    from .receptive import input_gradients, normalize

    lengths = [l_tr * m for m in ev.length_mults]
    was_training = model.training
    model.eval()
    segments = corpus.eval_segments(ev.n_segments, max(lengths) + 1, ev.seed)
    docs = corpus.segment_docs(ev.n_segments, max(lengths) + 1, ev.seed)
    nll = last_token_nll(model, segments, lengths, batch_size=ev.batch_size, progress=False)
    erf_len = ev.erf_length_mult * l_tr
    grads = input_gradients(model, corpus.eval_segments(ev.erf_samples, erf_len + 1, ev.seed),
                            batch_size=ev.batch_size, progress=False)
    model.train(was_training)
    return {"lengths": lengths, "nll": nll, "docs": docs.tolist(), "normalized": normalize(grads)}


def summary(point: dict, l_tr: int, threshold: float, docs=None) -> dict:
    """ppl per length, r(L) = ppl(L) / ppl(L_tr) with its paired 95% interval (over whole
    documents when ``docs``, the document of each segment, is given:
    :func:`rflens.results.paired_interval`), and the ERF (whether the segment capped it is
    derived when read: :func:`rflens.bundle.table`)."""
    from .receptive import summarize
    from .results import paired_interval

    nll = np.asarray(point["nll"], dtype=np.float64)
    ppl = np.exp(nll.mean(axis=1))
    r, lo, hi = paired_interval(nll, docs=docs)
    erf = summarize(point["normalized"], threshold, l_tr)
    return {"ppl": ppl.round(4).tolist(), "r": r.round(4).tolist(), "r_low": lo.round(4).tolist(),
            "r_high": hi.round(4).tolist(),
            "erf": erf["erf"], "erf_length": erf["length"],
            "share_in_ltr": round(erf["share_in_ltr"], 4)}


def document_intervals(scale: str, *, progress: bool = True) -> list[str]:
    """Give every shipped model of ``scale`` that lacks them the document of each of its
    segments (``segment_docs``, from its corpus and evaluation settings) and the paired
    intervals of each point resampled over those documents (:func:`summary`); the intervals
    over segments it carried are kept beside them (``r_low_segments``, ``r_high_segments``).
    Its NLLs and gradients are left as they are. Returns the names rewritten."""
    done = []
    for name, path in bundle.entries(scale).items():
        result = bundle.read_result(path)
        if "segment_docs" in result:
            continue
        bundle.verify(path)
        corpus = data.prepare(DataConfig.from_dict(result["data"]), progress=False)
        if corpus.fingerprint != result["data_fingerprint"]:
            raise UserError(f"the corpus of {name} changed since it was measured: its documents cannot be recovered")
        ev = EvalConfig.from_dict(result["eval"])
        nlls = bundle.point_nlls(path)
        docs = corpus.segment_docs(ev.n_segments, max(result["points"][-1]["lengths"]) + 1, ev.seed).tolist()
        for p in result["points"]:
            again = summary({"nll": nlls[p["steps"]], "normalized": p["normalized"]}, result["train"]["l_tr"],
                            ev.erf_threshold, docs)
            p["r_low_segments"], p["r_high_segments"] = p["r_low"], p["r_high"]
            p["r_low"], p["r_high"] = again["r_low"], again["r_high"]
        result["segment_docs"] = docs
        bundle.rewrite_result(scale, name, result)
        done.append(name)
        if progress:
            print(f"{name}: intervals over {len(set(docs))} documents", file=sys.stderr, flush=True)
    return done


# ----------------------------------------------------------------------------- the bundle

def _git_commit() -> str | None:
    """The commit of the code running now (the package's own checkout, which may not be the
    project folder the results are written to); None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


DRIFT_MODELS = ("alibi_slope_shift=4", "nope")  # shipped with weights: re-evaluated by the tests


def run(spec: LongModel, scale: str = "long", *, deadline: float | None = None, progress: bool = True,
        keep_weights: bool | None = None, root: Path | None = None) -> Path:
    """Train ``spec`` at ``scale`` with its emergence points and add it to the bundle (in
    ``root``, default :func:`rflens.storage.reference_dir`).

    Returns the bundle folder of the model. Raises :class:`OutOfTime` (the state kept)
    when ``deadline`` passes first, and a one-line error when another process trains the
    model now (:func:`hold`).
    """
    _, model_cfg, data_cfg, train_cfg = resolve(scale, spec.pos, spec.corpus, spec.settings())
    if train_cfg.schedule != "wsd" or train_cfg.warmup is None:
        raise UserError(f"the {scale} preset is not a long-run preset (it needs schedule=wsd and a fixed warmup)")
    if scales.get(scale).read_only and root is None:
        raise UserError(f"the {scale} bundle is a read-only control: nothing is trained into it (`emergence --scale "
                        f"{scale} --check K` retrains its models into a temporary folder to compare)")
    ev = scales.get(scale).eval
    corpus = data.prepare(data_cfg, progress=progress)
    work = storage.runs_dir() / "emergence" / scale / spec.name
    if root is not None:
        work = work.with_name(f"{spec.name}.check")
    with hold(work, spec.name):
        return _run(spec, scale, work, model_cfg, data_cfg, train_cfg, ev, corpus, deadline=deadline,
                    progress=progress, keep_weights=keep_weights, root=root)


@contextlib.contextmanager
def hold(work: Path, name: str):
    """The lock of the model whose state is kept in ``work``, held while it trains (the
    operating system frees it when its holder dies); a one-line error at once when another
    process holds it."""
    from filelock import FileLock, Timeout

    lock = work.parent / f".{work.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        held = FileLock(str(lock), timeout=0)
        held.acquire()
    except Timeout:
        raise UserError(f"another process trains {name} now (it holds {lock}): wait for it to finish, or choose "
                        "other models with --only") from None
    try:
        yield
    finally:
        held.release()


def _run(spec: LongModel, scale: str, work: Path, model_cfg, data_cfg, train_cfg, ev, corpus, *, deadline, progress,
         keep_weights, root) -> Path:
    """:func:`run` once the model's lock is held."""
    import torch

    fix = f"remove {work} to train {spec.name} from its start"
    points: list[dict] = []
    partial = work / "points.json"
    arrays = {}
    try:
        if partial.is_file():
            points = storage.read_json(partial)
            if not isinstance(points, list) or not all(isinstance(p, dict) and isinstance(p.get("steps"), int)
                                                       and not isinstance(p["steps"], bool) for p in points):
                raise ValueError("not a list of points")
        if (work / "points.npz").is_file():
            with np.load(work / "points.npz") as z:
                arrays = {k: z[k] for k in z.files}
    except (ValueError, EOFError, zipfile.BadZipFile) as err:  # a damaged file: JSON, zip or neither
        raise UserError(f"the kept state of {spec.name} in {work} is damaged ({type(err).__name__}): {fix}") from None

    def on_point(steps: int, model, val_loss: float) -> None:
        t0 = time.perf_counter()
        m = measure(model, corpus, ev, train_cfg.l_tr)
        arrays[f"steps_{steps}"] = m["nll"].astype(np.float32)
        point = {"steps": steps, "tokens": steps * train_cfg.batch_size * train_cfg.l_tr, "val_loss": round(val_loss, 5),
                 "lengths": m["lengths"],
                 "normalized": [float(f"{v:.4g}") for v in m["normalized"]], "measure_seconds": 0.0}
        point.update(summary(m, train_cfg.l_tr, ev.erf_threshold, m["docs"]))
        final["docs"] = m["docs"]  # the same segments at every size
        point["measure_seconds"] = round(time.perf_counter() - t0, 1)
        points[:] = [p for p in points if p["steps"] != steps] + [point]  # a resumed branch replaces its point
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        storage.write_bytes(work / "points.npz", buf.getvalue())
        storage.write_json(partial, points)
        if progress:
            print(f"{spec.name}: {point['tokens'] / 1e6:.2f}M tokens, ppl(L_tr) {point['ppl'][0]:.1f}, "
                  f"r(16 L_tr) {point['r'][-1]:.3f} [{point['r_low'][-1]:.3f}, {point['r_high'][-1]:.3f}], "
                  f"ERF {point['erf']}", file=sys.stderr, flush=True)
        if steps == train_cfg.steps:
            final["model"] = model

    final: dict = {}
    stopped = interrupted = None
    where = machine.device()
    try:
        metrics = train(model_cfg, data_cfg, train_cfg, out_dir=work, progress=progress, corpus=corpus,
                        points=point_steps(train_cfg), on_point=on_point, deadline=deadline, store=False, fix=fix)
        losses, seconds = metrics["train_loss"], metrics["train_seconds"]
    except OutOfTime as stop:
        if not points:
            raise
        # the points measured so far are finished runs: ship them, marked incomplete
        interrupted, losses, seconds, stopped = stop, stop.progress.train_loss, stop.progress.elapsed, stop.step
    stride = max(1, len(losses) // 1024)  # the training curve, averaged over blocks of steps
    curve = [[i + stride, round(float(np.mean(losses[i:i + stride])), 4)] for i in range(0, len(losses), stride)]
    result = {
        "name": spec.name, "scale": scale, "pos": spec.pos, "corpus": spec.corpus, "settings": spec.settings(),
        "complete": stopped is None, "stopped_at_step": stopped,
        "model": model_cfg.to_dict(), "data": data_cfg.to_dict(), "train": train_cfg.to_dict(), "eval": ev.to_dict(),
        "data_fingerprint": corpus.fingerprint, "code_version": code_version(), "commit": _git_commit(),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "machine": platform.machine(),
        "cpu": machine.cpu_capability(), "cpu_features": machine.cpu_features(), "device": machine.device_name(where),
        "train_seconds": round(seconds, 1), "finished": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "schedule": {"points": point_steps(train_cfg), "cooldown_frac": train_cfg.cooldown_frac,
                     "warmup": train_cfg.warmup},
        "train_curve": curve,
        "points": sorted(points, key=lambda p: p["steps"]),
        "segment_docs": final.get("docs") or corpus.segment_docs(ev.n_segments, max(points[-1]["lengths"]) + 1,
                                                                    ev.seed).tolist(),
    }
    keep = (spec.name in DRIFT_MODELS) if keep_weights is None else keep_weights
    out = bundle.write_model(scale, spec.name, result, arrays, final.get("model") if keep else None, root)
    if interrupted is not None:
        raise interrupted
    shutil.rmtree(work, ignore_errors=True)
    return out


DRIFT_TOLERANCE = 1e-5  # nats: a shipped model re-measured with the torch and vector unit it was measured with
DRIFT_TOLERANCE_ELSEWHERE = 1e-4  # nats: elsewhere (AVX2 against AVX-512 moved NLLs by up to 2.2e-5; AMX, 3.3e-5)


def drift_tolerance(result: dict) -> float:
    """How far a shipped model's re-measured NLLs may move before the bundle counts as stale."""
    return DRIFT_TOLERANCE if machine.same_machine(result) else DRIFT_TOLERANCE_ELSEWHERE


# ----------------------------------------------------------------------------- the schedule check

def schedule_check(name: str, steps: int, scale: str = "long", *, progress: bool = True) -> dict:
    """Is a cooled-down point what a run of the book's usual recipe gives at the same size?

    Trains (or reuses, through the run store) the model ``name`` for ``steps`` steps with
    the cosine schedule and the preset's warm-up fraction, measures it like a point, and
    compares r(L) with the shipped point of that size: both intervals, and the paired 95%
    interval of their ratio over the same segments. Writes the result into the bundle.
    """
    from .results import paired_interval  # pandas: not on the command line's startup path

    shipped_result = bundle.load(name, scale)
    point = next((p for p in shipped_result["points"] if p["steps"] == steps), None)
    if point is None:
        raise UserError(f"{name} has no shipped point at {steps} steps: choose one of "
                        f"{', '.join(str(p['steps']) for p in shipped_result['points'])}")
    spec = named(name, scale)
    cosine = {**spec.settings(), "steps": steps, "schedule": "cosine", "warmup": None}
    run_ = get_run(scale, spec.pos, spec.corpus, cosine, progress=progress)
    ev = scales.get(scale).eval
    m = measure(run_.load_model(), run_.corpus(), ev, run_.train_cfg.l_tr)
    wsd, cos = point["nll"], m["nll"]
    # paired over segments: r_wsd(L) / r_cos(L) = exp mean_i [(w_iL - c_iL) - (w_i0 - c_i0)], the r(L) of w - c
    docs = shipped_result.get("segment_docs")  # whole documents resampled where the bundle records them
    ratio, lo, hi = paired_interval(wsd - cos, seed=ev.seed, docs=docs)
    result = {
        "name": name, "steps": steps, "tokens": point["tokens"], "lengths": m["lengths"],
        "wsd": summary({"nll": wsd, "normalized": point["normalized"]}, run_.train_cfg.l_tr, ev.erf_threshold, docs),
        "cosine": summary(m, run_.train_cfg.l_tr, ev.erf_threshold, docs),
        "ratio": ratio.round(4).tolist(), "ratio_low": lo.round(4).tolist(),
        "ratio_high": hi.round(4).tolist(), "cosine_train": run_.train_cfg.to_dict(),
    }
    bundle.write_file(scale, bundle.SCHEDULE_CHECK, result)
    return result


def sweep(scale: str = "long", family: str = "slope_shift") -> tuple[str, list[str]]:
    """One of Table 1's sweeps in the long run ``scale``: the experiment's title and its
    models' names (ALiBi's Δ sweep, the book's key figure, by default)."""
    title = f"Table 1: {scales.FAMILIES[family].title}"
    return title, [spec.name for spec in by_experiment(scale)[title]]


def table1_names(scale: str = "long") -> list[str]:
    """The shipped models that belong to Table 1's three sweeps, in the sweeps' order."""
    names = [spec.name for specs in _table1(scale).values() for spec in specs]
    have = bundle.entries(scale)
    return [n for n in names if n in have]
