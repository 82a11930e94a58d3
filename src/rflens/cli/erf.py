"""``python -m rflens erf``: receptive-field analysis of a stored model (or, with ``--hf``,
of a Hugging Face causal LM), Section 4."""

from __future__ import annotations

from rflens.cli.common import check_hf_flags, hf_settings, print_hf_result, print_result, select_run
from rflens.measure.perplexity import segment_notes
from rflens.measure.receptive import receptive_field


def run(args) -> int:
    check_hf_flags(args)
    if args.hf is not None:
        return run_hf(args)
    model_run, ev = select_run(args)
    result = receptive_field(model_run, length=args.length, n=args.n, threshold=args.threshold,
                             progress=not args.quiet, eval_cfg=ev)
    print_result(model_run, result, args.json, format_table(result),
                 f"{result['seconds']:.1f} s to compute the gradients")
    return 0


def run_hf(args) -> int:
    from rflens.hf import hf_receptive_field

    ev, data_cfg = hf_settings(args)
    result = hf_receptive_field(args.hf, text=args.text, corpus=args.corpus, length=args.length, n=args.n,
                                threshold=args.threshold, revision=args.revision, eval_cfg=ev, data_cfg=data_cfg,
                                progress=not args.quiet)
    print_hf_result(result, args.json, format_table(result), "normalised input gradients, Section 4")
    return 0


def format_table(result: dict) -> str:
    l_tr, cum = result["l_tr"], result["cumulative"]  # l_tr None: a Hugging Face model without one
    span = "L_tr unknown" if l_tr is None else f"L_tr = {l_tr}"
    lines = [f"ERF ({result['threshold']:g} of the gradient): {result['erf']} tokens   "
             f"{span}   segment length = {result['length']}   N = {result['n']}"]
    if l_tr is not None:
        lines.append(f"share of the gradient in the last L_tr tokens: {result['share_in_ltr']:.3f}")
    if result["theoretical"] is not None:
        lines.append(f"theoretical receptive field R*w: {result['theoretical']}")
    head = f"{'last k tokens':>13} {'k/L_tr':>7} {'cumulative':>11}"
    lines += [head, "-" * len(head)]
    if l_tr is None:  # fractions of the segment instead of multiples of L_tr
        ks = sorted({k for k in (1, len(cum) // 8, len(cum) // 4, len(cum) // 2, len(cum)) if k >= 1})
    else:
        ks = sorted({k for k in (1, l_tr // 4, l_tr // 2, l_tr, 2 * l_tr, 4 * l_tr, 8 * l_tr, len(cum))
                     if 1 <= k <= len(cum)})
    lines += [f"{k:>13} {_ratio(k, l_tr)} {cum[k - 1]:>11.4f}" for k in ks]
    lines += [f"note: {x}" for x in segment_notes(result, interval=False)]
    return "\n".join(lines)


def _ratio(k: int, l_tr: int | None) -> str:
    return f"{k / l_tr:>7.3g}" if l_tr else f"{'-':>7}"
