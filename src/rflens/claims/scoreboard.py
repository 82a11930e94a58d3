"""The claims scoreboard: the verdicts of :mod:`rflens.claims.verdicts` on a scale's results,
stored in the run store (``scoreboard-<scale>.json``), and shown as a table, one column per
scale, or plain text for the terminal.

Each row carries the paper's sentence the claim tests, how many intervals its verdict reads
(all widened to hold together with 95% probability) and, for a claim whose criterion was
reworded, the verdict under the earlier criterion (``legacy``): :func:`changes` sets the two
side by side."""

from __future__ import annotations

import json
import math
import textwrap
import time
from pathlib import Path

import pandas as pd

from rflens import storage
from rflens.claims import statements, verdicts
from rflens.claims.gather import gather
from rflens.errors import UserError
from rflens.setup.presets import DEFAULT_SCALE
from rflens.setup import presets


def board_path(scale: str, corpus: str = "prose") -> Path:
    root = storage.runs_dir()
    return root / (f"scoreboard-{scale}.json" if corpus == "prose" else f"scoreboard-{scale}-{corpus}.json")


def jsonable(o):
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def scoreboard(scale: str = DEFAULT_SCALE, corpus: str = "prose", compute: bool = True, *, progress: bool = True,
               results: dict | None = None) -> list[dict]:
    """Check all sixteen claims at ``scale`` (at every seed of its deciding models:
    :func:`rflens.claims.verdicts.check_seeds`) and store the board in the run store
    (``runs/scoreboard-<scale>.json``). ``compute`` trains and measures what is missing;
    without it, only models already in the run store are used."""
    if results is None:  # at every seed the preset trains its deciding models from
        board = verdicts.check_seeds(scale, lambda: gather(scale, corpus, compute=compute, progress=progress))
    else:
        board = verdicts.check(results)
    path = board_path(scale, corpus)
    path.parent.mkdir(parents=True, exist_ok=True)
    storage.write_json(path, {
        "scale": scale, "corpus": corpus, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "summary": summary(board), "summary_earlier": summary(earlier(board)), "claims": board}, default=jsonable)
    return board


def load_scoreboard(scale: str = DEFAULT_SCALE, corpus: str = "prose") -> list[dict]:
    path = board_path(scale, corpus)
    if not path.exists():
        raise UserError(f"no scoreboard for scale {scale!r} yet: run `python -m rflens claims --scale {scale}`")
    return json.loads(path.read_text())["claims"]


def summary(board: list[dict], evidence: str | None = None) -> dict:
    """How many claims of ``board`` have each result; with ``evidence`` (``statements.TRAINED``
    or ``statements.CONSTRUCTION``), only the claims that rest on it."""
    kept = [c for c in board if evidence is None or statements.BY_ID[int(c["id"])].evidence == evidence]
    return {k: sum(1 for c in kept if c["result"] == k) for k in verdicts.RESULTS}


def sentences() -> pd.DataFrame:
    """One row a claim: the paper's sentence it tests, the criterion that reads it, and
    whether the verdict rests on trained models or holds by construction."""
    return pd.DataFrame({"the paper": [math_html(c.sentence) for c in statements.CLAIMS],
                         "criterion": [c.criterion for c in statements.CLAIMS],
                         "rests on": [c.evidence for c in statements.CLAIMS]},
                        index=pd.Index([c.id for c in statements.CLAIMS], name="claim"))


def earlier(board: list[dict]) -> list[dict]:
    """The board as the earlier criteria decided it: each reworded claim's legacy verdict, the
    others' own."""
    return [{**c, **c["legacy"]} if c.get("legacy") else c for c in board]


def changes(boards: dict[str, list[dict]]) -> pd.DataFrame:
    """One row a claim: the paper's sentence, the criterion now and before, and at each scale
    of ``boards`` ({scale: board}) the verdict under the earlier criterion beside the one now
    ("–" where the criterion did not change)."""
    ids = [c["id"] for c in next(iter(boards.values()))]
    df = pd.DataFrame({"the paper": [math_html(statements.BY_ID[int(i)].sentence) for i in ids],
                       "criterion now": [statements.BY_ID[int(i)].criterion for i in ids],
                       "criterion before": [statements.BY_ID[int(i)].legacy_criterion or "(unchanged)" for i in ids]},
                      index=pd.Index(ids, name="claim"))
    for name, board in boards.items():
        df[f"earlier ({name})"] = [c["legacy"]["result"] if c.get("legacy") else "–" for c in board]
        df[f"now ({name})"] = [c["result"] for c in board]
        df[f"intervals read ({name})"] = [c.get("comparisons") if c.get("comparisons") is not None else "–"
                                          for c in board]
    return df


def frame(board: list[dict]) -> pd.DataFrame:
    """The board as a DataFrame (chapter 9): each claim's result, what it rests on, the
    claim, its criterion, what this scale measured and what the paper reports."""
    df = pd.DataFrame(board)[["id", "result", "statement", "criterion", "measured"]]
    df.insert(2, "rests on", [statements.BY_ID[int(i)].evidence for i in df["id"]])
    df["the paper reports"] = [statements.BY_ID[int(i)].paper for i in df["id"]]
    df["intervals read"] = [c.get("comparisons") if c.get("comparisons") is not None else "–" for c in board]
    df["earlier criterion's result"] = [c["legacy"]["result"] if c.get("legacy") else "–" for c in board]
    return df.rename(columns={"statement": "claim"}).set_index("id")


def shipped_boards(exclude: str | None = None, corpus: str = "prose") -> dict[str, list[dict]]:
    """{scale: board} of every preset whose models are shipped (rflens.experiments.from_bundle), checked on
    what its bundle holds; nothing is trained, a claim whose models are not shipped yet is
    "not run". A run trained further is read with its run, a ladder that only times failure
    (``boards`` False) by rflens.longrun.clock."""
    from rflens.setup.presets import get, NAMES

    return {name: shipped_board(name, corpus) for name in NAMES  # an extension is read with its run,
            if name != exclude and get(name).shipped and not get(name).extends and get(name).boards}  # a ladder alone


def shipped_board(scale: str, corpus: str = "prose") -> list[dict]:
    """:func:`rflens.claims.verdicts.check_shipped`, cached in the run store (:func:`_cached`)."""
    board = _cached("board", scale, corpus, lambda: {"board": verdicts.check_shipped(scale, corpus)})["board"]
    for row in board:  # JSON names a seed by a string
        if "seeds" in row:
            row["seeds"] = {int(seed): result for seed, result in row["seeds"].items()}
    return board


def _cached(kind: str, scale: str, corpus: str, compute) -> dict:
    """``compute()`` (a JSON-able dict read from the shipped bundles, nothing trained), cached
    in the run store (``boards/``) and keyed by all it reads: the preset, the package's code,
    every bundle's and every corpus's manifest and the levels in force. Read inside
    :func:`rflens.store.shipped.at_size` or ``at_seed``, it is computed, never cached."""
    from rflens.measure.criterion import breaks_level, tol_level
    from rflens.setup.presets import get
    from rflens.store.shipped import served_seed, served_size

    if served_size() is not None or served_seed() != 0:
        return compute()
    key = {"scale": scale, "preset": repr(get(scale)), "corpus": corpus, "tol": tol_level(), "breaks": breaks_level(),
           "code": storage.files_digest(Path(verdicts.__file__).parents[1].rglob("*.py")),
           "bundles": storage.files_digest(storage.reference_dir().glob("*/manifest.json")),
           "corpora": storage.files_digest(storage.data_dir().glob("*/*/manifest.json"))}
    path = storage.cache_entry(storage.runs_dir() / "boards", f"{kind}-{scale}-{corpus}", key)
    return storage.cached_file(path, kind, key, compute)[0]


def by_size(scale: str = "long", corpus: str = "prose") -> pd.DataFrame:
    """The board of a shipped preset at each measured size of its models (each a finished
    run of that many tokens, :func:`rflens.store.shipped.at_size`; sizes from
    :func:`rflens.longrun.plan.sizes`): one row a claim, one column a size, the result in each
    cell. Nothing is trained; a claim whose models are not shipped is "not run" at every size.
    Cached in the run store (:func:`_cached`)."""
    from rflens.longrun.plan import sizes
    from rflens.store.shipped import at_size

    def compute() -> dict:  # a list of sizes: JSON would sort a dict's keys as text
        columns = []
        for tokens in sizes(presets.get(scale)):
            with at_size(tokens):
                columns.append([tokens, [c["result"] for c in verdicts.check_shipped(scale, corpus)]])
        return {"sizes": columns}

    columns = dict((tokens, results) for tokens, results in _cached("by-size", scale, corpus, compute)["sizes"])
    df = pd.DataFrame(columns, index=pd.Index([c.id for c in statements.CLAIMS], name="claim"))
    df.columns.name = "training tokens"
    return df


THESIS_CLAIMS = tuple(range(1, 9))  # Sections 3-5: the sweeps, the receptive fields, Table 2 and Figure 7


def at_paper_ratio(runs: tuple[str, ...] | None = None, corpus: str = "prose") -> pd.DataFrame:
    """The claims each shipped run decides (its preset's ``decides``; the thesis, claims 1 to 8
    of Sections 3-5, for a run that names none) read at the measured size nearest the paper's
    tokens per parameter (:func:`rflens.longrun.clock.paper_tokens_per_parameter`, nearest
    on a log scale) beside the same claims at the run's full budget: one row a run and claim.
    ``runs``: the shipped runs with boards (default: every one, ladders that only time failure
    left out). Nothing is trained; a size is read as the finished run of that many tokens
    (:func:`rflens.store.shipped.at_size`)."""
    from rflens.longrun.clock import parameters, paper_tokens_per_parameter
    from rflens.longrun.plan import sizes
    from rflens.store import bundle
    from rflens.store.shipped import at_size

    ratio = paper_tokens_per_parameter()
    if runs is None:
        runs = tuple(shipped_boards(corpus=corpus))
    rows = []
    for name in runs:
        run = presets.long_run(name)
        if not bundle.entries(name):
            continue
        n = parameters(run)
        near = min(sizes(run), key=lambda t: abs(math.log(t / n / ratio)))
        full = {c["id"]: c["result"] for c in shipped_board(name, corpus)}
        with at_size(near):
            there = {c["id"]: c["result"] for c in verdicts.check_shipped(name, corpus)}
        for cid in run.decides or THESIS_CLAIMS:
            rows.append({"run": name, "layers": run.model.n_layer, "d": run.model.d_model, "claim": cid,
                         "tokens there": near, "tokens per parameter there": round(near / n, 1),
                         "at the paper's ratio": there.get(cid, "not run"),
                         "tokens per parameter at the budget": round(max(sizes(run)) / n, 1),
                         "at the full budget": full.get(cid, "not run")})
    return pd.DataFrame(rows)


def sensitivity(scale: str, level: str, corpus: str = "prose") -> pd.DataFrame:
    """:func:`rflens.claims.verdicts.sensitivity` at its stated range; for a shipped preset (its
    bundle read, nothing trained) cached in the run store (:func:`_cached`)."""
    from rflens.setup.presets import get

    if level not in verdicts.SENSITIVITY or not get(scale).shipped:
        return verdicts.sensitivity(scale, level, corpus)  # a one-line error, or the run store's models
    table = _cached(f"sensitivity-{level}", scale, corpus,
                    lambda: verdicts.sensitivity(scale, level, corpus).to_dict(orient="split"))
    return pd.DataFrame(table["data"], index=pd.Index(table["index"], name="claim"), columns=table["columns"])


def by_scale(boards: dict[str, list[dict]]) -> pd.DataFrame:
    """One row a claim, the result at each scale, then what was measured at each."""
    scales = list(boards)
    first = boards[scales[0]]
    df = pd.DataFrame({"claim": [c["statement"] for c in first]}, index=pd.Index([c["id"] for c in first], name="id"))
    for name in scales:
        df[name] = [c["result"] for c in boards[name]]
    for name in scales:
        df[f"measured ({name})"] = [c["measured"] for c in boards[name]]
    return df


def compact(boards: dict[str, list[dict]]) -> pd.DataFrame:
    """The board that fits on a screen: one row a claim in a few words (the paper's values),
    its result at each scale of ``boards`` ({scale: board}), and what the paper reports."""
    ids = [int(c["id"]) for c in next(iter(boards.values()))]
    df = pd.DataFrame({"claim": [statements.BY_ID[i].short for i in ids]}, index=pd.Index(ids, name="#"))
    for name, board in boards.items():
        df[name] = [c["result"] for c in board]
    df["the paper"] = [statements.BY_ID[i].paper for i in ids]
    return df


def math_html(text: str) -> str:
    """Inline TeX of a table cell (``$w=100$``) in the delimiters MathJax typesets in the
    book's HTML tables (``\\(w=100\\)``)."""
    import re

    return re.sub(r"\$([^$]+)\$", r"\\(\1\\)", text)


def render_scoreboard(scale: str = DEFAULT_SCALE, corpus: str = "prose", board: list[dict] | None = None,
                      width: int = 110) -> str:
    """The board as a plain-text table for the terminal."""
    board = load_scoreboard(scale, corpus) if board is None else board
    lines = [f"Claims scoreboard, scale {scale}, corpus {corpus} (r(L) = ppl(L)/ppl(L_tr), last-token protocol)",
             f"{'#':>3}  {'result':<8} claim / measured", "-" * width]
    indent = " " * 14
    for c in board:
        lines.append(f"{c['id']:>3}  {c['result'].upper():<8} " + textwrap.shorten(c["statement"], width - 14))
        for part in textwrap.wrap(f"criterion: {c['criterion']}", width - 14):
            lines.append(indent + part)
        for part in textwrap.wrap(f"measured: {c['measured']}", width - 14):
            lines.append(indent + part)
        if c.get("comparisons"):
            lines.append(indent + f"intervals read: {c['comparisons']}"
                         + (" (widened to hold together at 95%)" if c["comparisons"] > 1 else ""))
        if c.get("legacy"):
            for part in textwrap.wrap(f"earlier criterion: {c['legacy']['result']} ({c['legacy']['criterion']})",
                                      width - 14):
                lines.append(indent + part)
    s, t = summary(board), summary(board, statements.TRAINED)
    lines += ["-" * width, f"passed {s['pass']}, failed {s['fail']}, not decided {s['not decided']}, not run {s['not run']} "
                              f"(of {len(board)}); of the {sum(t.values())} that rest on trained models: passed "
                              f"{t['pass']}, failed {t['fail']}, not decided {t['not decided']}, not run {t['not run']}"]
    return "\n".join(lines)



def by_bootstrap(scale: str = DEFAULT_SCALE, corpus: str = "prose") -> dict[str, dict]:
    """The experiment tables the claims read (:func:`rflens.claims.gather.gather`, nothing trained),
    gathered twice: {"segments": ..., "documents": ...}, their paired intervals resampling
    each segment on its own or whole documents of the test split
    (:func:`rflens.measure.intervals.bootstrap_over`)."""
    import contextlib
    import io

    from rflens.measure.intervals import bootstrap_over

    out = {}
    for unit in ("segments", "documents"):
        # what is not run is said once, by the first pass
        quiet = contextlib.redirect_stderr(io.StringIO()) if out else contextlib.nullcontext()
        with bootstrap_over(unit), quiet:
            out[unit] = gather(scale, corpus, compute=False, progress=False)
    return out


def verdicts_by_bootstrap(gathered: dict[str, dict]) -> pd.DataFrame:
    """One row a claim: its verdict when the paired intervals resample segments and when they
    resample documents (``gathered``: :func:`by_bootstrap`), and whether clustering changed it."""
    boards = {unit: verdicts.check(res) for unit, res in gathered.items()}
    df = pd.DataFrame({"claim": [c["statement"] for c in boards["segments"]],
                       "over segments": [c["result"] for c in boards["segments"]],
                       "over documents": [c["result"] for c in boards["documents"]]},
                      index=pd.Index([c["id"] for c in boards["segments"]], name="id"))
    df["changed"] = df["over segments"] != df["over documents"]
    return df


def horizon_intervals(gathered: dict[str, dict], table: str = "table1") -> pd.DataFrame:
    """One row a model of ``table``: r(16 L_tr) with its paired interval over segments and
    over documents (``gathered``: :func:`by_bootstrap`), and how many documents hold the
    scored tokens. Empty when the table was not run."""
    from rflens.measure.criterion import EXTRAPOLATION_HORIZON

    seg, doc = gathered["segments"].get(table), gathered["documents"].get(table)
    if not isinstance(seg, pd.DataFrame) or not isinstance(doc, pd.DataFrame) or seg.empty:
        return pd.DataFrame()
    rows = []
    for (_, s), (_, d) in zip(seg.iterrows(), doc.iterrows()):
        L = EXTRAPOLATION_HORIZON * int(s["l_tr"])
        if f"r_lo@{L}" not in s or _nan(s.get(f"r_lo@{L}")):
            continue
        rows.append({"label": s["label"], "r": s[f"r@{L}"], "segments low": s[f"r_lo@{L}"],
                     "segments high": s[f"r_hi@{L}"], "documents low": d[f"r_lo@{L}"],
                     "documents high": d[f"r_hi@{L}"], "n_docs": d.get("n_docs"),
                     "width ratio": _ratio(d[f"r_hi@{L}"] - d[f"r_lo@{L}"], s[f"r_hi@{L}"] - s[f"r_lo@{L}"])})
    return pd.DataFrame(rows).set_index("label") if rows else pd.DataFrame()


def docs_summary(intervals: pd.DataFrame) -> str:
    """A sentence on how many documents the intervals of :func:`horizon_intervals` rest on,
    with the warning of :func:`rflens.measure.intervals.docs_note` when they are too few."""
    from rflens.measure.intervals import docs_note

    if intervals.empty or "n_docs" not in intervals or intervals["n_docs"].isna().all():
        return "No paired interval here records its documents."
    k = int(intervals["n_docs"].min())
    note = docs_note(k)
    return (f"The scored tokens come from {k} documents of the test split." if not note else
            note[0].upper() + note[1:] + ".")


def _nan(v) -> bool:
    return v is None or v != v


def _ratio(a, b) -> float:
    """a / b, NaN where b is 0 (an interval of no width: a model whose r does not move)."""
    return float(a) / float(b) if float(b) != 0 else float("nan")
