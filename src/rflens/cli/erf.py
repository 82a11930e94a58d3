"""``python -m rflens erf``: receptive-field analysis of a stored model (Section 4)."""

from __future__ import annotations

from ..receptive import receptive_field
from .common import print_result, select_run


def run(args) -> int:
    model_run, ev = select_run(args)
    result = receptive_field(model_run, length=args.length, n=args.n, threshold=args.threshold,
                             progress=not args.quiet, eval_cfg=ev)
    print_result(model_run, result, args.json, format_table(result),
                 f"{result['seconds']:.1f} s to compute the gradients")
    return 0


def format_table(result: dict) -> str:
    l_tr, cum = result["l_tr"], result["cumulative"]
    lines = [f"ERF ({result['threshold']:g} of the gradient): {result['erf']} tokens   "
             f"L_tr = {l_tr}   segment length = {result['length']}   N = {result['n']}",
             f"share of the gradient in the last L_tr tokens: {result['share_in_ltr']:.3f}"]
    if result["theoretical"] is not None:
        lines.append(f"theoretical receptive field R*w: {result['theoretical']}")
    head = f"{'last k tokens':>13} {'k/L_tr':>7} {'cumulative':>11}"
    lines += [head, "-" * len(head)]
    ks = sorted({k for k in (1, l_tr // 4, l_tr // 2, l_tr, 2 * l_tr, 4 * l_tr, 8 * l_tr, len(cum))
                 if 1 <= k <= len(cum)})
    lines += [f"{k:>13} {k / l_tr:>7.3g} {cum[k - 1]:>11.4f}" for k in ks]
    return "\n".join(lines)
