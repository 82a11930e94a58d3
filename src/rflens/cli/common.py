"""What several commands share: choosing a stored model from the command line, and printing."""

from __future__ import annotations

import json
import os
import sys

from ..errors import UserError


def emit(text: str) -> None:
    """Print to stdout; a closed pipe (``... | head``) is not an error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")


def select_run(args):
    """The stored model that ``--scale/--pos/--corpus/--set`` select (trained if needed),
    and the evaluation settings: the preset's, with the ``--set eval...`` overrides."""
    from .. import runs
    from ..config import EvalConfig, parse_overrides
    from ..evaluate import eval_config

    sections = parse_overrides(args.overrides)
    ev_overrides = sections.pop("eval")
    EvalConfig().replace(**ev_overrides)  # a bad evaluation setting is one line, before any training
    run = runs.get_run(args.scale, args.pos, args.corpus, {k: v for k, v in sections.items() if v},
                       progress=not args.quiet)
    ev = eval_config(run)
    if ev_overrides:
        ev = ev.replace(**ev_overrides)
    return run, ev


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
