"""Train the book's models in parallel worker processes, one thread each.

The book needs some forty independent models (:func:`rflens.experiments.model_plan`). On a
CPU, two processes of one thread do more work than one process of two threads (the small
matrices of these models do not keep two threads busy), so ``reproduce`` trains the models
the run store lacks here, before the chapters run, and the chapters then find them stored.

Each worker trains through :func:`rflens.runs.get_run`, so the run store's locks keep two
processes from training the same model and a model is stored exactly as a sequential run
with the same thread count stores it (the thread count is recorded in every run). After
training, a worker also takes the measurements every chapter reads (last-token perplexity at
the scale's lengths, the receptive field), which the run store caches.

Table 2 retrains the Table 1 models that fail, with an L_tr that covers their measured
receptive field, so it is planned in a second round, once Table 1 is stored and measured;
those models are measured by Table 2 itself, at Table 1's lengths.
"""

from __future__ import annotations

import os
import time

from .errors import UserError


def _init_worker(threads: int) -> None:
    """Runs first in each worker, before torch is imported there."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    import torch

    torch.set_num_threads(threads)


def _train_one(scale: str, pos: str, corpus: str, overrides: dict, measure: bool) -> dict:
    """Train (or find) one model and take its default measurements; a small summary back."""
    from . import experiments as ex
    from .runs import get_run

    t0 = time.perf_counter()
    run = get_run(scale, pos, corpus, overrides, progress=False)
    trained = not run.reused
    if measure:
        ex.measure_ppl(run)
        ex.measure_erf(run)
    return {"key": run.key, "pos": pos, "corpus": corpus, "overrides": overrides, "trained": trained,
            "seconds": time.perf_counter() - t0}


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def run_items(scale: str, items: list[dict], *, workers: int, threads: int = 1, measure: bool = True,
              progress: bool = True, desc: str = "models") -> list[dict]:
    """Train and measure ``items`` ({"pos", "corpus", "overrides"}) in ``workers`` processes
    of ``threads`` threads; ``workers=1`` runs them here, one after another."""
    from tqdm.auto import tqdm

    if workers < 1 or threads < 1:
        raise UserError(f"--workers and threads must be at least 1 (got {workers} workers, {threads} threads)")
    bar = tqdm(total=len(items), desc=desc, unit="model", disable=not progress or not items, leave=False)
    done = []
    try:
        if workers == 1 or len(items) <= 1:
            import torch

            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                for it in items:
                    done.append(_train_one(scale, it["pos"], it["corpus"], it["overrides"], measure))
                    bar.update()
            finally:
                torch.set_num_threads(before)
            return done
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # spawn: a fresh interpreter per worker, so no OpenMP pool or lock is inherited
        with ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=mp.get_context("spawn"),
                                 initializer=_init_worker, initargs=(threads,)) as pool:
            futures = [pool.submit(_train_one, scale, it["pos"], it["corpus"], it["overrides"], measure)
                       for it in items]
            try:
                for fut in as_completed(futures):
                    done.append(fut.result())
                    bar.update()
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise
        return done
    finally:
        bar.close()


def train_book(scale: str, *, workers: int | None = None, threads: int = 1, progress: bool = True) -> list[dict]:
    """Every model of the book at ``scale`` (:func:`rflens.experiments.model_plan`), trained
    and measured in ``workers`` processes (default: one per core) where the store lacks it.
    Returns what was trained now."""
    from . import experiments as ex

    from . import data
    from .runs import resolve

    workers = default_workers() if workers is None else workers
    plan = [it for it in ex.model_plan(scale) if it["experiment"] != "Table 2"]
    # the corpora first, here with their progress, so that no worker waits on another's build
    for cfg in {resolve(scale, it["pos"], it["corpus"], it["overrides"])[2] for it in plan}:
        data.prepare(cfg, progress=progress)
    # models already stored still get their measurements (cached: quick when present)
    done = run_items(scale, plan, workers=workers, threads=threads, progress=progress, desc=f"models ({scale})")
    t1 = ex.table1(scale, progress=False, train=False)  # stored and measured: reads the cache
    second = [{"pos": s.pos, "corpus": s.corpus, "overrides": s.settings} for s in ex.table2_specs(scale, t1)]
    # measured by Table 2 itself, at Table 1's absolute lengths (not at 16 x its own L_tr)
    done += run_items(scale, second, workers=workers, threads=threads, measure=False, progress=progress,
                      desc="Table 2")
    return [d for d in done if d["trained"]]
