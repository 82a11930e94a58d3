"""The shipped bundle of a long run: its file format, written, read and checked here only.

A long run (:mod:`rflens.longrun.plan`) ships each model in ``reference/<scale>/<name>/``
(:func:`rflens.storage.reference_dir`): ``result.json`` (settings, provenance, training
curve, every measured point), ``nll.npz`` (the per-segment NLLs of every point, float32),
``model.safetensors`` for the few models kept for the drift test, and ``manifest.json``
(the sha256 of the others, written last: a model without it is not shipped). Files of the
whole bundle (the schedule check, ``schedule_check.json``) sit beside the models, and the
bundle's own ``manifest.json`` gives the sha256 of every file in it, so that a deleted model
folder, an added one or an edited file is caught before anything is read.

Each result records the test-split document of every scored segment (``segment_docs``), and
a point's r intervals resample those documents whole (:func:`rflens.measure.intervals.paired_interval`;
a result measured before keeps its intervals over segments beside them, ``r_low_segments``).
What a point stores is measured (NLLs, normalised gradients) or computed from them once
(ppl, r with its interval, the ERF); what a rule decides from them (whether the segment
capped the ERF, r at the horizon) is derived when read (:func:`table`), never stored.

A shipped model is served whatever the code version is now (its provenance says which code
trained it): the drift test, which re-measures the models shipped with weights, says when
the shipped numbers have gone stale, not the code hash. :mod:`rflens.store.shipped` serves
the models to the run store.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np

from rflens import storage
from rflens.errors import UserError
from rflens.setup.config import ModelConfig
from rflens.setup.presets import FAMILIES
from rflens.setup.schemes import model_title, title

RESULT, NLL, MANIFEST, WEIGHTS = "result.json", "nll.npz", "manifest.json", "model.safetensors"
# every file of a bundle stays under this size: weights whose float32 file would pass it (a
# 12-layer model's, 3.4 MB) are stored in float16, and load into the float32 model as they are
FILE_LINE = 2 * 2**20
# the prefix of a point's per-segment normalised gradients in NLL (float16, (segments, length));
# the models trained before they were kept have none
GRADIENTS = "gradients_"
DOCUMENTS = "documents_"  # nll.npz: a finished model's NLLs on segments that cover every test document
VERSION = 1  # of the bundle's layout
SCHEDULE_CHECK = "schedule_check.json"  # beside the models: rflens.longrun.emergence.schedule_check
CORPORA = "corpora.json"  # beside the models: what the run's corpora hold (rflens.longrun.compare.record_corpora)
RESTORE = "restore it from the repository (git checkout -- reference)"

# what every result.json holds, and every point of it (a result without one is damaged)
RESULT_KEYS = ("name", "scale", "pos", "corpus", "settings", "complete", "stopped_at_step", "model", "data", "train",
               "eval", "data_fingerprint", "code_version", "commit", "torch", "threads", "train_seconds", "finished",
               "train_curve", "points")
POINT_KEYS = ("steps", "tokens", "val_loss", "lengths", "normalized", "measure_seconds", "ppl", "r", "r_low", "r_high",
              "erf", "erf_length", "share_in_ltr")


KEPT_POINTS = "points.json"  # in a model's emergence state: the sizes measured so far


def emergence_state(scale: str, name: str) -> Path:
    """The folder where model ``name`` of the long-run preset ``scale`` keeps its training
    state and measured sizes between sittings (removed when the model is shipped)."""
    return storage.runs_dir() / "emergence" / scale / name


def bundle_dir(scale: str = "long", root: Path | None = None) -> Path:
    return (storage.reference_dir() if root is None else Path(root)) / scale


def restore_fix(scale: str) -> str:
    """What gives back the models a read-only control's bundle lacks: nothing trains into it,
    and the repository ships it complete."""
    fix = (f"the {scale} bundle is a read-only control that the repository ships complete, and {bundle_dir(scale)} "
           f"lacks some of its models: {RESTORE}")
    return fix + (", or unset RFLENS_REFERENCE" if os.environ.get("RFLENS_REFERENCE") else "")


# ----------------------------------------------------------------------------- writing

LOCK_WAIT = 120.0  # seconds a reader that found the bundle changing waits for its writer
_HELD = threading.local()  # the bundles whose writer lock this thread holds, with a count each
# what a killed writer leaves beside the models: a copy not yet in place (removed), a model taken out of
# place for its successor (put back when its place is empty, else removed)
PARTIAL, TAKEN_OUT = (".adopting", ".writing"), (".replaced", ".old")


@contextlib.contextmanager
def writing(scale: str = "long", root: Path | None = None):
    """The bundle's writer lock, held across a whole change of it and its seal (a model
    joined, written or rewritten, a file of the bundle written): two writers one after the
    other, and what a killed writer left is cleaned first (:func:`_recover`). A lock on the
    bundle's folder itself (:func:`rflens.storage.locked_folder`): nothing is added to it.
    Nested calls of one thread take it once."""
    top = bundle_dir(scale, root)
    top.mkdir(parents=True, exist_ok=True)
    key = str(top.resolve())
    held = getattr(_HELD, "counts", None)
    if held is None:
        held = _HELD.counts = {}
    if held.get(key):
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    with storage.locked_folder(top):
        held[key] = 1
        try:
            _recover(top)
            yield
        finally:
            held.pop(key, None)


def _holds(top: Path) -> bool:
    """Whether this thread holds the writer lock of the bundle at ``top``."""
    return bool(getattr(_HELD, "counts", {}).get(str(top.resolve())))


def _recover(top: Path) -> None:
    """Under the writer lock, no writer is at work: a hidden model folder is what a killed
    writer left. A copy not yet in place is removed; a model taken out of place for its
    successor goes back where the successor never arrived, and is removed where it did;
    a killed writer's temporary file (``.NAME.PID.tmp``) is removed."""
    for entry in top.iterdir():
        name = entry.name
        if not name.startswith(".") or entry.is_symlink():
            continue
        if entry.is_dir() and name.endswith(PARTIAL):
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.is_dir() and name.endswith(TAKEN_OUT):
            model = top / name[1:].rsplit(".", 1)[0]
            if model.exists():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.rename(model)  # the join was killed between its two renames: the model as it was
        elif entry.is_file() and name.endswith(".tmp"):
            entry.unlink(missing_ok=True)



def new_result(name: str, scale: str, pos: str, corpus: str, settings: dict, model_cfg, data_cfg, train_cfg, ev, *,
               fingerprint: str, code: str, commit: str | None, where, stopped: int | None, seconds: float,
               measured_steps: list[int], curve: list, points: list[dict], segment_docs: list) -> dict:
    """A long-run model's ``result.json``: its settings, its provenance (the code version,
    commit, torch, machine and device it was trained with), its training curve and every
    measured point (each of :data:`POINT_KEYS`)."""
    import platform
    import time

    import torch

    from rflens.training import machine

    result = {
        "name": name, "scale": scale, "pos": pos, "corpus": corpus, "settings": settings,
        "complete": stopped is None, "stopped_at_step": stopped,
        "model": model_cfg.to_dict(), "data": data_cfg.to_dict(), "train": train_cfg.to_dict(), "eval": ev.to_dict(),
        "data_fingerprint": fingerprint, "code_version": code, "commit": commit,
        "torch": torch.__version__, "threads": torch.get_num_threads(), "machine": platform.machine(),
        "cpu": machine.cpu_capability(), "cpu_features": machine.cpu_features(), "device": machine.device_name(where),
        "train_seconds": round(seconds, 1), "finished": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "schedule": {"points": measured_steps, "cooldown_frac": train_cfg.cooldown_frac, "warmup": train_cfg.warmup},
        "train_curve": curve,
        "points": sorted(points, key=lambda p: p["steps"]),
        "segment_docs": segment_docs,
    }
    assert all(k in result for k in RESULT_KEYS) and all(k in p for p in points for k in POINT_KEYS)
    return result


def write_model(scale: str, name: str, result: dict, arrays: dict, weights=None, root: Path | None = None) -> Path:
    """A model's result.json, nll.npz (and model.safetensors from the module ``weights``),
    then its manifest (last: it marks the model shipped), written in a hidden folder beside
    the models and renamed into place, then the bundle's manifest: a write that fails (a full
    disk) leaves the bundle as it was. Returns the model's folder."""
    with writing(scale, root):
        return _write_model(scale, name, result, arrays, weights, root)


def _write_model(scale: str, name: str, result: dict, arrays: dict, weights, root: Path | None) -> Path:
    """:func:`write_model` under the bundle's writer lock."""
    final = bundle_dir(scale, root) / name
    path, old = final.with_name(f".{name}.writing"), final.with_name(f".{name}.old")
    shutil.rmtree(path, ignore_errors=True)  # a killed writer's: not the bundle's
    path.mkdir(parents=True)
    try:
        storage.write_json(path / RESULT, result, newline=True)
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        storage.write_bytes(path / NLL, buf.getvalue())
        files = [RESULT, NLL]
        if weights is not None:
            from rflens.training.trainer import save_weights

            if sum(t.numel() for t in weights.state_dict().values()) * 4 >= FILE_LINE:  # float32 would pass the line
                weights = copy.deepcopy(weights).half()
            save_weights(weights, path / WEIGHTS, "free some space, or point RFLENS_REFERENCE at a larger disk, then "
                         "run the command again")
            files.append(WEIGHTS)
        storage.write_json(path / MANIFEST, {"version": VERSION,
                                             "sha256": {f: storage.sha256_file(path / f) for f in files}}, newline=True)
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        path.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    seal(scale, root)
    return final


def adopt(scale: str, folder: Path, root: Path | None = None, *, reproduced: bool = False) -> Path:
    """Copy a model that another bundle folder holds (a worker trained it with its own
    ``$RFLENS_REFERENCE``) into this bundle, after checking its files against its manifest
    (and that it holds no other file and no link) and that it is of this preset; then seal
    the bundle. An unfinished model joins too; the same model further along (more sizes
    measured, the bundle's sizes first and unchanged: the run it continues) replaces it.
    Returns the model's folder here. The whole join, checks and seal, holds the bundle's
    writer lock (:func:`writing`): two joins at once run one after the other.

    ``reproduced``: the caller found ``folder`` to be the shipped model trained again on
    another machine and reproduced by the check's rule (:func:`rflens.longrun.recheck.compare`:
    the same verdicts, NLL differences within the seeds' spread); keeping more
    (:func:`keeps_more`), it then replaces the shipped copy, its numbers with it."""
    with writing(scale, root):
        return _adopt(scale, Path(folder), root, reproduced)


def _adopt(scale: str, folder: Path, root: Path | None, reproduced: bool = False) -> Path:
    """:func:`adopt` under the bundle's writer lock."""
    verify(folder)
    listed = {MANIFEST, *storage.read_json(folder / MANIFEST)["sha256"]}
    for entry in [folder, *folder.iterdir()]:  # the model's own files and nothing else: no link, nothing unlisted
        if entry.is_symlink() or (entry != folder and (entry.name not in listed or not entry.is_file())):
            what = "a symbolic link" if entry.is_symlink() else "not a file its manifest lists"
            raise UserError(f"{entry} is {what}: a model joins the bundle with the files it was trained with only")
    result = read_result(folder)
    if result["scale"] != scale:
        raise UserError(f"{folder} holds a model of the {result['scale']} preset: only a {scale} model joins the "
                        f"{scale} bundle")
    path = bundle_dir(scale, root) / result["name"]
    if path.is_dir() and (path / MANIFEST).is_file() and \
            (path / MANIFEST).read_bytes() == (folder / MANIFEST).read_bytes():
        return path  # joined already (by another join of the same folder): nothing to do
    if path.exists() and not (continues(read_result(path), result) or reproduces(path, folder)
                              or (reproduced and keeps_more(path, folder))):
        raise UserError(f"the {scale} bundle already holds {result['name']} and {folder} neither continues it "
                        f"(more sizes, its own first) nor reproduces it with more kept: {RESTORE} if it is damaged")
    tmp, old = path.with_name(f".{path.name}.adopting"), path.with_name(f".{path.name}.replaced")
    for stale in (tmp, old):
        shutil.rmtree(stale, ignore_errors=True)
    shutil.copytree(folder, tmp)
    if path.exists():
        path.rename(old)  # a crash from here on leaves hidden folders only, never half a model
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)
    seal(scale, root)
    return path


def reproduces(shipped: Path, later: Path) -> bool:
    """Whether the model in folder ``later`` is the finished model in ``shipped`` trained
    again (``emergence --check --keep``) with more kept: the same sizes, the same NLLs at each
    to the bit, and weights or a measurement that the shipped copy lacks (a Table 2 model's
    NLLs on every test document, the gradient on the paper's input). Such a copy replaces
    the shipped one: its numbers are the same, its provenance that of the retraining."""
    if not keeps_more(shipped, later):
        return False
    a, b = point_nlls(Path(shipped)), point_nlls(Path(later))
    return all(np.array_equal(a[k].astype(np.float32), b[k].astype(np.float32)) for k in a)


def keeps_more(shipped: Path, later: Path) -> bool:
    """Whether the finished model in folder ``later`` is measured at the same sizes as the
    finished one in ``shipped`` and keeps what that lacks: weights, or a measurement (a
    Table 2 model's NLLs on every test document, the gradient on the paper's input)."""
    old, new = read_result(Path(shipped)), read_result(Path(later))
    if not (old["complete"] and new["complete"]) or [p["steps"] for p in old["points"]] != [p["steps"] for p in new["points"]]:
        return False
    more = [key for key in ("every_document", "paper_input") if key in new["points"][-1] and key not in old["points"][-1]]
    return bool(more) or ((Path(later) / WEIGHTS).is_file() and not (Path(shipped) / WEIGHTS).is_file())


def further(shipped: dict, later: dict) -> bool:
    """Whether ``later`` has measured more sizes than the unfinished ``shipped`` model."""
    return not shipped["complete"] and len(later["points"]) > len(shipped["points"])


def continues(shipped: dict, later: dict) -> bool:
    """Whether ``later`` is the unfinished ``shipped`` model trained further: more sizes
    measured (:func:`further`), the shipped ones first and unchanged."""
    def sizes(result):
        return [(p["steps"], p["r"], p["erf"]) for p in result["points"]]

    return further(shipped, later) and sizes(later)[:len(shipped["points"])] == sizes(shipped)


def rewrite_result(scale: str, name: str, result: dict, root: Path | None = None) -> Path:
    """A shipped model's result.json replaced by ``result`` (its measurements untouched:
    only what is computed from them may change), then its manifest and the bundle's."""
    path = bundle_dir(scale, root) / name
    with writing(scale, root):
        listed = storage.read_json(path / MANIFEST)["sha256"]
        storage.write_json(path / RESULT, result, newline=True)
        listed[RESULT] = storage.sha256_file(path / RESULT)
        storage.write_json(path / MANIFEST, {"version": VERSION, "sha256": listed}, newline=True)
        seal(scale, root)
    return path


def write_file(scale: str, filename: str, obj, root: Path | None = None) -> Path:
    """A JSON file of the whole bundle (beside the models), then the bundle's manifest."""
    path = bundle_dir(scale, root) / filename
    with writing(scale, root):
        storage.write_json(path, obj, newline=True)
        seal(scale, root)
    return path


def seal(scale: str = "long", root: Path | None = None) -> None:
    """Write the bundle's manifest: the sha256 of every file in the bundle (by its path
    inside it). Only the writers call it: what they did not write is never vouched for."""
    top = bundle_dir(scale, root)
    with writing(scale, root):  # the writer that called it holds it already
        storage.write_json(top / MANIFEST, {"version": VERSION, "sha256": {
            rel: storage.sha256_file(top / rel) for rel in _files(top)}}, newline=True)


def _files(top: Path) -> list[str]:
    """Every file of the bundle but its own manifest, by its path inside it (temporary files
    a killed writer left are not the bundle's)."""
    found = []
    for here, dirs, files in os.walk(top):  # links are listed, never followed
        rel = os.path.relpath(here, top)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            path = name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")
            if path != MANIFEST and not name.startswith("."):
                found.append(path)
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # a killed writer's folder (.NAME.adopting): not the bundle's
    return sorted(found)


# ----------------------------------------------------------------------------- checking

_CHECKED: dict = {}


def check(scale: str = "long", root: Path | None = None) -> None:
    """UserError naming the file unless the bundle holds exactly the files its manifest
    lists, each with its sha256 (re-hashed only after a file changed). A folder without
    any file is an empty bundle."""
    top = bundle_dir(scale, root)
    try:
        _check(top)
    except UserError as found:
        if not top.is_dir() or _holds(top):
            raise
        # a writer at work (a model in place, its seal still to come) is not damage: the check again once it
        # is done, under its lock; a bundle that stays so is damaged
        try:
            with storage.locked_folder(top, timeout=LOCK_WAIT):
                _check(top)
        except TimeoutError:
            raise UserError(f"the shipped bundle {top} is being changed by another process, which holds it for "
                            f"more than {LOCK_WAIT:g} s: wait for it to finish, then run the command again") from None
        except OSError:  # a folder that cannot be locked here: what the check found stands
            raise found from None


def _check(top: Path) -> None:
    """:func:`check` of the bundle at ``top``, once."""
    found = _files(top) if top.is_dir() else []
    if not found:
        return
    stamp = tuple((rel, *_stat(top / rel)) for rel in [*found, MANIFEST])
    if _CHECKED.get(str(top)) == stamp:
        return
    try:
        doc = storage.read_json(top / MANIFEST)
        listed = doc["sha256"]
        # nothing vouches for the manifest itself: it must be exactly what seal wrote
        if (not isinstance(listed, dict) or doc.get("version") != VERSION or (top / MANIFEST).is_symlink()
                or (top / MANIFEST).read_text() != json.dumps(doc, indent=1, sort_keys=True) + "\n"):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(f"the shipped bundle {top} is damaged ({MANIFEST} is missing, unreadable or not as its writer "
                        f"wrote it): {RESTORE}") from None
    for rel in sorted(set(listed) | set(found)):
        if rel not in listed:
            why = "is not in its manifest"
        elif rel not in found:
            why = "is missing"
        elif not (top / rel).is_symlink() and not (top / rel).is_file():  # a FIFO would block the hash for ever
            why = "is not a regular file"
        elif (top / rel).is_symlink() or storage.sha256_file(top / rel) != listed[rel]:
            why = f"does not match its sha256 in {MANIFEST}"
        else:
            continue
        if rel not in listed:  # a file no writer made: restoring the tracked files leaves it there
            raise UserError(f"the shipped bundle {top} is damaged ({rel} {why}): remove {top / rel}, which no writer "
                            f"of the bundle made (git checkout -- reference does not remove it)")
        raise UserError(f"the shipped bundle {top} is damaged ({rel} {why}): {RESTORE}")
    _CHECKED[str(top)] = stamp


def _stat(path: Path) -> tuple:
    try:
        st = path.lstat()
    except OSError:
        return (None,)
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def stamp(scale: str = "long") -> tuple:
    """What changes whenever a writer changes the bundle (its manifest's size, time and inode)."""
    top = bundle_dir(scale)
    return (str(top), *_stat(top / MANIFEST))


def entries(scale: str = "long") -> dict[str, Path]:
    """The models of the (checked) bundle whose manifest is written, by name."""
    root = bundle_dir(scale)
    if not root.is_dir():
        return {}
    check(scale)
    # a hidden folder is a writer's (.NAME.adopting, .NAME.replaced: a killed one's), never a shipped model
    found = {d.name: d for d in sorted(root.iterdir())
             if not d.name.startswith(".") and d.is_dir() and (d / MANIFEST).is_file()}
    _check_planned(scale, found)
    return found


_PLANNED: dict[str, tuple] = {}  # bundle folder -> its files as check() found them when its models were found planned


def _check_planned(scale: str, found: dict[str, Path]) -> None:
    """UserError of one line naming the model, the setting and the plan's value when a model
    of a long run's bundle is not the model its name stands for in the plan
    (:func:`rflens.store.planned.check_shipped`): it would be counted as shipped by its name
    and never served by its settings. Once a process while the bundle is unchanged."""
    from rflens.setup import presets

    top = str(bundle_dir(scale))
    stamp = _CHECKED.get(top)
    if stamp is not None and _PLANNED.get(top) == stamp:
        return
    try:
        run = presets.get(scale)
    except UserError:  # no preset of that name: nothing to hold its models to
        return
    if isinstance(run, presets.LongRun):
        from rflens.store import planned  # it reads this module: imported when first needed

        fix = RESTORE + (", or unset RFLENS_REFERENCE" if os.environ.get("RFLENS_REFERENCE") else "")
        for path in found.values():
            planned.check_shipped(read_result(path), run, path, fix)
    if stamp is not None:
        _PLANNED[top] = stamp


def verify(path: Path, weights: bool = True) -> None:
    """UserError unless every file the model's manifest lists has its sha256 (``weights=False``:
    all but the weights)."""
    try:
        listed = storage.read_json(path / MANIFEST)["sha256"].items()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"the shipped result {path} is damaged ({MANIFEST} is unreadable): {RESTORE}") from None
    for name, digest in listed:
        if name == WEIGHTS and not weights:
            continue
        f = path / name
        if not f.is_file() or storage.sha256_file(f) != digest:
            raise UserError(f"the shipped result {path} is damaged ({name} does not match its sha256): {RESTORE}")


# ----------------------------------------------------------------------------- reading

def read_result(path: Path) -> dict:
    """A model's result.json, checked to hold every key of the format; UserError naming the
    file otherwise."""
    file = Path(path) / RESULT
    try:
        result = storage.read_json_cached(file, finite=False)  # its values are checked where they are read
        missing = [k for k in RESULT_KEYS if k not in result]
        missing += [f"points[{i}].{k}" for i, p in enumerate(result.get("points") or [{}]) for k in POINT_KEYS
                    if k not in p]
    except storage.UnreadableJSON as err:
        raise UserError(f"the shipped result {file} is damaged ({RESULT}: {err.why}): {RESTORE}") from None
    except (OSError, ValueError, TypeError, AttributeError) as err:
        raise UserError(f"the shipped result {file} is damaged (not a result: {type(err).__name__}): {RESTORE}") from None
    if missing:
        raise UserError(f"the shipped result {file} is damaged (it lacks {missing[0]}): {RESTORE}")
    return result


_COMPLETE: dict[str, tuple] = {}


def complete(scale: str = "long") -> set[str]:
    """The shipped models trained to their full budget (not stopped part-way), read once
    while the bundle is unchanged (its files as :func:`check` last found them)."""
    found = entries(scale)  # checks the bundle first
    key = (tuple(found), _CHECKED.get(str(bundle_dir(scale))))
    if _COMPLETE.get(scale, (None,))[0] != key:
        _COMPLETE[scale] = (key, {name for name, path in found.items() if read_result(path)["complete"]})
    return set(_COMPLETE[scale][1])


def fingerprints(scale: str = "long") -> dict[str, str]:
    """{the book's corpus (prose, code, math): the fingerprint of the data its shipped models
    were trained and measured on}; several, joined by commas, where models differ."""
    found: dict[str, set[str]] = {}
    for path in entries(scale).values():
        result = read_result(path)
        found.setdefault(result.get("corpus", "prose"), set()).add(result["data_fingerprint"])
    return {corpus: ",".join(sorted(fps)) for corpus, fps in found.items()}


def load(name: str, scale: str = "long") -> dict:
    """A shipped model's result.json with each point's NLLs (as float64 arrays) attached."""
    path = entries(scale).get(name)
    if path is None:
        raise UserError(f"the {scale} bundle holds no model {name!r}: `python -m rflens emergence --scale {scale} "
                        f"--list` shows what it holds and what it lacks")
    verify(path)
    result = read_result(path)
    nll = point_nlls(path)
    for point in result["points"]:
        point["nll"] = nll[point["steps"]]
    return result


def _arrays(path: Path, prefix: str) -> dict[int, np.ndarray]:
    """{steps: array as float64} of the arrays of a model's nll.npz named ``prefix<steps>``; a
    file that cannot be read is a damaged bundle (one line)."""
    try:
        with np.load(Path(path) / NLL) as arrays:
            return {int(k.removeprefix(prefix)): arrays[k].astype(np.float64) for k in arrays.files
                    if k.startswith(prefix)}
    except (OSError, ValueError, KeyError) as err:
        raise UserError(f"the shipped result {path} is damaged ({NLL}: {type(err).__name__}): {RESTORE}") from None


def point_nlls(path: Path) -> dict[int, np.ndarray]:
    """{steps: per-segment NLLs (lengths, N) as float64} of a model's measured points."""
    nll = _arrays(path, "steps_")
    _check_nlls(Path(path), nll)  # finite, and the perplexities result.json shows are theirs
    return nll


def point_document_nlls(path: Path) -> dict[int, np.ndarray]:
    """{steps: NLLs (lengths, N) as float64 on the segments that score every test document}
    of the points that hold them (a Table 2 model's last, :data:`DOCUMENTS`); a row that is
    not finite, or whose perplexities are not the ones result.json shows, is a damaged bundle."""
    nll = _arrays(path, DOCUMENTS)
    shown = {p["steps"]: p["every_document"]["ppl"] for p in read_result(Path(path))["points"] if "every_document" in p}
    for steps, rows in nll.items():
        if steps not in shown or not np.isfinite(rows).all() or not np.allclose(
                np.exp(rows.mean(axis=1)), shown[steps], rtol=1e-3):
            raise UserError(f"the shipped result {path} is damaged (its NLLs on every document at step {steps} are not "
                            f"the perplexities {RESULT} shows): {RESTORE}")
    return nll


def point_gradients(path: Path) -> dict[int, np.ndarray]:
    """{steps: each segment's normalised gradient (segments, length) as float64} of a model's
    measured points; empty for a model trained before they were kept. A point whose rows are
    not finite, negative or do not sum to 1 is a damaged bundle."""
    grads = _arrays(path, GRADIENTS)
    for steps, g in grads.items():
        if g.ndim != 2 or not np.isfinite(g).all() or (g < 0).any() or not np.allclose(g.sum(1), 1, atol=2e-2):
            raise UserError(f"the shipped result {path} is damaged (the gradients at step {steps} are not "
                            f"normalised): {RESTORE}")
    return grads


def read_file(scale: str, filename: str) -> dict | None:
    """A JSON file of the whole bundle (after checking the bundle), or None when it has none."""
    path = bundle_dir(scale) / filename
    if not path.is_file():
        return None
    check(scale)
    try:
        return storage.read_json(path, finite=False)  # its readers check its values
    except storage.UnreadableJSON as err:
        raise UserError(f"the shipped bundle file {path} is damaged ({err.why}): {RESTORE}") from None
    except (OSError, ValueError):
        raise UserError(f"the shipped bundle file {path} is damaged (not JSON): {RESTORE}") from None


# ----------------------------------------------------------------------------- as tables

def label(result: dict) -> str:
    """'ALiBi Δ=4', 'window w=30', 'NoPE', 'window w=30 L_tr=128', 'Rotary (code)': the
    model's scheme, its swept setting and what else differs from the preset."""
    names = {"alibi": "ALiBi", "window": "window", "nope": "NoPE"}  # Table 1's words
    symbols = {"l_tr": "L_tr", "batch_size": "batch"}
    settings = result["settings"]
    pos = result["pos"]
    parts = [(names.get(pos) or title(pos)) if settings else model_title(pos)]
    for key in sorted(settings, key=lambda k: (k not in FAMILIES, k == "batch_size")):  # the swept one first
        value = settings[key]
        if key == "scale_embeddings":  # Sinusoidal as the paper's code trains it, or as the book does
            parts.append("embeddings " + ("scaled" if value else "unscaled"))
            continue
        symbol = FAMILIES[key].symbol if key in FAMILIES else symbols.get(key, key)
        parts.append(f"{symbol}={value}")
    if result.get("corpus", "prose") != "prose":
        parts.append(f"({result['corpus']})")
    return " ".join(parts)


def table(scale: str = "long", names: list[str] | None = None):
    """One row per shipped model and measured size: tokens, ppl@L, r@L with its paired
    interval (r_lo@L, r_hi@L), ERF (and whether the segment capped it, by the rule of
    :func:`rflens.measure.receptive.erf_capped`), the share of the gradient inside L_tr, the
    validation loss; in the column names of :mod:`rflens.measure.columns`. ``ppl_l_tr`` and
    ``r_horizon`` (with ``r_horizon_lo``, ``r_horizon_hi``) are each model's ppl(L_tr) and
    r(16 L_tr) at its own L_tr."""
    import pandas as pd

    from rflens.measure.criterion import EXTRAPOLATION_HORIZON
    from rflens.measure.receptive import erf_capped, theoretical_field

    rows = []
    for name in list(entries(scale)) if names is None else names:
        res = load(name, scale)
        l_tr = res["train"]["l_tr"]
        field = theoretical_field(ModelConfig.from_dict(res["model"]))
        for p in res["points"]:
            row = {"name": name, "label": label(res), "pos": res["pos"], "l_tr": l_tr, "steps": p["steps"],
                   "tokens": p["tokens"], "complete": res["complete"], "val_loss": p["val_loss"], "erf": p["erf"],
                   "erf_length": p["erf_length"], "erf_capped": erf_capped(p["erf"], p["erf_length"], field),
                   "share_in_ltr": p["share_in_ltr"]}
            lengths = p["lengths"]
            for i, L in enumerate(lengths):
                row.update({f"ppl@{L}": p["ppl"][i], f"r@{L}": p["r"][i], f"r_lo@{L}": p["r_low"][i],
                            f"r_hi@{L}": p["r_high"][i]})
            top = lengths.index(max(L for L in lengths if L <= EXTRAPOLATION_HORIZON * l_tr))
            row.update({"ppl_l_tr": row.get(f"ppl@{l_tr}"), "r_horizon": p["r"][top], "r_horizon_lo": p["r_low"][top],
                        "r_horizon_hi": p["r_high"][top]})
            rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["run"] = scale  # the run the rows come from, for a CSV of them
    return out


def provenance(scale: str = "long"):
    """Where each shipped model's numbers come from: one row a model (finished or not, its
    last measured size, code version, commit, torch, CPU, device, threads, minutes)."""
    import pandas as pd

    rows = []
    for name, path in entries(scale).items():
        res = read_result(path)
        rows.append({"model": label(res), "finished": res["complete"], "tokens": res["points"][-1]["tokens"],
                     "points": len(res["points"]), "code version": res["code_version"],
                     "commit": (res["commit"] or "")[:10], "torch": res["torch"], "cpu": res.get("cpu", "not recorded"),
                     "device": res.get("device", "cpu"), "threads": res["threads"],
                     "minutes": round(res["train_seconds"] / 60), "finished at (UTC)": res["finished"]})
    return pd.DataFrame(rows)


def schedule_table(scale: str = "long"):
    """The shipped schedule check as a table (one row a length), or None if it was not run."""
    import pandas as pd

    c = read_file(scale, SCHEDULE_CHECK)
    if c is None:
        return None
    try:
        rows = [{"name": c["name"], "tokens": c["tokens"], "L": L,
                 "r wsd": c["wsd"]["r"][i], "r wsd low": c["wsd"]["r_low"][i], "r wsd high": c["wsd"]["r_high"][i],
                 "r cosine": c["cosine"]["r"][i], "r cosine low": c["cosine"]["r_low"][i],
                 "r cosine high": c["cosine"]["r_high"][i],
                 "wsd / cosine": c["ratio"][i], "low": c["ratio_low"][i], "high": c["ratio_high"][i]}
                for i, L in enumerate(c["lengths"])]
    except (KeyError, IndexError, TypeError) as err:
        raise UserError(f"the shipped bundle file {bundle_dir(scale) / SCHEDULE_CHECK} is damaged "
                        f"({type(err).__name__}: {err}): {RESTORE}") from None
    return pd.DataFrame(rows)


PPL_RTOL = 1e-3  # result.json rounds each perplexity to 4 decimals, from the NLLs before they were stored as float32


def _check_nlls(path: Path, nll: dict[int, np.ndarray]) -> None:
    """UserError naming the file unless every point of the model's result.json has its NLLs in
    nll.npz, one finite row a measured length, whose perplexities (exp of each row's mean)
    are the finite, positive ones result.json shows: the manifest vouches for what was
    sealed, this for what a reader is shown agreeing between the model's files."""
    result = read_result(path)
    for point in result["points"]:
        steps, ppl = point.get("steps"), point.get("ppl")
        where = f"the point at {steps} steps"
        why = None
        if not isinstance(steps, int) or steps not in nll:
            why = f"{NLL} lacks {where}"
        elif not isinstance(ppl, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                   and bool(np.isfinite(v)) and v > 0 for v in ppl):
            why = f"{RESULT} gives {where} perplexities that are not finite positive numbers"
        else:
            a = nll[steps]
            if a.ndim != 2 or a.shape[0] != len(ppl) or a.shape[1] == 0 or not np.isfinite(a).all():
                why = f"{NLL} holds for {where} an array of shape {a.shape} or values that are not finite"
            elif not np.allclose(np.exp(a.mean(axis=1)), ppl, rtol=PPL_RTOL, atol=0):
                why = f"{NLL} and {RESULT} disagree on the perplexities of {where}"
        if why is not None:
            raise UserError(f"the shipped result {path} is damaged ({why}): {RESTORE}")
