"""A fake clock for code that reads instants through an injected `clock()`. Test infrastructure.

`ScriptedClock` hands each thread its own copy of a list of instants, one per call, so code that
times several streams on several threads (one thread per stream, as `tools.bench.client.run_round`
does) reads the same known timeline in every stream however the threads interleave. A thread that
reads more instants than were scripted fails the test loudly instead of inventing a time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence


class ScriptedClock:
    """A `clock()` that returns `instants` in order, separately in every thread that calls it."""

    def __init__(self, instants: Sequence[float]) -> None:
        self.instants = tuple(instants)
        self._local = threading.local()

    def __call__(self) -> float:
        readings: Iterator[float] | None = getattr(self._local, "readings", None)
        if readings is None:
            readings = self._local.readings = iter(self.instants)
        try:
            return next(readings)
        except StopIteration:
            raise AssertionError(
                f"the clock was read more than the {len(self.instants)} scripted times in "
                f"thread {threading.current_thread().name}"
            ) from None
