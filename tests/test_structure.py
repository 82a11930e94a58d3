"""The package's structure: imports run one way, every fact has one home."""

import ast
from pathlib import Path

import pytest
import torch

from rflens.model import positional
from rflens.model.transformer import TransformerLM
from rflens.setup import schemes
from rflens.setup.config import ModelConfig

PKG = Path(__file__).resolve().parents[1] / "src" / "rflens"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """{module: rflens modules it imports anywhere in its code (also inside functions)}."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "rflens"):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module
                for a in node.names:  # `from . import x` imports the module x; `from .x import f`, x
                    sub = f"{target}.{a.name}"
                    out.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name in modules}
        graph[name] = {m for m in out if m in modules} - {name}
    return graph


def _reachable(graph, start) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_import_circle():
    graph = _imports()
    assert sorted(m for m in graph if m in _reachable(graph, m)) == []


# The folders from the bottom up: a module imports only from its own folder and the layers
# below it (folders of one layer do not import each other). The package root's modules
# (errors, paper, storage, terminal) are the ground floor; its __init__ and __main__ are the
# package's face and entry point.
LAYERS = (("",), ("setup",), ("data",), ("model",), ("measure", "training"), ("store",), ("longrun",),
          ("experiments",), ("claims",), ("readings", "figures", "hf"), ("widgets",), ("publish",), ("cli",))
FOLDERS = {f: i for i, layer in enumerate(LAYERS) for f in layer}
ENTRY = {"rflens", "rflens.__main__"}


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PKG / parts[1]).is_dir()) else ""


def test_every_folder_imports_only_its_own_and_the_layers_below():
    graph = _imports()
    assert set(FOLDERS) - {""} == {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    upward = sorted(f"{m} -> {t}" for m, targets in graph.items() if m not in ENTRY for t in targets
                    if _folder(t) != _folder(m) and FOLDERS[_folder(t)] >= FOLDERS[_folder(m)])
    assert upward == []


def test_the_package_map_names_every_folder_and_each_folder_every_module():
    """The package docstring lists every folder, and each folder's docstring every module in
    it, so the map cannot go stale."""
    import importlib

    top = importlib.import_module("rflens").__doc__
    missing = [f for f in FOLDERS if f and f"``{f}``" not in top]
    missing += [f"root: {p.stem}" for p in PKG.glob("*.py") if not p.stem.startswith("__") and f"``{p.stem}``" not in top]
    for folder in (p for p in PKG.iterdir() if (p / "__init__.py").is_file()):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        missing += [f"{folder.name}: {p.stem}" for p in folder.glob("*.py")
                    if p.stem != "__init__" and not any(f in doc for f in (f"``{p.stem}``", f"{folder.name}.{p.stem}`", f":mod:`.{p.stem}`"))]
    assert missing == []


def test_the_run_store_imports_training_never_the_other_way():
    graph = _imports()
    assert "rflens.training.trainer" in graph["rflens.store.runs"]
    assert "rflens.store.runs" not in _reachable(graph, "rflens.training.trainer")


def test_the_data_package_imports_nothing_above_it():
    graph = _imports()
    above = {m for name in graph if name.startswith("rflens.data") for m in graph[name]
             if not m.startswith("rflens.data")}
    assert above <= {"rflens.setup.config", "rflens.errors", "rflens.storage", "rflens.setup.schemes", "rflens.setup.presets",
                     "rflens.setup.settings"}


def test_commands_live_in_the_command_line_package():
    """Library modules compute; rflens.cli parses arguments and prints."""
    offenders = []
    for path in PKG.rglob("*.py"):
        if "cli" in path.relative_to(PKG).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("cli_"):
                offenders.append(f"{path.name}:{node.name}")
    assert offenders == []


def test_the_library_takes_named_values_and_prints_only_warnings():
    """Outside rflens.cli no function takes an argparse Namespace (a parameter named args or
    namespace, or argparse at all) and nothing prints to stdout: results are returned, and
    the command line decides what to show."""
    offenders = []
    for path in PKG.rglob("*.py"):
        if "cli" in path.relative_to(PKG).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = {a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs}
                offenders += [f"{path.name}:{node.name}({p})" for p in params & {"args", "namespace"}]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                offenders += [f"{path.name}: imports argparse" for n in names if n == "argparse"]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                where = {k.arg: ast.unparse(k.value) for k in node.keywords}.get("file")
                if where != "sys.stderr":
                    offenders.append(f"{path.name}:{node.lineno} prints to stdout")
    assert offenders == []


def test_every_scheme_has_one_row_and_one_implementation():
    assert set(positional.REGISTRY) == set(schemes.TABLE)
    for name, cls in positional.REGISTRY.items():
        row = schemes.TABLE[name]
        assert (cls.name, cls.kind, cls.learnable) == (name, row.kind, row.learnable)
        assert row.kind in schemes.KINDS


def test_table3_is_the_papers_seven_schemes_in_its_order():
    assert schemes.TABLE3 == ("sinusoidal", "rotary", "alibi", "sandwich", "smoothed", "kerple_log", "t5")
    assert schemes.TABLE3_LEARNABLE == ("kerple_log", "t5")


def test_a_new_scheme_is_one_row_and_one_class(monkeypatch):
    monkeypatch.setitem(schemes.TABLE, "halfway", schemes.SchemeInfo("halfway", "relative", False, "Halfway"))

    @positional.register("halfway")
    class Halfway(positional.Scheme):
        """-k / 2: ALiBi with one slope of 1/2 for every head."""

        def _table(self, n):
            return -0.5 * self._distances(n).expand(self.n_head, n)

    try:
        cfg = ModelConfig(pos="halfway", n_layer=1, n_head=2, d_model=16, vocab_size=300)
        bias = positional.last_query_bias(cfg, 4)
        assert torch.equal(bias, torch.tensor([[0.0, -0.5, -1.0, -1.5]] * 2))
        logits = TransformerLM(cfg)(torch.zeros(1, 5, dtype=torch.long))
        assert logits.shape == (1, 5, 300)
        assert schemes.title("halfway") == "Halfway"
    finally:
        positional.REGISTRY.pop("halfway")


def test_an_unknown_scheme_is_a_one_line_error():
    with pytest.raises(Exception, match="allowed values are nope, sinusoidal"):
        ModelConfig(pos="halfway")


def test_every_deviation_from_the_papers_code_names_a_real_setting():
    from rflens.setup.config import SETTINGS
    from rflens.setup.deviations import DEVIATIONS, table

    fields = {f for cls in SETTINGS.values() for f in cls.__dataclass_fields__}
    for d in DEVIATIONS:
        assert d.setting is None or d.setting in fields, d.setting
        assert d.why and d.ours and d.papers_code
    assert len(table()) == len(DEVIATIONS)
