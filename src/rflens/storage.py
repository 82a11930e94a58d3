"""Files on disk: the project's folders, atomic writes, checksums, a file lock and cached results.

Every file rflens writes (token streams, tokenizers, weights, checkpoints, JSON results)
goes through :func:`atomic_write` or one of its wrappers: it is written to a temporary
name beside its destination, flushed to disk and renamed over it, so a reader (or a
process started after a crash) sees the old file or the whole new one, never half of one.

Folders are read from the environment at call time, never frozen at import:

* ``$RFLENS_ROOT``, else the nearest folder above the working directory that holds the
  project's files, else the repository of an editable install (:func:`project_dir`); an
  installed package (``pip install .``, no clone) finds no repository and uses the working
  directory, where the book and the shipped bundles are not: :func:`require_checkout`
  says so in one line;
* ``$RFLENS_DATA``, else ``<project>/data`` (:func:`data_dir`);
* ``$RFLENS_RUNS``, else ``<project>/runs`` (:func:`runs_dir`);
* ``$RFLENS_REFERENCE``, else ``<project>/reference`` (:func:`reference_dir`): the shipped
  results of long runs (rflens.longrun.plan), part of the repository.

This module imports neither torch nor anything of rflens but its errors.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import pickle
import re
import stat
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from filelock import FileLock

from rflens.errors import UserError

SAMPLE_BYTES = 4 * 2**20  # sha256_file(sample=True) reads the first and the last 4 MiB


# ----------------------------------------------------------------------------- folders

def project_dir() -> Path:
    """The project folder: ``$RFLENS_ROOT``, else the nearest folder above the working
    directory with the project's files, else the repository of the installed package."""
    env = os.environ.get("RFLENS_ROOT")
    if env:
        return Path(env).expanduser().resolve()
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "pyproject.toml").is_file() and (d / "src" / "rflens").is_dir():
            return d
        if (d / "_toc.yml").is_file():
            return d
    return package_repo()


def is_checkout(path) -> bool:
    """Whether ``path`` is a clone of the rflens repository (its book and its package)."""
    path = Path(path)
    return (path / "pyproject.toml").is_file() and (path / "src" / "rflens").is_dir() and (path / "book").is_dir()


def package_repo() -> Path:
    """The repository the package runs from: ``src/rflens/..`` of a clone (an editable
    install, or the package imported from src/). An installed package (site-packages) has
    no repository beside it: then ``$RFLENS_ROOT``, else the nearest clone above the working
    directory, else the working directory itself (see :func:`require_checkout`)."""
    source = Path(__file__).resolve().parents[2]
    if is_checkout(source):
        return source
    env = os.environ.get("RFLENS_ROOT")
    if env:
        return Path(env).expanduser().resolve()
    here = Path.cwd().resolve()
    return next((d for d in (here, *here.parents) if is_checkout(d)), here)


def require_checkout(what: str) -> Path:
    """The repository (:func:`package_repo`), or a UserError of one line naming ``what``
    the caller needs from it and where to point rflens."""
    repo = package_repo()
    if not is_checkout(repo):
        raise UserError(f"{what} ships with the rflens repository, not with the installed package: run this "
                         f"command inside a clone of the repository, or set RFLENS_ROOT to one (none at {repo})")
    return repo


def data_dir() -> Path:
    """Where corpora live: ``$RFLENS_DATA``, else ``<project>/data``."""
    env = os.environ.get("RFLENS_DATA")
    return Path(env).expanduser().resolve() if env else project_dir() / "data"


def runs_dir(check: bool = True) -> Path:
    """Where trained models and their results live: ``$RFLENS_RUNS``, else ``<project>/runs``.
    With ``check`` (every caller but an error message's), a UserError of one line when the
    run store and a shipped bundles' folder (:func:`reference_dirs`) are one inside the other:
    runs written there would land in the bundles, whose manifests no longer vouch for them."""
    env = os.environ.get("RFLENS_RUNS")
    path = Path(env).expanduser().resolve() if env else project_dir() / "runs"
    if check:
        _check_apart(path, env)
    return path


def reference_dirs() -> list[Path]:
    """The shipped bundles' folders no command but the bundle's writers writes into, resolved:
    :func:`reference_dir` and the repository's own ``<project>/reference``."""
    return list(dict.fromkeys([reference_dir().resolve(), (project_dir() / "reference").resolve()]))


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both resolved)."""
    return path == folder or folder in path.parents


_APART: set = set()  # (run store, bundles' folders) found apart, by this process


def _check_apart(runs: Path, env: str | None) -> None:
    """UserError unless the run store ``runs`` (``$RFLENS_RUNS`` given as ``env``, or the
    default) and each shipped bundles' folder are apart: neither is, or holds, the other."""
    runs = runs.resolve()
    refs = reference_dirs()
    key = (runs, *refs)
    if key in _APART:
        return
    store = (f"the run store RFLENS_RUNS={env}" + ("" if env == str(runs) else f" ({runs})") if env
             else f"the run store {runs} (RFLENS_RUNS unset)")
    ref_env = os.environ.get("RFLENS_REFERENCE")
    for ref in refs:
        mine = bool(ref_env) and ref == reference_dir().resolve()
        bundles = (f"RFLENS_REFERENCE={ref_env}" + ("" if ref_env == str(ref) else f" ({ref})") if mine
                   else f"the shipped bundles' folder {ref}")
        fix = ("point RFLENS_RUNS at a folder apart from the bundles (unset, it is <project>/runs)"
               + (", or RFLENS_REFERENCE at the folder that holds only the bundles" if mine else ""))
        if _inside(runs, ref):
            raise UserError(f"{store} is inside {bundles}: runs written there would land in the shipped bundles: "
                            + fix)
        if _inside(ref, runs):
            raise UserError(f"{bundles} is inside {store}: runs written there, and runs --clean, would change the "
                            "shipped bundles: " + fix)
    _APART.add(key)


def reference_dir() -> Path:
    """The shipped long-run results: ``$RFLENS_REFERENCE``, else ``<project>/reference``."""
    env = os.environ.get("RFLENS_REFERENCE")
    return Path(env).expanduser().resolve() if env else project_dir() / "reference"


# ----------------------------------------------------------------------------- writing

@contextlib.contextmanager
def atomic_write(path, mode: str = "wb") -> Iterator:
    """Open a temporary file beside ``path`` for writing; on success it replaces ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
    """A temporary path beside ``path`` for writers that want a file name (safetensors);
    renamed over ``path`` on success, removed on an exception."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.chmod(tmp, _file_mode())  # some writers create their files 0600: give it the usual mode
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _file_mode() -> int:
    """The mode ``open`` gives a new file here: 0666 less the process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_write(path) as f:
        f.write(data)


def write_json(path, obj, default: Callable | None = None, newline: bool = False) -> None:
    """Write JSON atomically (indent 1, sorted keys). ``default`` converts values json
    cannot write, as in ``json.dump``; ``newline`` ends the file with one."""
    text = json.dumps(obj, indent=1, sort_keys=True, default=default) + ("\n" if newline else "")
    write_bytes(path, text.encode())


class NotRegularFile(OSError):
    """A path to read that is not a regular file (a FIFO, a socket, a device): reading it could
    block for ever or never end, so it is refused before a byte is read."""


def open_regular(path):
    """``path`` opened for reading in binary, if it is a regular file (after links): opened
    without blocking (a FIFO would wait for a writer) and checked before anything is read;
    :class:`NotRegularFile` (an OSError) otherwise."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", os.fspath(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


MAX_JSON_DEPTH = 64  # of arrays and objects nested in a file rflens reads: its own files nest a handful deep
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a string literal, escapes included
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")  # an empty pair: one scan peels one level
_DIGITS = bytes.maketrans(b"0123456789", b"9" * 10)
# where a number could pass a float's range: an exponent of three digits or more, or 300 digits in a row
_HUGE = (b"e999", b"E999", b"e+999", b"E+999", b"9" * 300)


class UnreadableJSON(UserError, ValueError):
    """A JSON file rflens will not read: nested deeper than :data:`MAX_JSON_DEPTH`, or holding a
    number beyond a float's range (or NaN or an infinity, where finite numbers are read). A
    ValueError too, so a reader that takes an unreadable file for a damaged one (and
    recomputes it, or names its own fix) still does; one line otherwise. ``why``: what is wrong
    with it, for a reader that names its own fix."""

    def __init__(self, where, why: str):
        self.why = why
        super().__init__(f"{where} is not a file rflens reads ({why}): restore it, or remove it if rflens wrote it "
                         "(it is then made again)")


def _json_depth_exceeds(bare: bytes, limit: int) -> bool:
    """Whether the arrays and objects of the JSON text ``bare`` (its strings dropped) nest
    deeper than ``limit``: found before parsing (the parser recurses once a level, and a deep
    enough file exhausts Python's stack), without recursing: innermost pairs peeled off."""
    if bare.count(b"[") + bare.count(b"{") <= limit:
        return False
    brackets = bare.translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        peeled = _INNERMOST.sub(b"", brackets)
        if peeled == brackets:  # unbalanced: not JSON, which the parser says
            return False
        brackets = peeled
        if not brackets:
            return False
    return True


def _may_overflow(bare: bytes) -> bool:
    """Whether a number of the JSON text ``bare`` (its strings dropped) may pass a float's
    range: then numbers are read one by one and checked, else at the parser's speed."""
    digits = bare.translate(_DIGITS)
    return any(pattern in digits for pattern in _HUGE)


class _NotFinite(ValueError):
    """A number of a JSON text that no float holds, or NaN or an infinity where finite numbers are read."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: Python reads it as infinity
        raise _NotFinite(f"the number {_cut(text)}, beyond a float's range")
    return value


def _float_sized_int(text: str) -> int:
    value = int(text)
    if len(text) > 300 and abs(value) >= 2 ** 1024:  # no float holds it: float(value) would overflow
        raise _NotFinite(f"the number {_cut(text)}, beyond a float's range")
    return value


def _no_constant(text: str):
    raise _NotFinite(f"{text}, not a finite number")


def _cut(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text):,} characters)"


def parse_json(data: bytes | str, where, *, finite: bool = True) -> object:
    """The JSON text ``data`` (of the file ``where``) parsed, or :class:`UnreadableJSON`
    naming the file when it nests deeper than :data:`MAX_JSON_DEPTH`, holds a number no float
    holds (``1e400``, which Python would read as infinity) or, with ``finite``, NaN or an
    infinity (``json.dumps`` writes them; a cache of computed results may hold them, the
    files whose numbers are counts, steps and sizes may not). Malformed JSON raises
    ValueError, as ``json.loads`` does."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    bare = _JSON_STRING.sub(b"", raw)
    if _json_depth_exceeds(bare, MAX_JSON_DEPTH):
        raise UnreadableJSON(where, f"its JSON nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        numbers = {"parse_float": _finite_float, "parse_int": _float_sized_int} if _may_overflow(bare) else {}
        return json.loads(data, **numbers, **({"parse_constant": _no_constant} if finite else {}))
    except _NotFinite as err:
        raise UnreadableJSON(where, f"it holds {err}") from None
    except RecursionError:  # nested within the limit, yet deeper than this stack allows
        raise UnreadableJSON(where, "its JSON nests too deep") from None


def read_json(path, *, finite: bool = True):
    """The JSON file ``path`` (a regular file), parsed by :func:`parse_json`."""
    with open_regular(path) as f:
        return parse_json(f.read(), path, finite=finite)


_PARSED: dict[str, tuple] = {}  # path -> (the file's identity and change times, its parsed JSON pickled)


def read_json_cached(path, *, finite: bool = True):
    """:func:`read_json`, parsed once a process while the file's inode, size and change times
    stay the same (as :func:`sha256_file` remembers digests); each call gets its own copy."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, finite)
    hit = _PARSED.get(os.fspath(path))
    if hit is None or hit[0] != key:
        hit = _PARSED[os.fspath(path)] = (key, pickle.dumps(read_json(path, finite=finite), pickle.HIGHEST_PROTOCOL))
    return pickle.loads(hit[1])


def fresh_copy(obj):
    """A deep copy of a result (parsed JSON, arrays) by a pickle round trip: exact, and many
    times faster than ``copy.deepcopy`` on thousands of floats."""
    return pickle.loads(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))


# ----------------------------------------------------------------------------- checking

_DIGESTS: dict[tuple, str] = {}  # (file's identity and change times, sample) -> digest, for this process


def sha256_file(path, sample: bool = False) -> str:
    """sha256 of a file; ``sample``: of its first and last SAMPLE_BYTES only (a cheap check
    for very large files). Remembered for the process while the file's inode, size and
    change times stay the same (any write changes its ctime, which no caller can set back)."""
    st = os.stat(path)
    key = (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, sample)
    if key not in _DIGESTS:
        _DIGESTS[key] = _sha256(path, sample)
    return _DIGESTS[key]


def _sha256(path, sample: bool) -> str:
    h = hashlib.sha256()
    with open_regular(path) as f:
        if sample:
            h.update(f.read(SAMPLE_BYTES))
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - SAMPLE_BYTES))
            h.update(f.read(SAMPLE_BYTES))
        else:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()


SETTLED_NS = 2 * 10**9  # a file changed this recently may change again within its clock tick: not remembered


def sha256_kept(path, memo) -> str:
    """sha256 of the whole of a file, remembered across processes in the folder ``memo``
    with the file's path, device, inode, size and change times: read back, not hashed
    again, until any of them changes (any write changes the ctime, which no caller can set
    back). A file that changed in the last :data:`SETTLED_NS`, or while it was hashed, is
    not remembered; a memo that cannot be written or read is only a slower call."""
    path = Path(path).absolute()
    st = os.stat(path)
    stamp = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    entry = Path(memo) / f"{hashlib.sha256(os.fsencode(path)).hexdigest()[:32]}.json"
    try:
        seen = read_json(entry)
        if (isinstance(seen, dict) and seen.get("path") == str(path) and seen.get("stat") == stamp
                and isinstance(seen.get("sha256"), str) and len(seen["sha256"]) == 64):
            return seen["sha256"]
    except (OSError, ValueError):
        pass
    started = time.time_ns()
    digest = sha256_file(path)
    after = os.stat(path)
    if (stamp == [after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns]
            and started - max(st.st_mtime_ns, st.st_ctime_ns) >= SETTLED_NS):
        with contextlib.suppress(OSError):
            entry.parent.mkdir(parents=True, exist_ok=True)
            write_json(entry, {"path": str(path), "stat": stamp, "sha256": digest})
    return digest


def dir_size(path) -> int:
    """Bytes of all files under ``path``."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


# ----------------------------------------------------------------------------- locking

@contextlib.contextmanager
def locked(path) -> Iterator[None]:
    """An exclusive lock across processes on the lock file ``path`` (created if missing).

    The operating system releases it when its holder dies, so a killed build or training
    never leaves the store locked.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path)):
        yield


@contextlib.contextmanager
def locked_folder(path, timeout: float | None = None) -> Iterator[None]:
    """An exclusive lock across processes on the folder ``path`` itself (it must exist): no
    lock file is made, so a folder the repository tracks (a shipped bundle) stays as it is.
    Released by the operating system when its holder dies, like :func:`locked`; each call
    takes it anew (a nested call of the same process waits for ever: callers keep count).
    ``timeout``: seconds to wait before :class:`TimeoutError` (None: as long as it takes)."""
    try:
        import fcntl
    except ImportError:  # no flock: the lock file beside the folder
        with locked(Path(path).with_name(f".{Path(path).name}.lock")):
            yield
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            end = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > end:
                        raise TimeoutError(f"{path} stayed locked for {timeout:g} s") from None
                    time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


# ----------------------------------------------------------------------------- cached results

CACHE_KEY_LENGTH = 16  # hex digits of sha256 naming a cached result


def cache_entry(folder: Path, name: str, params: dict) -> Path:
    """Where the result ``name`` computed with ``params`` is cached in ``folder``."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:CACHE_KEY_LENGTH]
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    return Path(folder) / f"{safe}-{digest}.json"


def cached_file(path: Path, name: str, params: dict, compute: Callable[[], dict]) -> tuple[dict, bool]:
    """``compute()``'s result, stored as JSON at ``path`` with its ``params`` and a checksum;
    (result, whether it was read from the file). A stored entry of other params, or one that
    fails its checksum, is computed again; two identical requests compute once (a lock)."""
    wanted = json.loads(json.dumps(params, default=str))
    warned = []  # the entry is read twice (before and under the lock): one warning

    def stored():
        if path.is_file():
            try:
                entry = read_json(path, finite=False)  # a computed result may hold NaN
                if entry.get("params") == wanted:
                    if entry.get("sha256") == _digest(entry["result"]):
                        return entry["result"]
                    if not warned:
                        print(f"warning: {path} fails its checksum (edited or damaged): recomputing it",
                              file=sys.stderr)
                        warned.append(path)
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                pass  # an unreadable cache entry is recomputed
        return None

    hit = stored()
    if hit is not None:
        return hit, True
    with contextlib.ExitStack() as stack:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(locked(path.with_name(f".{path.name}.lock")))
        except OSError:
            pass  # a store we cannot write: compute, and hand the result back uncached
        hit = stored()
        if hit is not None:
            return hit, True
        result = json.loads(json.dumps(compute(), default=str))  # the same types as a later cache hit
        try:
            write_json(path, {"name": name, "params": wanted, "result": result, "sha256": _digest(result),
                              "created": time.time()})
        except OSError as err:
            print(f"warning: the result could not be cached ({err.strerror}: {err.filename or path})", file=sys.stderr)
    return result, False


def files_digest(paths) -> str:
    """sha256 over ``paths`` (sorted), each named and read whole: one value that changes when
    any of them is added, removed or edited."""
    h = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        h.update(str(path).encode() + b"\0" + sha256_file(path).encode() + b"\0")
    return h.hexdigest()


def _digest(result) -> str:
    """sha256 of a cached result's canonical JSON: an edited or damaged entry is recomputed."""
    return hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()
