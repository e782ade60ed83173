"""Fixtures shared by the whole suite; the fakes themselves live in `tests/fakes/`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from tests import builders
from tests.fakes.pulumi_mocks import RecordingMocks


@pytest.fixture(autouse=True)
def _plans_made_by_each_test_under_mutation_stats() -> None:
    """mutmut learns which tests reach each function from one run (`MUTANT_UNDER_TEST=stats`):
    a plan `tests.builders` cached for an earlier test would hide its calls from the later ones,
    which would then never judge a mutant of the planner or the manifest builders."""
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        builders.clear_caches()


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    """Fresh recording mocks installed as the engine (project gemma-graviton, stack dev, not a
    preview) with empty stack config."""
    pulumi.runtime.set_all_config({}, [])
    yield RecordingMocks().install()
    pulumi.runtime.set_all_config({}, [])


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What a program passes to `pulumi.export`, by name (Outputs, unresolved)."""
    recorded: dict[str, Any] = {}
    monkeypatch.setattr(pulumi, "export", lambda name, value: recorded.__setitem__(name, value))
    return recorded
