"""Median and spread: the statistics every metric of the report is summarised with.

Pure arithmetic on plain numbers, no I/O and nothing about replies, so the report can summarise any
new metric the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def median(values: Sequence[float]) -> float:
    """The median; the mean of the two middle values for an even count."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2


def spread(values: Sequence[float]) -> tuple[float, float]:
    """The (min, max) range of the values."""
    if not values:
        raise ValueError("spread of no values")
    return float(min(values)), float(max(values))


@dataclass(frozen=True)
class Summary:
    """Median and spread of one metric over a set of samples."""

    median: float
    min: float
    max: float
    n: int

    def to_json(self) -> dict[str, float | int]:
        """The JSON form: median, min, max and the sample count."""
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}

    def format(self, digits: int) -> str:
        """`median (min..max)` with `digits` decimals."""
        return f"{self.median:.{digits}f} ({self.min:.{digits}f}..{self.max:.{digits}f})"


def summarize(values: Iterable[float | None]) -> Summary | None:
    """Median and spread of the values that exist; None when there are none."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    low, high = spread(present)
    return Summary(median=median(present), min=low, max=high, n=len(present))
