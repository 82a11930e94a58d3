"""Train the book's models in parallel worker processes, one thread each.

The book needs some forty independent models (:func:`rflens.experiments.book_models.model_plan`). On a
CPU, two processes of one thread do more work than one process of two threads (the small
matrices of these models do not keep two threads busy), so ``reproduce`` trains the models
the run store lacks here, before the chapters run, and the chapters then find them stored.

Each worker trains through :func:`rflens.store.runs.get_run`, so the run store's locks keep two
processes from training the same model and a model is stored exactly as a sequential run
with the same thread count stores it (the thread count is recorded in every run). After
training, a worker also takes the measurements every chapter reads (last-token perplexity at
the scale's lengths, the receptive field), which the run store caches.

The same plan runs on a cluster through submitit (:class:`Cluster`, ``reproduce --executor
slurm``): one job a model, submitted as a job array, with the run store on a filesystem the
nodes share; ``--executor local`` is submitit's local executor (real processes, pickling and
result collection, on this machine), to try the path before a cluster.

Table 2 retrains the Table 1 models that fail, with an L_tr that covers their measured
receptive field, so it is planned in a second round, once Table 1 is stored and measured;
those models are measured by Table 2 itself, at Table 1's lengths.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from rflens.errors import UserError
from rflens.setup import presets

EXECUTORS = ("processes", "local", "slurm")  # reproduce --executor: processes is the default


@dataclass(frozen=True)
class Cluster:
    """Where submitit runs the jobs: ``kind`` "local" or "slurm"; ``folder``, a path every node
    can read, for the jobs' pickles and logs; Slurm's partition (None: the cluster's default),
    GPUs a job, the time limit of a job in minutes and at most how many jobs run at once
    (None: as many as Slurm allows; the local executor runs ``max_jobs`` or one per core)."""

    kind: str
    folder: Path
    partition: str | None = None
    gpus_per_job: int = 0
    time_min: int = 120
    max_jobs: int | None = None

    def __post_init__(self):
        if self.kind not in ("local", "slurm"):
            raise UserError(f"unknown executor {self.kind!r}: choose one of {', '.join(EXECUTORS)}")
        if self.gpus_per_job < 0 or self.time_min < 1 or (self.max_jobs is not None and self.max_jobs < 1):
            raise UserError(f"--gpus-per-job must be 0 or more, --time-limit and --max-jobs at least 1 "
                            f"(got {self.gpus_per_job}, {self.time_min}, {self.max_jobs})")


def _init_worker(threads: int) -> None:
    """Runs first in each worker, before torch is imported there."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    import torch

    torch.set_num_threads(threads)


def _train_one(scale: str, pos: str, corpus: str, overrides: dict, measure: bool, report=None) -> dict:
    """Train (or find) one model and take its default measurements; a small summary back.

    ``report``: where this model's progress goes, line by line (anything with ``put``: the
    parent's queue in a worker, or a :class:`rflens.terminal.Log`): its training bar (steps,
    tokens/s, time left), its measurements, and whether it came from the run store."""
    import contextlib

    from rflens.measure.perplexity import perplexity
    from rflens.measure.receptive import receptive_field
    from rflens.terminal import LineStream, model_label
    from rflens.store.runs import get_run

    t0 = time.perf_counter()
    label = model_label(pos, corpus, overrides)
    stream = LineStream(report.put, f"{label}: ") if report is not None else None
    with contextlib.redirect_stderr(stream) if stream else contextlib.nullcontext():
        run = get_run(presets.get(scale), pos, corpus, overrides, progress=stream is not None)
        trained = not run.reused
        if stream:
            report.put(f"{label}: {'trained' if trained else 'found in the run store'} ({run.key})")
        if measure:
            perplexity(run, progress=stream is not None)
            receptive_field(run, progress=stream is not None)
    seconds = time.perf_counter() - t0
    if stream:
        report.put(f"{label}: done in {seconds:.0f} s")
    return {"key": run.key, "pos": pos, "corpus": corpus, "overrides": overrides, "trained": trained,
            "seconds": seconds}


def _job(threads: int, scale: str, pos: str, corpus: str, overrides: dict, measure: bool) -> dict:
    """One model as a submitit job: the thread count first, then :func:`_train_one`."""
    _init_worker(threads)
    return _train_one(scale, pos, corpus, overrides, measure)


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def run_items(scale: str, items: list[dict], *, workers: int, threads: int = 1, measure: bool = True,
              progress: bool = True, desc: str = "models", cluster: Cluster | None = None, log=None) -> list[dict]:
    """Train and measure ``items`` ({"pos", "corpus", "overrides"}) in ``workers`` processes
    of ``threads`` threads; ``workers=1`` runs them here, one after another; with a
    ``cluster``, as submitit jobs of ``threads`` CPUs each. ``log`` (a
    :class:`rflens.terminal.Log`) gets every model's progress lines, from the workers too."""
    from tqdm.auto import tqdm

    if workers < 1 or threads < 1:
        raise UserError(f"--workers and threads must be at least 1 (got {workers} workers, {threads} threads)")
    bar = tqdm(total=len(items), desc=desc, unit="model", disable=not progress or not items, leave=False)
    done = []
    try:
        if cluster is not None and items:
            return _submit(scale, items, cluster, threads, measure, bar, done, workers, log)
        if workers == 1 or len(items) <= 1:
            import torch

            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                for it in items:
                    done.append(_train_one(scale, it["pos"], it["corpus"], it["overrides"], measure, log))
                    bar.update()
            finally:
                torch.set_num_threads(before)
            return done
        import multiprocessing as mp
        import queue as queues
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        context = mp.get_context("spawn")  # a fresh interpreter per worker: no OpenMP pool or lock inherited
        manager = context.Manager() if log is not None else None
        lines = manager.Queue() if manager else None

        def drain():
            while lines is not None:
                try:
                    log(lines.get_nowait())
                except queues.Empty:
                    return

        try:
            with ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=context,
                                     initializer=_init_worker, initargs=(threads,)) as pool:
                futures = [pool.submit(_train_one, scale, it["pos"], it["corpus"], it["overrides"], measure, lines)
                           for it in items]
                try:
                    running = set(futures)
                    while running:
                        finished, running = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                        drain()
                        for fut in finished:
                            done.append(fut.result())
                            bar.update()
                except BaseException:
                    for fut in futures:
                        fut.cancel()
                    raise
            drain()
        finally:
            if manager:
                manager.shutdown()
        return done
    finally:
        bar.close()


def _submit(scale, items, cluster: Cluster, threads, measure, bar, done, workers, log=None) -> list[dict]:
    """Each item a submitit job; Slurm gets them as one job array. Waits for all of them."""
    try:
        import submitit
    except ImportError:
        raise UserError("--executor local/slurm needs submitit: pip install submitit==1.5.4") from None
    executor = submitit.AutoExecutor(folder=cluster.folder / "%j", cluster=cluster.kind)
    params = dict(name=f"rflens-{scale}", timeout_min=cluster.time_min, nodes=1, tasks_per_node=1,
                  cpus_per_task=threads, gpus_per_node=cluster.gpus_per_job,
                  slurm_array_parallelism=cluster.max_jobs or len(items))
    if cluster.partition:
        params["slurm_partition"] = cluster.partition
    executor.update_parameters(**params)
    limit = len(items) if cluster.kind == "slurm" else (cluster.max_jobs or workers)
    pending, running = list(items), []
    try:
        while pending or running:
            if len(running) < limit and pending:
                batch, pending = pending[:limit - len(running)], pending[limit - len(running):]
                with executor.batch():
                    jobs = [executor.submit(_job, threads, scale, it["pos"], it["corpus"], it["overrides"], measure)
                            for it in batch]
                running += zip(jobs, batch)
                for job, it in zip(jobs, batch):
                    if log is not None:
                        log(f"{_label(it)}: submitted as job {job.job_id} (log: {job.paths.stderr})")
            finished = [(job, it) for job, it in running if job.done()]
            for job, it in finished:
                running.remove((job, it))
                try:
                    done.append(job.result())
                    if log is not None:
                        log(f"{_label(it)}: job {job.job_id} {'trained' if done[-1]['trained'] else 'found'} "
                            f"the model in {done[-1]['seconds']:.0f} s")
                except Exception as err:  # submitit re-raises the job's error with its traceback
                    raise UserError(f"job {job.job_id} ({it['pos']}, {it['corpus']}) failed: {_error_line(err)}; "
                                    f"its log: {job.paths.stderr}") from None
                bar.update()
            if not finished:
                time.sleep(0.5)
    except BaseException:  # a failed job or Ctrl-C: no job is left running
        for job, _ in running:
            job.cancel(check=False)
        raise
    return done


def _label(it: dict) -> str:
    from rflens.terminal import model_label

    return model_label(it["pos"], it["corpus"], it["overrides"])


def _error_line(err: Exception) -> str:
    """The job's own error from submitit's report: the last "Name: message" line of its trace."""
    lines = [ln.strip() for ln in str(err).splitlines()]
    for ln in reversed(lines):
        head = ln.split(":", 1)[0]
        if ":" in ln and head.split(".")[-1].endswith(("Error", "Exception", "Interrupt", "Exit")):
            return ln.split(":", 1)[1].strip() if head.endswith(("UserError", "ConfigError")) else ln
    return next((ln for ln in lines if ln), type(err).__name__)


def train_book(scale: str, *, workers: int | None = None, threads: int = 1, progress: bool = True,
               cluster: Cluster | None = None, chapters: list[str] | None = None, log=None) -> list[dict]:
    """Every model of the book at ``scale`` (:func:`rflens.experiments.book_models.model_plan`; only
    those ``chapters`` read, if given), trained and measured in ``workers`` processes
    (default: one per core) where the store lacks it; each model's progress to ``log``.
    Returns what was trained now."""
    preset = presets.get(scale)  # resolved once for what follows
    from rflens import data
    from rflens.experiments import tables as ex
    from rflens.experiments.book_models import chapter_experiments, model_plan
    from rflens.setup.settings import resolve

    workers = default_workers() if workers is None else workers
    wanted = chapter_experiments(chapters)
    plan = [it for it in model_plan(preset)
            if it["experiment"] != "Table 2" and (wanted is None or it["experiment"] in wanted)]
    # the corpora first, here with their progress, so that no worker waits on another's build
    for cfg in {resolve(preset, it["pos"], it["corpus"], it["overrides"]).data for it in plan}:
        data.prepare(cfg, progress=progress)
    # models already stored still get their measurements (cached: quick when present)
    if log is not None:
        log(f"models ({scale}): {len(plan)} for the chosen chapters, in {workers} worker(s)")
    done = run_items(scale, plan, workers=workers, threads=threads, progress=progress, desc=f"models ({scale})",
                     cluster=cluster, log=log)
    if wanted is not None and "Table 2" not in wanted:
        return [d for d in done if d["trained"]]
    t1 = ex.table1(preset, progress=False, train=False)  # stored and measured: reads the cache
    second = [{"pos": s.pos, "corpus": s.corpus, "overrides": s.settings} for s in ex.table2_specs(preset, t1)]
    # measured by Table 2 itself, at Table 1's absolute lengths (not at 16 x its own L_tr)
    if log is not None:
        log(f"Table 2 ({scale}): {len(second)} retraining(s) with an L_tr that covers the measured ERF")
    done += run_items(scale, second, workers=workers, threads=threads, measure=False, progress=progress,
                      desc="Table 2", cluster=cluster, log=log)
    return [d for d in done if d["trained"]]


def missing_cost(scale: str, chapters: list[str] | None = None) -> str | None:
    """One line, said before a command trains what the run store lacks for ``chapters``
    (None: the whole book): how many models and about how long on one core (their FLOPs at
    the shipped models' training speed, :func:`rflens.store.shipped.one_core_speed`; times nothing).
    None when they take less than :data:`rflens.training.cost.ANNOUNCED_FLOPS`."""
    preset = presets.get(scale)  # resolved once for what follows
    from rflens import data
    from rflens.experiments.book_models import chapter_experiments, training_cost
    from rflens.setup.settings import resolve
    from rflens.store.runs import is_complete, run_key, runs_dir
    from rflens.store.shipped import one_core_speed
    from rflens.training.cost import ANNOUNCED_FLOPS

    wanted = chapter_experiments(chapters)
    rows = [r for r in training_cost(preset) if wanted is None or r["experiment"] in wanted]
    if sum(r["train_flops"] + r["eval_flops"] for r in rows) < ANNOUNCED_FLOPS:
        return None  # even all of them: nothing to say
    flops = []
    for r in rows:
        _, m, d, t = resolve(preset, r["pos"], r["corpus"], r["overrides"])
        corpus = data.built(d)  # data not built yet holds no stored model
        if corpus is None or not is_complete(runs_dir() / run_key(m, d, t, corpus.fingerprint)):
            flops.append(r["train_flops"] + r["eval_flops"])
    if sum(flops) < ANNOUNCED_FLOPS:
        return None
    at = one_core_speed(scale)
    hours = f"about {at.train_hours(sum(flops)):.1f} hours on one core" if at else "not timed"
    return (f"{len(flops)} model(s) the run store lacks are trained first: {hours} ({sum(flops) / 1e12:,.0f} TFLOP; "
            f"`python -m rflens reproduce --scale {scale} --plan` times them on this machine)")


def training_estimate(scale: str, chapters: list[str], *, workers: int, timed_steps: int = 3) -> dict:
    """What ``reproduce`` would train for ``chapters``, trained nothing: each model of
    :func:`rflens.experiments.book_models.model_plan` those chapters read, whether the run store has it,
    and the time of the missing ones on this machine.

    The speed is measured, not assumed: ``timed_steps`` training steps (after one untimed)
    of each distinct missing model shape, on one thread as a worker runs them. A model's
    time is its tokens at that speed, times (1 + its evaluation FLOPs / training FLOPs) for
    the measurements that follow training; the wall time spreads the models over
    ``workers``. Timed on a CPU machine only, and not for the ``full`` preset (a CPU step of
    it takes minutes; chapter 11 gives its GPU-hours).
    Returns {"rows": [...], "missing_s", "wall_s", "speeds": [tokens/s], "timed": bool,
    "no_data": why some data could not be prepared, or None}.
    """
    preset = presets.get(scale)  # resolved once for what follows
    import torch

    from rflens import data
    from rflens.data import rebuild_command
    from rflens.experiments.book_models import chapter_experiments, model_plan, training_cost
    from rflens.experiments.speed import time_steps
    from rflens.setup.settings import resolve
    from rflens.store.runs import is_complete, run_key, runs_dir

    wanted = chapter_experiments(chapters)
    no_data = None
    to_build: set[str] = set()  # the commands that build the data not built yet (reproduce builds it first)
    cost = {(r["pos"], r["corpus"], tuple(sorted(r["overrides"].items()))): r for r in training_cost(preset)}
    rows = []
    for it in model_plan(preset):
        if it["experiment"] not in wanted:
            continue
        _, m, d, t = resolve(preset, it["pos"], it["corpus"], it["overrides"])
        try:  # the key needs the data's fingerprint: data not built yet holds no stored model
            corpus = data.built(d)
        except UserError as err:  # damaged data: reproduce stops on it too
            corpus, no_data = None, str(err)
        if corpus is None:
            key = None
            if no_data is None:
                to_build.add(rebuild_command(d))
        else:
            key = run_key(m, d, t, corpus.fingerprint)
        c = cost[(it["pos"], it["corpus"], tuple(sorted(it["overrides"].items())))]
        shape = (m.pos, m.n_layer, m.n_head, m.d_model, m.vocab_size, m.window, t.l_tr, t.batch_size)
        rows.append({**it, "key": key, "stored": key is not None and is_complete(runs_dir() / key), "tokens": c["tokens"],
                     "eval_factor": 1.0 + c["eval_flops"] / c["train_flops"], "shape": shape, "cfgs": (m, t)})
    timed = scale != "full" and not torch.cuda.is_available()
    speeds = {}
    if timed:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for r in rows:
                if not r["stored"] and r["shape"] not in speeds:
                    m, t = r["cfgs"]
                    sec = time_steps({"m": m}, t, rounds=1, steps=timed_steps, warmup=1)["m"][0]
                    speeds[r["shape"]] = t.batch_size * t.l_tr / sec
        finally:
            torch.set_num_threads(before)
    for r in rows:
        del r["cfgs"]
        tps = speeds.get(r.pop("shape"))
        r["seconds"] = None if r["stored"] or tps is None else r["tokens"] / tps * r["eval_factor"]
    times = [r["seconds"] for r in rows if r["seconds"] is not None]
    wall = max(sum(times) / max(1, workers), max(times)) if times else 0.0
    return {"rows": rows, "missing_s": sum(times), "wall_s": wall, "timed": timed,
            "speeds": list(speeds.values()), "no_data": no_data, "to_build": sorted(to_build)}


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.0f} h"


def format_plan(scale: str, plan: dict, workers: int) -> str:
    """The plan as the terminal shows it: one line a model, then the estimate."""
    from rflens.store.runs import train_command

    rows = plan["rows"]
    missing = [r for r in rows if not r["stored"]]
    lines = [f"plan for the {scale} book: {len(rows)} models, {len(rows) - len(missing)} stored, {len(missing)} to train"]
    for r in rows:
        settings = " ".join(f"{k}={v}" for k, v in sorted(r["overrides"].items()))
        state = "stored" if r["stored"] else ("to train" + (f", ~{r['seconds'] / 60:.1f} min" if r["seconds"] else ""))
        lines.append(f"  {r['experiment']:9s} {r['pos']:16s} {r['corpus']:6s} {settings:32s} {state}")
    if plan.get("to_build"):
        lines.append(f"data to build first (reproduce builds it; the plan builds nothing): "
                     f"{'; '.join(plan['to_build'])}")
    if plan.get("no_data"):
        lines.append(f"some data is not prepared, so its models cannot be stored yet: {plan['no_data']}")
    if not missing:
        lines.append("everything is stored: reproduce trains nothing")
    elif not plan["timed"]:
        why = "a step of the full preset takes minutes on a CPU" if scale == "full" else "timing runs on CPU machines only"
        lines.append(f"not timed ({why}; chapter 11 estimates GPU-hours); the first to train: "
                     f"{train_command(presets.get(scale), missing[0]['pos'], missing[0]['corpus'], missing[0]['overrides'])}")
    else:
        tokens = sum(r["tokens"] for r in missing)
        lo, hi = min(plan["speeds"]), max(plan["speeds"])
        lines.append(f"estimate: {tokens / 1e6:.1f}M training tokens at {lo:,.0f}-{hi:,.0f} tokens/s a worker "
                     f"(measured now, one thread), with their evaluations {_duration(plan['missing_s'])} of work: "
                     f"about {_duration(plan['wall_s'])} in {workers} worker(s), before the chapters run")
    return "\n".join(lines)
