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
