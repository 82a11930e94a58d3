"""Building the data: documents cached, split, tokenized, encoded and checked.

A build has two stages, each cached on disk under ``storage.data_dir()``::

    <corpus>/source/docs.jsonl, source.json         extracted documents (one per line)
    <corpus>/bpe<V>[-b<max_bytes>][-s<seed>]/       one tokenization of them:
        manifest.json                                 what was built from what, with sha256
        tokenizer-<hash>.json                         byte-level BPE trained on the train split
        {train,validation,test}-<hash>.bin            uint16/uint32 token ids, documents
                                                      separated by <|endoftext|>

Whole documents go to one split each, ranked by a hash of their id, so the splits are
disjoint and the same on every machine. The manifest is written last and names every file
by a content hash: a build interrupted at any point leaves the previous manifest and the
files it names intact, and every load checks the files against it before they are read.
Builds of one variant take a lock, so processes that start together build it once.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from rflens import storage
from rflens.data import subsets, wide
from rflens.data.corpus import Corpus, EOT, SPLITS
from rflens.errors import UserError
from rflens.setup.config import DataConfig, SUBSET_CORPORA, WIDE_CORPORA
from rflens.data.sources import (PINS, SOURCE_PACKAGES, _embedded_documents, _files_documents, _files_key,
    _hub_documents, _hub_name, _installed, _progress, check_hub)

FORMAT = 1  # bump when the layout or the extraction changes: old builds are then rebuilt
# Share of the bytes in (train, validation, test). The math corpus is small (~1.3 MB), so
# it gives its test split a larger share: the evaluation needs >= 100k test tokens
# (N = 128 segments of up to 16 x 64 tokens at the tiny scale).
SPLIT_FRACTIONS = {"prose": (0.90, 0.05, 0.05), "code": (0.90, 0.05, 0.05), "math": (0.70, 0.05, 0.25),
                   **{c: (0.90, 0.05, 0.05) for c in WIDE_CORPORA + SUBSET_CORPORA}}
# The wide corpora's test and validation splits hold at least this many documents, so that an
# interval that resamples documents has enough of them to resample.
MIN_SPLIT_DOCS = {c: 100 for c in WIDE_CORPORA}
MAX_EPOCHS = 4  # passes over a training split beyond which repeated tokens are worth less than new ones
DEFAULT_FRACTIONS = (0.90, 0.05, 0.05)
GPT2_VOCAB = 50257  # vocab_size that selects the GPT-2 tokenizer on the hub path (as in the paper)
FULL_VERIFY_BYTES = 512 * 2**20  # below this total, every load checks the sha256 of every file;
# above it the size of every file and the sha256 of its first and last storage.SAMPLE_BYTES


# ----------------------------------------------------------------------------- locations

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


def built_path(cfg: DataConfig, root=None) -> Path:
    """The folder :func:`prepare` builds ``cfg``'s data in (it may not exist yet)."""
    root = Path(root).resolve() if root is not None else storage.data_dir()
    return _corpus_dir(cfg, root) / _variant_name(cfg)


def rebuild_command(cfg: DataConfig, scale: str | None = None) -> str:
    """The command line that rebuilds the data of ``cfg``, for error messages.

    ``scale`` names a preset whose data settings are those of ``cfg``; this package does
    not look presets up (it imports nothing above it), so only a caller that knows them
    can pass one. Without it the command spells out the settings that name the variant.
    """
    cmd = f"python -m rflens data --corpus {cfg.corpus}"
    if cfg.source != "embedded":
        cmd += f" --source {cfg.source}"
    if cfg.source == "files":
        cmd += " --files " + " ".join(cfg.files)
    if scale:
        return cmd + f" --scale {scale}"
    cmd += f" --vocab-size {cfg.vocab_size}"
    if cfg.max_bytes:
        cmd += f" --max-bytes {cfg.max_bytes}"
    if cfg.split_seed:
        cmd += f" --split-seed {cfg.split_seed}"
    return cmd


# ----------------------------------------------------------------------------- manifests

def _canonical(obj) -> str:
    """One JSON text per value (sorted keys, no spaces): what checksums and fingerprints hash."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _with_checksum(manifest: dict) -> dict:
    """``manifest`` with a ``checksum`` of the rest of it, so that an edit is noticed."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    return {**body, "checksum": hashlib.sha256(_canonical(body).encode()).hexdigest()}


def _checksum_ok(manifest: dict) -> bool:
    return isinstance(manifest, dict) and _with_checksum(manifest).get("checksum") == manifest.get("checksum")


def _say(msg: str) -> None:
    print(f"rflens.data: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- documents

def _source_documents(corpus: str, root: Path, progress: bool, max_bytes: int | None = None):
    """Extracted documents of an embedded corpus, cached in <root>/<corpus>/source/.

    With ``max_bytes`` and no cache, only the documents up to that prefix are extracted
    (the same prefix the full extraction gives) and nothing is cached.
    """
    is_wide = corpus in wide.WIDE
    packages = wide.pins(corpus) if is_wide else {p: _installed(p) for p in SOURCE_PACKAGES[corpus]}
    for p, v in ({} if is_wide else packages).items():
        if v != PINS[p]:
            _say(f"{p} {v} is installed, the pinned version is {PINS[p]}: the {corpus} corpus will differ "
                 f"from the reference build (run `make setup` for the pinned set)")
    src = root / corpus / "source"
    info_path, docs_path = src / "source.json", src / "docs.jsonl"
    info = None
    if info_path.is_file() and docs_path.is_file():
        try:
            info = storage.read_json(info_path)
        except ValueError:
            info = None
        if not (_checksum_ok(info) and info.get("format") == FORMAT and info.get("packages") == packages
                and info.get("docs_sha256") == storage.sha256_file(docs_path)):
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
    if max_bytes and not is_wide:
        docs, total = [], 0
        for doc in _embedded_documents(corpus, progress):
            docs.append(doc)
            total += len(doc[1].encode("utf-8"))
            if total > max_bytes:  # one past the prefix, so that the prefix is known to be complete
                break
        return docs, {"packages": packages}
    extra = {}
    if is_wide:
        docs, record = wide.documents(corpus, root, say=_say if progress else None)
        extra = {"archives": record["archives"], "extracted": record["extracted"], "duplicates": record["dropped"]}
    else:
        docs = list(_embedded_documents(corpus, progress))
    if not docs:
        raise UserError(f"no documents found for the {corpus} corpus: reinstall the pinned packages with `make setup`")
    blob = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in docs).encode("utf-8")
    src.mkdir(parents=True, exist_ok=True)
    storage.write_bytes(docs_path, blob)
    info = _with_checksum({
        "format": FORMAT, "corpus": corpus, "packages": packages, "documents": len(docs),
        "bytes": sum(len(t.encode("utf-8")) for _, t in docs),
        "docs_sha256": hashlib.sha256(blob).hexdigest(), **extra,
    })
    storage.write_json(info_path, info, newline=True)
    if progress:
        _say(f"{corpus}: extracted {len(docs)} documents ({info['bytes'] / 1e6:.1f} MB) in {time.time() - t0:.1f} s")
    return docs, info


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


def split_documents(docs, fractions, seed: int = 0, min_docs: int = 0) -> dict[str, list[tuple[str, str]]]:
    """Assign whole documents to train / validation / test, deterministically and disjointly.

    Documents are ranked by sha256(seed, id); test takes documents from the top of that
    ranking until it holds its share of the bytes and at least ``min_docs`` documents,
    then validation likewise, and train keeps the rest. Each split keeps the documents in
    their original order.
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
        taken = 0
        while pos < len(ranked) - reserve and (got == 0 or got < frac * total or taken < min_docs):
            where[ranked[pos]] = split
            got += size[ranked[pos]]
            pos += 1
            taken += 1
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
    batch = 64  # documents per call: encode_batch_fast spreads them over the cores
    bar = _progress(None, progress, total=len(texts), desc=desc, unit="doc", leave=False) if progress else None
    for start in range(0, len(texts), batch):
        # the ids encode_batch gives, without the character offsets nothing here reads
        for enc in tok.encode_batch_fast(texts[start:start + batch], add_special_tokens=False):
            parts.append(np.asarray(enc.ids, dtype=dtype))
            parts.append(np.asarray([eot], dtype=dtype))
        if bar is not None:
            bar.update(len(texts[start:start + batch]))
    if bar is not None:
        bar.close()
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


# ----------------------------------------------------------------------------- load

def _sources_now(cfg: DataConfig, root: Path) -> dict:
    """What the manifest must still match for the data to be current (cheap to compute)."""
    if cfg.source == "embedded":
        if cfg.corpus in subsets.SUBSETS:
            return _subset_sources(cfg, root)
        if cfg.corpus in wide.WIDE:
            return wide.pins(cfg.corpus)
        return {p: _installed(p) for p in SOURCE_PACKAGES[cfg.corpus]}
    if cfg.source == "files":
        return {"files": _files_key(cfg)}
    return {"hub_name": _hub_name(cfg)}


def _sources_match(manifest_sources: dict, now: dict) -> bool:
    if "files" in now:
        old = [{k: f[k] for k in ("path", "size", "mtime_ns")} for f in manifest_sources.get("files", [])]
        return old == now["files"]
    return all(manifest_sources.get(k) == v for k, v in now.items())


def _verify(path: Path, manifest: dict, fix: str) -> None:
    """Raise UserError, ending with ``fix``, when a file the manifest names is missing,
    truncated or changed."""
    files = manifest["files"]
    sample = sum(f["size"] for f in files.values()) > FULL_VERIFY_BYTES
    for f in files.values():
        p = path / f["name"]
        if not p.is_file():
            raise UserError(f"{p} is missing: {fix}")
        size = p.stat().st_size
        if size != f["size"]:
            raise UserError(f"{p} is truncated or changed ({size} bytes, the manifest says {f['size']}): {fix}")
        digest = storage.sha256_file(p, sample=sample)
        if digest != (f["sample_sha256"] if sample else f["sha256"]):
            raise UserError(f"{p} is corrupted (sha256 differs from the manifest): {fix}")


# Settings a source does not read: the embedded corpora are the same text whatever files
# or hub name the settings also carry, so those do not make a build stale.
_UNREAD = {"embedded": ("files", "hub_name"), "files": ("hub_name",), "hub": ("files",)}


def _deciding(settings: dict, source: str) -> dict:
    """The data settings (as a manifest stores them) that decide the data of ``source``."""
    return {k: v for k, v in settings.items() if k not in _UNREAD.get(source, ())}


def _load(cfg: DataConfig, path: Path, fix: str) -> tuple[Corpus | None, str]:
    """Load the built data at ``path``; (None, why) when it must be (re)built.

    A missing build or one from other sources/settings is rebuilt; a damaged one raises
    UserError, ending with ``fix``.
    """
    mpath = path / "manifest.json"
    if not mpath.is_file():
        return None, "missing"
    try:
        manifest = storage.read_json(mpath)
    except (ValueError, UnicodeDecodeError):
        raise UserError(f"{mpath} is not valid JSON (damaged): {fix}") from None
    if not _checksum_ok(manifest):
        raise UserError(f"{mpath} was changed or damaged (its checksum does not match): {fix}")
    if manifest.get("format") != FORMAT:
        return None, f"it was built by an older rflens (format {manifest.get('format')}, now {FORMAT})"
    if _deciding(manifest.get("cfg") or {}, cfg.source) != _deciding(json.loads(_canonical(cfg.to_dict())), cfg.source):
        return None, "its settings differ"
    if manifest.get("split_fractions") != dict(zip(SPLITS, _fractions(cfg))):
        return None, "the split fractions changed"
    now = _sources_now(cfg, path.parent.parent)
    if not _sources_match(manifest.get("sources", {}), now):
        old = {k: v for k, v in manifest.get("sources", {}).items() if k in now and k != "files"}
        return None, (f"its sources changed ({old} -> {now})" if old else "its input files changed")
    _verify(path, manifest, fix)
    return Corpus(cfg, path, manifest), ""


def _fractions(cfg: DataConfig) -> tuple[float, float, float]:
    return SPLIT_FRACTIONS[cfg.corpus] if cfg.source == "embedded" else DEFAULT_FRACTIONS


# ----------------------------------------------------------------------------- build

def _build(cfg: DataConfig, path: Path, root: Path, progress: bool) -> Corpus:
    if cfg.source == "embedded" and cfg.corpus in subsets.SUBSETS:
        return _build_subset(cfg, path, root, progress)
    t0 = time.time()
    if cfg.source == "embedded":
        docs, src = _source_documents(cfg.corpus, root, progress, cfg.max_bytes)
        sources = dict(src["packages"])
        if cfg.corpus in wide.WIDE:  # what was served and extracted, in the fingerprint
            sources.update(archives=src["archives"], docs_sha256=src["docs_sha256"])
    elif cfg.source == "hub":
        docs, sources = _hub_documents(cfg, progress)
    else:
        docs, sources = _files_documents(cfg, progress)
    fractions = _fractions(cfg)
    docs = _limit_bytes(docs, cfg.max_bytes)
    min_docs = MIN_SPLIT_DOCS.get(cfg.corpus, 0) if cfg.source == "embedded" and not cfg.max_bytes else 0
    splits = split_documents(docs, fractions, cfg.split_seed, min_docs)

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

    files: dict[str, dict] = {}
    put = _storer(path, files)
    put("tokenizer", tok.to_str(pretty=True).encode("utf-8"), ".json")
    counts = {}
    for split in SPLITS:
        arr = _encode_split(tok, [t for _, t in splits[split]], dtype, progress, f"{cfg.corpus}: encode {split}")
        counts[split] = int(arr.size)
        put(split, arr.tobytes(), ".bin")
    nbytes = {s: sum(len(t.encode("utf-8")) for _, t in splits[s]) for s in SPLITS}
    return _commit(cfg, path, t0, progress, files, {
        "sources": sources, "tokenizer": tok_kind, "tokenizer_vocab": n_vocab, "dtype": dtype.name,
        "split_fractions": dict(zip(SPLITS, fractions)), "documents": {s: len(splits[s]) for s in SPLITS},
        "bytes": nbytes, "tokens": counts, "split_ids": {s: [i for i, _ in splits[s]] for s in SPLITS}})


def _subset_parent(cfg: DataConfig) -> DataConfig:
    return cfg.replace(corpus=subsets.SUBSETS[cfg.corpus].parent)


def _subset_sources(cfg: DataConfig, root: Path) -> dict:
    """What a subset is cut from: its rule and its parent's build in the data folder ``root``
    (the parent's fingerprint, read from its manifest; None while the parent is not built)."""
    mpath = built_path(_subset_parent(cfg), root) / "manifest.json"
    try:
        parent = storage.read_json(mpath).get("fingerprint") if mpath.is_file() else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        parent = None  # damaged: the parent's own load names the fix
    return {"subset": subsets.SUBSETS[cfg.corpus].rule(), "parent_fingerprint": parent}


def _build_subset(cfg: DataConfig, path: Path, root: Path, progress: bool) -> Corpus:
    """A subset (:mod:`rflens.data.subsets`): the parent's tokenizer, validation and test
    split as they are, its training split cut by whole documents."""
    t0 = time.time()
    subset = subsets.SUBSETS[cfg.corpus]
    parent = prepare(_subset_parent(cfg), root=root, progress=progress)
    pm = parent.manifest
    train = np.asarray(parent.tokens("train"))
    lengths = subsets.document_lengths(train, parent.eot_id)
    keep = subsets.select(pm["split_ids"]["train"], lengths, subset)
    stream = subsets.cut(train, lengths, keep)
    files: dict[str, dict] = {}
    put = _storer(path, files)
    for key, suffix in (("tokenizer", ".json"), ("validation", ".bin"), ("test", ".bin")):
        put(key, (parent.path / pm["files"][key]["name"]).read_bytes(), suffix)
    put("train", stream.tobytes(), ".bin")
    kept = parent.tokenizer.decode_batch([doc.tolist() for doc in subsets.documents(stream, parent.eot_id)],
                                         skip_special_tokens=True)
    ids = {"train": [pm["split_ids"]["train"][i] for i in keep],
           "validation": pm["split_ids"]["validation"], "test": pm["split_ids"]["test"]}
    if progress:
        _say(f"{cfg.corpus}: {len(keep)} of {len(lengths)} training documents of {subset.parent}, "
             f"{stream.size:,} tokens")
    return _commit(cfg, path, t0, progress, files, {
        "sources": _subset_sources(cfg, root), "tokenizer": pm["tokenizer"], "tokenizer_vocab": pm["tokenizer_vocab"],
        "dtype": pm["dtype"], "split_fractions": dict(zip(SPLITS, _fractions(cfg))),
        "documents": {s: len(ids[s]) for s in SPLITS},
        "bytes": {**pm["bytes"], "train": sum(len(t.encode("utf-8")) for t in kept)},
        "tokens": {**pm["tokens"], "train": int(stream.size)}, "split_ids": ids})


def _storer(path: Path, files: dict):
    """``put(key, data, suffix)``: writes ``data`` under a name holding its hash into ``path``
    and records it in ``files`` (what the manifest lists)."""
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob(".*.tmp"):  # left by a build that was killed; we hold the lock
        stale.unlink(missing_ok=True)

    def put(key: str, data: bytes, suffix: str) -> None:
        digest = hashlib.sha256(data).hexdigest()
        name = f"{key}-{digest[:12]}{suffix}"
        storage.write_bytes(path / name, data)
        entry = {"name": name, "size": len(data), "sha256": digest}
        # what storage.sha256_file(sample=True) gives, for the loads of large stores
        head, tail = data[:storage.SAMPLE_BYTES], data[max(0, len(data) - storage.SAMPLE_BYTES):]
        entry["sample_sha256"] = hashlib.sha256(head + tail).hexdigest()
        files[key] = entry
    return put


def _commit(cfg: DataConfig, path: Path, t0: float, progress: bool, files: dict, fields: dict) -> Corpus:
    """Write the manifest of a build whose ``files`` are written (the commit point), drop
    the files of an older build and return the corpus."""
    counts, nbytes, docs = fields["tokens"], fields["bytes"], fields["documents"]
    body = {"format": FORMAT, "corpus": cfg.corpus, "source": cfg.source,
            "cfg": json.loads(_canonical(cfg.to_dict())), **fields,
            "bytes_per_token": round(sum(nbytes.values()) / max(1, sum(counts.values()) - sum(docs.values())), 4),
            "files": files}
    body["fingerprint"] = hashlib.sha256(_canonical(
        {k: body[k] for k in ("format", "cfg", "sources", "tokenizer", "dtype", "files")}).encode()).hexdigest()
    manifest = _with_checksum(body)
    storage.write_json(path / "manifest.json", manifest, newline=True)  # the commit point of the build
    keep = {f["name"] for f in files.values()} | {"manifest.json", "build.json"}
    for old in path.iterdir():
        if old.is_file() and old.name not in keep and not old.name.startswith("."):
            old.unlink(missing_ok=True)
    storage.write_json(path / "build.json", {"seconds": round(time.time() - t0, 2),
                                             "built_at": time.strftime("%Y-%m-%dT%H:%M:%S")}, newline=True)
    if progress:
        _say(f"{cfg.corpus}: built {path} in {time.time() - t0:.1f} s")
    return Corpus(cfg, path, manifest)


# ----------------------------------------------------------------------------- prepare

def _load_or_repair(cfg: DataConfig, path: Path, fix: str, repair: bool) -> tuple[Corpus | None, str]:
    """:func:`_load`, except that with ``repair`` damage is one more reason to rebuild."""
    try:
        return _load(cfg, path, fix)
    except UserError as err:
        if not repair:
            raise
        return None, f"it is damaged ({str(err).split(':')[0]})"


def built(cfg: DataConfig, *, root=None) -> Corpus | None:
    """The data of ``cfg`` if it is built and current, else None; builds nothing (a plan
    asks this). A damaged build raises UserError naming the command that rebuilds it."""
    if not isinstance(cfg, DataConfig):
        raise TypeError("built() takes a rflens.setup.config.DataConfig")
    root = Path(root).resolve() if root is not None else storage.data_dir()
    path = built_path(cfg, root)
    return _load(cfg, path, f"rebuild it with `{rebuild_command(cfg)}`")[0]


def prepare(cfg: DataConfig, *, root=None, progress: bool = True, repair: bool = False, force: bool = False,
            rebuild_hint: str | None = None) -> Corpus:
    """Build the data of ``cfg`` if it is missing or stale, else load it (well under a second).

    A build from other package versions or other input files is rebuilt with a message.
    A damaged manifest or token file raises :class:`UserError` naming the command that
    rebuilds it: ``rebuild_hint`` if given (a caller that knows the preset, say), else
    :func:`rebuild_command` of ``cfg``. ``repair=True`` (the command line) rebuilds
    instead; ``force`` rebuilds. ``root``: the data folder, else ``storage.data_dir()``.
    """
    if not isinstance(cfg, DataConfig):
        raise TypeError("prepare() takes a rflens.setup.config.DataConfig")
    root = Path(root).resolve() if root is not None else storage.data_dir()
    path = built_path(cfg, root)
    fix = f"rebuild it with `{rebuild_hint or rebuild_command(cfg)}`"
    if not force:  # the fast path: no lock to load what is built
        corpus, _ = _load_or_repair(cfg, path, fix, repair)
        if corpus is not None:
            return corpus
    if cfg.source == "hub":
        check_hub()  # before anything is written: offline, fail at once with the fix
    with storage.locked(path.parent / f".{path.name}.lock"):
        if not force:  # another process may have built it while we waited
            corpus, why = _load_or_repair(cfg, path, fix, repair)
            if corpus is not None:
                return corpus
            if why != "missing":
                _say(f"rebuilding {path}: {why}")
        return _build(cfg, path, root, progress)


# ----------------------------------------------------------------------------- token budgets

def train_tokens(cfg: DataConfig, *, root=None) -> int | None:
    """Tokens in the training split of ``cfg``'s data (``<|endoftext|>`` included), or None
    when it is not built. A run's budget on it follows from :func:`capped_budget`."""
    corpus = built(cfg, root=root)
    return None if corpus is None else int(corpus.manifest["tokens"]["train"])


def capped_budget(budget: int, train: int, max_epochs: float = MAX_EPOCHS) -> int:
    """The tokens a run of ``budget`` tokens may train on a split of ``train`` tokens without
    passing over it more than ``max_epochs`` times."""
    return int(min(int(budget), max_epochs * int(train)))
