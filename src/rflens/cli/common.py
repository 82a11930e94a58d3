"""What several commands share: choosing a stored model (or a Hugging Face one, ``--hf``)
from the command line, and printing."""

from __future__ import annotations

import json
import os
import sys

from rflens.errors import UserError
from rflens.setup import presets
from rflens.setup.config import EvalConfig, parse_overrides
from rflens.setup.settings import resolve
from rflens.store import runs


def emit(text: str) -> None:
    """Print to stdout; a closed pipe (``... | head``) is not an error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")


def select_run(args):
    """The stored model that ``--scale/--pos/--corpus/--set`` select (trained if needed),
    and the evaluation settings: the preset's, with the ``--set eval...`` overrides."""
    from rflens.measure.perplexity import eval_config  # torch: only for the commands that measure

    sections = parse_overrides(args.overrides)
    ev_overrides = sections.pop("eval")
    EvalConfig().replace(**ev_overrides)  # a bad evaluation setting is one line, before any training
    overrides = {k: v for k, v in sections.items() if v}
    long = presets.get(args.scale).shipped  # a long preset's model is not trained here: `train` and its hours
    try:
        run = runs.get_run(presets.get(args.scale), args.pos, args.corpus, overrides, progress=not args.quiet, train=not long)
    except runs.NotStored as err:
        _, model_cfg, _, train_cfg = resolve(presets.get(args.scale), args.pos, args.corpus, overrides)
        raise runs.NotStored(f"{err} ({runs.hours_to_train(args.scale, model_cfg, train_cfg)})") from None
    ev = eval_config(run)
    if ev_overrides:
        ev = ev.replace(**ev_overrides)
    return run, ev


def hf_settings(args):
    """The evaluation and data settings of an ``--hf`` measurement: the preset's, with the
    ``--set eval...`` and ``--set data...`` overrides. A setting of the model or of its
    training is refused: a pretrained model's own config holds those."""
    sections = parse_overrides(args.overrides)
    refused = sorted(f"{s}.{k}" for s in ("model", "train") for k in sections[s])
    if refused:
        raise UserError(f"--set {refused[0]} does not apply to a Hugging Face model (its config holds its "
                        f"settings): drop it, or give eval.* and data.* settings only")
    if args.pos != "alibi":
        raise UserError("--pos does not apply to a Hugging Face model (its config holds its positions): drop it")
    preset = presets.get(args.scale)
    ev = preset.eval.replace(**sections["eval"]) if sections["eval"] else preset.eval
    return ev, preset.data.replace(corpus=args.corpus, **sections["data"])


def check_hf_flags(args) -> None:
    """``--text`` and ``--revision`` belong to ``--hf``."""
    for flag in ("text", "revision"):
        if getattr(args, flag, None) is not None and getattr(args, "hf", None) is None:
            raise UserError(f"--{flag} measures a Hugging Face model: give --hf PATH_OR_NAME as well")


def parse_lengths(text: str | None):
    """``"64,128"`` -> [64, 128]; None stays None (the preset's lengths)."""
    if text is None:
        return None
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UserError(f"--lengths must be comma-separated integers, e.g. 64,128,256; got {text!r}") from None


def print_result(run, result: dict, as_json: bool, table: str, note: str) -> None:
    """Print a measurement of ``run``: the JSON result, or a header, the table and a note."""
    if as_json:
        emit(json.dumps(result))
        return
    emit(f"model: {run.key}  ({run.model_cfg.pos}, {run.data_cfg.corpus})\n{table}\n({note})")


def print_hf_result(result: dict, as_json: bool, table: str, note: str) -> None:
    """Print a measurement of a Hugging Face model: the JSON result, or a header naming the
    model and the text, the table and a note that says where L_tr came from and whether the
    result was read from the cache."""
    if as_json:
        emit(json.dumps(result))
        return
    when = f"computed in {result['seconds']:.1f} s" + ("; read from the cache" if result.get("cached") else "")
    emit(f"model: {result['model']}  ({result['model_type']}, {result['text']}, {result['dtype']})\n{table}\n"
         f"({note}; L_tr: {result['l_tr_source']}; {when})")
