"""The rehearsal's quality rows: `tools.bench.quality` (lm-eval) against the tiny groups.

The scores of a random-weight model mean nothing; the rows show that the documented command runs
end to end through the real gatekeeper on the shipped task (chat route, the group's key, no hub),
on the bf16 group and on the int8 group, and prints the difference as `make quality` would.
A few questions only (`QUESTIONS`), to keep the rows to seconds each.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tools.bench.quality import TASK, Score, Target, render, score
from tools.rehearse.checks import Check

#: Questions of the shipped task scored per group (of 40).
QUESTIONS = 6


class QualityStep:
    """Scores each group it is handed, and the difference between the first two."""

    def __init__(self, python: Path, out_dir: Path, progress: Callable[[str], None]) -> None:
        self.python, self.out_dir, self.progress = python, out_dir, progress
        self.scored: list[tuple[Target, Score]] = []

    def row(self, label: str, gate_url: str, api_key: str, model: str) -> Check:
        """lm-eval on `QUESTIONS` questions through the gatekeeper at `gate_url`."""
        target = Target(label, gate_url, api_key, model)
        name, expected = f"{label}: lm-eval {TASK}", "a score, end to end"
        began = time.monotonic()
        try:
            result = score(self.python, target, self.out_dir / label, QUESTIONS, self.progress)
        except (RuntimeError, ValueError, KeyError, OSError) as error:
            first = str(error).splitlines()[0]
            return Check(name, expected, "lm-eval failed", False, note=str(error) or first)
        self.scored.append((target, result))
        took = time.monotonic() - began
        observed = (
            f"exact match {result.value:.3f} ± {result.stderr:.3f} "
            f"({result.questions} questions, {took:.0f} s)"
        )
        return Check(name, expected, observed, result.questions == QUESTIONS)

    def difference_row(self) -> Check:
        """Both scores and the difference, as `python -m tools.bench.quality --against` prints."""
        name, expected = "lm-eval difference", "bf16 and int8 scored, difference printed"
        if len(self.scored) < 2:
            return Check(name, expected, f"{len(self.scored)} group(s) scored", False)
        table = render(self.scored[:2])
        self.progress(table)
        return Check(name, expected, table.splitlines()[-1], True)
