"""``python -m rflens claims``: check the paper's claims and print the scoreboard."""

from __future__ import annotations

import json

from rflens.claims import scoreboard
from rflens.cli.common import emit


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
