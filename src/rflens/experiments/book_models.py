"""The book's plan: which experiments each chapter reads, every model the book trains at a
scale (once each), and what training them costs on GPUs (Chapter 11, ``reproduce --plan``).
What the long run's models cost on one core here is :mod:`rflens.store.core_cost`."""

from __future__ import annotations

from rflens.experiments import tables as ex
from rflens.experiments.beyond import beyond_models
from rflens.setup.settings import describe, resolve


# the experiments of model_plan each chapter reads (chapter 9 reads the claims of them all)
CHAPTER_EXPERIMENTS = {"03": ("Table 1",), "04": ("Table 1", "Table 2"), "05": ("Figure 7",),
                       "06": ("Table 1", "Table 3", "Figure 11"), "07": ("Table 3",), "08": ("Protocols",),
                       "09": ("Table 1", "Table 2", "Figure 7", "Table 3", "Figure 11", "Protocols"),
                       "12": ("Figure 7", "Table 3", "Beyond the paper")}


def chapter_experiments(chapters) -> set[str] | None:
    """The experiments of :func:`model_plan` the given chapters read (None: all of them)."""
    return None if chapters is None else {e for c in chapters for e in CHAPTER_EXPERIMENTS.get(c, ())}


def model_plan(scale) -> list[dict]:
    """Every model the book trains at ``scale``, once each: [{"experiment", "pos", "corpus",
    "overrides"}], where ``overrides`` are the settings that differ from the preset.

    From the experiments' own model lists: Table 1, Table 2 (every listed retraining),
    Figure 7, Table 3 on every corpus, Figure 11 and the protocol comparison. A model two
    experiments share is listed once, under the first.
    """
    sc = ex.get_scale(scale)
    groups = [("Table 1", ex.table1_models(sc)), ("Table 2", ex.table2_models(sc)), ("Figure 7", ex.figure7_models(sc)),
              ("Table 3", ex.table3_models(sc)), ("Figure 11", ex.models_of(sc, "figure11")),
              ("Protocols", ex.models_of(sc, "protocols")), ("Beyond the paper", beyond_models(sc))]
    plan, seen = [], set()
    for experiment, specs in groups:
        for spec in specs:
            r = resolve(sc.name, spec.pos, spec.corpus, spec.settings)
            changed = describe(r.model, r.data, r.train, sc.name)
            key = (spec.pos, spec.corpus, tuple(sorted(changed.items())))
            if key not in seen:
                seen.add(key)
                plan.append({"experiment": experiment, "pos": spec.pos, "corpus": spec.corpus, "overrides": changed})
    return plan


def training_cost(scale, *, gpu_tflops: float = 312.0, mfu: float = 0.4) -> list[dict]:
    """FLOPs and GPU-hours of each model of :func:`model_plan`: training (steps x batch x
    L_tr tokens at ``flops_per_token``) plus last-token evaluation (N segments at each
    L_ex, forward only: a third of the training FLOPs per token). GPU-hours assume
    ``gpu_tflops`` peak (312: an A100 in bf16) at ``mfu`` utilisation."""
    import torch

    from rflens.measure.perplexity import last_token_flops
    from rflens.model.transformer import TransformerLM

    sc = ex.get_scale(scale)
    rows = []
    for item in model_plan(sc):
        r = resolve(sc.name, item["pos"], item["corpus"], item["overrides"])
        mcfg, tcfg = r.model, r.train
        with torch.device("meta"):  # sizes only: no memory, no initialisation
            model = TransformerLM(mcfg)
        tokens = tcfg.steps * tcfg.batch_size * tcfg.l_tr
        train_flops = model.flops_per_token(tcfg.l_tr) * tokens
        lengths = [tcfg.l_tr * m for m in sc.eval.length_mults]
        eval_flops = last_token_flops(model, lengths, sc.eval.n_segments)
        flops = train_flops + eval_flops
        rows.append({**item, "params": model.num_params(non_embedding=False), "l_tr": tcfg.l_tr,
                     "tokens": tokens, "train_flops": train_flops, "eval_flops": eval_flops,
                     "gpu_hours": flops / (gpu_tflops * 1e12 * mfu) / 3600.0})
    return rows
