"""Where the rehearsals keep their files, and the error a step raises when it cannot run.

Every rehearsal (the two-rank group in `cli`, the memory-guard experiment in `memory_guard`)
shares one `.rehearsal/` directory at the repository root: the virtualenvs (`infra.venvs`), the
built tiny models (`tiny`) and one log directory per run. Both the model builder and the process
group raise `RehearsalError`, so it lives here rather than in either.
"""

from __future__ import annotations

from infra.venvs import QUALITY_VENV_DIR, QUANTIZE_VENV_DIR, REHEARSAL_DIR, VENV_DIR

__all__ = [
    "LOGS_DIR",
    "MODELS_DIR",
    "QUALITY_VENV_DIR",
    "QUANTIZE_VENV_DIR",
    "REHEARSAL_DIR",
    "VENV_DIR",
    "RehearsalError",
]

MODELS_DIR = REHEARSAL_DIR / "models"
LOGS_DIR = REHEARSAL_DIR / "logs"


class RehearsalError(RuntimeError):
    """A step of the rehearsal could not run (not a check that failed); the CLI exits 1."""
