"""A registry client dies with the build that started it, and what a killed fetch left is gone
at the next start. Nothing is downloaded: a stand-in ``apt-get`` (a shell script that records
its process id, waits, then "finishes its download") is spawned the way a real one is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rflens import storage
from rflens.data import archives as A
from rflens.errors import UserError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")

FAKE_APT = """#!/bin/sh
echo $$ > "$RFLENS_TEST_PID"
sleep {wait}
echo late > "$RFLENS_TEST_DONE"
exit 1
"""


def _fake_apt(tmp_path: Path, wait: float) -> dict:
    """An environment whose ``apt-get`` is the stand-in, and the files it writes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "apt-get").write_text(FAKE_APT.format(wait=wait))
    (bin_dir / "apt-get").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RFLENS_TEST_PID": str(tmp_path / "pid"),
            "RFLENS_TEST_DONE": str(tmp_path / "done")}


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its new parent to reap it does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


FETCH = """
from pathlib import Path
from rflens.data import archives as A
A.fetch(A.Archive("apt", "docs", "1.0", ("*",)), Path({root!r}), "a test corpus")
"""


def test_a_kill_9_of_the_build_takes_its_registry_client_with_it(tmp_path, monkeypatch):
    env = _fake_apt(tmp_path, wait=2)
    root = tmp_path / "data"
    build = subprocess.Popen([sys.executable, "-c", FETCH.format(root=str(root))], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = tmp_path / "pid"
    try:
        for _ in range(300):  # the build starts python, imports rflens, spawns the client
            if pid_file.is_file() and pid_file.read_text().strip():
                break
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert _alive(child)
        os.kill(build.pid, signal.SIGKILL)
        build.wait()
        for _ in range(40):
            if not _alive(child):
                break
            time.sleep(0.05)
        assert not _alive(child), "the registry client outlived the build that started it"
        time.sleep(2.5)  # past the stand-in's wait: a client still running would finish its download now
        assert not (tmp_path / "done").exists()
    finally:
        if build.poll() is None:
            build.kill()
    assert list((root / "sources").glob(".fetch-*"))  # the killed build's folder is left...
    with pytest.raises(UserError):  # ...until the next start (here a fetch whose client fails at once)
        _fetch_with(_fake_apt(tmp_path, wait=0), root, monkeypatch)
    assert not list((root / "sources").glob(".fetch-*"))


def _fetch_with(env: dict, root: Path, monkeypatch):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return A.fetch(A.Archive("apt", "other", "2.0", ("*",)), root, "a test corpus")


def test_a_fetch_at_work_keeps_its_folder_and_a_cached_start_clears_a_killed_ones(tmp_path, monkeypatch):
    sources = tmp_path / "data" / "sources"
    busy, stale = sources / ".fetch-apt-busy-1", sources / ".fetch-apt-stale-1"
    for folder in (busy, stale):
        folder.mkdir(parents=True)
        (folder / "half.deb").write_bytes(b"\0" * 1000)
    members = [("a.txt", b"text")]
    arch = A.Archive("apt", "kept", "1.0", ("*",))
    tar_path, info_path = A.cache_paths(arch, tmp_path / "data")
    A._write_cache(tar_path, members)
    storage.write_json(info_path, {"format": A.CACHE_FORMAT, "pin": arch.pin, "members_patterns": ["*"],
                                   "members_sha256": A.members_digest(members),
                                   "tar_sha256": storage.sha256_file(tar_path)})
    with storage.locked_folder(busy):  # another build downloads into it now
        assert A.fetch(arch, tmp_path / "data", "a test corpus")[0] == members  # cached: nothing spawned
    assert busy.is_dir() and not stale.exists()
