"""``python -m rflens bias``: each head's bias over distances 0..L-1, at initialisation."""

from __future__ import annotations

import json
import math

from rflens.cli.common import emit
from rflens.errors import UserError
from rflens.measure import resources
from rflens.model.positional import last_query_bias
from rflens.setup.config import ModelConfig, parse_overrides


def _fmt(x: float) -> str:
    return "-inf" if x == float("-inf") else f"{x + 0.0:.4g}"  # + 0.0: no "-0"


def _json_value(x: float):
    # float32 values written with the 7 significant digits they hold; JSON has no -inf
    return float(f"{x + 0.0:.7g}") if math.isfinite(x) else "-inf"


def run(args) -> int:
    """JSON output: ``{"pos", "heads", "length", "window", "bias": {"0": [...], ...}}`` with
    one list per head (distance 0 first); a masked distance is the string ``"-inf"`` (JSON
    has no infinity). Human output: a table with one row per head; for long L only the
    first and last distances are shown.
    """
    if args.heads is None or args.heads <= 0:
        raise UserError(f"--heads must be a positive integer, got {args.heads}")
    sections = parse_overrides(args.overrides)
    other = [f"{section}.{name}" for section, values in sections.items() if section != "model" for name in values
             if name not in sections["model"]]
    if other:
        raise UserError(f"--set {other[0]} does not change a bias at initialisation: bias takes model settings only "
                        "(e.g. --set slope_shift=2)")
    over = sections["model"]
    for fixed in ("pos", "n_head"):
        if fixed in over:
            raise UserError(f"set {fixed} with --{'pos' if fixed == 'pos' else 'heads'}, not --set")
    over.setdefault("d_model", args.heads * 8)  # any size divisible by H: the bias does not depend on d
    cfg = ModelConfig(**{**over, "pos": args.pos, "n_head": args.heads})
    if args.length is None or args.length <= 0:
        raise UserError(f"--length must be a positive integer, got {args.length}")
    # the bias table and the distances it is computed from, a few float32 copies of (H, L)
    resources.check(16.0 * cfg.n_head * args.length, f"a bias over {args.length:,} distances for {cfg.n_head:,} heads",
                    f"use fewer heads (--heads {args.heads:,}) or a shorter --length ({args.length:,})")
    bias = last_query_bias(cfg, args.length)  # (H, L)
    if args.json:
        rows = {str(h): [_json_value(v) for v in bias[h].tolist()] for h in range(cfg.n_head)}
        emit(json.dumps({"pos": cfg.pos, "heads": cfg.n_head, "length": args.length, "window": cfg.window, "bias": rows}))
        return 0
    L = args.length
    cols = list(range(L)) if L <= 12 else list(range(8)) + [None] + list(range(L - 3, L))
    head = ["head"] + ["..." if c is None else f"k={c}" for c in cols]
    table = [head] + [[str(h)] + ["..." if c is None else _fmt(bias[h, c].item()) for c in cols] for h in range(cfg.n_head)]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    extra = f", window={cfg.window}" if cfg.window is not None else ""
    lines = [f"{cfg.pos}: bias the last query gives to distance k = m - n (H={cfg.n_head}, L={L}{extra})"]
    lines += ["  ".join(x.rjust(w) for x, w in zip(r, widths)) for r in table]
    emit("\n".join(lines))
    return 0
