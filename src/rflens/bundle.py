"""The shipped bundle of a long run, and its models as a read-only layer of the run store.

A long run (:mod:`rflens.emergence`) ships each model in ``reference/<scale>/<name>/``
(:func:`rflens.storage.reference_dir`): ``result.json`` (settings, provenance, training
curve, every measured point), ``nll.npz`` (the per-segment NLLs of every point, float32),
``model.safetensors`` for the few models kept for the drift test, and ``manifest.json``
(the sha256 of the others, written last: a model without it is not shipped).

The run store serves a finished shipped model when it lacks one of the same settings
(:func:`find`, from :func:`rflens.runs.get_run`), so the chapters of that preset are built
without training. A shipped model holds what its finished run was measured on: per-segment
last-token NLLs at L_tr x length_mults and the normalised input gradient over
erf_length_mult x L_tr. :class:`ShippedRun` hands them out in the result format of
:func:`rflens.evaluate.perplexity` and :func:`rflens.receptive.receptive_field`; any other
measurement needs the weights, which only the drift models carry.

A shipped model is served whatever the code version is now (its provenance says which code
trained it): the drift test, which re-measures the models shipped with weights, says when
the shipped numbers have gone stale, not the code hash.
"""

from __future__ import annotations

import contextlib
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Callable

import numpy as np

from . import storage
from .config import DataConfig, EvalConfig, ModelConfig, TrainConfig, TrainedModel
from .errors import UserError

RESULT, NLL, MANIFEST, WEIGHTS = "result.json", "nll.npz", "manifest.json", "model.safetensors"
VERSION = 1  # of the bundle's layout
SCHEDULE_CHECK = "schedule_check.json"  # beside the models: rflens.emergence.schedule_check


def bundle_dir(scale: str = "long", root: Path | None = None) -> Path:
    return (storage.reference_dir() if root is None else Path(root)) / scale


def entries(scale: str = "long") -> dict[str, Path]:
    """The models of the bundle whose manifest is written (complete ones), by name."""
    root = bundle_dir(scale)
    if not root.is_dir():
        return {}
    return {d.name: d for d in sorted(root.iterdir()) if (d / MANIFEST).is_file()}


def complete(scale: str = "long") -> set[str]:
    """The shipped models trained to their full budget (not stopped part-way)."""
    return {name for name, path in entries(scale).items()
            if storage.read_json(path / RESULT).get("complete", True)}


def verify(path: Path) -> None:
    """UserError unless every file the manifest lists has its sha256."""
    manifest = storage.read_json(path / MANIFEST)
    for name, digest in manifest["sha256"].items():
        f = path / name
        if not f.is_file() or storage.sha256_file(f) != digest:
            raise UserError(f"the shipped result {path} is damaged ({name} does not match its sha256): "
                            "restore it from the repository (git checkout -- reference)")


def load(name: str, scale: str = "long") -> dict:
    """A shipped model's result.json with each point's NLLs (as float64 arrays) attached."""
    path = entries(scale).get(name)
    if path is None:
        raise UserError(f"no shipped long-run result for {name!r}: train it with "
                        f"`python -m rflens emergence --scale {scale} --only {name}`")
    verify(path)
    result = storage.read_json(path / RESULT)
    with np.load(path / NLL) as arrays:
        for point in result["points"]:
            point["nll"] = arrays[f"steps_{point['steps']}"].astype(np.float64)
    return result


def point_lengths(result: dict, point: dict) -> list[int]:
    """The evaluation lengths of a measured point (results shipped before points named them:
    the preset's L_tr x length_mults)."""
    return point.get("lengths") or [result["train"]["l_tr"] * m for m in result["eval"]["length_mults"]]


# ----------------------------------------------------------------------------- reading it

def label(result: dict) -> str:
    """'ALiBi Δ=4', 'window w=30', 'NoPE', 'window w=30 L_tr=128', 'Rotary (code)': the
    model's scheme, its swept setting and what else differs from the preset."""
    from .scales import FAMILIES
    from .schemes import title

    names = {"alibi": "ALiBi", "window": "window", "nope": "NoPE"}  # Table 1's words
    symbols = {"l_tr": "L_tr", "batch_size": "batch"}
    parts = [names.get(result["pos"]) or title(result["pos"])]
    settings = result["settings"]
    for key in sorted(settings, key=lambda k: (k not in FAMILIES, k == "batch_size")):  # the swept one first
        value = settings[key]
        symbol = FAMILIES[key].symbol if key in FAMILIES else symbols.get(key, key)
        parts.append(f"{symbol}={value}")
    if result.get("corpus", "prose") != "prose":
        parts.append(f"({result['corpus']})")
    return " ".join(parts)


def table(scale: str = "long", names: list[str] | None = None):
    """One row per shipped model and measured size: tokens, ppl@L, r@L with its paired
    interval (r_lo@L, r_hi@L), ERF (and whether the segment capped it, by the current rule of
    :func:`rflens.receptive.erf_capped`), the share of
    the gradient inside L_tr, the validation loss; in the column names of
    :mod:`rflens.results`. ``ppl_l_tr`` and ``r_horizon`` (with ``r_horizon_lo``,
    ``r_horizon_hi``) are each model's ppl(L_tr) and r(16 L_tr) at its own L_tr."""
    import pandas as pd

    from .receptive import erf_capped, theoretical_field
    from .results import EXTRAPOLATION_HORIZON

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
            lengths = point_lengths(res, p)
            for i, L in enumerate(lengths):
                row.update({f"ppl@{L}": p["ppl"][i], f"r@{L}": p["r"][i], f"r_lo@{L}": p["r_low"][i],
                            f"r_hi@{L}": p["r_high"][i]})
            top = lengths.index(max(L for L in lengths if L <= EXTRAPOLATION_HORIZON * l_tr))
            row.update({"ppl_l_tr": row.get(f"ppl@{l_tr}"), "r_horizon": p["r"][top], "r_horizon_lo": p["r_low"][top],
                        "r_horizon_hi": p["r_high"][top]})
            rows.append(row)
    return pd.DataFrame(rows)


def provenance(scale: str = "long"):
    """Where each shipped model's numbers come from: one row a model (finished or not, its
    last measured size, code version, commit, torch, CPU, device, threads, minutes)."""
    import pandas as pd

    rows = []
    for name, path in entries(scale).items():
        res = storage.read_json(path / RESULT)
        rows.append({"model": label(res), "finished": res["complete"], "tokens": res["points"][-1]["tokens"],
                     "points": len(res["points"]), "code version": res["code_version"],
                     "commit": (res["commit"] or "")[:10], "torch": res["torch"], "cpu": res.get("cpu", "not recorded"),
                     "device": res.get("device", "cpu"), "threads": res["threads"],
                     "minutes": round(res["train_seconds"] / 60), "finished at (UTC)": res["finished"]})
    return pd.DataFrame(rows)


def schedule_table(scale: str = "long"):
    """The shipped schedule check as a table (one row a length), or None if it was not run."""
    import pandas as pd

    path = bundle_dir(scale) / SCHEDULE_CHECK
    if not path.is_file():
        return None
    c = storage.read_json(path)
    rows = []
    for i, L in enumerate(c["lengths"]):
        rows.append({"name": c["name"], "tokens": c["tokens"], "L": L,
                     "r wsd": c["wsd"]["r"][i], "r wsd low": c["wsd"]["r_low"][i], "r wsd high": c["wsd"]["r_high"][i],
                     "r cosine": c["cosine"]["r"][i], "r cosine low": c["cosine"]["r_low"][i],
                     "r cosine high": c["cosine"]["r_high"][i],
                     "wsd / cosine": c["ratio"][i], "low": c["ratio_low"][i], "high": c["ratio_high"][i]})
    return pd.DataFrame(rows)


def cpu_capability() -> str:
    """The vector unit torch's CPU kernels were chosen for (``AVX2``, ``AVX512``, ...): two
    machines that differ in it round differently, so their numbers agree only to ~1e-5."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def cpu_features() -> str:
    """The instruction-set extensions that pick the math libraries' kernels (the AVX-512
    subsets, AMX, FMA), read from ``/proc/cpuinfo``; empty where that file is missing. Two
    machines of the same :func:`cpu_capability` can still round apart: NLLs re-measured on an
    AVX-512 machine with AMX moved by 3.3e-5 from those measured on one without."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return " ".join(sorted(f for f in flags if re.fullmatch(r"avx\w*|amx\w*|fma|f16c", f)))


# ----------------------------------------------------------------------------- the measured sizes

def sizes(scale: str = "long") -> list[int]:
    """The training tokens of the measured sizes of the preset's models."""
    from .scales import get

    t = get(scale).train
    from .train import point_steps

    return [steps * t.batch_size * t.l_tr for steps in point_steps(t)]


# ----------------------------------------------------------------------------- the run-store layer

# The measured size the run-store layer serves: None for each model's finished point.
_SIZE: ContextVar[int | None] = ContextVar("rflens_bundle_size", default=None)


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


class ShippedRun(TrainedModel):
    """A finished model of the shipped bundle, read like a :class:`rflens.runs.Run`."""

    shipped = True
    reused = True

    def __init__(self, path: Path):
        self.path = Path(path)
        verify(self.path)
        self.result = storage.read_json(self.path / RESULT)
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

    def __repr__(self) -> str:
        return f"ShippedRun({self.key}, code {self.result['code_version']}, trained {self.result['finished']} UTC)"

    @property
    def command(self) -> str:
        """The command line that trains this model again (with its emergence points)."""
        return f"python -m rflens emergence --scale {self.scale} --only {self.name}"

    @property
    def metrics(self) -> dict:
        last = self.result["points"][-1]
        curve = self.result["train_curve"]
        return {"val_loss": last["val_loss"], "final_train_loss": curve[-1][1] if curve else None,
                "train_seconds": self.result["train_seconds"], "tokens_per_s": None, "steps": last["steps"]}

    @property
    def provenance(self) -> dict:
        r = self.result
        return {k: r[k] for k in ("code_version", "commit", "torch", "threads", "train_seconds", "finished")}

    def verify(self, weights: bool = True) -> None:
        verify(self.path)

    @property
    def has_weights(self) -> bool:
        return (self.path / WEIGHTS).is_file()

    def measurable(self, lengths) -> list[int]:
        """The lengths of ``lengths`` this model's last-token perplexity can be read at: all
        of them with weights, else those the served point measured."""
        point = None if self.has_weights else self.final()
        return [int(L) for L in lengths if point is None or int(L) in point["lengths"]]

    def erf_segment(self, length: int) -> int:
        """``length`` with weights, else the segment the shipped receptive field was measured on."""
        return int(length) if self.has_weights else self.eval_cfg.erf_length_mult * self.l_tr

    def load_model(self):
        """The finished model (drift models only): UserError naming the command otherwise."""
        if not self.has_weights:
            raise UserError(f"the shipped model {self.key} carries no weights, only its measurements: "
                            f"train it with `{self.command}` to measure anything else")
        if _SIZE.get() is not None:
            raise UserError(f"the shipped weights of {self.key} are the finished model's, not the one at "
                            f"{_SIZE.get():,} tokens")
        from safetensors.torch import load_model

        from .model import TransformerLM

        model = TransformerLM(self.model_cfg)
        load_model(model, str(self.path / WEIGHTS), device="cpu")
        return model.eval()

    def corpus(self):
        if self._corpus is None:
            from . import data

            self._corpus = data.prepare(self.data_cfg, progress=False)
        return self._corpus

    def final(self) -> dict | None:
        """The point served: the finished model's, or the one of :func:`at_size`'s size (None
        when the model has no such size). NLLs (lengths, N) as float64, normalised gradients."""
        size = _SIZE.get()
        if size not in self._points:
            points = self.result["points"]
            point = points[-1] if size is None else next((p for p in points if p["tokens"] == size), None)
            if point is not None:
                with np.load(self.path / NLL) as arrays:
                    nll = arrays[f"steps_{point['steps']}"].astype(np.float64)
                point = {**point, "nll": nll, "lengths": point_lengths(self.result, point)}
            self._points[size] = point
        return self._points[size]

    def served(self, name: str, params: dict) -> dict | None:
        """The cached result ``name`` for ``params`` built from the shipped measurements, or
        None when the bundle does not hold it (other lengths, segments, protocol...)."""
        from .evaluate import last_token_result

        ev, point = self.eval_cfg, self.final()
        if point is None:
            return None
        rope = ev.rope_params()
        if name == "perplexity_last_token":
            # any of the measured lengths: every length scores the same last tokens
            want = {"protocol": "last_token", "n": ev.n_segments, "seed": ev.seed, "stride": None, **rope}
            lengths = [int(L) for L in params.get("lengths") or ()]
            if {k: params.get(k) for k in want} != want or not lengths or not set(lengths) <= set(point["lengths"]):
                return None
            rows = [point["lengths"].index(L) for L in lengths]
            out = last_token_result(point["nll"][rows], lengths, self.l_tr, ev.seed)
            return {**out, "seconds": point["measure_seconds"]}
        if name == "input_gradients":
            want = {"length": ev.erf_length_mult * self.l_tr, "n": ev.erf_samples, "seed": ev.seed, **rope}
            if {k: params.get(k) for k in want} != want:
                return None
            return {"length": want["length"], "n": want["n"], "seed": want["seed"],
                    "normalized": list(point["normalized"]), "seconds": point["measure_seconds"]}
        return None

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
        return storage.cached_file(storage.cache_entry(folder, name, params), name, params, compute)[0]


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
    """{name: settings} of the bundle's finished models (re-read when a manifest changes)."""
    root = bundle_dir(scale)
    found = entries(scale)
    stamp = (str(root), tuple((n, *((p / f).stat().st_mtime_ns for f in (MANIFEST, RESULT)))
                              for n, p in found.items()))
    if _INDEX.get(scale, (None,))[0] != stamp:
        out = {}
        for name, path in found.items():
            result = storage.read_json(path / RESULT)
            settings = _settings(result)
            if result.get("complete", True) and settings is not None:
                out[name] = settings
        _INDEX[scale] = (stamp, out)
    return _INDEX[scale][1]


def find(scale: str, model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig,
         fingerprint: str) -> ShippedRun | None:
    """The shipped, finished model trained with exactly these settings on this data, if any."""
    for name, settings in index(scale).items():
        if settings == (model_cfg, data_cfg, train_cfg, fingerprint):
            return ShippedRun(bundle_dir(scale) / name)
    return None
