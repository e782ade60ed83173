"""Where the rehearsals keep their files, and the error a step raises when it cannot run.

Every rehearsal (the two-rank group in `cli`, the memory-guard experiment in `memory_guard`)
shares one `.rehearsal/` directory at the repository root: the vLLM virtualenv (`env`), the built
tiny models (`tiny`) and one log directory per run. Both the model builder and the process
group raise `RehearsalError`, so it lives here rather than in either.
"""

from __future__ import annotations

from infra.plan.stackfile import REPO

REHEARSAL_DIR = REPO / ".rehearsal"
VENV_DIR = REHEARSAL_DIR / "venv"
#: The quantizer's virtualenv (llm-compressor), apart from vLLM's.
QUANTIZE_VENV_DIR = REHEARSAL_DIR / "quantize"
#: lm-evaluation-harness's virtualenv (`infra.bench.quality`).
QUALITY_VENV_DIR = REHEARSAL_DIR / "quality"
MODELS_DIR = REHEARSAL_DIR / "models"
LOGS_DIR = REHEARSAL_DIR / "logs"


class RehearsalError(RuntimeError):
    """A step of the rehearsal could not run (not a check that failed); the CLI exits 1."""
