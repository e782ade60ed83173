"""Tests for `tools.bench.stats`: median, spread and summaries."""

from __future__ import annotations

import pytest

from tools.bench.stats import Summary, median, spread, summarize


def test_median_of_odd_and_even_counts() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.0]) == 7.0
    with pytest.raises(ValueError, match="median of no values"):
        median([])


def test_spread_is_min_and_max() -> None:
    assert spread([4.02, 3.98, 4.0]) == (3.98, 4.02)
    with pytest.raises(ValueError, match="spread of no values"):
        spread([])


def test_summarize_ignores_missing_values() -> None:
    summary = summarize([None, 4.0, 3.0, None, 5.0, 10.0])
    assert summary == Summary(median=4.5, min=3.0, max=10.0, n=4)
    assert summary.format(1) == "4.5 (3.0..10.0)"
    assert summary.to_json() == {"median": 4.5, "min": 3.0, "max": 10.0, "n": 4}
    assert summarize([None]) is None
