"""The positional schemes, one row each: the single list every other module derives from.

A row gives what the rest of rflens needs to know about a scheme without building it (and
without importing torch): where it acts on the model (``kind``), whether it has learnable
parameters, its title in tables and figures, and whether it is one of the seven schemes
of Table 3 of Chi et al. (ACL 2023). The implementation is a class in
:mod:`rflens.model.positional` registered under the same name.

Adding a scheme to rflens takes that class and one row here; the settings check, the
command line, the experiments, the figures and the claims all read the lists below.

A scheme of one's own needs no edit here: :func:`rflens.model.positional.register_scheme` adds
its row at run time, from a file of the user's that :func:`load_files` imports (the files
named in the environment variable ``RFLENS_SCHEMES`` are imported by every process that
looks a scheme up, so worker processes, cluster jobs and notebook kernels know them too).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

KINDS = ("none", "absolute", "rotary", "relative")


@dataclass(frozen=True)
class SchemeInfo:
    name: str
    kind: str  # none: no position at all; absolute: added to the input embeddings;
    #            rotary: rotates q and k; relative: an additive bias on the attention logits
    learnable: bool  # the positional scheme has trained parameters
    title: str  # as tables and figures print it
    table3: bool = False  # one of the seven schemes of the paper's Table 3 (Section 6)
    source: str | None = None  # the file that registered a scheme of one's own (None: rflens's)


# In the order of the paper's Table 3 for its schemes; Table 3 itself is the subset marked.
TABLE: dict[str, SchemeInfo] = {s.name: s for s in (
    SchemeInfo("nope", "none", False, "NoPE"),
    SchemeInfo("sinusoidal", "absolute", False, "Sinusoidal", table3=True),
    SchemeInfo("rotary", "rotary", False, "Rotary", table3=True),
    SchemeInfo("alibi", "relative", False, "ALiBi", table3=True),
    SchemeInfo("window", "relative", False, "Windowed"),  # Eq. (3): a mask, no bias
    SchemeInfo("sandwich", "relative", False, "Sandwich", table3=True),  # Eq. (5)-(6)
    SchemeInfo("sandwich_learned", "relative", True, "Sandwich (learned h_c)"),
    SchemeInfo("smoothed", "relative", False, "Smoothed Sandwich", table3=True),  # a log(1 + k) + b
    SchemeInfo("kerple_log", "relative", True, "KERPLE (log)", table3=True),  # -r1 log(1 + r2 k)
    SchemeInfo("kerple_power", "relative", True, "KERPLE (power)"),  # -r1 k^r2
    SchemeInfo("t5", "relative", True, "T5", table3=True),  # learned log-binned buckets
)}

NAMES: tuple[str, ...] = tuple(TABLE)
RELATIVE: tuple[str, ...] = tuple(n for n, s in TABLE.items() if s.kind == "relative")
LEARNABLE: tuple[str, ...] = tuple(n for n, s in TABLE.items() if s.learnable)
TABLE3: tuple[str, ...] = tuple(n for n, s in TABLE.items() if s.table3)
# Table 3's two groups, as the paper compares them (claim 15)
TABLE3_PARAMETER_FREE: tuple[str, ...] = tuple(n for n in TABLE3 if not TABLE[n].learnable)
TABLE3_LEARNABLE: tuple[str, ...] = tuple(n for n in TABLE3 if TABLE[n].learnable)


def title(name: str) -> str:
    """The printed name of a scheme (the name itself for one the table does not know)."""
    info = TABLE.get(name)
    return info.title if info else name


STANDARD_ALIBI = "ALiBi, standard slopes"


def model_title(name: str) -> str:
    """The printed name of a model of the scheme at the preset's own settings. ALiBi's says that
    its slopes are the standard ones for the model's heads: Table 1's ALiBi models shift them
    to the paper's proportions of L_tr and are named by their Δ, so at a short L_tr the two
    are different models."""
    return STANDARD_ALIBI if name == "alibi" else title(name)


def learnable(name: str) -> bool:
    """Whether the scheme ``name`` has trained parameters (False for one the table does not know)."""
    info = TABLE.get(name)
    return bool(info and info.learnable)


# ----------------------------------------------------------------------------------------
# schemes of one's own

ENV = "RFLENS_SCHEMES"  # os.pathsep-separated files that register schemes
_LOADED: dict = {}  # resolved path -> its module


def add(info: SchemeInfo) -> None:
    """Add (or, from the same file, replace) the row of a scheme of one's own. A name that
    another loaded scheme file registered already is refused: which of the two a model was
    trained with would depend on the order the files were named in."""
    from rflens.errors import UserError

    old = TABLE.get(info.name)
    if old is not None and info.name in NAMES:
        raise UserError(f"{info.name!r} is one of rflens's own schemes: register yours under another name")
    if (old is not None and old.source and info.source and _from_file(old.source) and _from_file(info.source)
            and Path(old.source).resolve() != Path(info.source).resolve()):
        raise UserError(f"the scheme {info.name!r} is registered by two scheme files, {old.source} and {info.source}: "
                        "rename it in one of them, or load only one")
    TABLE[info.name] = info


def _from_file(source: str) -> bool:
    """Whether ``source`` is a scheme file loaded by :func:`load_files` (not a notebook's cell)."""
    return str(Path(source).resolve()) in _LOADED


def load_files(paths=None) -> list[str]:
    """Import the scheme files ``paths`` (default: those of ``RFLENS_SCHEMES``), each once per
    process, and name them in ``RFLENS_SCHEMES`` so that processes started from here import
    them too. Returns the scheme names known afterwards."""
    from rflens.errors import UserError

    if paths is None:
        paths = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    elif isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        if str(path) in _LOADED:
            continue
        if not path.is_file():
            what = ("is a folder" if path.is_dir() else "is not a regular file" if path.exists() else "not found")
            raise UserError(f"scheme file {raw} {what} (from --schemes, {ENV} or load_schemes): give the path of a "
                            ".py file")
        name = f"rflens_schemes_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
        spec = importlib.util.spec_from_file_location(name, path) if path.suffix == ".py" else None
        if spec is None or spec.loader is None:
            raise UserError(f"scheme file {raw} is not a Python file (a .py file is imported to register schemes): "
                            "give the path of a .py file")
        module = importlib.util.module_from_spec(spec)
        _LOADED[str(path)] = sys.modules[name] = module
        try:
            # what the file prints goes to stderr: the commands' output (bias --json, say) stays theirs
            with contextlib.redirect_stdout(sys.stderr):
                spec.loader.exec_module(module)
        except UserError as err:  # rflens's one line, with the file named once
            del _LOADED[str(path)], sys.modules[name]
            if str(path) in str(err) or str(raw) in str(err):
                raise
            raise UserError(f"scheme file {raw}: {err}") from None
        except Exception as err:  # the user's own code: say where, in one line
            del _LOADED[str(path)], sys.modules[name]
            raise UserError(f"scheme file {raw} failed to import: {type(err).__name__}: {err}") from None
        except SystemExit as err:  # sys.exit() or exit() in the file: not a silent exit of the command
            del _LOADED[str(path)], sys.modules[name]
            raise UserError(f"scheme file {raw} called sys.exit({'' if err.code is None else repr(err.code)}) while "
                            "being imported: a scheme file should only define and register schemes") from None
        listed = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]
        if str(path) not in {str(Path(p).expanduser().resolve()) for p in listed}:
            os.environ[ENV] = os.pathsep.join(listed + [str(path)])
    return list(TABLE)


_SEEN_ENV = ""  # the value of RFLENS_SCHEMES whose files are all imported


def ensure_loaded() -> None:
    """Import the files of ``RFLENS_SCHEMES`` not imported yet. Every settings check calls
    this, so an unchanged variable costs one comparison."""
    global _SEEN_ENV
    value = os.environ.get(ENV, "")
    if value and value != _SEEN_ENV:
        load_files()
        _SEEN_ENV = os.environ.get(ENV, "")


def source_digest(name: str) -> str | None:
    """sha256 of the syntax tree of the file that registered ``name`` (None: one of rflens's
    own schemes), so that a stored model of a scheme of one's own is keyed by its code."""
    info = TABLE.get(name)
    if info is None or info.source is None:
        return None
    tree = ast.parse(Path(info.source).read_text())
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]
