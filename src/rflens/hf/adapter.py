"""The adapter: :class:`CausalLMLens` gives a ``transformers`` causal LM the three calls through
which rflens's protocols read a model, ``model(idx, last_only=True)``, ``model.embed(idx)`` and
``model(embeds=..., last_only=True)``, so that its numbers come from the very code that measures
rflens's own models; :func:`load` reads one from a folder or hub name, with bf16 weights on CUDA
and float32 on CPU. ``transformers`` is imported only when a model is loaded.
"""

from __future__ import annotations

import contextlib
import inspect
import json

import torch
import torch.nn as nn

from rflens.errors import UserError
from rflens.hf.hub import _first_line, check_positions, LOAD_FIX, ModelRef, POSITION_FIELDS, resolve
from rflens.measure import resources


MISSING_SHOWN = 6  # tensors a refusal of an incomplete checkpoint names


@contextlib.contextmanager
def _quiet_transformers(progress: bool):
    """transformers without its progress bars (unless ``progress``) and its warnings."""
    from transformers.utils import logging as tlog

    bars, level = tlog.is_progress_bar_enabled(), tlog.get_verbosity()
    if not progress:
        tlog.disable_progress_bar()
    tlog.set_verbosity_error()
    try:
        yield
    finally:
        tlog.set_verbosity(level)
        if bars:
            tlog.enable_progress_bar()


class CausalLMLens(nn.Module):
    """A ``transformers`` causal LM seen through rflens's model interface.

    ``forward(idx)`` or ``forward(embeds=...)`` -> logits (B, L', vocab), with L' = 1 when
    ``last_only``; ``embed(idx)`` -> the input token embeddings (B, L, d), before any
    position is added (GPT-2 adds ``wpe`` inside the model), which is where Section 4 takes
    its gradients. ``kernel`` is accepted and ignored: the model chooses its own attention.
    """

    def __init__(self, model, name: str = "model", max_positions: int | None = None):
        super().__init__()
        self.hf = model.eval()
        self.name = name
        self.max_positions = max_positions if max_positions is not None else learned_positions(model)
        self._keep = "logits_to_keep" in inspect.signature(model.forward).parameters

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        return self.hf.get_input_embeddings()(idx)

    def forward(self, idx: torch.Tensor | None = None, *, embeds: torch.Tensor | None = None,
                last_only: bool = False, kernel: str | None = None) -> torch.Tensor:
        if (idx is None) == (embeds is None):
            raise TypeError("give exactly one of idx and embeds")
        length = (idx if idx is not None else embeds).shape[1]
        check_positions(self.name, self.max_positions, length)
        kw = {"logits_to_keep": 1} if (last_only and self._keep) else {}
        out = self.hf(input_ids=idx, inputs_embeds=embeds, use_cache=False, **kw)
        return out.logits[:, -1:] if last_only else out.logits  # (B, L', v)


def learned_positions(model) -> int | None:
    """The size of a model's learned position table (a ``wpe`` or ``*position*`` embedding),
    as its config gives it where it does; None when positions are not a table."""
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(module, nn.Embedding) and (leaf == "wpe" or "position" in leaf):
            counts = [getattr(model.config, f, None) for f in POSITION_FIELDS]
            return next((c for c in counts if isinstance(c, int)), module.num_embeddings)
    return None


def check_complete(name: str, info: dict) -> None:
    """One line when the checkpoint lacks tensors the model has: transformers would fill them
    with random numbers, and every measurement of the model would be of a model nobody trained."""
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        shown = ", ".join(missing[:MISSING_SHOWN]) + (f" and {len(missing) - MISSING_SHOWN} more"
                                                       if len(missing) > MISSING_SHOWN else "")
        raise UserError(f"the checkpoint of {name} lacks {len(missing)} of the model's tensors ({shown}); they would "
                        "be random, not trained: save the whole model again with save_pretrained, or download it "
                        "again")


def device_and_dtype(device=None) -> tuple[torch.device, torch.dtype]:
    """CUDA with bf16 weights where there is a GPU, else the CPU with float32."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return device, (torch.bfloat16 if device.type == "cuda" else torch.float32)


_DECLARED: dict[tuple, int | None] = {}  # (folder, config) -> the parameters its config declares


def declared_parameters(ref: ModelRef) -> int | None:
    """The number of parameters of the model ``ref``'s config declares, counted on a model
    built on the meta device (no memory, no weights read): what loading it will allocate,
    whatever its weight files hold. None when transformers cannot build it from its config
    (the load then says why)."""
    key = (str(ref.folder), json.dumps(ref.config, sort_keys=True, default=str))
    if key not in _DECLARED:
        try:
            with _quiet_transformers(False):
                from transformers import AutoConfig, AutoModelForCausalLM

                config = AutoConfig.from_pretrained(ref.folder)
                with torch.device("meta"):
                    built = AutoModelForCausalLM.from_config(config)
            _DECLARED[key] = sum(p.numel() for p in built.parameters())
        except Exception:  # noqa: BLE001 - a config transformers cannot build: the load names it
            _DECLARED[key] = None
    return _DECLARED[key]


def check_memory(ref: ModelRef, device=None) -> None:
    """One line naming the memory needed when loading ``ref`` would take more than this
    machine has free, before anything is loaded: its parameters as its config declares them
    (the weights are read into memory first, bf16 for a GPU, float32 on the CPU), or its
    weight files where those are larger (a float16 file is read as float32 on the CPU)."""
    device, dtype = device_and_dtype(device)
    size = torch.finfo(dtype).bits // 8
    weights = sum(p.stat().st_size for p in ref.folder.iterdir()
                  if p.suffix in (".safetensors", ".bin", ".pt", ".pth") and p.is_file())
    stored = str(ref.config.get("dtype") or ref.config.get("torch_dtype") or "float32")
    files = weights * (2 if stored in ("float16", "bfloat16") and size == 4 else 1)
    params = declared_parameters(ref)
    declared = (params or 0) * size
    what = f"{ref.name} in {str(dtype).replace('torch.', '')}"
    if params and declared >= files:
        what += f" ({params / 1e9:,.2f} billion parameters, as its config declares)" if params >= 10**8 else \
            f" ({params:,} parameters, as its config declares)"
    resources.check(max(declared, files), what, "use a smaller model, or a machine with more memory"
                    + (" or a GPU" if device.type == "cpu" else ""))


def load(model, *, revision: str | None = None, device=None, progress: bool = False):
    """(CausalLMLens, tokenizer) of a folder or hub name (or a :class:`ModelRef`), after
    :func:`check_memory`."""
    ref = model if isinstance(model, ModelRef) else resolve(model, revision)
    device, dtype = device_and_dtype(device)
    check_memory(ref, device)
    try:
        with _quiet_transformers(progress):
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(ref.folder)
            hf_model, info = AutoModelForCausalLM.from_pretrained(ref.folder, dtype=dtype, output_loading_info=True)
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - a folder transformers cannot read: one line
        raise UserError(f"cannot load {ref.name} as a causal language model ({_first_line(err)}): {LOAD_FIX}") from None
    check_complete(ref.name, info)
    return CausalLMLens(hf_model.to(device), ref.name, ref.max_positions), tokenizer
