"""Worker processes against threads: chapter 3's models trained both ways, alone and under load.

Chapter 3 trains Table 1's ALiBi sweeps (slope shifts and same-slope exponents, ten
models at the ``tiny`` preset). This script trains the first ``--models`` of them, with
``--steps`` steps each (the preset's 600 steps are a third of a minute a model), into a
fresh temporary run store, in two ways:

* *threads*: one process, the models one after another, 2 threads (``--workers 0``);
* *workers*: two worker processes of one thread (``reproduce``'s default on 2 cores);

first with nothing else running, then while a second CPU-heavy process (a 2-thread
matrix-multiply loop, as a laptop's other work) runs beside it. Each way trains the same
models from scratch, so wall times compare directly.

    .venv/bin/python bench/workers.py                 # 6 models x 150 steps, ~8 minutes
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time

from rflens.experiments import tables as ex
from rflens.publish import parallel
from rflens.setup import presets


def load(stop) -> None:
    """A second CPU-heavy process: 2-thread matrix products until told to stop."""
    import torch

    torch.set_num_threads(2)
    a = torch.randn(512, 512)
    while not stop.is_set():
        a = (a @ a).tanh_()


def train(items: list[dict], workers: int) -> float:
    with tempfile.TemporaryDirectory() as store:
        os.environ["RFLENS_RUNS"] = store
        t0 = time.perf_counter()
        if workers == 1:
            parallel.run_items("tiny", items, workers=1, threads=2, measure=False, progress=False)
        else:
            parallel.run_items("tiny", items, workers=workers, threads=1, measure=False, progress=False)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=6)
    ap.add_argument("--steps", type=int, default=150)
    args = ap.parse_args()
    specs = ex.table1_models(presets.get("tiny"))[:args.models]
    items = [{"pos": s.pos, "corpus": s.corpus, "overrides": {**s.settings, "steps": args.steps}} for s in specs]
    from rflens.setup.settings import resolve

    tcfg = resolve(presets.get("tiny"), items[0]["pos"], "prose", items[0]["overrides"]).train
    tokens = len(items) * tcfg.steps * tcfg.batch_size * tcfg.l_tr
    print(f"{len(items)} models ({', '.join(s.label for s in specs)}), {args.steps} steps each, "
          f"{tokens / 1e6:.2f}M tokens in all\n")
    print("| condition | way | wall (s) | tokens/s | workers vs threads |")
    print("|---|---|---|---|---|")
    for condition in ("alone", "beside a 2-thread matmul loop"):
        stop, other = None, None
        if condition != "alone":
            stop = mp.get_context("spawn").Event()
            other = mp.get_context("spawn").Process(target=load, args=(stop,))
            other.start()
            time.sleep(2)
        try:
            wall = {way: train(items, workers) for way, workers in (("1 process x 2 threads", 1),
                                                                     ("2 workers x 1 thread", 2))}
        finally:
            if other is not None:
                stop.set()
                other.join()
        base = wall["1 process x 2 threads"]
        for way, sec in wall.items():
            print(f"| {condition} | {way} | {sec:.0f} | {tokens / sec:,.0f} | {base / sec:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
