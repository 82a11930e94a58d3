"""``python -m rflens runs``: what the run store holds."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rflens.cli.common import emit
from rflens.errors import UserError
from rflens.storage import runs_dir
from rflens.store.runs import check_store_path, clean, list_runs


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def _check_export(export: str) -> None:
    """UserError unless ``--export`` names a folder that exists or can be made."""
    if not export.strip():
        raise UserError("--export needs a folder to write the CSV files into, e.g. --export tables")
    for what, name in (("--export", export), ("RFLENS_RUNS", str(runs_dir()))):
        try:  # the files record where they came from, and the command names what it wrote, in UTF-8
            name.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(name).decode("utf-8", "backslashreplace")
            raise UserError(f"{what} names {shown}, whose name holds a byte that is not UTF-8 (the CSV files name "
                            "their source, and the command what it wrote, in UTF-8): rename the folder, or give one "
                            "whose name is UTF-8") from None
    target = Path(export).expanduser()
    from rflens.storage import reference_dirs

    where = target.resolve()
    for ref in reference_dirs():
        if where == ref or ref in where.parents:  # its manifest would no longer vouch for the bundle
            raise UserError(f"--export {export} is inside the shipped bundles' folder {ref}: export the tables to a "
                            "folder outside it")
    for p in (target, *target.absolute().parents):
        if p.exists():
            if not p.is_dir():
                raise UserError(f"--export {export}: {p} is a file, not a folder: give --export a folder "
                                "(new or existing) for the CSV files")
            return


def run(args) -> int:
    check_store_path(runs_dir())  # a file at RFLENS_RUNS: one line, as training says it
    export = getattr(args, "export", None)
    if export is not None:
        _check_export(export)  # before --clean removes anything
    if getattr(args, "clean", False):
        for r in clean():
            emit(f"removed {r['key']} ({r['status']})")
    if export is not None:
        from rflens.publish.csv_files import export_store

        target = Path(export).expanduser()
        made = not target.exists()
        try:
            written = export_store(target)  # ~ expanded: --export=~/t (no shell expansion after =) is the home folder
        except BaseException:
            if made and target.is_dir() and not any(target.iterdir()):
                target.rmdir()  # the folder this export made, left empty: not left behind
            raise
        for path in written:
            emit(f"wrote {path}")
        return 0
    rows = list_runs()
    if getattr(args, "json", False):
        emit(json.dumps(rows, indent=1))
        return 0
    if not rows:
        emit(f"no stored runs in {runs_dir()}")
        return 0
    header = ("key", "scheme", "settings", "scale", "corpus", "steps", "final loss", "size", "status")
    table = [header]
    for r in rows:
        settings = " ".join(f"{k}={v}" for k, v in sorted(r.get("settings", {}).items())) or "-"
        loss = r.get("final_loss")
        table.append((r["key"], r.get("pos", "?"), settings, r.get("scale", "?"), r.get("corpus", "?"),
                      str(r.get("steps", "?")), f"{loss:.3f}" if isinstance(loss, (int, float)) else "-",
                      _size(r["size_bytes"]), r["status"]))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    total = sum(r["size_bytes"] for r in rows)
    lines.append(f"{len(rows)} runs, {_size(total)} in {runs_dir()}")
    lines += [f"{r['key']}: {r['error']}" for r in rows if r["status"] in ("unknown scheme", "not a run", "unreadable")]
    if any(r["status"].startswith("interrupted") for r in rows):
        lines.append("interrupted: its training died; the same train command resumes it from its last checkpoint")
    emit("\n".join(lines))
    return 0
