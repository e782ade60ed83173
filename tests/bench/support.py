"""Helpers shared by the benchmark tests that run the command line against a stub server."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.openai_stub import STUB_API_KEY, StubServer

STUB_DELAYS = {"ttft_s": 0.01, "seconds_per_token": 0.002}
"""The stub's real delays: short, and non-zero so every interval the real clock measures is
positive. No test asserts a duration measured by the real clock; a busy machine stretches them."""

# The timeline scripted clocks replay (`reply_instants`): the field report's shape, scaled down.
TTFT_S = 0.1
SECONDS_PER_TOKEN = 0.02
STUB_RATE = 50.0

StubFactory = Callable[..., StubServer]
"""The `stub` fixture: start a stub server with the given `StubConfig` fields."""

CliRun = Callable[..., tuple[int, str, str]]
"""The `run_cli` fixture: run `main` in-process with the given argv; exit code, stdout, stderr."""


def bench_args(server: StubServer, *extra: str, key: str = STUB_API_KEY) -> list[str]:
    """The command line for a run against `server`, with its key unless told otherwise."""
    return ["--endpoint", server.base_url, "--api-key", key, *extra]
