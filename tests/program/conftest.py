"""Fixtures for running the program as Pulumi's Python host runs it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.pulumi_host import pulumi_host
from tests.program.harness import PROGRAM


@pytest.fixture
def as_pulumi_host() -> Iterator[None]:
    """The host's view: cwd is the program folder, the repository root is not importable."""
    with pulumi_host(PROGRAM):
        yield
