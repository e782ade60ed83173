"""Fixtures shared by the whole suite; the fakes themselves live in `tests/fakes/`."""

from __future__ import annotations

from collections.abc import Iterator

import pulumi
import pytest

from tests.fakes.pulumi_mocks import RecordingMocks


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    """Fresh recording mocks installed as the engine (project gemma-graviton, stack dev, not a
    preview) with empty stack config."""
    pulumi.runtime.set_all_config({}, [])
    yield RecordingMocks().install()
    pulumi.runtime.set_all_config({}, [])
