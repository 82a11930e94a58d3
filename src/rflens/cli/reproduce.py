"""``python -m rflens reproduce``: execute the book's chapters at a scale, then build it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from rflens.errors import UserError
from rflens.terminal import Log
from rflens.publish import parallel, reproduce
from rflens.setup import presets


def cluster_of(args, scale: str) -> parallel.Cluster | None:
    """The submitit executor the options ask for; None for processes on this machine."""
    kind = getattr(args, "executor", "processes")
    if kind == "processes":
        return None
    folder = Path(args.jobs_dir) if getattr(args, "jobs_dir", None) else reproduce.BUILD / scale / "jobs"
    return parallel.Cluster(kind, folder, partition=args.partition, gpus_per_job=args.gpus_per_job,
                            time_min=args.time_limit, max_jobs=args.max_jobs)


def run(args) -> int:
    """The command; the environment it sets for the chapters' kernels is undone when it returns,
    so that a caller in the same process (a test, a notebook) keeps its own."""
    saved = dict(os.environ)
    try:
        return _run(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _run(args) -> int:
    from tqdm.auto import tqdm

    quiet = getattr(args, "quiet", False)
    request = reproduce.request(args.scale, args.chapters, getattr(args, "parameters", None), getattr(args, "corpus", None))
    scale = request["scale"]
    os.environ.update(reproduce.kernel_env())
    os.environ["RFLENS_SCALE"] = scale  # chapters read it too when run outside papermill
    start = time.time()
    cluster = cluster_of(args, scale)
    chosen = list(request["chapters"])
    workers = args.workers
    if workers is not None and (workers < 0 or (cluster and workers == 0)):
        raise UserError(f"--workers must be {'at least 1 with --executor ' + cluster.kind if cluster else '0 or more'}, "
                        f"not {workers}")
    if workers is not None and (cluster is None or cluster.kind == "local"):
        cores = parallel.default_workers()  # one-thread processes on this machine: more than its cores only queue
        if workers > cores:
            raise UserError(f"--workers {workers} is more than the {cores} core(s) this process may use (the bound: "
                            f"one one-thread worker a core): give --workers {cores} or fewer")
    if request["skipped"]:
        gaps = request["skipped"]
        print(f"the {scale} preset's models are read from its shipped bundle; chapters {', '.join(gaps)} need models "
              f"it lacks ({len({g for lack in gaps.values() for g in lack})} in all) and are left unexecuted: "
              f"{reproduce.shipped_fix(scale, list(gaps))}")
    if presets.get(scale).shipped:
        if workers:
            raise UserError(f"--workers: the {scale} preset trains nothing here (its models are read from its "
                            "shipped bundle): drop --workers")
        if getattr(args, "plan", False):
            print(f"chapters {', '.join(chosen)} are built from the shipped bundle: nothing to train")
            return 0
        workers = 0
    if getattr(args, "plan", False):
        workers = workers or parallel.default_workers()
        print(parallel.format_plan(scale, parallel.training_estimate(scale, chosen, workers=workers), workers))
        return 0
    if workers is None:  # the whole book (or any book on a cluster): train its models first, in parallel
        workers = parallel.default_workers() if cluster or getattr(args, "chapters", None) is None else 0
    rerun = getattr(args, "rerun", False)
    with Log(reproduce.log_path(scale), quiet=quiet) as log:
        log(f"reproduce --scale {scale}: chapters {', '.join(chosen)}; progress also in {log.path}")
        changes = {} if rerun else reproduce.changes(scale, request["chapters"])
        kept = [key for key, what in changes.items() if not what]
        if kept:
            log(f"chapters {', '.join(kept)}: executed earlier with today's inputs, kept (--rerun executes them again)")
        for key, what in changes.items():
            if what and what != ["notebook"]:
                log(f"chapter {key} executes again: its {', '.join(what)} changed since it was executed")
        todo = [key for key in chosen if key not in kept]
        cost = None if presets.get(scale).shipped or not todo else parallel.missing_cost(scale, todo)
        if cost:  # said before the first model trains
            log(cost)
        if workers and todo:
            trained = parallel.train_book(scale, workers=workers, progress=not quiet, cluster=cluster,
                                          chapters=todo, log=log)
            where = f"{cluster.kind} jobs" if cluster else f"{workers} worker(s)"
            log(f"{len(trained)} model(s) trained and measured in {where} in {time.time() - start:.0f} s")
        bar = tqdm([(k, request["chapters"][k]) for k in todo], desc=f"chapters ({scale})", unit="chapter",
                   disable=quiet or not todo)
        for i, (key, (path, params)) in enumerate(bar, 1):
            bar.set_postfix_str(path.stem)
            log(f"chapter {key} ({i}/{len(todo)}): executing {path.name}")
            t0 = time.time()
            reproduce.execute(key, path, params, scale, log=log, rerun=True)
            log(f"chapter {key} executed in {time.time() - t0:.0f} s -> {reproduce.notebooks_dir(scale) / path.name}")
        bar.close()
        if getattr(args, "no_build", False):
            log(f"executed {len(todo)} chapter(s) in {time.time() - start:.0f} s; book not built (--no-build)")
            return 0
        t0 = time.time()
        log("building the book")
        out = reproduce.build(scale, quiet=quiet)
        log(f"book built in {time.time() - t0:.0f} s (total {time.time() - start:.0f} s)")
    print(reproduce.scoreboard_text(scale, getattr(args, "corpus", None)))
    print(f"book: {out / 'index.html'}")
    return 0

