"""Seed spread: do the book's comparisons between models survive a second training seed?

Claims 14 and 15 (Table 3 of Chi et al., ACL 2023) compare perplexities of different
schemes, and Table 1's failing side is read on r(16 L_tr) of single models. This script
trains the same models from a second seed (the book's preset trains seed 0), through the
run store and the book's parallel workers, and reports for each seed

* claims 14 and 15, checked by the book's own code on each seed's Table 3;
* for every Table 3 model, ppl(L_tr) and ppl(16 L_tr) at both seeds;
* for the failing side of Table 1 (the flattest slopes of both ALiBi sweeps, the widest
  window), r(16 L_tr) with its paired 95% interval at both seeds.

Usage (nothing else running on the machine; models are cached, a rerun only reads):
  python bench/seeds.py run [--scale tiny] [--seeds 0,1] [--workers 2]
  python bench/seeds.py report          # the table in bench/README.md from bench/seeds.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT_JSON = HERE / "seeds.json"
README = HERE / "README.md"
START, END = "<!-- seeds-table:start -->", "<!-- seeds-table:end -->"


def failing_side(sc) -> list[tuple[str, str, dict]]:
    """(label, pos, settings) of Table 1's failing side at this scale."""
    from rflens.experiments import tables as ex

    out = []
    for family, fam in ex.FAMILIES.items():
        values = getattr(sc.sweeps, family)
        v = max(values)  # the flattest slopes (largest Delta, largest shared h), the widest window
        out.append((ex.family_label(family, v, sc.train.l_tr), fam.pos, {fam.setting: v}))
    return out


def cmd_run(args) -> int:
    from rflens.claims import statements, verdicts
    from rflens.experiments import tables as ex
    from rflens.measure import columns
    from rflens.publish import parallel
    from rflens.setup import presets

    sc = presets.get(args.scale)
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.time()
    items = []
    for seed in seeds:
        over = {} if seed == sc.train.seed else {"seed": seed}
        items += [{"pos": s.pos, "corpus": s.corpus, "overrides": s.settings} for s in ex.table3_models(sc, seed=seed)]
        items += [{"pos": pos, "corpus": "prose", "overrides": {**settings, **over}}
                  for _, pos, settings in failing_side(sc)]
    done = parallel.run_items(sc.name, items, workers=args.workers, desc="seeds")
    print(f"{sum(d['trained'] for d in done)} model(s) trained in {time.time() - t0:.0f} s")

    from rflens.store.runs import get_run

    result = {"scale": sc.name, "seeds": seeds, "table3": [], "claims": {}, "table1": [],
              "criteria": {str(cid): statements.BY_ID[cid].criterion for cid in (14, 15)}}
    for seed in seeds:
        t3 = ex.table3(sc, seed=seed, progress=False, train=False)
        for c in verdicts.check({"table3": t3, "corpus": "prose"}, [14, 15]):
            result["claims"].setdefault(str(c["id"]), {})[str(seed)] = {"result": c["result"], "measured": c["measured"]}
        top = sc.train.l_tr * max(sc.eval.length_mults)
        for _, row in t3.iterrows():
            result["table3"].append({"seed": seed, "corpus": row["corpus"], "pos": row["pos"], "label": row["label"],
                                     "ppl_l_tr": float(row[f"ppl@{sc.train.l_tr}"]), "ppl_top": float(row[f"ppl@{top}"])})
        over = {} if seed == sc.train.seed else {"seed": seed}
        for label, pos, settings in failing_side(sc):
            run = get_run(sc, pos, "prose", {**settings, **over}, train=False, progress=False)
            row = {}
            columns.add_ppl_columns(row, ex.measure_ppl(run), run.train_cfg.l_tr)
            result["table1"].append({"seed": seed, "label": label, "r_top": row[f"r@{top}"],
                                     "r_lo": row[f"r_lo@{top}"], "r_hi": row[f"r_hi@{top}"]})
    from rflens.storage import write_json

    write_json(OUT_JSON, result)
    return cmd_report(args)


def fmt(result: dict) -> str:
    seeds = result["seeds"]
    lines = [f"Scale `{result['scale']}`, seeds {', '.join(map(str, seeds))} (the book trains seed {seeds[0]}).", "",
             "| claim | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|---|" + "---|" * len(seeds)]
    for cid, by_seed in result["claims"].items():
        lines.append(f"| {cid} | " + " | ".join(f"{by_seed[str(s)]['result'].upper()}: {by_seed[str(s)]['measured']}"
                                               for s in seeds) + " |")
    lines += ["", "| Table 1 failing side | " + " | ".join(f"r(16 L_tr), seed {s} [95% CI]" for s in seeds) + " |",
              "|---|" + "---|" * len(seeds)]
    for label in dict.fromkeys(r["label"] for r in result["table1"]):
        cells = []
        for s in seeds:
            r = next(x for x in result["table1"] if x["label"] == label and x["seed"] == s)
            cells.append(f"{r['r_top']:.3f} [{r['r_lo']:.3f}, {r['r_hi']:.3f}]")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "| corpus | scheme | " + " | ".join(f"ppl(L_tr) / ppl(16 L_tr), seed {s}" for s in seeds)
              + " | largest relative spread |", "|---|---|" + "---|" * (len(seeds) + 1)]
    keys = list(dict.fromkeys((r["corpus"], r["label"]) for r in result["table3"]))
    for corpus, label in keys:
        rows = [next(x for x in result["table3"] if x["corpus"] == corpus and x["label"] == label and x["seed"] == s)
                for s in seeds]
        spread = max(max(r[k] for r in rows) / min(r[k] for r in rows) - 1 for k in ("ppl_l_tr", "ppl_top"))
        lines.append(f"| {corpus} | {label} | " + " | ".join(f"{r['ppl_l_tr']:.1f} / {r['ppl_top']:.1f}" for r in rows)
                     + f" | {spread:.1%} |")
    return "\n".join(lines)


def cmd_report(args) -> int:
    from rflens.storage import atomic_write, read_json

    text = fmt(read_json(OUT_JSON))
    print(text)
    readme = README.read_text()
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        _, tail = rest.split(END, 1)
        with atomic_write(README, "w") as f:
            f.write(head + START + "\n" + text + "\n" + END + tail)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--scale", default="tiny")
    r.add_argument("--seeds", default="0,1")
    r.add_argument("--workers", type=int, default=2)
    sub.add_parser("report")
    args = p.parse_args()
    return {"run": cmd_run, "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
