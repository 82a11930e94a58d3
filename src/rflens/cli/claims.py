"""``python -m rflens claims``: check the paper's claims and print the scoreboard."""

from __future__ import annotations

import json

from rflens.claims import scoreboard
from rflens.cli.common import emit

CPU_HOURS_LIMIT = 24 * 30  # one-core hours past which a CPU machine is refused the board: a month of one core


def run(args) -> int:
    from rflens.errors import UserError
    from rflens.setup import presets
    from rflens.setup.config import CORPORA

    preset = presets.get(args.scale)  # one line for an unknown scale, before anything is computed or written
    if preset.shipped and preset.extends:
        raise UserError(f"{args.scale} trains models of the {preset.extends} run further and has no board of its own: "
                        f"check the claims with --scale {preset.extends}; chapter 10 reads {args.scale} against the "
                        "forecast it tests")
    if args.corpus not in CORPORA:
        raise UserError(f"unknown corpus {args.corpus!r}: choose one of {', '.join(CORPORA)}")
    if presets.get(args.scale).shipped:  # a damaged bundle stops the board: one line naming the file
        from rflens.store import bundle

        bundle.check(args.scale)
    else:  # what the board trains first, said before it starts when it takes minutes or more
        import sys

        from rflens.publish.parallel import missing_cost

        cost = missing_cost(args.scale, ["09"])
        if cost:
            _refuse_beyond_a_cpu(preset)
            print(cost, file=sys.stderr, flush=True)
    if getattr(args, "record_speed", False):
        from rflens.experiments.speed import record_speed, speed_record_path

        rec = record_speed(presets.get(args.scale), progress=not getattr(args, "quiet", False))
        emit(f"training speed recorded on {rec['machine']}: {speed_record_path(presets.get(args.scale))}")
    board = scoreboard.scoreboard(args.scale, args.corpus, compute=True, progress=not getattr(args, "quiet", False))
    if getattr(args, "json", False):
        emit(json.dumps(board, indent=2, default=scoreboard.jsonable))
    else:
        emit(scoreboard.render_scoreboard(args.scale, args.corpus, board=board))
        emit(f"written to {scoreboard.board_path(args.scale, args.corpus)}")
    return 0


def _refuse_beyond_a_cpu(preset) -> None:
    """UserError, in one line naming a preset that fits, when this machine has no GPU and the
    board's models of ``preset`` take more than :data:`CPU_HOURS_LIMIT` hours on one core (the
    ``full`` preset: about 145,000), instead of printing the estimate and starting anyway."""
    import torch

    from rflens.errors import UserError
    from rflens.experiments.book_models import chapter_experiments, training_cost
    from rflens.store.shipped import one_core_speed

    if torch.cuda.is_available():
        return
    wanted = chapter_experiments(["09"])
    flops = sum(r["train_flops"] + r["eval_flops"] for r in training_cost(preset)
                if wanted is None or r["experiment"] in wanted)
    at = one_core_speed(preset.name)
    hours = at.train_hours(flops) if at else None
    if hours is not None and hours > CPU_HOURS_LIMIT:
        raise UserError(f"the {preset.name} preset's claims train models of about {hours:,.0f} hours on one core, and "
                        f"this machine has no GPU: check the claims at --scale small (or tiny) here, or run "
                        f"--scale {preset.name} on a GPU machine")
