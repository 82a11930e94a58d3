"""``python -m rflens evaluate``: perplexity of a stored model at several lengths."""

from __future__ import annotations

from ..evaluate import perplexity
from .common import parse_lengths, print_result, select_run


def run(args) -> int:
    model_run, ev = select_run(args)
    # --protocol wins over --set protocol=..., which wins over the preset
    result = perplexity(model_run, protocol=args.protocol, lengths=parse_lengths(args.lengths), n=args.n,
                        progress=not args.quiet, eval_cfg=ev)
    print_result(model_run, result, args.json, format_table(result),
                 f"{result['ci']}; {result['seconds']:.1f} s to compute")
    return 0


def format_table(result: dict) -> str:
    l_tr = result["l_tr"]
    head = f"{'L_ex':>7} {'L_ex/L_tr':>9} {'ppl':>10} {'95% CI':>21} {'tokens':>8}"
    n = result["n"] if result["n"] is not None else "the evaluation region"
    lines = [f"protocol: {result['protocol']}   N = {n}   L_tr = {l_tr}", head, "-" * len(head)]
    for i, length in enumerate(result["lengths"]):
        ci = f"[{result['ci_low'][i]:.2f}, {result['ci_high'][i]:.2f}]"
        lines.append(f"{length:>7} {length / l_tr:>9.3g} {result['ppl'][i]:>10.2f} {ci:>21} {result['tokens'][i]:>8}")
    return "\n".join(lines)
