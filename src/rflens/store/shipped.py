"""The shipped bundle's models as a read-only layer of the run store.

The run store serves a finished shipped model (:mod:`rflens.store.bundle`) when it lacks one of
the same settings (:func:`find`, from :func:`rflens.store.runs.get_run`), so the chapters of that
preset are built without training. A shipped model holds what its finished run was measured
on: per-segment last-token NLLs at L_tr x length_mults and the normalised input gradient
over erf_length_mult x L_tr. :class:`ShippedRun` hands them out in the result format of
:func:`rflens.measure.perplexity.perplexity` and :func:`rflens.measure.receptive.receptive_field`; any other
measurement needs the weights, which only the drift models carry. Inside :func:`at_size`
every model is served as it was at one of its measured sizes, and inside :func:`at_seed` every
model the preset trains from several seeds is served from one of them.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from pathlib import Path
from typing import Callable

from rflens import data, storage
from rflens.errors import UserError
from rflens.setup import presets
from rflens.setup.config import DataConfig, EvalConfig, ModelConfig, TrainConfig
from rflens.store import bundle
from rflens.store.trained import TrainedModel

# The measured size the run-store layer serves: None for each model's finished point.
_SIZE: ContextVar[int | None] = ContextVar("rflens_bundle_size", default=None)
# The training seed served for the models the preset trains from several seeds (0: their first).
_SEED: ContextVar[int] = ContextVar("rflens_bundle_seed", default=0)


@contextlib.contextmanager
def at_size(tokens: int | None):
    """Serve every shipped model as it was at ``tokens`` training tokens (one of its
    measured sizes, each a finished run of that size) instead of its finished point, inside
    the ``with`` block: the book's experiments and claims then read the preset as if it had
    been trained that long. A model without that size is not served."""
    token = _SIZE.set(tokens)
    try:
        yield
    finally:
        _SIZE.reset(token)


@contextlib.contextmanager
def at_seed(seed: int):
    """Serve every model that the preset trains from several seeds (its
    ``sweeps.seeds``: :func:`rflens.longrun.plan.seeded`) as trained from ``seed`` inside the
    ``with`` block, the other models as they are (:func:`rflens.longrun.plan.served_settings`,
    which the book's experiments and the bundle's lookups apply): they then read the preset as
    if that seed had been its only one. A seeded model whose ``seed`` is not shipped yet is not
    served."""
    token = _SEED.set(int(seed))
    try:
        yield
    finally:
        _SEED.reset(token)


def served_seed() -> int:
    """The seed :func:`at_seed` serves now (0 outside it)."""
    return _SEED.get()


def served_size() -> int | None:
    """The size :func:`at_size` serves now (None outside it: each model's finished point)."""
    return _SIZE.get()


class ShippedRun(TrainedModel):
    """A finished model of the shipped bundle, read like a :class:`rflens.store.runs.Run`."""

    shipped = True
    reused = True

    def __init__(self, path: Path):
        self.path = Path(path)
        bundle.verify(self.path)
        self.result = bundle.read_result(self.path)
        r = self.result
        self.name: str = r["name"]
        self.key = f"{r['scale']}/{self.name}"
        self.scale: str = r["scale"]
        self.model_cfg = ModelConfig.from_dict(r["model"])
        self.data_cfg = DataConfig.from_dict(r["data"])
        self.train_cfg = TrainConfig.from_dict(r["train"])
        self.eval_cfg = EvalConfig.from_dict(r["eval"])
        self.data_fingerprint: str = r["data_fingerprint"]
        self._corpus = None
        self._points: dict[int | None, dict | None] = {}
        self._results: dict[tuple, dict] = {}  # (size, lengths) -> its last-token result

    def __repr__(self) -> str:
        return f"ShippedRun({self.key}, code {self.result['code_version']}, trained {self.result['finished']} UTC)"

    @property
    def copy_command(self) -> str:
        """The command line that trains this model's settings into the run store, weights
        kept (the run store's model is then read before the bundle's)."""
        from rflens.setup.settings import describe, train_command

        changed = describe(self.model_cfg, self.data_cfg, self.train_cfg, presets.get(self.scale))
        return train_command(presets.get(self.scale), self.result["pos"], self.data_cfg.corpus, changed) + " --retrain"

    @property
    def metrics(self) -> dict:
        """What a stored run's metrics.json gives, as far as the bundle holds it (its
        tokens/s is not recorded: None)."""
        import torch

        from rflens.model.transformer import TransformerLM

        last = self.result["points"][-1]
        curve = self.result["train_curve"]
        with torch.device("meta"):  # sizes only: no memory, no initialisation
            model = TransformerLM(self.model_cfg)
        return {"val_loss": last["val_loss"], "final_train_loss": curve[-1][1] if curve else None,
                "train_seconds": self.result["train_seconds"], "tokens_per_s": None, "steps": last["steps"],
                "num_params": model.num_params(non_embedding=False)}

    @property
    def provenance(self) -> dict:
        r = self.result
        return {k: r[k] for k in ("code_version", "commit", "torch", "threads", "train_seconds", "finished")}

    def verify(self, weights: bool = True) -> None:
        """Check the model's files against its manifest (``weights=False``: all but the weights)."""
        bundle.verify(self.path, weights)

    @property
    def has_weights(self) -> bool:
        return (self.path / bundle.WEIGHTS).is_file()

    def measurable(self, lengths, draw: str = "uniform") -> list[int]:
        """The lengths of ``lengths`` this model's last-token perplexity can be read at: all
        of them with weights, else those the served point measured; on the documents draw,
        those its last point measured on every test document (a Table 2 model's)."""
        if draw != "uniform":
            every = (self.point() or {}).get("every_document") if _SIZE.get() is None else None
            return [int(L) for L in lengths if every is not None and int(L) in every["lengths"]]
        point = None if self.has_weights else self.point()
        return [int(L) for L in lengths if point is None or int(L) in point["lengths"]]

    def erf_segment(self, length: int) -> int:
        """``length`` with weights, else the segment the shipped receptive field was measured on."""
        return int(length) if self.has_weights else self.eval_cfg.erf_length_mult * self.l_tr

    def load_model(self):
        """The finished model (drift models only): UserError naming the command otherwise."""
        if not self.has_weights:
            raise UserError(f"the shipped model {self.key} carries no weights, only its measurements: "
                            f"`{self.copy_command}` trains a copy with weights into the run store (the bundle is "
                            "left as it is) to measure anything else")
        if _SIZE.get() is not None:
            raise UserError(f"the shipped weights of {self.key} are the finished model's, not the one at "
                            f"{_SIZE.get():,} tokens")
        from safetensors.torch import load_model

        from rflens.model.transformer import TransformerLM

        model = TransformerLM(self.model_cfg)
        load_model(model, str(self.path / bundle.WEIGHTS), device="cpu")
        return model.eval()

    def corpus(self):
        """The data this model was trained and measured on, built here when first needed;
        UserError when the corpus built here is not that data (other sources or packages)."""
        if self._corpus is None:
            corpus = data.prepare(self.data_cfg, progress=False)
            if corpus.fingerprint != self.data_fingerprint:
                raise UserError(f"the shipped model {self.key} was measured on {self.data_cfg.corpus} data with "
                                f"fingerprint {self.data_fingerprint[:12]}, but the {self.data_cfg.corpus} built here "
                                f"has {corpus.fingerprint[:12]}, so a measurement the bundle lacks cannot be taken "
                                f"here: rebuild it from the pinned sources with "
                                f"`{data.rebuild_command(self.data_cfg, self.scale)}`")
            self._corpus = corpus
        return self._corpus

    def point(self) -> dict | None:
        """The measured point served: the finished model's, or the one of :func:`at_size`'s
        size (None when the model has no such size). NLLs (lengths, N) as float64, normalised
        gradients."""
        size = _SIZE.get()
        if size not in self._points:
            points = self.result["points"]
            point = points[-1] if size is None else next((p for p in points if p["tokens"] == size), None)
            if point is not None:
                point = {**point, "nll": bundle.point_nlls(self.path)[point["steps"]]}
            self._points[size] = point
        return self._points[size]

    def served(self, name: str, params: dict) -> dict | None:
        """The cached result ``name`` for ``params`` built from the shipped measurements, or
        None when the bundle does not hold it (other lengths, segments, protocol...)."""
        from rflens.measure.perplexity import last_token_result

        ev, point = self.eval_cfg, self.point()
        if point is None:
            return None
        rope = ev.rope_params()
        if name == "perplexity_last_token" and params.get("draw") == "documents":
            return self._every_document(params)
        if name == "perplexity_last_token":
            # any of the measured lengths: every length scores the same last tokens
            want = {"protocol": "last_token", "n": ev.n_segments, "seed": ev.seed, "stride": None, **rope}
            lengths = [int(L) for L in params.get("lengths") or ()]
            if {k: params.get(k) for k in want} != want or not lengths or not set(lengths) <= set(point["lengths"]):
                return None
            key = (_SIZE.get(), tuple(lengths))
            if key not in self._results:  # its intervals are bootstrapped once
                rows = [point["lengths"].index(L) for L in lengths]
                out = last_token_result(point["nll"][rows], lengths, self.l_tr, ev.seed)
                if "segment_docs" in self.result:  # so that its paired intervals resample documents
                    out["segment_docs"] = self.result["segment_docs"]
                self._results[key] = {**out, "seconds": point["measure_seconds"]}
            return storage.fresh_copy(self._results[key])
        if name == "input_gradients":
            want = {"length": ev.erf_length_mult * self.l_tr, "n": ev.erf_samples, "seed": ev.seed, **rope}
            if {k: params.get(k) for k in want} != want:
                return None
            return {"length": want["length"], "n": want["n"], "seed": want["seed"],
                    "normalized": list(point["normalized"]), "seconds": point["measure_seconds"]}
        return None

    def _every_document(self, params: dict) -> dict | None:
        """The finished model's last-token result on segments that score every test document
        (:meth:`rflens.data.Corpus.document_segments`), where its last point holds them."""
        from rflens.measure.perplexity import last_token_result

        ev, point = self.eval_cfg, self.point()
        every = None if point is None or _SIZE.get() is not None else point.get("every_document")
        lengths = [int(L) for L in params.get("lengths") or ()]
        want = {"protocol": "last_token", "n": ev.n_segments, "seed": ev.seed, "stride": None, **ev.rope_params()}
        if every is None or {k: params.get(k) for k in want} != want or not lengths or not set(lengths) <= set(every["lengths"]):
            return None
        nll = bundle.point_document_nlls(self.path)[point["steps"]]
        out = last_token_result(nll[[every["lengths"].index(L) for L in lengths]], lengths, self.l_tr, ev.seed)
        return {**out, "draw": "documents", "segment_docs": list(every["segment_docs"]), "seconds": point["measure_seconds"]}

    def cached(self, name: str, params: dict, compute: Callable[[], dict]) -> dict:
        """What the bundle holds; anything else is computed from the weights (drift models)
        and cached in the local store, or a UserError naming the command that trains it."""
        hit = self.served(name, params)
        if hit is not None:
            return hit
        if _SIZE.get() is not None:  # the weights are the finished model's, not that size's
            raise UserError(f"the shipped model {self.key} holds only its last-token perplexities and receptive "
                            f"field at {_SIZE.get():,} tokens, not this measurement")
        folder = storage.runs_dir() / "shipped" / self.scale / self.name
        # keyed by what it is computed from: the model's files, through its manifest's sha256
        # (which the bundle's checks hold to the files), so an edited model is never served old numbers
        keyed = {**params, "bundle_manifest": storage.sha256_file(self.path / bundle.MANIFEST)}
        return storage.cached_file(storage.cache_entry(folder, name, keyed), name, keyed, compute)[0]


def _settings(result: dict) -> tuple | None:
    """(model, data, train, data fingerprint) of a shipped result; None if today's settings
    classes cannot read them."""
    try:
        return (ModelConfig.from_dict(result["model"]), DataConfig.from_dict(result["data"]),
                TrainConfig.from_dict(result["train"]), result["data_fingerprint"])
    except (KeyError, TypeError, ValueError):
        return None


_INDEX: dict = {}


def index(scale: str) -> dict[str, tuple]:
    """{name: settings} of the bundle's finished models (re-read when the bundle changes)."""
    found = bundle.entries(scale)  # checked against the bundle's manifest first
    stamp = bundle.stamp(scale)
    if _INDEX.get(scale, (None,))[0] != stamp:
        out = {}
        for name, path in found.items():
            result = bundle.read_result(path)
            settings = _settings(result)
            if result["complete"] and settings is not None:
                out[name] = settings
        _INDEX[scale] = (stamp, out)
    return _INDEX[scale][1]


def name_of(scale: str, model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig,
            fingerprint: str | None = None) -> str | None:
    """The name of the shipped, finished model trained with these settings (on data of this
    ``fingerprint``, when given); None if the bundle holds none."""
    for name, settings in index(scale).items():
        if settings[:3] == (model_cfg, data_cfg, train_cfg) and fingerprint in (None, settings[3]):
            return name
    return None


def find(scale: str, model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig,
         fingerprint: str) -> ShippedRun | None:
    """The shipped, finished model trained with exactly these settings on this data, if any."""
    name = name_of(scale, model_cfg, data_cfg, train_cfg, fingerprint)
    if name is None:
        return None
    key = (scale, name, bundle.stamp(scale))  # one object a model while the bundle is unchanged:
    if key not in _SERVED:  # its measurements are read once a process
        _SERVED[key] = ShippedRun(bundle.bundle_dir(scale) / name)
    return _SERVED[key]


_SERVED: dict[tuple, ShippedRun] = {}


# ----------------------------------------------------------------------------- what the shipped models say of a core

def kept(scale: str, name: str) -> tuple[int, frozenset[int]]:
    """(the step of the training state a stopped sitting kept for model ``name`` of ``scale``,
    the sizes it measured, in steps): what the next sitting resumes from; (0, {}) when none
    is kept (or it cannot be read: the run then starts again)."""
    return kept_in(bundle.emergence_state(scale, name))


def kept_in(work) -> tuple[int, frozenset[int]]:
    """:func:`kept` of the training state kept in the folder ``work`` (a model's, or a check's)."""
    from rflens.training.trainer import CHECKPOINT_POINTER

    try:
        step = int(storage.read_json(work / CHECKPOINT_POINTER)["step"]) if (work / CHECKPOINT_POINTER).is_file() else 0
        points = storage.read_json(work / bundle.KEPT_POINTS) if (work / bundle.KEPT_POINTS).is_file() else []
        return step, frozenset(int(p["steps"]) for p in points)
    except (OSError, ValueError, KeyError, TypeError):
        return 0, frozenset()


def _rates(scale: str) -> dict[str, list[tuple[float, float]]]:
    """{vector unit: [:func:`rflens.training.cost.rates` of each finished shipped model trained
    on a CPU with it]}: the models of ``scale``'s bundle, or, while it has none, of every
    shipped preset's (a FLOP rate is the core's, whichever run it was measured in)."""
    from rflens.training import cost

    pools: dict[str, list[tuple[float, float]]] = {}
    found = [(scale, name) for name in bundle.complete(scale)] or [
        (other, name) for other in presets.NAMES if presets.get(other).shipped for name in bundle.complete(other)]
    for where, name in found:
        res = bundle.load(name, where)
        rate = cost.rates(res)
        if rate is not None:
            pools.setdefault(res.get("cpu") or "an unrecorded vector unit", []).append(rate)
    return pools


def core_speeds(scale: str = "long") -> dict:
    """{vector unit: the one-core :class:`rflens.training.cost.Speed` of the shipped models
    trained on CPUs with it}."""
    from rflens.training.cost import median_speed

    return {cpu: median_speed(pool, f"{cpu} CPUs") for cpu, pool in _rates(scale).items()}


def one_core_speed(scale: str = "long"):
    """The one-core :class:`rflens.training.cost.Speed` of the shipped finished models trained
    on a CPU with this vector unit (else of all of them), from their wall times and FLOPs;
    None when none is shipped."""
    from rflens.training import machine
    from rflens.training.cost import median_speed

    pools = _rates(scale)
    here = machine.cpu_capability()
    pool = pools.get(here) or [r for rs in pools.values() for r in rs]
    if not pool:
        return None
    return median_speed(pool, f"{here} CPUs like this one" if here in pools else "other machines")


def one_core_minutes(specs: list, run: presets.LongRun, at=None, *, resumed: bool = False) -> list[float] | None:
    """The one-core minutes of each model of ``specs`` of the long run ``run`` at ``at``
    (default :func:`one_core_speed`, the shipped models' speed on this kind of CPU), or, with
    ``resumed``, of what is left of each from its kept state (:func:`kept`); None when no
    model is shipped to time."""
    from rflens.setup.settings import resolve

    at = at or one_core_speed(run.name)
    if at is None:
        return None
    out = []
    for spec in specs:
        r = resolve(run, spec.pos, spec.corpus, spec.settings())
        out.append(at.minutes(r.model, r.train, run.eval, run.measured_points(r.train),
                              *(kept(run.name, spec.name) if resumed else ())))
    return out


def one_core_cost(specs: list, run: presets.LongRun, at=None, *, resumed: bool = False) -> str:
    """One line: the time ``specs`` take to train (with ``resumed``, what is left of them from
    their kept states), on one core and on two, and the speed that times them
    (:func:`rflens.training.cost.one_core_line`)."""
    from rflens.training.cost import one_core_line

    if not specs:
        return "nothing: no model is left to train"
    at = at or one_core_speed(run.name)
    if at is None:
        return "not timed: no finished model shipped yet"
    return one_core_line(one_core_minutes(specs, run, at, resumed=resumed), at)
