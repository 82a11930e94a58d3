"""The book's tables as files: CSV with where the numbers come from.

Every table a chapter shows is also written as CSV next to the executed notebook
(``_build/<scale>/notebooks/tables/<chapter>-table<k>.csv``) and linked below the table on
the chapter's page, when the chapter runs under ``reproduce`` (which names the folder and
the chapter in ``RFLENS_TABLES`` and ``RFLENS_CHAPTER``). :func:`export_store` writes the
same kind of files for everything in the run store (``python -m rflens runs --export DIR``).

A file starts with ``#`` lines: the scale (or, for rows read from a long run's bundle, marked
``attrs["run"]``, that run), the code version (:func:`rflens.store.runs.code_version`) and the
fingerprint of each corpus prepared for it, then the CSV itself (``pandas.read_csv(path,
comment="#")`` reads it back; a first column named ``#`` becomes ``number``, so that a reader
skipping ``#`` lines keeps the header). A missing or undefined number (NaN, None) is an empty cell, never
the word ``nan``, which a reader that parses numbers strictly would take for text; an infinity
is ``inf`` or ``-inf``, as Python's ``float`` and pandas read it.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

TABLES_ENV, CHAPTER_ENV = "RFLENS_TABLES", "RFLENS_CHAPTER"


def provenance(scale: str | None = None) -> dict[str, str]:
    """The scale, the code version and the fingerprints of its corpora: for a shipped long
    run, those its bundle's models were trained on (:func:`rflens.store.bundle.fingerprints`,
    whether or not they are built here); else those prepared for it."""
    from rflens.data.build import built_path
    from rflens.setup import presets
    from rflens.setup.settings import resolve
    from rflens.storage import read_json
    from rflens.store import bundle
    from rflens.store.runs import code_version

    out = {"scale": scale or "", "code_version": code_version()}
    if scale and presets.get(scale).shipped and bundle.entries(scale):
        return out | {f"data_{corpus}": fp for corpus, fp in sorted(bundle.fingerprints(scale).items())}
    names = presets.get(scale).sweeps.corpora if scale else ()
    for corpus in names:
        manifest = built_path(resolve(presets.get(scale), "alibi", corpus).data) / "manifest.json"
        if manifest.is_file():
            out[f"data_{corpus}"] = read_json(manifest)["fingerprint"]
    return out


def write_csv(df, path, meta: dict) -> Path:
    """``df`` as CSV (with its index) under ``#`` lines of ``meta``, written atomically."""
    from rflens.storage import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "".join(f"# {k}: {v}\n" for k, v in meta.items())
    frame = df.reset_index() if _named_index(df) else df
    # a header row that starts with "#" would be dropped with the comment lines by a reader that skips them
    frame = frame.rename(columns={c: "number" + str(c)[1:] for c in frame.columns[:1] if str(c).startswith("#")})
    with atomic_write(path, "w") as f:
        f.write(head + frame.to_csv(index=False))
    return path


def _named_index(df) -> bool:
    return any(name is not None for name in df.index.names)


def offer_tables(scale: str | None) -> bool:
    """In a chapter run by ``reproduce``: make every DataFrame (and pandas Styler) the chapter
    displays write itself as CSV and show a download link below the table. Returns whether
    it did (False in a live notebook, where nothing is written)."""
    folder, chapter = os.environ.get(TABLES_ENV), os.environ.get(CHAPTER_ENV)
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the book's requirements
        return False
    shell = get_ipython()
    if not folder or not chapter or shell is None:
        return False
    import pandas as pd
    from pandas.io.formats.style import Styler

    metas: dict = {}  # provenance by the run a table's rows come from (the chapter's scale unless marked)
    counter = itertools.count(1)

    def as_html(obj):
        df = obj.data if isinstance(obj, Styler) else obj
        name = f"{chapter}-table{next(counter)}.csv"
        run = df.attrs.get("run") or scale  # a long run's rows are headed with that run
        if run not in metas:
            metas[run] = {**provenance(run), "chapter": chapter}
        full = df.attrs.get("csv")  # a rounded view's rows at full precision (rflens.measure.columns.display_table)
        write_csv(df if full is None else pd.DataFrame(full), Path(folder) / name, metas[run])
        return (obj.to_html() if isinstance(obj, Styler) else obj._repr_html_()) + (
            f'<p class="rflens-download"><a href="tables/{name}" download>Download this table (CSV)</a></p>')

    html = shell.display_formatter.formatters["text/html"]
    html.for_type(pd.DataFrame, as_html)
    html.for_type(Styler, as_html)
    return True


def export_store(folder, root=None) -> list[Path]:
    """Every complete run of the store as CSV in ``folder``: ``runs.csv`` (one row a model:
    its settings, data fingerprint and training metrics), ``perplexity.csv`` (one row a model, protocol and
    L_ex) and ``receptive_fields.csv`` (one row a model and segment length). Returns the
    paths written."""
    import pandas as pd

    from rflens.measure.receptive import erf_from_normalized
    from rflens.paper import ERF_THRESHOLD
    from rflens.storage import read_json, runs_dir
    from rflens.store.runs import code_version, is_complete, Run

    root = Path(root) if root else runs_dir()
    models, ppl, erf = [], [], []
    paths = sorted(p for p in root.iterdir() if p.is_dir() and is_complete(p)) if root.is_dir() else []
    for path in paths:
        run = Run(path)
        m = run.metrics
        models.append({"key": run.key, "scale": run.scale, "pos": run.pos, "corpus": run.data_cfg.corpus,
                       "data_fingerprint": run.data_fingerprint, "l_tr": run.l_tr,
                       "model": json.dumps(run.model_cfg.to_dict(), sort_keys=True),
                       "train": json.dumps(run.train_cfg.to_dict(), sort_keys=True),
                       "val_loss": m.get("val_loss"), "tokens_per_s": m.get("tokens_per_s"),
                       "train_seconds": m.get("train_seconds")})
        for result in sorted((path / "results").glob("*.json")):
            data = read_json(result).get("result", {})
            if "ppl" in data and "lengths" in data:
                for i, L in enumerate(data["lengths"]):
                    ppl.append({"key": run.key, "pos": run.pos, "corpus": run.data_cfg.corpus,
                                "protocol": data.get("protocol"), "l_tr": run.l_tr, "l_ex": L, "ppl": data["ppl"][i],
                                "ci_low": data["ci_low"][i], "ci_high": data["ci_high"][i],
                                "tokens": data["tokens"][i], "rope": json.dumps(data.get("rope"))})
            elif "normalized" in data:
                erf.append({"key": run.key, "pos": run.pos, "corpus": run.data_cfg.corpus, "l_tr": run.l_tr,
                            "length": data["length"], "n": data["n"],
                            "erf": erf_from_normalized(data["normalized"], ERF_THRESHOLD)})
    meta = {"exported_from": str(root), "code_version": code_version()}
    written = []
    for name, rows in (("runs", models), ("perplexity", ppl), ("receptive_fields", erf)):
        written.append(write_csv(pd.DataFrame(rows), Path(folder) / f"{name}.csv", meta))
    return written
