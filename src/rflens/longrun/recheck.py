"""Is a shipped long-run model reproduced? It is trained again from scratch and compared with the bundle.

On a machine that computes as the bundle's did (a CPU with the same torch, vector unit,
instruction-set extensions and thread count: :func:`like_machine`) training is
deterministic, so the retrained model's per-segment NLLs must equal the shipped ones to the
bit. Anywhere else fp32 rounds differently, and over tens of thousands of steps the two runs
drift apart (in the one model compared across two machines, single segments moved by up to
0.23 nats while the mean NLL at every length agreed to 0.002). There the question is the one
the book asks of a model (Chi et al., ACL 2023: does its perplexity stay flat beyond L_tr?), and
a model is *reproduced* when, at every measured size,

- it gets the same verdict as the shipped model (:func:`verdict`): it extrapolates
  (:func:`rflens.measure.criterion.extrapolates` on the upper ends of the paired intervals), it breaks
  (the lower end of r(16 L_tr) is at least :data:`rflens.measure.criterion.BREAKS`), or neither; and
- the mean per-segment NLL difference (retrained - shipped) at L_tr and at 16 L_tr is
  within what two training seeds of one model give (:func:`seed_spread`), or within
  :data:`FALLBACK_BOUND` while the bundle holds no pair of seeds.

What such a check cannot show: that this code gives the shipped numbers themselves (only
the bitwise check does), nor a change of the code smaller than the seed-to-seed spread. A
verdict that sits on its threshold can flip with the rounding alone; it is then reported as
not reproduced, since the book's sentence about that model would change.
"""

from __future__ import annotations

import contextlib
import itertools
import tempfile
from pathlib import Path

import numpy as np

from rflens import storage
from rflens.errors import UserError
from rflens.setup.presets import LongRun
from rflens.store import bundle
from rflens.training import machine

# The bound on |mean NLL difference| while the bundle holds no pair of seeds, in nats. One
# model has been compared across two machines (ALiBi with the flattest slopes at 33.6M tokens:
# the shipped run, and a retraining on an AMD AVX-512 core): its mean per-segment NLL moved by
# at most 0.0019 nats at any length, each paired 95% interval (half-widths 0.002-0.003 nats)
# holding 0; at the two lengths the check reads the intervals were +0.0006 [-0.0015, +0.0027]
# (L_tr) and -0.0019 [-0.0047, +0.0008] (16 L_tr). So 0.005 nats bounds what that machine
# change did even at the far ends of its intervals; it is 0.5% in perplexity, a twentieth of
# the ln 1.10 that "extrapolates" allows. Two seeds differ in their initialisation and batch
# order, not only in their rounding, so their spread, once shipped, is expected to be wider.
FALLBACK_BOUND = 0.005


# ----------------------------------------------------------------------------- the machine

def like_machine(result: dict) -> bool:
    """Whether this process computes as the one that trained ``result``: on a CPU, the same
    torch, vector unit and instruction-set extensions (:func:`rflens.training.machine.same_machine`)
    and the same number of threads. Only then is the retrained model bitwise the shipped one."""
    import torch

    return (machine.device().type == "cpu" and machine.same_machine(result)
            and result.get("threads") == torch.get_num_threads())


def _here() -> dict:
    """This process's machine, in the fields a shipped result records."""
    import torch

    return {"device": machine.device_name(machine.device()), "cpu": machine.cpu_capability(),
            "cpu_features": machine.cpu_features(), "torch": torch.__version__, "threads": torch.get_num_threads()}


def _machine_text(result: dict) -> str:
    """'cpu AVX512, torch 2.13.0+cpu, 1 thread(s)' of a result's machine."""
    where = result.get("device") or "cpu"
    if where == "cpu":
        where = f"cpu {result.get('cpu') or '(vector unit not recorded)'}"
    return f"{where}, torch {result.get('torch', '?')}, {result.get('threads', '?')} thread(s)"


def machines(result: dict) -> str:
    """One line: the machine that trained ``result`` and this one, with the instruction-set
    extensions only one of them has."""
    here = _here()
    there, mine = set((result.get("cpu_features") or "").split()), set(here["cpu_features"].split())
    text = f"shipped on {_machine_text(result)}; here {_machine_text(here)}"
    if not result.get("cpu_features"):
        return text + "; the bundle did not record its extensions"
    if there != mine:
        text += (f"; extensions only there: {' '.join(sorted(there - mine)) or 'none'}, "
                 f"only here: {' '.join(sorted(mine - there)) or 'none'}")
    return text


def _tokens(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n / 1e3:.3g}k"


# ----------------------------------------------------------------------------- the numbers compared

def _horizon(lengths: list[int], l_tr: int) -> int:
    """The index of 16 L_tr (the longest length within the horizon) in ``lengths``."""
    from rflens.measure.criterion import EXTRAPOLATION_HORIZON

    return lengths.index(max(L for L in lengths if L <= EXTRAPOLATION_HORIZON * l_tr))


def verdict(lengths: list[int], ppl: list[float], r_low: list[float], r_high: list[float], l_tr: int) -> str:
    """What the book concludes about a model at one size: "extrapolates" (the upper end of
    every r(L), L_tr < L <= 16 L_tr, within 1.10), "breaks" (the lower end of r(16 L_tr) at
    least 2), or "neither"."""
    from rflens.measure.criterion import BREAKS, extrapolates

    if extrapolates(dict(zip(lengths, ppl)), l_tr, upper=dict(zip(lengths, r_high))):
        return "extrapolates"
    return "breaks" if r_low[_horizon(lengths, l_tr)] >= BREAKS else "neither"


def mean_difference(diff: np.ndarray, docs=None, seed: int = 0) -> tuple[float, float, float]:
    """The mean of the per-segment differences ``diff`` (N,) with its 95% percentile
    bootstrap interval, resampling whole documents when ``docs`` (the document of each
    segment) is known, by the book's rule for few documents
    (:func:`rflens.measure.intervals.paired_interval`: below MIN_DOCS, the union with the segment
    interval)."""
    from rflens.measure.intervals import bootstrap_indices, CI_LEVEL, clusters_of, MIN_DOCS, n_docs

    diff = np.asarray(diff, dtype=np.float64)
    q = [(1 - CI_LEVEL) / 2, (1 + CI_LEVEL) / 2]

    def interval(clusters) -> np.ndarray:
        draws = bootstrap_indices(diff.size, seed, clusters=clusters)
        return np.quantile(np.array([diff[i].mean() for i in draws]), q)

    clusters = clusters_of(docs)
    lo, hi = interval(clusters)
    if clusters is not None and n_docs(clusters) < MIN_DOCS:
        slo, shi = interval(None)
        lo, hi = min(lo, slo), max(hi, shi)
    return float(diff.mean()), float(lo), float(hi)


def _side(result: dict, point: dict, docs) -> dict:
    """One model at one size as the check reads it, computed from its NLLs and gradients by
    the code that summarises every point (:func:`rflens.longrun.emergence.summary`), so that both
    sides are read alike whatever code shipped the bundle."""
    from rflens.longrun.emergence import summary

    l_tr, lengths = result["train"]["l_tr"], point["lengths"]
    s = summary(point, l_tr, result["eval"]["erf_threshold"], docs)
    top = _horizon(lengths, l_tr)
    return {"r": s["r"][top], "r_low": s["r_low"][top], "r_high": s["r_high"][top],
            "verdict": verdict(lengths, s["ppl"], s["r_low"], s["r_high"], l_tr), "erf": s["erf"],
            "ppl_l_tr": s["ppl"][lengths.index(l_tr)]}


def seed_spread(run: LongRun) -> dict:
    """What two training seeds of one model give: for every size that a pair of shipped,
    complete seeds of one model has measured, the largest |mean per-segment NLL difference|
    between two seeds at L_tr and at 16 L_tr, over every such pair.

    Returns {"pairs": [(name, name), ...], "sizes": {tokens: (at L_tr, at 16 L_tr)}}; no
    pairs and no sizes while the bundle holds no two seeds of a model."""
    from rflens.longrun import plan

    complete = bundle.complete(run.name)
    groups: dict[str, list[str]] = {}
    for spec in plan.models(run):
        if spec.name in complete:
            base = plan.LongModel(spec.pos, tuple(o for o in spec.overrides if o[0] != "seed"), spec.corpus)
            groups.setdefault(base.name, []).append(spec.name)
    pairs = [pair for names in groups.values() for pair in itertools.combinations(names, 2)]
    sizes: dict[int, tuple[float, float]] = {}
    for a, b in pairs:
        ra, rb = bundle.load(a, run.name), bundle.load(b, run.name)
        theirs = {p["tokens"]: p for p in rb["points"]}
        l_tr = ra["train"]["l_tr"]
        for p in ra["points"]:
            q = theirs.get(p["tokens"])
            if q is None:
                continue
            rows = [p["lengths"].index(l_tr), _horizon(p["lengths"], l_tr)]
            spread = tuple(float(abs(np.mean(p["nll"][i] - q["nll"][i]))) for i in rows)
            old = sizes.get(p["tokens"], (0.0, 0.0))
            sizes[p["tokens"]] = (max(old[0], spread[0]), max(old[1], spread[1]))
    return {"pairs": pairs, "sizes": sizes}


def compare(shipped: dict, again: dict, *, like: bool, spread: dict | None = None) -> dict:
    """The retrained model ``again`` against the ``shipped`` one (both results with each
    point's NLLs attached, as :func:`rflens.store.bundle.load` gives them), one entry a measured
    size of the shipped model. ``like``: this machine computes as the bundle's
    (:func:`like_machine`), and the rule is then bitwise equality; ``spread``: the seeds'
    spread (:func:`seed_spread`), else :data:`FALLBACK_BOUND` bounds the NLL differences."""
    spread = spread or {"pairs": [], "sizes": {}}
    docs = shipped.get("segment_docs")  # the second run records them; the first does not
    seed = int(shipped["eval"]["seed"])
    theirs = {p["steps"]: p for p in again["points"]}
    why: list[str] = []
    for key, what in (("data_fingerprint", "corpus"), ("model", "model settings"), ("train", "training settings")):
        if shipped.get(key) != again.get(key):
            why.append(f"the {what} differ from the shipped model's")
    sizes, largest, bitwise = [], 0.0, True
    for p in shipped["points"]:
        q = theirs.get(p["steps"])
        if q is None or q["lengths"] != p["lengths"] or np.shape(q["nll"]) != np.shape(p["nll"]):
            why.append(f"the retrained model lacks the point at {p['steps']} steps")
            bitwise = False
            continue
        bitwise &= bool(np.array_equal(q["nll"], p["nll"]))
        largest = max(largest, float(np.abs(q["nll"] - p["nll"]).max()))
        l_tr = shipped["train"]["l_tr"]
        rows = [p["lengths"].index(l_tr), _horizon(p["lengths"], l_tr)]
        diffs = [mean_difference(q["nll"][i] - p["nll"][i], docs, seed) for i in rows]
        bound, source = (spread["sizes"][p["tokens"]], "seeds") if p["tokens"] in spread["sizes"] else (
            (FALLBACK_BOUND, FALLBACK_BOUND), "fallback")
        s, a = _side(shipped, p, docs), _side(again, q, docs)
        entry = {"tokens": p["tokens"], "steps": p["steps"], "shipped": s, "retrained": a,
                 "diff_l_tr": diffs[0], "diff_horizon": diffs[1], "bound": bound, "bound_from": source,
                 "same_verdict": s["verdict"] == a["verdict"],
                 "within": all(abs(d[0]) <= b for d, b in zip(diffs, bound))}
        sizes.append(entry)
        faults = [] if entry["same_verdict"] else [
            f"the verdict differs (shipped: {s['verdict']}, retrained: {a['verdict']})"]
        faults += [f"the mean NLL difference at {where} is {m:+.4f} nats, beyond the {source} bound of {b:.4f}"
                   for (m, _, _), b, where in zip(diffs, bound, ("L_tr", "16 L_tr")) if abs(m) > b]
        if faults:
            why.append(f"at {_tokens(p['tokens'])} tokens " + "; ".join(faults))
    if like:
        rule = "bitwise (a machine like the bundle's)"
        reproduced = bitwise and not why
        if not bitwise:
            why.insert(0, f"not bitwise on a machine like the bundle's: the largest per-segment NLL difference is "
                          f"{largest:.2e} nats")
    else:
        rule = "the verdicts and the NLL differences (another machine)"
        reproduced = not why
    from_seeds = {e["bound_from"] for e in sizes} == {"seeds"}
    if spread["pairs"]:
        names = ", ".join(f"{a} / {b}" for a, b in spread["pairs"])
        bound_text = (f"the largest |mean NLL difference| between two shipped seeds of one model at each size "
                      f"({len(spread['pairs'])} pair(s): {names})"
                      + ("" if from_seeds else f"; {FALLBACK_BOUND} nats (the fallback) at sizes no pair measured"))
    else:
        bound_text = (f"the fallback of {FALLBACK_BOUND} nats (the bundle holds no two seeds of a model yet; "
                      f"the largest mean difference one model showed between two machines was 0.0019)")
    return {"name": shipped["name"], "scale": shipped["scale"], "like_machine": like, "rule": rule,
            "machines": machines(shipped), "bitwise": bitwise, "max_abs_diff": largest,
            "bound": bound_text, "sizes": sizes, "reproduced": reproduced, "why": why}


def reproduced_elsewhere(shipped: Path, later: Path, run: LongRun) -> bool:
    """Whether the finished model in folder ``later`` reproduces the shipped one in ``shipped``
    by the check's rule (:func:`compare`) without being it to the bit: trained again on a
    machine unlike the bundle's (on a like one the rule is bitwise), the same verdicts at
    every size and NLL differences within the seeds' spread."""
    if not bundle.keeps_more(shipped, later):
        return False
    old = _load(Path(shipped))
    row = compare(old, _load(Path(later)), like=like_machine(old), spread=seed_spread(run))
    return row["reproduced"] and not row["bitwise"]


# ----------------------------------------------------------------------------- retraining

def keep_folder(path, scale: str | None = None) -> Path:
    """The folder ``--keep`` keeps the retrained bundles in, resolved; a one-line error for a
    folder inside the shipped bundles' (``reference/``), whose manifest would then vouch for
    a model nobody shipped, or for a path that is a file. With ``scale``, also for a
    ``DIR/<scale>/`` that holds files no check kept there (they would be overwritten or sealed
    into its manifest), and for a folder that cannot be written (before any training)."""
    if not str(path).strip():
        raise UserError("--keep needs a folder to keep the retrained models in, e.g. --keep checked "
                        "(an empty name would be the current folder)")
    path = Path(path).expanduser().resolve()
    for ref in storage.reference_dirs():
        if path == ref or ref in path.parents:
            raise UserError(f"--keep {path} is inside the shipped bundles' folder {ref}: keep the retrained models "
                            f"in a folder outside it")
    if path.exists() and not path.is_dir():
        raise UserError(f"--keep {path} is a file: give a folder (it is created if missing)")
    if scale is not None:
        _check_keep_target(path, scale)
    return path


def _load(path: Path) -> dict:
    """A retrained model's result with each point's NLLs attached, read from its folder."""
    result = bundle.read_result(path)
    nll = bundle.point_nlls(path)
    for point in result["points"]:
        point["nll"] = nll[point["steps"]]
    return result


@contextlib.contextmanager
def progressing(work: Path, what: str, deadline: float | None):
    """Around a sitting that trains from the state kept in ``work``: a sitting whose time runs
    out before it moved that state on (no step past it, no size measured: setting the sitting
    up, its data and model, took all the time given) is a one-line UserError saying so; "run
    the same command to resume" would stop at the same step again, every time. ``what``:
    the training, in the message ("the check of NAME", "NAME")."""
    from rflens.store.shipped import kept_in
    from rflens.training.trainer import OutOfTime

    before, measured = kept_in(work)
    try:
        yield
    except OutOfTime as stop:
        if deadline is None or stop.step > before or kept_in(work)[1] - measured:
            raise
        raise UserError(f"the sitting's time ran out before {what} trained past step {before:,}, where its kept state "
                        "stood: starting a sitting here (the data, the shipped models, the model) takes longer than "
                        "the time given, so the same command would stop there again; give --minutes more time (the "
                        "state is kept)") from None


def check(names: list[str], run: LongRun, *, progress: bool = True, deadline: float | None = None,
          keep=None) -> list[dict]:
    """Retrain the shipped models ``names`` from scratch and compare each with the bundle
    (:func:`compare`). The retrained bundles go to a temporary folder, or, with ``keep``,
    to ``keep/<run>/<name>/`` with their weights, to be studied. Returns one entry a model
    (``kept``: its folder, or None). Raises :class:`rflens.training.trainer.OutOfTime` (the state kept in
    the run store) when ``deadline`` passes first."""
    from rflens.longrun import emergence, plan

    folder = None if keep is None else keep_folder(keep, run.name)
    check_data(names, run, progress=progress)  # every model's data, before any of them trains
    spread = seed_spread(run)
    rows = []
    for name in names:
        shipped = bundle.load(name, run.name)
        spec = plan.named(name, run)
        work = bundle.emergence_state(run.name, name).with_name(f"{name}.check")  # a check's state (emergence.run)
        with progressing(work, f"the check of {name}", deadline):
            if folder is None:
                with tempfile.TemporaryDirectory(prefix="rflens-check-") as tmp:
                    again = _load(emergence.run(spec, run, progress=progress, keep_weights=False, root=Path(tmp),
                                                deadline=deadline))
                kept = None
            else:
                kept = emergence.run(spec, run, progress=progress, keep_weights=True, root=folder, deadline=deadline)
                again = _load(kept)
        rows.append(compare(shipped, again, like=like_machine(shipped), spread=spread) | {"kept": kept and str(kept)})
    return rows


def check_data(names: list[str], run: LongRun, *, progress: bool = True) -> None:
    """:class:`rflens.store.runs.OtherData` (one line: the model, both fingerprints and the
    command that rebuilds the corpus) when the corpus a shipped model of ``names`` was trained
    on is other data here than the bundle's: its retraining could never reproduce it, and
    would say so only at its end, hours later. Each corpus is built (as its training would)
    and compared before any model trains."""
    from rflens import data
    from rflens.longrun import plan
    from rflens.setup.settings import resolve
    from rflens.store import runs

    have = bundle.entries(run.name)
    for name in names:
        if name not in have:
            continue  # not shipped: bundle.load says so
        result = bundle.read_result(have[name])
        spec = plan.named(name, run)
        data_cfg = resolve(run, spec.pos, spec.corpus, spec.settings()).data
        corpus = data.prepare(data_cfg, progress=progress)
        if corpus.fingerprint != result["data_fingerprint"]:
            raise runs.other_data(run.name, name, data_cfg, result["data_fingerprint"], corpus)


# ----------------------------------------------------------------------------- as text

def render(row: dict) -> str:
    """One checked model as a compact text table: a line a measured size."""
    def r(side):
        return f"{side['r']:.3f} [{side['r_low']:.3f}, {side['r_high']:.3f}]"

    def d(m):
        return f"{m[0]:+.4f} [{m[1]:+.4f}, {m[2]:+.4f}]"

    ok = row["reproduced"]
    lines = [f"{'ok  ' if ok else 'FAIL'} {row['name']}: {'reproduced' if ok else 'not reproduced'}; rule: {row['rule']}",
             f"  {row['machines']}",
             f"  {'tokens':>7}  {'r(16 L_tr) shipped':<22}  {'retrained':<22}  {'verdict shipped / retrained':<27}  "
             f"{'ERF':>9}  {'ppl(L_tr)':>13}  {'dNLL at L_tr':<26}  {'dNLL at 16 L_tr':<26}  bound"]
    for e in row["sizes"]:
        s, a = e["shipped"], e["retrained"]
        verdicts, erfs = f"{s['verdict']} / {a['verdict']}", f"{s['erf']}/{a['erf']}"
        ppls = f"{s['ppl_l_tr']:.2f}/{a['ppl_l_tr']:.2f}"
        lines.append(f"  {_tokens(e['tokens']):>7}  {r(s):<22}  {r(a):<22}  {verdicts:<27}  {erfs:>9}  {ppls:>13}  "
                     f"{d(e['diff_l_tr']):<26}  {d(e['diff_horizon']):<26}  "
                     f"±{e['bound'][0]:.4f}, ±{e['bound'][1]:.4f}")
    lines.append("  dNLL: the mean per-segment NLL difference (retrained - shipped, nats) with its paired 95% interval; "
                 f"the largest at one segment: {row['max_abs_diff']:.2e}" + (" (bitwise equal)" if row["bitwise"] else ""))
    if not row["like_machine"]:
        lines.append(f"  bound on |dNLL|: {row['bound']}")
    lines += [f"  why: {w}" for w in row["why"][:5]]
    if len(row["why"]) > 5:
        lines.append(f"  ... and {len(row['why']) - 5} more")
    if row.get("kept"):
        lines.append(f"  kept in {row['kept']}")
    return "\n".join(lines)


def _check_keep_target(path: Path, scale: str) -> None:
    """UserError unless ``path/<scale>/`` is new, empty, or a bundle that earlier checks kept
    there (whole: its manifest vouches for every file), and unless it can be written."""
    import os

    top = bundle.bundle_dir(scale, path)
    for p in (top, *top.parents):  # a file where a folder is needed
        if p.exists():
            if not p.is_dir():
                raise UserError(f"--keep {path}: {p} is a file, where the kept bundle's folder is needed: give "
                                "another folder")
            break
    if top.is_dir() and any(top.iterdir()):
        try:
            bundle.check(scale, path)
            if not (top / bundle.MANIFEST).is_file():
                raise UserError("no manifest")
        except UserError:
            first = next(iter(sorted(p.name for p in top.iterdir())))
            raise UserError(f"--keep {path}: {top} holds files no check kept there (such as {first}), which the "
                            "retrained models would overwrite or be sealed with: give a new or empty folder") from None
    probe = top
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"--keep {path}: {probe} cannot be written: give a folder you can write")
