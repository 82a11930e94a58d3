"""The package as others install it: what pyproject.toml declares, what requirements.txt pins,
the licence and the citation, and no private names of other libraries.

"pip install ." gives a working ``rflens`` for every command that needs no clone; a command
that needs the book or the shipped bundles, or an optional dependency not installed, says so
in one line.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from rflens import storage
from rflens.cli import main
from rflens.errors import missing_dependency
from rflens.publish import citation

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "rflens"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = ("book", "hf", "explore", "cluster", "test")


def _declared() -> dict[str, list[tuple[str, Requirement]]]:
    """{distribution: [(extra or "", requirement)]} of pyproject.toml."""
    out: dict[str, list] = {}
    groups = [("", PYPROJECT["project"]["dependencies"])]
    groups += list(PYPROJECT["project"]["optional-dependencies"].items())
    for extra, reqs in groups:
        for text in reqs:
            req = Requirement(text)
            out.setdefault(canonicalize_name(req.name), []).append((extra, req))
    return out


def _pins() -> dict[str, tuple[str, str]]:
    """{distribution: (pinned version, the line's comment)} of requirements.txt."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        text, _, comment = line.partition("#")
        text = text.strip()
        if not text or text.startswith("-"):
            continue
        name, sep, version = text.partition("==")
        assert sep, f"requirements.txt: {line!r} is not pinned with =="
        pins[canonicalize_name(name)] = (version.strip(), comment.strip())
    return pins


def _imported_modules() -> dict[str, set[str]]:
    """{top-level module of another distribution: files of the package that import it}."""
    found: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "rflens":
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_package_declares_core_dependencies_and_the_five_extras():
    assert PYPROJECT["project"]["dependencies"], "pyproject.toml declares no dependencies"
    assert sorted(PYPROJECT["project"]["optional-dependencies"]) == sorted(EXTRAS)


def test_every_import_of_the_package_is_a_declared_dependency():
    declared = _declared()
    owners = packages_distributions()
    for module, files in sorted(_imported_modules().items()):
        dists = {canonicalize_name(d) for d in owners.get(module, [])}
        assert dists, f"{module} (imported by {sorted(files)}) is not installed"
        assert dists & set(declared), f"{module} (imported by {sorted(files)}) comes from {dists}: declare it in pyproject.toml"


def test_every_declared_dependency_is_pinned_in_requirements_within_its_range():
    pins = _pins()
    for name, reqs in _declared().items():
        assert name in pins, f"{name} is declared in pyproject.toml but not pinned in requirements.txt"
        for extra, req in reqs:
            assert req.specifier.contains(pins[name][0], prereleases=True), (
                f"requirements.txt pins {name}=={pins[name][0]}, outside {req} ({extra or 'core'})")


def test_every_pin_is_declared_or_named_as_a_dependency_of_a_declared_one():
    declared = _declared()
    for name, (_, comment) in _pins().items():
        if name in declared:
            continue
        parent = re.search(r"a dependency of ([A-Za-z0-9._-]+)", comment)
        assert parent and canonicalize_name(parent.group(1)) in declared, (
            f"requirements.txt pins {name}, which pyproject.toml does not declare (nor names its parent)")


def test_make_installs_the_package_with_every_extra_and_torch_stays_the_cpu_pin():
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    assert f"-e .[{','.join(EXTRAS)}]" in lines
    assert "torch==2.13.0" in lines
    assert _pins()["torch"][0] == "2.13.0"


def test_the_licence_is_mit_everywhere_and_setuptools_reads_its_spdx_form():
    licence = (ROOT / "LICENSE").read_text()
    cff = citation.read_cff()
    assert licence.startswith("MIT License")
    assert PYPROJECT["project"]["license"] == cff["license"] == "MIT"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    holders = " and ".join(a["name"] for a in cff["authors"])
    assert f"Copyright (c) {str(cff['date-released'])[:4]} {holders}" in licence
    assert [a["name"] for a in PYPROJECT["project"]["authors"]] == [a["name"] for a in cff["authors"]]
    setuptools = next(Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    assert not setuptools.specifier.contains("76.9") and setuptools.specifier.contains("77.0")  # PEP 639 strings


def test_the_citation_names_the_version_the_date_and_the_paper():
    cff = citation.read_cff()
    assert cff["cff-version"] == "1.2.0"
    assert cff["version"] == PYPROJECT["project"]["version"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(cff["date-released"]))
    for key in ("title", "authors", "message", "type", "license", "abstract"):
        assert cff.get(key), key
    paper = cff["references"][0]
    assert paper["doi"] == "10.18653/v1/2023.acl-long.756"


def test_the_books_citation_block_is_the_one_generated_from_citation_cff():
    index = (ROOT / "book" / "index.md").read_text()
    block = citation.bibtex_block()
    assert block in index, "book/index.md's citation block is stale: run python -m rflens.publish.citation"
    bib = (ROOT / "book" / "references.bib").read_text()
    for field in ("title", "author", "booktitle", "pages", "year", "doi"):  # the paper as the references page has it
        ours = re.search(rf"^\s*{field}\s*=\s*\{{(.*)\}},?$", citation.paper_bibtex(citation.read_cff()), re.M)
        assert ours.group(0).split("=", 1)[1].strip().rstrip(",") in bib, field


# ----------------------------------------------------------------------------- other libraries' private names

# torch keeps the recompile limits of torch.compile only in torch._dynamo.config (torch.compiler.config
# has none in 2.13): the one private module used, by model/attention.py and its test
ALLOWED = {"torch._dynamo"}


def _ours(top: str) -> bool:
    """rflens itself, or a module of tests/ (their helpers are the project's own)."""
    return top == "rflens" or (ROOT / "tests" / f"{top}.py").is_file()


def test_no_private_module_or_method_of_another_library_is_used():
    bad = []
    for path in [*PKG.rglob("*.py"), *(ROOT / "tests").glob("*.py")]:
        if path.name == "test_packaging.py":
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            module = node.module if isinstance(node, ast.ImportFrom) and node.level == 0 else None
            names = [module] if module else [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                top, *rest = name.split(".")
                if _ours(top):
                    continue
                if any(p.startswith("_") for p in rest) and name not in ALLOWED:
                    bad.append(f"{path.name}: {name}")
            if isinstance(node, ast.ImportFrom) and module and not _ours(module.split(".")[0]):
                bad += [f"{path.name}: {module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__") and f"{module}.{a.name}" not in ALLOWED]
        bad += [f"{path.name}: _repr_mimebundle_" for _ in re.finditer(r"\._repr_mimebundle_\(", text)]
    assert bad == []


def test_parameters_are_typed_as_papermill_types_its_own():
    from rflens.publish.reproduce import _parse_parameters

    got = _parse_parameters(["a=8", "b=0.5", "c=True", "d=False", "e=None", "f=code", "g=1e-3", "h=", "i=-2"])
    assert got == {"a": 8, "b": 0.5, "c": True, "d": False, "e": None, "f": "code", "g": 1e-3, "h": "", "i": -2}
    assert type(got["a"]) is int and type(got["b"]) is float


# ----------------------------------------------------------------------------- an installed package

def _metadata_of_pyproject(monkeypatch):
    """importlib.metadata.requires("rflens") as a wheel built from this pyproject.toml has it."""
    reqs = list(PYPROJECT["project"]["dependencies"])
    for extra, group in PYPROJECT["project"]["optional-dependencies"].items():
        reqs += [f'{r}; extra == "{extra}"' for r in group]
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "requires", lambda name: reqs if name == "rflens" else None)


@pytest.mark.parametrize("module, extra", [("voila", "explore"), ("plotly.graph_objects", "book"),
                                           ("yaml", "book"), ("transformers", "hf"), ("submitit", "cluster"),
                                           ("huggingface_hub", "hf")])
def test_a_missing_optional_dependency_is_one_line_naming_its_extra(monkeypatch, capsys, module, extra):
    _metadata_of_pyproject(monkeypatch)
    from rflens.cli import bias

    def missing(args):
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)

    monkeypatch.setattr(bias, "run", missing)
    assert main(["bias", "--pos", "alibi"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"'rflens[{extra}]'" in err


def test_a_missing_core_dependency_says_reinstall_and_a_module_of_rflens_stays_a_bug(monkeypatch):
    _metadata_of_pyproject(monkeypatch)
    assert "reinstall rflens" in missing_dependency(ModuleNotFoundError(name="filelock"))
    assert missing_dependency(ModuleNotFoundError(name="rflens.nosuch")) is None


@pytest.fixture
def installed(monkeypatch, tmp_path):
    """rflens as ``pip install .`` puts it: in site-packages, run from a folder with no clone."""
    monkeypatch.setattr(storage, "__file__", str(tmp_path / "site-packages" / "rflens" / "storage.py"))
    for var in ("RFLENS_ROOT", "RFLENS_REFERENCE"):
        monkeypatch.delenv(var, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def test_an_installed_package_finds_no_repository_and_works_in_the_working_directory(installed):
    assert storage.package_repo() == installed.resolve()
    assert not storage.is_checkout(storage.package_repo())
    assert storage.package_repo.__module__ == "rflens.storage"


@pytest.mark.parametrize("argv, points_to", [(["reproduce", "--scale", "smoke", "--plan"], "RFLENS_ROOT"),
                                             (["claims", "--scale", "smoke"], "RFLENS_ROOT"),
                                             (["emergence", "--list"], "RFLENS_REFERENCE")])
def test_a_command_that_needs_a_clone_says_where_to_point_it_in_one_line(installed, capsys, argv, points_to):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and points_to in err and "clone" in err


def test_an_installed_package_run_inside_a_clone_or_with_rflens_root_finds_it(installed, monkeypatch):
    monkeypatch.setenv("RFLENS_ROOT", str(ROOT))
    assert storage.require_checkout("the book") == ROOT
    monkeypatch.delenv("RFLENS_ROOT")
    monkeypatch.chdir(ROOT / "book")
    assert storage.package_repo() == ROOT
