"""Helpers shared by the benchmark tests that run the command line against a stub server."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.openai_stub import STUB_API_KEY, StubServer

# 50 tokens/s with 20 tokens keeps a round under half a second while leaving 19 decode intervals
# of 20 ms each, long enough that scheduling jitter stays far inside the 10% tolerance.
SECONDS_PER_TOKEN = 0.02
STUB_RATE = 1 / SECONDS_PER_TOKEN
TTFT_S = 0.1

StubFactory = Callable[..., StubServer]
"""The `stub` fixture: start a stub server with the given `StubConfig` fields."""

CliRun = Callable[..., tuple[int, str, str]]
"""The `run_cli` fixture: run `main` in-process with the given argv; exit code, stdout, stderr."""


def bench_args(server: StubServer, *extra: str, key: str = STUB_API_KEY) -> list[str]:
    """The command line for a run against `server`, with its key unless told otherwise."""
    return ["--endpoint", server.base_url, "--api-key", key, *extra]
