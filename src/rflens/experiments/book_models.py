"""The book's plan: which experiments each chapter reads, every model the book trains at a
scale (once each), and what training them costs on GPUs (Chapter 11, ``reproduce --plan``;
the arithmetic is :mod:`rflens.training.cost`'s)."""

from __future__ import annotations

from rflens.experiments import tables as ex
from rflens.experiments.beyond import beyond_models
from rflens.setup.settings import describe, resolve
from rflens.training import cost
from rflens.setup import presets


# the experiments of model_plan each chapter reads (chapter 9 reads the claims of them all)
CHAPTER_EXPERIMENTS = {"03": ("Table 1",), "04": ("Table 1", "Table 2"), "05": ("Figure 7",),
                       "06": ("Table 1", "Table 3", "Figure 11"), "07": ("Table 3",), "08": ("Protocols",),
                       "09": ("Table 1", "Table 2", "Figure 7", "Table 3", "Figure 11", "Protocols"),
                       "12": ("Figure 7", "Table 3", "Beyond the paper")}


def chapter_experiments(chapters) -> set[str] | None:
    """The experiments of :func:`model_plan` the given chapters read (None: all of them)."""
    return None if chapters is None else {e for c in chapters for e in CHAPTER_EXPERIMENTS.get(c, ())}


def model_plan(preset: presets.Preset) -> list[dict]:
    """Every model the book trains at ``preset``, once each: [{"experiment", "pos", "corpus",
    "overrides"}], where ``overrides`` are the settings that differ from the preset.

    From the experiments' own model lists: Table 1, Table 2 (every listed retraining),
    Figure 7, Table 3 on every corpus, Figure 11 and the protocol comparison. A model two
    experiments share is listed once, under the first.
    """
    sc = preset
    groups = [("Table 1", ex.table1_models(sc)), ("Table 2", ex.table2_models(sc)), ("Figure 7", ex.figure7_models(sc)),
              ("Table 3", ex.table3_models(sc)), ("Figure 11", ex.models_of(sc, "figure11")),
              ("Protocols", ex.models_of(sc, "protocols")), ("Beyond the paper", beyond_models(sc))]
    plan, seen = [], set()
    for experiment, specs in groups:
        for spec in specs:
            r = resolve(sc, spec.pos, spec.corpus, spec.settings)
            changed = describe(r.model, r.data, r.train, sc)
            key = (spec.pos, spec.corpus, tuple(sorted(changed.items())))
            if key not in seen:
                seen.add(key)
                plan.append({"experiment": experiment, "pos": spec.pos, "corpus": spec.corpus, "overrides": changed})
    return plan


def training_cost(preset: presets.Preset, *, gpu_tflops: float = cost.GPU_TFLOPS, mfu: float = cost.MFU) -> list[dict]:
    """FLOPs and GPU-hours of each model of :func:`model_plan`: training
    (:func:`rflens.training.cost.training_flops`) plus one last-token evaluation
    (:func:`rflens.training.cost.eval_flops`), at ``gpu_tflops`` peak (312: an A100 in bf16)
    and ``mfu`` utilisation (:func:`rflens.training.cost.gpu_hours`)."""
    sc = preset
    rows = []
    for item in model_plan(sc):
        r = resolve(sc, item["pos"], item["corpus"], item["overrides"])
        mcfg, tcfg = r.model, r.train
        train_flops = cost.training_flops(mcfg, tcfg)
        eval_flops = cost.eval_flops(mcfg, tcfg.l_tr, sc.eval)
        rows.append({**item, "params": cost.meta_model(mcfg).num_params(non_embedding=False), "l_tr": tcfg.l_tr,
                     "tokens": tcfg.steps * tcfg.batch_size * tcfg.l_tr, "train_flops": train_flops,
                     "eval_flops": eval_flops, "gpu_hours": cost.gpu_hours(train_flops + eval_flops, gpu_tflops, mfu)})
    return rows
