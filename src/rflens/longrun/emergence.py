"""Emergence: one long training run per model, measured as it grows, shipped as a bundle.

The failures Chi et al. (ACL 2023) explain need training: at the tiny preset's 0.6M tokens a
model whose receptive field outgrows L_tr still extrapolates. Here each model of the
``long`` preset (:func:`models`: what is trained, in which order) is trained once to its full
budget with a warmup-stable-decay schedule by the book's one training loop,
:func:`rflens.training.trainer.train`, which branches it at each of its log-spaced sizes
(:func:`rflens.training.trainer.point_steps`: the budget / 2^6 .. the budget): a copy of its state is
cooled down over the last ``cooldown_frac`` of that size, which is exactly the finished
shorter run (same batches, same rates, bitwise), and handed here to be measured; then the
main run continues from where it branched. One run thus gives every point of an emergence
curve at about 1.2 times the cost of its last point.

A point's measurement is what the book reads: per-segment last-token NLLs at L_tr x
length_mults on the preset's N segments (so r(L) and its paired intervals can be computed
against any other point or model), the normalised input gradient over segments of
``erf_length_mult`` x L_tr (the receptive field), and the validation loss.

The results go to the shipped bundle, ``reference/<run>/<name>/``, written by
:func:`rflens.store.bundle.write_model` (:mod:`rflens.store.bundle` owns its files). A model being trained
keeps its state in the run store's ``emergence/`` folder, checkpointed at every branch and
every ``ckpt_interval`` steps, so a sitting that ends (``--minutes``) or a kill loses at most
that much work.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from rflens import data, paper, storage
from rflens.errors import UserError
from rflens.longrun.plan import every_document_lengths, keeps_weights, LongModel, measured_steps, named
from rflens.setup import presets
from rflens.setup.config import DataConfig, EvalConfig
from rflens.setup.settings import resolve
from rflens.store import bundle
from rflens.store.runs import code_version, get_run
from rflens.training import machine
from rflens.training.trainer import OutOfTime, train


# ----------------------------------------------------------------------------- measuring

def measure(model, corpus, ev: EvalConfig, l_tr: int, every: list[int] | None = None) -> dict:
    """Per-segment last-token NLLs at L_tr x length_mults (float64, (lengths, N)), the
    test-split document of each segment's scored token, and the normalised input gradient
    over segments of erf_length_mult x L_tr, with each segment's (``per_segment``); where
    that is not the paper's input (4 L_tr), the normalised gradient on it too (``paper_input``).
    With ``every`` (lengths), the NLLs at those lengths on segments that score every test
    document too (``every_document``: :meth:`rflens.data.Corpus.document_segments`)."""
    from rflens.measure.perplexity import last_token_nll
    from rflens.measure.receptive import input_gradients, per_segment

    lengths = [l_tr * m for m in ev.length_mults]
    was_training = model.training
    model.eval()
    segments = corpus.eval_segments(ev.n_segments, max(lengths) + 1, ev.seed)
    docs = corpus.segment_docs(ev.n_segments, max(lengths) + 1, ev.seed)
    nll = last_token_nll(model, segments, lengths, batch_size=ev.batch_size, progress=False)
    erf_len = ev.erf_length_mult * l_tr
    grads = input_gradients(model, corpus.eval_segments(ev.erf_samples, erf_len + 1, ev.seed),
                            batch_size=ev.batch_size, progress=False)
    out = {"lengths": lengths, "nll": nll, "docs": docs.tolist(), "per_segment": per_segment(grads)}
    out["normalized"] = out["per_segment"].mean(axis=0)
    if ev.erf_length_mult != paper.ERF_INPUT_MULT:  # and on the paper's input, the one Figure 7 reads
        length = paper.ERF_INPUT_MULT * l_tr
        out["paper_input"] = {"length": length, "normalized": per_segment(input_gradients(
            model, corpus.eval_segments(ev.erf_samples, length + 1, ev.seed), batch_size=ev.batch_size,
            progress=False)).mean(axis=0)}
    if every:
        segments, docs, _ = corpus.document_segments(ev.n_segments, max(every) + 1, ev.seed)
        out["every_document"] = {"lengths": list(every), "docs": docs.tolist(), "nll": last_token_nll(
            model, segments, list(every), batch_size=ev.batch_size, progress=False)}
    model.train(was_training)
    return out


def summary(point: dict, l_tr: int, threshold: float, docs=None) -> dict:
    """ppl per length, r(L) = ppl(L) / ppl(L_tr) with its paired 95% interval (over whole
    documents when ``docs``, the document of each segment, is given:
    :func:`rflens.measure.intervals.paired_interval`), and the ERF (whether the segment capped it is
    derived when read: :func:`rflens.store.bundle.table`)."""
    from rflens.measure.receptive import summarize

    erf = summarize(point["normalized"], threshold, l_tr)
    return ratios(point["nll"], docs) | {"erf": erf["erf"], "erf_length": erf["length"],
                                         "share_in_ltr": round(erf["share_in_ltr"], 4)}


def ratios(nll, docs=None) -> dict:
    """ppl per length and r(L) = ppl(L) / ppl(L_tr) with its paired 95% interval (over whole
    documents when ``docs`` is given), rounded as a bundle stores them."""
    from rflens.measure.intervals import paired_interval

    nll = np.asarray(nll, dtype=np.float64)
    r, lo, hi = paired_interval(nll, docs=docs)
    return {"ppl": np.exp(nll.mean(axis=1)).round(4).tolist(), "r": r.round(4).tolist(), "r_low": lo.round(4).tolist(),
            "r_high": hi.round(4).tolist()}


def document_intervals(run: presets.LongRun, *, progress: bool = True) -> list[str]:
    """Give every shipped model of ``run`` that lacks them the document of each of its
    segments (``segment_docs``, from its corpus and evaluation settings) and the paired
    intervals of each point resampled over those documents (:func:`summary`); the intervals
    over segments it carried are kept beside them (``r_low_segments``, ``r_high_segments``).
    Its NLLs and gradients are left as they are. Returns the names rewritten."""
    done = []
    for name, path in bundle.entries(run.name).items():
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
        bundle.rewrite_result(run.name, name, result)
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


def run(spec: LongModel, preset: presets.Preset, *, deadline: float | None = None, progress: bool = True,
        keep_weights: bool | None = None, root: Path | None = None) -> Path:
    """Train ``spec`` of the long run ``preset`` (or of a size preset trained as one) with its emergence points and add it to the bundle (in
    ``root``, default :func:`rflens.storage.reference_dir`).

    Returns the bundle folder of the model. Raises :class:`OutOfTime` (the state kept)
    when ``deadline`` passes first, and a one-line error when another process trains the
    model now (:func:`hold`).
    """
    _, model_cfg, data_cfg, train_cfg = resolve(preset, spec.pos, spec.corpus, spec.settings())
    if train_cfg.schedule != "wsd" or train_cfg.warmup is None:
        raise UserError(f"the {preset.name} preset is not a long-run preset (it needs schedule=wsd and a fixed warmup)")
    if preset.shipped and preset.read_only and root is None:
        raise UserError(f"the {preset.name} bundle is a read-only control: nothing is trained into it (`emergence --scale "
                        f"{preset.name} --check K` retrains its models into a temporary folder to compare)")
    ev = preset.eval
    corpus = data.prepare(data_cfg, progress=progress)
    work = bundle.emergence_state(preset.name, spec.name)
    if root is not None:
        work = work.with_name(f"{spec.name}.check")
    with hold(work, spec.name):
        return _run(spec, preset, work, model_cfg, data_cfg, train_cfg, ev, corpus, deadline=deadline,
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


def _run(spec: LongModel, preset: presets.Preset, work: Path, model_cfg, data_cfg, train_cfg, ev, corpus, *, deadline, progress,
         keep_weights, root) -> Path:
    """:func:`run` once the model's lock is held."""
    fix = f"remove {work} to train {spec.name} from its start"
    points: list[dict] = []
    partial = work / bundle.KEPT_POINTS
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
        m = measure(model, corpus, ev, train_cfg.l_tr, every if steps == train_cfg.steps else None)
        arrays[f"steps_{steps}"] = m["nll"].astype(np.float32)
        # each segment's normalised gradient, so that the ERF gets an interval over segments
        arrays[f"{bundle.GRADIENTS}{steps}"] = m["per_segment"].astype(np.float16)
        point = {"steps": steps, "tokens": steps * train_cfg.batch_size * train_cfg.l_tr, "val_loss": round(val_loss, 5),
                 "lengths": m["lengths"],
                 "normalized": [float(f"{v:.4g}") for v in m["normalized"]], "measure_seconds": 0.0}
        if "paper_input" in m:  # the gradient on Figure 7's input (4 L_tr) beside the ERF's
            point["paper_input"] = {"length": m["paper_input"]["length"],
                                    "normalized": [float(f"{v:.4g}") for v in m["paper_input"]["normalized"]]}
        point.update(summary(m, train_cfg.l_tr, ev.erf_threshold, m["docs"]))
        if "every_document" in m:  # the finished model on every test document (Table 2's, claim 7's)
            e = m["every_document"]
            arrays[f"{bundle.DOCUMENTS}{steps}"] = e["nll"].astype(np.float32)
            point["every_document"] = {"lengths": e["lengths"], "segment_docs": e["docs"],
                                       "documents": len(set(e["docs"])), **ratios(e["nll"], e["docs"])}
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
    every = every_document_lengths(preset, spec)
    stopped = interrupted = None
    where = machine.device()
    try:
        metrics = train(model_cfg, data_cfg, train_cfg, out_dir=work, progress=progress, corpus=corpus,
                        points=measured_steps(preset, train_cfg), on_point=on_point, deadline=deadline, store=False, fix=fix)
        losses, seconds = metrics["train_loss"], metrics["train_seconds"]
    except OutOfTime as stop:
        if not points:
            raise
        # the points measured so far are finished runs: ship them, marked incomplete
        interrupted, losses, seconds, stopped = stop, stop.progress.train_loss, stop.progress.elapsed, stop.step
    stride = max(1, len(losses) // 1024)  # the training curve, averaged over blocks of steps
    curve = [[i + stride, round(float(np.mean(losses[i:i + stride])), 4)] for i in range(0, len(losses), stride)]
    result = bundle.new_result(
        spec.name, preset.name, spec.pos, spec.corpus, spec.settings(), model_cfg, data_cfg, train_cfg, ev,
        fingerprint=corpus.fingerprint, code=code_version(), commit=_git_commit(), where=where, stopped=stopped,
        seconds=seconds, measured_steps=measured_steps(preset, train_cfg), curve=curve, points=points,
        segment_docs=final.get("docs") or corpus.segment_docs(ev.n_segments, max(points[-1]["lengths"]) + 1,
                                                              ev.seed).tolist())
    keep = (preset.shipped and keeps_weights(preset, spec)) if keep_weights is None else keep_weights
    out = bundle.write_model(preset.name, spec.name, result, arrays, final.get("model") if keep else None, root)
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

def schedule_check(name: str, steps: int, run: presets.LongRun, *, progress: bool = True) -> dict:
    """Is a cooled-down point what a run of the book's usual recipe gives at the same size?

    Trains (or reuses, through the run store) the model ``name`` for ``steps`` steps with
    the cosine schedule and the preset's warm-up fraction, measures it like a point, and
    compares r(L) with the shipped point of that size: both intervals, and the paired 95%
    interval of their ratio over the same segments. Writes the result into the bundle.
    """
    from rflens.measure.intervals import paired_interval  # pandas: not on the command line's startup path

    shipped_result = bundle.load(name, run.name)
    point = next((p for p in shipped_result["points"] if p["steps"] == steps), None)
    if point is None:
        raise UserError(f"{name} has no shipped point at {steps} steps: choose one of "
                        f"{', '.join(str(p['steps']) for p in shipped_result['points'])}")
    spec = named(name, run)
    cosine = {**spec.settings(), "steps": steps, "schedule": "cosine", "warmup": None}
    run_ = get_run(run, spec.pos, spec.corpus, cosine, progress=progress)
    ev = run.eval
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
    bundle.write_file(run.name, bundle.SCHEDULE_CHECK, result)
    return result
