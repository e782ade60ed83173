"""Where the rehearsals keep their files, the error a step raises when it cannot run, their
progress lines and tables, and a wait for something to show.

Every rehearsal (the two-rank group in `cli`, the probes and groups in `measure`) shares one
`.rehearsal/` directory at the repository root: the virtualenvs (`tools.venvs`), the built tiny
models (`tiny_plan`) and one log directory per run. Both the model builder and the process group
raise `RehearsalError`, so it lives here rather than in either; both print `Progress`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from tools.venvs import REHEARSAL_DIR

MODELS_DIR = REHEARSAL_DIR / "models"
LOGS_DIR = REHEARSAL_DIR / "logs"

T = TypeVar("T")


class RehearsalError(RuntimeError):
    """A step of the rehearsal could not run (not a check that failed); the CLI exits 1."""


class Progress:
    """One line per step on stderr, with seconds since the start."""

    def __init__(self) -> None:
        self.began = time.monotonic()

    def __call__(self, line: str) -> None:
        print(f"[{time.monotonic() - self.began:6.1f} s] {line}", file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.began


def aligned(rows: Sequence[Sequence[str]], sep: str = "  ") -> list[str]:
    """Rows of cells, each column as wide as its widest cell, each line right-stripped."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [sep.join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def poll(
    read: Callable[[], T], done: Callable[[T], object], seconds: float, every: float = 0.05
) -> T:
    """`read()` every `every` seconds until `done` holds of its value or `seconds` pass; the last
    value read (the caller judges a timeout by it)."""
    end = time.monotonic() + seconds
    while not done(value := read()) and time.monotonic() < end:
        time.sleep(every)
    return value
