"""Which model: a folder written by ``save_pretrained``, or a hub name found in the local Hugging
Face cache (downloaded when the hub is reachable), resolved to a :class:`ModelRef` that holds its
folder, its config, its L_tr and its identity for the cache (a folder: its path, config and the
sha256 of its files; a hub model: its name and commit). The config field that names the context
the model was built for (``n_positions``, ``max_position_embeddings``) is taken as L_tr: for
GPT-2 and Pythia that is the training length; a config without one (BLOOM) leaves L_tr unknown,
and the results say so. A model with learned absolute positions (GPT-2, OPT) has no position
beyond its table, so :func:`check_positions` refuses a longer length in one line instead of
letting it fail inside the model.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from rflens import storage
from rflens.errors import UserError

POSITION_FIELDS = ("n_positions", "max_position_embeddings")  # the config fields taken as L_tr
# model types whose positions are a learned table: nothing exists beyond it
LEARNED_ABSOLUTE = frozenset({"gpt2", "gpt_neo", "gpt_bigcode", "opt", "biogpt"})
LARGE_FILE = 256 * 2**20  # the sha256 of a file above this is kept on disk until the file changes
DIGESTS = "hf/digests"  # where in the run store (storage.sha256_kept)
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
LOAD_FIX = "give a folder written by save_pretrained (e.g. one of rflens.hf.tiny_random_models), " \
           "or a hub name that is in the local Hugging Face cache"


class ModelRef:
    """A model to load: where its files are, its config and what identifies it."""

    def __init__(self, name: str, folder: Path, identity: dict):
        self.name, self.folder, self.identity = name, folder, identity
        try:
            self.config = storage.read_json(folder / "config.json", finite=False)  # as transformers reads it
        except storage.UnreadableJSON:
            raise
        except (OSError, ValueError) as err:
            raise UserError(f"{folder / 'config.json'} cannot be read ({type(err).__name__}): {LOAD_FIX}") from None
        if not isinstance(self.config, dict):
            raise UserError(f"{folder / 'config.json'} holds a JSON {type(self.config).__name__}, not a model's "
                            f"settings (an object): {LOAD_FIX}")
        for field in POSITION_FIELDS:  # the position count is L_tr: a number of positions, or absent
            value = self.config.get(field)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 2):
                raise UserError(f"{folder / 'config.json'} gives {field} = {json.dumps(value)}, not a number of "
                                f"positions (an integer >= 2): fix the config, or {LOAD_FIX}")
        self.model_type: str = str(self.config.get("model_type", "?"))

    def __repr__(self) -> str:
        return f"ModelRef({self.name!r}, {self.model_type}, l_tr={self.l_tr})"

    @property
    def l_tr_field(self) -> str | None:
        """The config field taken as L_tr, or None when the config names no position count."""
        return next((f for f in POSITION_FIELDS if isinstance(self.config.get(f), int)), None)

    @property
    def l_tr(self) -> int | None:
        return self.config[self.l_tr_field] if self.l_tr_field else None

    @property
    def max_positions(self) -> int | None:
        """The last position + 1 a learned-absolute model has; None for relative schemes."""
        return self.l_tr if self.model_type in LEARNED_ABSOLUTE else None

    def check_length(self, length: int, flag: str = "--lengths") -> None:
        check_positions(self.name, self.max_positions, length, flag)


def check_positions(name: str, max_positions: int | None, length: int, flag: str = "--lengths") -> None:
    """One line when ``length`` tokens need positions a learned-absolute model does not have."""
    if max_positions is not None and length > max_positions:
        raise UserError(f"{name} has only {max_positions} positions (learned absolute position embeddings): "
                        f"length {length} does not fit; use {flag} up to {max_positions}")


def resolve(name_or_path, revision: str | None = None) -> ModelRef:
    """The folder and identity of a model: a folder written by ``save_pretrained``, or a
    hub name found in the local Hugging Face cache (downloaded when the hub is reachable)."""
    name = str(name_or_path)
    path = Path(name).expanduser()
    if path.is_dir():
        if revision is not None:
            raise UserError(f"--revision {revision} picks a version of a hub model; {path} is a folder, which has only "
                            "the one it holds: drop --revision")
        if not (path / "config.json").is_file():
            raise UserError(f"{path} has no config.json, so it is not a saved model: {LOAD_FIX}")
        folder = path.resolve()
        config = (folder / "config.json").read_bytes()
        identity = {"folder": str(folder), "config_sha256": hashlib.sha256(config).hexdigest(),
                    "files": _file_fingerprints(folder)}
        return ModelRef(name, folder, identity)
    if path.exists():
        raise UserError(f"{path} is a file, not a model folder: {LOAD_FIX}")
    if not HUB_ID.match(name) or name.startswith((".", "~")):
        raise UserError(f"no model folder {path}: {LOAD_FIX}")
    folder = _hub_snapshot(name, revision)
    return ModelRef(name, folder, {"hub": name, "commit": folder.name})


def _file_fingerprints(folder: Path) -> dict[str, str]:
    """sha256 of the whole of every file of a model folder, so that any changed byte of its
    weights changes the cache key. The digest of a file above :data:`LARGE_FILE` is kept in
    the run store (:data:`DIGESTS`) until the file changes, so a second call reads it back."""
    out = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and not p.name.startswith("."):
            out[p.name] = (storage.sha256_file(p) if p.stat().st_size <= LARGE_FILE
                           else storage.sha256_kept(p, storage.runs_dir() / DIGESTS))
    return out


def _hub_offline() -> str | None:
    """The environment variable that puts the hub off limits, if one does."""
    return next((v for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
                 if os.environ.get(v, "").lower() in ("1", "true", "yes", "on")), None)


def _hub_snapshot(name: str, revision: str | None) -> Path:
    """The snapshot folder of a hub model in the local cache; downloaded first when it is
    not there and the hub can be reached."""
    from huggingface_hub import try_to_load_from_cache

    def cached() -> Path | None:
        found = try_to_load_from_cache(name, "config.json", revision=revision)
        return Path(found).parent if isinstance(found, str) else None

    folder = cached()
    if folder is not None:
        return folder
    where = f"{name}{'@' + revision if revision else ''}"
    offline = _hub_offline()
    if offline:
        raise UserError(f"no model folder {name}, and {where} is not in the local Hugging Face cache "
                        f"({offline} is set): {LOAD_FIX}")
    from rflens.data.sources import check_hub

    try:
        check_hub()
    except UserError:
        raise UserError(f"no model folder {name}, and {where} is not in the local Hugging Face cache "
                        f"(the hub cannot be reached): {LOAD_FIX}") from None
    try:
        from huggingface_hub import list_repo_files, snapshot_download

        files = list_repo_files(name, revision=revision)
        weights = ["*.safetensors"] if any(f.endswith(".safetensors") for f in files) else ["*.bin"]
        # the config, the tokenizer's files and one format of the weights, not every format the repo has
        snapshot_download(name, revision=revision, allow_patterns=["*.json", "*.txt", "*.model", *weights])
    except Exception as err:  # noqa: BLE001 - the hub's errors are many; the fix is the same
        raise UserError(f"cannot download {where} from the Hugging Face hub ({_first_line(err)}): {LOAD_FIX}") from None
    folder = cached()
    if folder is None:
        raise UserError(f"{where} was downloaded but not found in the local cache: {LOAD_FIX}")
    return folder


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__
