"""What a long run says while it works: lines on the terminal, the same lines in a log.

``reproduce`` trains the book's models in worker processes and then executes the chapters
in Jupyter kernels; neither writes to this terminal by itself. Both hand their output to a
:class:`LineStream`: a text stream that cuts what it receives into lines (tqdm's
carriage-return updates included) and passes each to a callback, thinning the bars' updates
to one every few seconds per stream. The callback is a :class:`Log`, which prints the line
above the progress bar and appends it, time-stamped, to a log file (``--quiet``: the file
only).
"""

from __future__ import annotations

import io
import re
import sys
import time
from pathlib import Path
from typing import Callable

# a tqdm status line: "desc:  45%|####5     | 270/600 [00:20<00:25, 13.2step/s, ...]"
_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d+")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
EVERY_S = 5.0  # at most one update of a running bar per stream in this many seconds


class Log:
    """Print a line (unless ``quiet``) and append it, time-stamped, to ``path`` (if given)."""

    def __init__(self, path: Path | None = None, *, quiet: bool = False):
        self.quiet = quiet
        self._terminal = sys.stderr  # the terminal as it is now (a model's output may be redirected later)
        self.path = Path(path) if path else None
        self._file = None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", buffering=1, encoding="utf-8")

    def __call__(self, text: str) -> None:
        text = text.rstrip()
        if not text:
            return
        if self._file:
            self._file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")
        if not self.quiet:
            from tqdm.auto import tqdm

            tqdm.write(text, file=self._terminal)

    def put(self, text: str) -> None:  # the interface of a queue, for code that reports to either
        self(text)

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LineStream(io.TextIOBase):
    """A writable text stream that sends each line to ``emit`` with ``prefix`` before it.

    A progress bar's updates (tqdm rewrites its line after a carriage return) are passed on
    at most once every ``every`` seconds, and always when the bar completes; other lines
    are passed on as they come. ``clock`` is for tests.
    """

    def __init__(self, emit: Callable[[str], None], prefix: str = "", every: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.emit, self.prefix, self.every, self.clock = emit, prefix, every, clock
        self._buffer = ""
        self._last: dict[str, float] = {}  # bar description -> when it was last passed on

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buffer += text
        *parts, self._buffer = re.split(r"[\r\n]", self._buffer)
        if _BAR.search(self._buffer) and self._buffer.rstrip().endswith("]"):  # a whole bar update, as tqdm writes it
            parts.append(self._buffer)
            self._buffer = ""
        for part in parts:
            self._line(part)
        return len(text)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self._buffer:
            self._line(self._buffer)
            self._buffer = ""
        super().close()

    def _line(self, part: str) -> None:
        part = _ANSI.sub("", part).strip()
        if not part:
            return
        if _BAR.search(part):
            desc = part.split(":", 1)[0] if ":" in part else ""
            now = self.clock()
            finished = re.search(r"\b(\d+)/\1\b", part) is not None  # e.g. 600/600
            if not finished and now - self._last.get(desc, -float("inf")) < self.every:
                return
            self._last[desc] = now
        self.emit(f"{self.prefix}{part}")


def plain_bars() -> None:
    """Progress bars as plain text on stderr, also in a Jupyter kernel.

    ``tqdm.auto`` draws a widget in a kernel: in a chapter that ``reproduce`` executes, such
    a bar would stay on the built page, frozen where it stopped, and never reach the
    terminal. The chapters' kernel runs this first (``reproduce.kernel_env``), so that their
    bars are text on stderr, which the terminal and the log get and the page does not."""
    import tqdm.auto
    import tqdm.std

    tqdm.auto.tqdm, tqdm.auto.trange = tqdm.std.tqdm, tqdm.std.trange


def model_label(pos: str, corpus: str, overrides: dict) -> str:
    """A model as a log line names it: scheme, corpus and the settings that differ from the preset."""
    settings = ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    return f"{pos} on {corpus}" + (f" ({settings})" if settings else "")
