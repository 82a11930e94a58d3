"""The book's "How to cite" block, generated from the repository's ``CITATION.cff``.

``CITATION.cff`` is the one record of how to cite this book (and, in its ``references``, the
paper it reproduces); :func:`bibtex_block` writes both as BibTeX, and ``book/index.md``
holds that text between two markers. ``python -m rflens.publish.citation`` rewrites the
block after an edit of ``CITATION.cff``; a test fails while the two disagree.

May import: ``storage``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from rflens.storage import package_repo

BEGIN = "<!-- citation: generated from CITATION.cff by `python -m rflens.publish.citation`; do not edit -->"
END = "<!-- end of the generated citation -->"
PAPER_KEY = "chi2023dissecting"  # the key of the paper in book/references.bib, cited as {cite:t}
BOOK_KEY = "rflens"


def read_cff(path: Path | None = None) -> dict:
    """The parsed ``CITATION.cff`` of the repository (or ``path``)."""
    path = package_repo() / "CITATION.cff" if path is None else Path(path)
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _person(author: dict) -> str:
    """One CFF author as BibTeX writes a name: "Family, Given", or an entity in braces."""
    if "family-names" in author:
        return f"{author['family-names']}, {author['given-names']}" if "given-names" in author else author["family-names"]
    return "{" + author["name"] + "}"


def _entry(kind: str, key: str, fields: list[tuple[str, object]]) -> str:
    width = max(len(name) for name, _ in fields)
    lines = [f"  {name:<{width}} = {{{value}}}" for name, value in fields if value is not None]
    return f"@{kind}{{{key},\n" + ",\n".join(lines) + "\n}"


def paper_bibtex(cff: dict) -> str:
    """The paper the book reproduces (the first of ``references``) as ``@inproceedings``."""
    ref = cff["references"][0]
    return _entry("inproceedings", PAPER_KEY, [
        ("title", ref["title"]),
        ("author", " and ".join(_person(a) for a in ref["authors"])),
        ("booktitle", ref["collection-title"]),
        ("pages", f"{ref['start']}--{ref['end']}"),
        ("year", ref["year"]),
        ("doi", ref["doi"]),
    ])


def book_bibtex(cff: dict) -> str:
    """The book itself as ``@software``."""
    return _entry("software", BOOK_KEY, [
        ("title", cff["title"]),
        ("author", " and ".join(_person(a) for a in cff["authors"])),
        ("year", str(cff["date-released"])[:4]),
        ("version", cff["version"]),
        ("license", cff.get("license")),
        ("url", cff.get("repository-code")),
    ])


def bibtex_block(cff: dict | None = None) -> str:
    """The Markdown between the markers of ``book/index.md``."""
    cff = read_cff() if cff is None else cff
    return "\n".join([
        BEGIN,
        "Cite the paper, {cite:t}`" + PAPER_KEY + "`:",
        "",
        "```bibtex", paper_bibtex(cff), "```",
        "",
        "Cite this book itself (the repository's `CITATION.cff`, from which this block is written):",
        "",
        "```bibtex", book_bibtex(cff), "```",
        END,
    ])


def replace_block(text: str, block: str) -> str:
    """``text`` with the part from BEGIN to END (inclusive) replaced by ``block``."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + block + text[end:]


def main() -> int:
    index = package_repo() / "book" / "index.md"
    text = index.read_text(encoding="utf-8")
    new = replace_block(text, bibtex_block())
    if new != text:
        index.write_text(new, encoding="utf-8")
        print(f"{index}: citation block rewritten from CITATION.cff", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
