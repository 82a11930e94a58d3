"""Executed chapters kept and reused: a chapter whose inputs are unchanged is not run again.

An executed notebook (``_build/<scale>/notebooks/<chapter>.ipynb``) carries in its metadata,
under ``rflens``, a digest of each thing its outputs depend on (:func:`inputs`) and the sha256
of each table file (CSV) it wrote. ``reproduce`` reuses the notebook when both still match
(:func:`reusable`; :func:`changed` names what did not), and ``--rerun`` executes it anyway.

The inputs are the chapter's cells, its parameters and scale, every file of the package, the
book's files other than the chapters, the shipped bundles (their contents), the installed
distributions and Python, the thread settings, and the ``RFLENS_`` settings other than those
that say where things are. The run store and the corpora are left out on purpose: a model
is found by the digest of its settings, code and corpus (:func:`rflens.store.runs.code_version`),
and a corpus is built by the package from pinned sources, so unchanged inputs read the same
models and the same tokens.

A chapter can also be executed cell by cell by another runner (the notebook tests run every
chapter under nbval): :func:`write_from_cells` turns the outputs it collected into the
notebook papermill would have written, stamped the same way, so ``reproduce`` reuses it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from rflens.storage import sha256_file

KEY = "rflens"  # the notebook metadata entry that holds the stamp
# settings that say where things are, not what a chapter computes (RFLENS_REFERENCE: the
# bundles' contents are hashed instead; RFLENS_SCALE: the scale is hashed as a parameter)
WHERE = {"RFLENS_DATA", "RFLENS_RUNS", "RFLENS_TEST_RUNS", "RFLENS_ROOT", "RFLENS_SCALE", "RFLENS_TABLES",
         "RFLENS_CHAPTER", "RFLENS_REFERENCE", "RFLENS_REPOSITORY"}
THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def tree_digest(root: Path, skip=()) -> str:
    """The digest of the files under ``root`` (their names and contents), caches and names
    ending in ``skip`` left out; each file read once a process while it is unchanged
    (:func:`rflens.storage.sha256_file`)."""
    root = Path(root)
    if not root.is_dir():
        return hashlib.sha256(b"").hexdigest()
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and not p.name.endswith(skip)):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + sha256_file(path).encode() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=4)
def _distributions(path: tuple) -> str:
    names = sorted({(d.metadata["Name"] or "", d.version) for d in metadata.distributions(path=list(path))})
    return hashlib.sha256(json.dumps([sys.version, names]).encode()).hexdigest()


def environment(book: Path) -> dict:
    """The inputs every chapter of ``book`` (its folder) shares: the package, the book's files
    other than the chapters, the bundles, the distributions and the settings."""
    import rflens
    from rflens.storage import reference_dirs

    settings = {k: v for k, v in os.environ.items() if k.startswith("RFLENS_") and k not in WHERE | {"RFLENS_SCHEMES"}}
    # the scheme files a process names as it loads them, by content; the book's own are among its files
    book = Path(book).resolve()
    schemes = sorted({str(Path(p).resolve()) for p in os.environ.get("RFLENS_SCHEMES", "").split(os.pathsep)
                      if p and Path(p).is_file() and book not in Path(p).resolve().parents})
    return {
        "package": tree_digest(Path(rflens.__file__).parent),
        "book": tree_digest(book, skip=(".ipynb",)),
        "bundles": [tree_digest(d) for d in reference_dirs()],
        "distributions": _distributions(tuple(sys.path)),
        "threads": [os.environ.get(v) for v in THREADS] + [len(os.sched_getaffinity(0))
                                                          if hasattr(os, "sched_getaffinity") else os.cpu_count()],
        "settings": sorted(settings.items()),
        "schemes": [(p, sha256_file(Path(p))) for p in schemes],
    }


def for_the_page(nb) -> int:
    """What a static page shows of an executed notebook: its stderr outputs removed (the
    progress bars that led to the results), and the state of its widgets (a page shows no
    widget: a control needs a kernel). Returns how many outputs were removed."""
    nb.metadata.pop("widgets", None)
    removed = 0
    for cell in nb.cells:
        outputs = cell.get("outputs")
        if outputs:
            kept = [o for o in outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
            removed += len(outputs) - len(kept)
            cell["outputs"] = kept
    return removed


def cells_digest(nb) -> str:
    """The digest of a notebook's cells: their kinds, sources and tags (a tag hides or folds a
    cell in the built page, or marks the parameters papermill replaces); outputs, ids and other
    metadata left out."""
    cells = [(c["cell_type"], c["source"] if isinstance(c["source"], str) else "".join(c["source"]),
              sorted((c.get("metadata") or {}).get("tags") or [])) for c in nb["cells"]]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def inputs(path: Path, params: dict, scale: str) -> dict[str, str]:
    """Everything the outputs of the chapter at ``path`` depend on, each as a digest: its
    cells, scale and parameters, and the inputs every chapter shares (:func:`environment`)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    record = {"chapter": Path(path).stem, "cells": cells_digest(nb), "scale": scale,
              "parameters": sorted((k, repr(v)) for k, v in params.items()), **environment(Path(path).parent)}
    return {k: hashlib.sha256(json.dumps(v, sort_keys=True).encode()).hexdigest()[:16] for k, v in record.items()}


def changed(source: Path, executed: Path, params: dict, scale: str, tables: Path) -> list[str]:
    """What changed since ``executed`` was executed from the chapter at ``source``: the names
    of the inputs (:func:`inputs`) whose digest differs, ``tables`` where its table files do
    not match, ``notebook`` where there is no stamped notebook. Empty: it can be kept."""
    import nbformat

    if not Path(executed).is_file():
        return ["notebook"]
    try:
        mark = nbformat.read(str(executed), as_version=4).metadata.get(KEY) or {}
    except Exception:  # a damaged file is executed again
        return ["notebook"]
    was = mark.get("inputs")
    if not isinstance(was, dict):
        return ["notebook"]
    now = inputs(source, params, scale)
    out = sorted(k for k in now.keys() | was.keys() if now.get(k) != was.get(k))
    return out + (["tables"] if mark.get("tables") != tables_of(tables, Path(source).stem) else [])


def tables_of(folder: Path, stem: str) -> dict[str, str]:
    """The chapter's table files in ``folder``, each name with its sha256."""
    return {p.name: sha256_file(p) for p in sorted(Path(folder).glob(f"{stem}-table*.csv"))}


def stamp(path: Path, digests: dict[str, str], tables: dict[str, str]) -> None:
    """Write the stamp into the executed notebook at ``path`` (in place)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    nb.metadata[KEY] = {"inputs": digests, "tables": tables}
    nbformat.write(nb, str(path))


def reusable(source: Path, executed: Path, params: dict, scale: str, tables: Path) -> bool:
    """Whether ``executed`` is the chapter at ``source`` executed with today's inputs, its
    table files in ``tables`` as it wrote them."""
    return not changed(source, executed, params, scale, tables)


def write_from_cells(source: Path, outputs: list[list[dict]], params: dict, scale: str,
                     out_dir: Path, tables: Path) -> Path:
    """The chapter at ``source`` as papermill would have executed it, from the outputs another
    runner collected (one list a code cell, in order), stamped, written atomically to
    ``out_dir``: the injected parameters cell, numbered cells, no stderr and no widget state."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    from rflens.storage import atomic_write

    nb = load_notebook_node(str(source))  # as papermill reads it: every cell with its tags
    code = [c for c in nb.cells if c.cell_type == "code"]
    if len(code) != len(outputs):
        raise ValueError(f"{source.name}: {len(code)} code cells but outputs for {len(outputs)}")
    for cell, outs in zip(code, outputs):
        cell.outputs = [nbformat.from_dict(o) for o in outs]
    if params:
        nb = parameterize_notebook(nb, params)
    count = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            count += 1
            cell.execution_count = count
            for o in cell.get("outputs", []):
                if o.get("output_type") == "execute_result":
                    o["execution_count"] = count
    for_the_page(nb)
    nb.metadata[KEY] = {"inputs": inputs(source, params, scale), "tables": tables_of(tables, source.stem)}
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / source.name
    with atomic_write(final, "w") as f:
        nbformat.write(nb, f)
    return final
