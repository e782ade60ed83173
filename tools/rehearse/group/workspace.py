"""Where the rehearsals keep their files, the error a step raises when it cannot run, and their
progress lines.

Every rehearsal (the two-rank group in `cli`, the memory-guard experiment in `memory_guard`)
shares one `.rehearsal/` directory at the repository root: the virtualenvs (`tools.venvs`), the
built tiny models (`tiny_plan`) and one log directory per run. Both the model builder and the
process group raise `RehearsalError`, so it lives here rather than in either; both print
`Progress`.
"""

from __future__ import annotations

import sys
import time

from tools.venvs import QUALITY_VENV_DIR, QUANTIZE_VENV_DIR, REHEARSAL_DIR, VENV_DIR

__all__ = [
    "LOGS_DIR",
    "MODELS_DIR",
    "QUALITY_VENV_DIR",
    "QUANTIZE_VENV_DIR",
    "REHEARSAL_DIR",
    "VENV_DIR",
    "Progress",
    "RehearsalError",
]

MODELS_DIR = REHEARSAL_DIR / "models"
LOGS_DIR = REHEARSAL_DIR / "logs"


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
