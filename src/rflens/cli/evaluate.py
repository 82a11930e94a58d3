"""``python -m rflens evaluate``: perplexity of a stored model (or, with ``--hf``, of a
Hugging Face causal LM) at several lengths."""

from __future__ import annotations

from rflens.cli.common import check_hf_flags, hf_settings, parse_lengths, print_hf_result, print_result, select_run
from rflens.errors import UserError
from rflens.measure.perplexity import perplexity, segment_notes, unit_notes


def run(args) -> int:
    check_hf_flags(args)
    if args.hf is not None:
        return run_hf(args)
    model_run, ev = select_run(args)
    # --protocol wins over --set protocol=..., which wins over the preset
    result = perplexity(model_run, protocol=args.protocol, lengths=parse_lengths(args.lengths), n=args.n,
                        progress=not args.quiet, eval_cfg=ev)
    print_result(model_run, result, args.json, format_table(result),
                 f"{result['ci']}; {result['seconds']:.1f} s to compute")
    return 0


def run_hf(args) -> int:
    from rflens.hf import hf_perplexity

    ev, data_cfg = hf_settings(args)
    protocol = args.protocol or ev.protocol
    if protocol != "last_token":
        raise UserError(f"--hf measures the last-token protocol only, not {protocol}: drop --protocol")
    result = hf_perplexity(args.hf, text=args.text, corpus=args.corpus, lengths=parse_lengths(args.lengths),
                           n=args.n, revision=args.revision, eval_cfg=ev, data_cfg=data_cfg, progress=not args.quiet)
    print_hf_result(result, args.json, format_table(result), result["ci"])
    return 0


def format_table(result: dict) -> str:
    l_tr = result["l_tr"]  # None: a Hugging Face model whose config names no position count
    head = f"{'L_ex':>7} {'L_ex/L_tr':>9} {'ppl':>10} {'95% CI':>21} {'tokens':>8}"
    n = result["n"] if result["n"] is not None else "the evaluation region"
    if result.get("segments_distinct", n) != n:
        n = f"{n} ({result['segments_distinct']} distinct)"
    lines = [f"protocol: {result['protocol']}   N = {n}   L_tr = {'unknown' if l_tr is None else l_tr}", head,
             "-" * len(head)]
    for i, length in enumerate(result["lengths"]):
        ci = f"[{result['ci_low'][i]:.2f}, {result['ci_high'][i]:.2f}]"
        ratio = f"{length / l_tr:>9.3g}" if l_tr else f"{'-':>9}"
        lines.append(f"{length:>7} {ratio} {result['ppl'][i]:>10.2f} {ci:>21} {result['tokens'][i]:>8}")
    lines += [f"note: {x}" for x in segment_notes(result) + unit_notes(result)]
    return "\n".join(lines)
