"""One exception type for user mistakes.

Anything a user can get wrong (a bad setting, a missing data set, a corrupted file) raises
:class:`UserError` with a one-line message that names the fix. The command line prints the
message and exits with code 2; it never shows a traceback for these.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the input: printed as one line, exit code 2."""


MAX_VALUE_CHARS = 60  # a value longer than this is cut in a message (a pasted file stays one short line)


def shown(value, limit: int = MAX_VALUE_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters with the full length named."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


class ConfigError(UserError, ValueError):
    """A setting that is not allowed; the message names the field and the allowed values."""

    def __init__(self, field: str, value, allowed: str):
        self.field, self.value, self.allowed = field, value, allowed
        name = str(field) if len(str(field)) <= MAX_VALUE_CHARS else f"{str(field)[:MAX_VALUE_CHARS]}..."
        super().__init__(f"invalid {name}={shown(value)}: {allowed}")


# import name -> distribution name, where the two differ
DISTRIBUTIONS = {"yaml": "pyyaml", "IPython": "ipython", "huggingface_hub": "huggingface-hub"}


def _normal(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def missing_dependency(err: ModuleNotFoundError) -> str | None:
    """One line for a third-party module that is not installed, naming the extra of rflens
    that installs it (read from the installed package's metadata, so it agrees with
    pyproject.toml); None for a module of rflens itself (a bug, shown as one)."""
    import re
    from importlib.metadata import PackageNotFoundError, requires

    top = (err.name or "").split(".")[0]
    if not top or top == "rflens":
        return None
    dist = _normal(DISTRIBUTIONS.get(top, top))
    try:
        declared = requires("rflens") or []
    except PackageNotFoundError:
        declared = []
    extras, core = set(), False
    for req in declared:
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
        if name is None or _normal(name.group()) != dist:
            continue
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        if extra:
            extras.add(extra.group(1))
        else:
            core = True
    if core:
        return f"rflens's dependency {dist} is not installed (no module {top!r}): reinstall rflens (pip install .)"
    if extras:
        names = " or ".join(f"'{e}'" for e in sorted(extras))
        first = sorted(extras)[0]
        return (f"this needs {dist} (no module {top!r}), in rflens's extra {names}: "
                f"pip install 'rflens[{first}]' (in a clone: pip install '.[{first}]')")
    return f"this needs {dist} (no module {top!r}), which rflens does not install: pip install {dist}"
