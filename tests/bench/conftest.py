"""Fixtures shared by the benchmark tests: stub servers, the CLI in-process, no ambient key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.bench.support import STUB_DELAYS, CliRun, StubFactory
from tests.fakes.openai_stub import StubConfig, StubServer
from tools.bench.args import API_KEY_ENV
from tools.bench.cli import main


@pytest.fixture
def stub() -> Iterator[StubFactory]:
    """Start stub servers with the given `StubConfig` fields; all are stopped after the test."""
    started: list[StubServer] = []

    def start(**config: Any) -> StubServer:
        server = StubServer(StubConfig(**{**STUB_DELAYS, **config})).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> CliRun:
    """Run `main` in-process; return exit code, stdout and stderr."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's exported key must not change what these tests send."""
    monkeypatch.delenv(API_KEY_ENV, raising=False)
