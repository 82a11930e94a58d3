"""The run store: every trained model, found again by its configuration.

Every chapter of the book asks for models by configuration (``get_run(presets.get("tiny"), "alibi",
"prose", slope_shift=-3)`` for a row of Table 1 of Chi et al., ACL 2023). The first call
trains the model; later calls return the stored one at once. A model lives in
``runs/<key>/`` (``RFLENS_RUNS`` overrides the folder)::

    config.json        the model, data and train settings, the scale, the data fingerprint
    model.safetensors  the weights
    manifest.json      sha256 of every stored file; written last, so its presence means "complete"
    metrics.json       loss curve, validation losses, tokens/s, training seconds
    results/           JSON caches of evaluations (Run.cached)
    checkpoint-*.pt    training state while a run is in progress (removed when it completes)

The key is a short sha256 of the three settings, the data fingerprint and a code version,
so a changed setting, corpus or model code never hands back a stale model.

The settings of a run are resolved in :mod:`rflens.setup.settings`; a model of the shipped bundle
is served through :mod:`rflens.store.shipped`. This module imports neither torch nor the
model: listing the store and finding a stored run stay fast (``python -m rflens train`` on a
stored run answers in well under 2 s).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Callable

from filelock import FileLock, Timeout

from rflens import data, storage
from rflens.errors import ConfigError, UserError
from rflens.measure import resources
from rflens.setup import presets, schemes
from rflens.setup.config import DataConfig, ModelConfig, TrainConfig
from rflens.setup.settings import cuda_available, describe, resolve, train_command
from rflens.storage import read_json, runs_dir, sha256_file, write_json
from rflens.store import shipped
from rflens.store.trained import TrainedModel
from rflens.training import cost, distributed, trainer as training

# Modules whose code decides the trained weights. The data package is left out on purpose:
# the data fingerprint already identifies the exact token stream, so a change there that
# changes the tokens changes the key through the fingerprint, and one that does not (a
# faster loader, a new message) keeps every stored model valid.
CODE_MODULES = ("model/transformer.py", "model/positional.py", "model/attention.py", "training/trainer.py")  # in rflens/
KEY_LENGTH = 16  # hex digits of sha256: 64 bits, no collisions among a few thousand runs
FAILED = "failed.json"  # in a run folder whose training raised: the error
VERIFIED = ".weights-verified.json"  # the weights file's stat when its sha256 last matched (quick listing)


class NotStored(UserError):
    """The store (and the shipped bundle) lacks the model, and training was not asked for."""


class OtherData(UserError):
    """The shipped bundle holds the model, trained and measured on other data than the corpus built here."""


class UnknownScheme(UserError):
    """A stored run of a scheme of one's own whose file is not loaded: not damaged, unknown."""


# ----------------------------------------------------------------------------- keys

def _strip(tree: ast.AST) -> ast.AST:
    """Drop docstrings: they never change trained weights (comments are gone after parsing)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            body.pop(0)
    return tree


_code_version_cache: str | None = None


def code_version() -> str:
    """sha256 of the code that shapes the weights, insensitive to comments and formatting.

    The source is parsed, docstrings are dropped and the syntax tree is hashed; the torch
    version is included because bitwise results depend on it. A module of
    :data:`CODE_MODULES` that is missing is an error, never hashed as empty: a key that
    stopped seeing the code would serve models the code no longer trains.
    """
    global _code_version_cache
    if _code_version_cache is None:
        h = hashlib.sha256()
        pkg = Path(__file__).resolve().parents[1]
        for name in CODE_MODULES:
            path = pkg / name
            if not path.is_file():
                raise RuntimeError(f"rflens is installed incompletely: {path} (code that shapes the weights) is missing")
            text = path.read_text()
            h.update(name.encode() + b"\0" + ast.dump(_strip(ast.parse(text))).encode() + b"\0")
        try:
            h.update(metadata.version("torch").encode())
        except metadata.PackageNotFoundError:  # pragma: no cover
            pass
        _code_version_cache = h.hexdigest()[:KEY_LENGTH]
    return _code_version_cache


def run_key(model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig, fingerprint: str,
            code: str | None = None) -> str:
    """The store key of a model: sha256 of its settings, its data and the code version."""
    payload = {"model": model_cfg.to_dict(), "data": data_cfg.to_dict(), "train": train_cfg.to_dict(),
               "data_fingerprint": fingerprint, "code": code or code_version()}
    own = schemes.source_digest(model_cfg.pos)  # a scheme of one's own: its file's code too
    if own is not None:
        payload["scheme_source"] = own
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:KEY_LENGTH]


# ----------------------------------------------------------------------------- Run

class Run(TrainedModel):
    """A stored model: its settings, metrics, weights and cached results."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.key = self.path.name
        try:
            cfg = read_json(self.path / "config.json")
            self.config = cfg
            _check_scheme_known(self.path, cfg)
            self.scale: str = cfg["scale"]
            self.model_cfg = ModelConfig.from_dict(cfg["model"])
            self.data_cfg = DataConfig.from_dict(cfg["data"])
            self.train_cfg = TrainConfig.from_dict(cfg["train"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise UserError(f"stored run {self.path} has an unreadable config.json ({type(err).__name__}): "
                            f"remove the folder and train the model again") from None
        self.data_fingerprint: str = cfg["data_fingerprint"]
        self._metrics: dict | None = None
        self._corpus = None
        self.reused = True  # False right after get_run trained it

    def __repr__(self) -> str:
        changed = describe(self.model_cfg, self.data_cfg, self.train_cfg, presets.get(self.scale))
        extra = "".join(f", {k}={v}" for k, v in sorted(changed.items()))
        return f"Run({self.key}: {self.scale} {self.model_cfg.pos} on {self.data_cfg.corpus}{extra})"

    @property
    def metrics(self) -> dict:
        if self._metrics is None:
            try:
                metrics = read_json(self.path / "metrics.json")
            except (OSError, ValueError) as err:
                raise UserError(f"stored run {self.path} has an unreadable metrics.json ({type(err).__name__}): "
                                f"train it again with `{self.command} --retrain`") from None
            if not isinstance(metrics, dict):
                raise UserError(f"stored run {self.path} has a metrics.json that is not an object: "
                                f"train it again with `{self.command} --retrain`")
            self._metrics = metrics
        return self._metrics

    @property
    def command(self) -> str:
        """The command line that trains this run."""
        changed = describe(self.model_cfg, self.data_cfg, self.train_cfg, presets.get(self.scale))
        return train_command(presets.get(self.scale), self.pos, self.data_cfg.corpus, changed)

    def manifest(self) -> dict[str, str]:
        """{file: sha256} of the manifest, which must vouch for the weights, the settings and the
        metrics; UserError naming the fix if it is unreadable or does not."""
        fix = f"train it again with `{self.command} --retrain`"
        try:
            digests = read_json(self.path / "manifest.json")["sha256"]
            listed = set(digests)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UserError(f"stored run {self.path} has an unreadable manifest.json ({type(err).__name__}): {fix}") from None
        missing = sorted({training.WEIGHTS, "config.json", "metrics.json"} - listed)
        if missing or not all(isinstance(v, str) for v in digests.values()):
            raise UserError(f"stored run {self.path} has a manifest without {', '.join(missing) or 'valid digests'}: {fix}")
        return digests

    def verify(self, weights: bool = True) -> None:
        """Check every stored file against the manifest (``weights=False``: all but the
        weights, which is quick enough for listing a store); UserError naming the fix if not."""
        for name, digest in self.manifest().items():
            if name == training.WEIGHTS and not weights:
                continue
            p = self.path / name
            if not p.is_file() or sha256_file(p) != digest:
                raise UserError(f"stored run {self.path} is corrupted ({name} fails its sha256 check): "
                                f"train it again with `{self.command} --retrain`")

    def load_model(self):
        """The trained TransformerLM, in eval mode on the CPU."""
        from safetensors.torch import load_model

        from rflens.model.transformer import TransformerLM

        self.verify()
        model = TransformerLM(self.model_cfg)
        load_model(model, str(self.path / training.WEIGHTS), device="cpu")
        return model.eval()

    def corpus(self):
        """The corpus the model was trained on (prepared if this machine lacks it)."""
        if self._corpus is None:
            self._corpus = data.prepare(self.data_cfg, progress=False)
        return self._corpus

    def cached(self, name: str, params: dict, compute: Callable[[], dict]) -> dict:
        """``compute()``'s result, stored as JSON under results/ keyed by ``name`` and ``params``.

        ``params`` must be JSON-serialisable and hold everything the result depends on
        besides the model (lengths, N, protocol, seed...).
        """
        return storage.cached_file(storage.cache_entry(self.path / "results", name, params), name, params, compute)[0]


def _check_scheme_known(path: Path, cfg) -> None:
    """UnknownScheme when the run's positional scheme is none rflens knows now: a scheme of
    one's own whose file is not loaded (the message names the file, where the run recorded it)."""
    try:
        pos = cfg["model"]["pos"]
    except (KeyError, TypeError):
        return  # the settings check reports it
    schemes.ensure_loaded()
    if not isinstance(pos, str) or pos in schemes.TABLE:
        return
    source = cfg.get("scheme_file") if isinstance(cfg, dict) else None
    needs = f"--schemes {source}" if source else "--schemes FILE (the file that registers it)"
    raise UnknownScheme(f"stored run {path} was trained with the scheme {pos!r} of one's own, which is not loaded: "
                        f"give {needs} before the command, or name the file in {schemes.ENV}")


def is_complete(path: Path) -> bool:
    return (path / "manifest.json").is_file()


def _check_bundle_data(scale: str, model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig,
                       corpus) -> None:
    """OtherData when the shipped bundle holds the model of these settings, but trained and
    measured on data of another fingerprint than the corpus built here: the model is not
    missing, the data is other, and training or the long run would not mend that."""
    name = shipped.name_of(scale, model_cfg, data_cfg, train_cfg)
    if name is None:
        return
    raise other_data(scale, name, data_cfg, shipped.index(scale)[name][3], corpus)


def other_data(scale: str, name: str, data_cfg: DataConfig, theirs: str, corpus) -> OtherData:
    """The error of one line for the shipped model ``name`` of ``scale``, trained and measured
    on data of the fingerprint ``theirs``, where the corpus built here (``corpus``, of
    ``data_cfg``) has another: the data differs, and the command that rebuilds it."""
    preset = presets.get(scale).data.replace(corpus=data_cfg.corpus)
    command = data.rebuild_command(data_cfg, scale if data_cfg == preset else None)
    return OtherData(f"the {scale} bundle's {name} was trained and measured on {data_cfg.corpus} data with fingerprint "
                     f"{str(theirs)[:12]}, but the {data_cfg.corpus} corpus built here ({corpus.path}) has "
                     f"{corpus.fingerprint[:12]}: rebuild it from the pinned sources with `{command}`, then run "
                     "this again")


def get_run(preset: presets.Preset, pos: str = "alibi", corpus: str = "prose",
            overrides: dict | None = None, *, train: bool = True, progress: bool = True, retrain: bool = False,
            **settings) -> Run:
    """The model for these settings: the stored one, or trained now and stored.

    The settings that differ from the preset are ModelConfig / DataConfig / TrainConfig
    fields, given as ``overrides`` (flat, ``{"window": 8}``, or by section as from
    :func:`rflens.setup.config.parse_overrides`, see :func:`resolve`) or as keywords
    (``window=8, slope_shift=-3, l_tr=256``). With ``train=False`` a missing model raises
    UserError naming the command that trains it; ``retrain=True`` trains it again.
    ``run.reused`` says whether the stored model was returned.
    """
    if settings:
        if overrides:
            raise UserError("give the settings either as an overrides dict or as keywords, not both")
        overrides = settings
    scale = preset.name  # the run store and the bundle name a model's preset by its name
    _, model_cfg, data_cfg, train_cfg = resolve(preset, pos, corpus, overrides)
    changed = describe(model_cfg, data_cfg, train_cfg, preset)
    command = train_command(preset, pos, corpus, changed)
    several = distributed.world_size() > 1 and train
    if several:
        distributed.init()
    corpus_obj = None if several else data.built(data_cfg)  # what prepare would load, loaded once
    if corpus_obj is None and not retrain and not several:
        # No model of the run store can be trained on data never built here, so the shipped
        # bundle's is the model, read without building its corpus (minutes, and Debian or npm
        # packages for some); a measurement its bundle lacks builds the corpus then
        # (ShippedRun.corpus, held to the data the bundle measured on).
        hit = shipped.find(scale, model_cfg, data_cfg, train_cfg, None)
        if hit is not None:
            return hit
    if corpus_obj is None:
        corpus_obj = _prepare_data(data_cfg, progress=progress, several=several)
    if corpus_obj.vocab_size > model_cfg.vocab_size:
        raise ConfigError("vocab_size", model_cfg.vocab_size,
                          f"the {data_cfg.corpus} tokenizer has {corpus_obj.vocab_size} tokens; the model needs as many")
    key = run_key(model_cfg, data_cfg, train_cfg, corpus_obj.fingerprint)
    path = runs_dir() / key
    main = distributed.is_main()

    def stored() -> Run:
        run = Run(path)
        run.verify()  # a corrupted file is reported (with the fix), never loaded
        if main:
            training.tidy(path)
        run._corpus, run.reused = corpus_obj, True
        return run

    if is_complete(path) and not retrain:
        return stored()
    if not retrain:
        hit = shipped.find(scale, model_cfg, data_cfg, train_cfg, corpus_obj.fingerprint)
        if hit is not None:  # the shipped bundle, read-only
            hit._corpus = corpus_obj
            return hit
    if not train:
        if not retrain:
            _check_bundle_data(scale, model_cfg, data_cfg, train_cfg, corpus_obj)
        raise NotStored(f"no stored model for {scale} {pos} on {corpus}"
                        f"{''.join(f', {k}={v}' for k, v in sorted(changed.items()))}: train it with `{command}`")
    restart = f"start over with `{command} --retrain`"  # whichever command met it: train has --retrain
    if not retrain:
        training.read_checkpoint_pointer(path, restart)  # a corrupted checkpoint stops us here, before any work
    from rflens.model.positional import check_bias

    # memory first: a step that cannot fit is refused before any work that grows with L_tr
    if not cuda_available():  # on a GPU the step lives in device memory, which this does not see
        per_rank = max(1, train_cfg.batch_size // distributed.world_size())
        resources.check(resources.training_bytes(model_cfg, train_cfg, per_rank),
                        f"a training step of {per_rank} x {train_cfg.l_tr} tokens and {train_cfg.eval_batches:,} "
                        "validation batches", resources.training_fix(model_cfg, train_cfg, per_rank))
    check_bias(model_cfg, train_cfg.l_tr)  # a nan or +inf bias is one line, before anything is stored
    if main and (preset.shipped or cost.training_flops(model_cfg, train_cfg) >= cost.ANNOUNCED_FLOPS):
        print(f"training {scale} {pos} on {corpus}{''.join(f', {k}={v}' for k, v in sorted(changed.items()))}: "
              f"{hours_to_train(scale, model_cfg, train_cfg)}", file=sys.stderr, flush=True)
    with storage.locked(runs_dir() / f".{key}.lock") if main else contextlib.nullcontext():
        if is_complete(path) and not retrain:  # another process finished it while we waited
            return stored()
        if main:
            if retrain and path.exists():
                shutil.rmtree(path)
            path.mkdir(parents=True, exist_ok=True)
            if not (path / "config.json").is_file():
                write_json(path / "config.json", {
                    "key": key, "scale": scale, "model": model_cfg.to_dict(), "data": data_cfg.to_dict(),
                    "train": train_cfg.to_dict(), "data_fingerprint": corpus_obj.fingerprint,
                    "code_version": code_version(), "command": command, "created": time.time(),
                    **({"scheme_file": own} if (own := schemes.TABLE[pos].source) else {})})
        distributed.barrier()  # the other ranks wait until rank 0 has laid out the folder
        (path / FAILED).unlink(missing_ok=True)
        try:
            training.train(model_cfg, data_cfg, train_cfg, out_dir=path, progress=progress, corpus=corpus_obj,
                           fix=restart)
        except Exception as err:  # marked, so that the store lists it as failed (a kill leaves it resumable)
            if main:
                with contextlib.suppress(OSError):  # a full disk must not hide the error itself
                    write_json(path / FAILED, {"error": f"{type(err).__name__}: {err}", "time": time.time()})
            raise
    run = Run(path)
    run._corpus, run.reused = corpus_obj, False
    return run


def hours_to_train(scale: str, model_cfg: ModelConfig, train_cfg: TrainConfig) -> str:
    """What training this model from its start takes on one core, at the training speed of
    the shipped models (:func:`rflens.store.shipped.one_core_speed`): one line, said before a long
    training starts (a long preset's, or any of :data:`rflens.training.cost.ANNOUNCED_FLOPS` or
    more). On a GPU, its steps alone."""
    if cuda_available():  # the shipped speeds are one CPU core's: they do not time a GPU
        return f"{train_cfg.steps:,} steps on the GPU"
    at = shipped.one_core_speed(scale)
    if at is None:
        return f"{train_cfg.steps:,} steps, its time not known: no finished model is shipped to time it by"
    hours = at.train_hours(cost.training_flops(model_cfg, train_cfg))
    return (f"{train_cfg.steps:,} steps, about {hours:.1f} hours on one core at the training "
            f"speed of the {at.models} shipped model(s) trained on {at.where}, {at.train / 1e9:.0f} GFLOP/s")


def _prepare_data(data_cfg: DataConfig, *, progress: bool, several: bool):
    """rflens.data.prepare; with several processes rank 0 builds first and the others then load."""
    if not several:
        return data.prepare(data_cfg, progress=progress)
    corpus_obj = data.prepare(data_cfg, progress=progress) if distributed.is_main() else None
    distributed.barrier()
    return corpus_obj if corpus_obj is not None else data.prepare(data_cfg, progress=False)


# ----------------------------------------------------------------------------- listing

def _row(run: Run) -> dict:
    path = run.path
    row = {"key": run.key, "pos": run.pos, "scale": run.scale, "corpus": run.data_cfg.corpus,
           "settings": describe(run.model_cfg, run.data_cfg, run.train_cfg, presets.get(run.scale)),
           "steps": run.train_cfg.steps, "size_bytes": storage.dir_size(path)}
    if is_complete(path):
        run.verify(weights=False)  # the settings and metrics
        _verify_weights(run)  # and the weights: "complete" vouches for them too
        m = run.metrics
        row.update(status="complete", final_loss=m.get("val_loss"), train_loss=m.get("final_train_loss"),
                   tokens_per_s=m.get("tokens_per_s"), train_seconds=m.get("train_seconds"))
    elif (path / FAILED).is_file():
        row.update(status="failed", error=read_json(path / FAILED).get("error", "?"), final_loss=None)
    else:
        ck = path / "checkpoint.json"
        step = read_json(ck)["step"] if ck.is_file() else 0
        if _being_trained(path):
            row.update(status=f"in progress ({step}/{run.train_cfg.steps})", final_loss=None)
        else:  # its training died (a kill, a crash, a reboot): the lock it held is free
            row.update(status=f"interrupted ({step}/{run.train_cfg.steps})", final_loss=None,
                       resume=f"{run.command}")
    return row


def _weights_stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _verify_weights(run: Run) -> None:
    """UserError (as Run.verify) unless the weights match their sha256 in the manifest. The
    check is remembered beside them with the file's size, times and inode, so a listing
    hashes each model's weights once, and again only after the file changed."""
    weights, stamp = run.path / training.WEIGHTS, run.path / VERIFIED
    digest = run.manifest()[training.WEIGHTS]
    try:
        seen = read_json(stamp)
        if seen == {"sha256": digest, "stat": _weights_stat(weights)}:
            return
    except (OSError, ValueError):
        pass
    run.verify()  # raises on damage
    with contextlib.suppress(OSError):  # a store we may not write: hashed again next time
        write_json(stamp, {"sha256": digest, "stat": _weights_stat(weights)})


def _being_trained(path: Path) -> bool:
    """Whether a live process trains the run at ``path`` now: it holds the run's lock for
    as long as it trains, and the operating system frees the lock when it dies. A lock we
    cannot take part in (a read-only store) counts as held: nothing is claimed dead."""
    lock = path.parent / f".{path.name}.lock"
    if not lock.exists():
        return False
    try:
        with FileLock(str(lock), timeout=0):
            return False
    except Timeout:
        return True
    except OSError:
        return True


def clean(root: Path | None = None) -> list[dict]:
    """Remove the run folders that can never complete: failed ones, damaged ones, and
    ones that hold neither a finished model nor a checkpoint to resume (a training that
    died before its first checkpoint). A folder whose training holds its lock is kept.
    Returns the rows of what was removed."""
    root = Path(root) if root is not None else runs_dir()
    removed = []
    for row in list_runs(root):
        path = root / row["key"]
        stale = row["status"].startswith(("in progress", "interrupted")) and not any(path.glob("checkpoint*"))
        if row["status"] in ("failed", "damaged") or stale:
            try:
                with FileLock(str(root / f".{row['key']}.lock"), timeout=0):
                    shutil.rmtree(path)
            except Timeout:
                continue  # being trained right now
            (root / f".{row['key']}.lock").unlink(missing_ok=True)
            removed.append(row)
    return removed


def check_store_path(root: Path) -> None:
    """UserError when a file stands at the run store's path or above it (nothing could be
    stored there), as training says it; a folder that does not exist yet is an empty store."""
    for p in (root, *root.parents):
        if p.exists():
            if not p.is_dir():
                raise UserError(f"Not a directory: {p}: a file stands where the run store's folder ({root}) is "
                                "needed: move it, or point RFLENS_RUNS elsewhere")
            return


def list_runs(root: Path | None = None) -> list[dict]:
    """One row per stored run: scheme, settings, scale, corpus, steps, losses, size."""
    root = Path(root) if root is not None else runs_dir()
    rows = []
    check_store_path(root)
    if not root.is_dir():
        return rows
    for path in sorted(p for p in root.iterdir() if p.is_dir() and (p / "config.json").is_file()):
        foreign = _not_own_run(path)
        if foreign is not None:  # never judged, so never cleaned: listed with why
            rows.append(foreign)
            continue
        try:
            rows.append(_row(Run(path)))
        except UnknownScheme as err:  # healthy as far as we can tell: listed, never cleaned
            rows.append({"key": path.name, "status": "unknown scheme", "error": str(err),
                         "size_bytes": storage.dir_size(path)})
        except (OSError, ValueError, KeyError, TypeError, AttributeError, UserError) as err:
            unreadable = _unreadable(path, err)
            if unreadable is not None:  # a permission is not damage: reported, never removed
                rows.append(unreadable)
                continue
            # one damaged run is marked, and the others are still listed
            rows.append({"key": path.name, "status": "damaged", "error": str(err) or type(err).__name__,
                         "size_bytes": storage.dir_size(path)})
    return rows


NOT_A_RUN = "not a run"  # a folder rflens did not write: listed, never removed
UNREADABLE = "unreadable"  # a run with a file we may not read: listed, never removed


def _safe_size(path: Path) -> int:
    try:
        return storage.dir_size(path)
    except OSError:
        return 0


def _not_own_run(path: Path) -> dict | None:
    """The row of a folder that is not a run folder rflens wrote (None when it is one): a run
    folder is named by its run key, and its config.json is an object that carries that key
    and the settings get_run writes. Whatever else (a model folder of another library, a
    project of one's own) is left as it is, whatever its state."""
    import re

    why = None
    if not re.fullmatch(f"[0-9a-f]{{{KEY_LENGTH}}}", path.name):
        why = "its name is not a run key"
    else:
        try:
            cfg = read_json(path / "config.json")
        except PermissionError:
            return None  # a run whose config we may not read: reported as unreadable
        except (OSError, ValueError):
            cfg = None
        if not isinstance(cfg, dict) or cfg.get("key") != path.name \
                or not all(k in cfg for k in ("scale", "model", "data", "train", "data_fingerprint")):
            why = "its config.json does not carry its run key and settings"
    if why is None:
        return None
    return {"key": path.name, "status": NOT_A_RUN, "size_bytes": _safe_size(path),
            "error": f"{path} is not a run folder rflens wrote ({why}): left as it is (remove it by hand if "
                     "it is yours to remove, or point RFLENS_RUNS at the run store)"}


def _unreadable(path: Path, err: BaseException) -> dict | None:
    """The row of a run that failed to list because a file of it may not be read (None when
    that is not why): a permission to fix, not damage to remove."""
    seen, e = set(), err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, PermissionError):
            name = Path(e.filename).name if getattr(e, "filename", None) else "a file"
            return {"key": path.name, "status": UNREADABLE, "size_bytes": _safe_size(path),
                    "error": f"{path}: {name} cannot be read (permission denied): give read access to the "
                             f"folder and its files (chmod -R u+rX {path}); nothing was removed"}
        e = e.__cause__ or e.__context__
    return None
