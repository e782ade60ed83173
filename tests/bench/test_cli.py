"""Tests for `tools.bench.cli`: a whole run against the stub, rejected keys, bad arguments.

The end-to-end tests run the real `run_bench` or CLI entry (`main`) and the real `openai` client
against `tests.fakes.openai_stub`. Measured values are asserted only where the client's clock is
a `ScriptedClock`, so they are exact and independent of how busy the machine is.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.support import (
    SECONDS_PER_TOKEN,
    STUB_RATE,
    TTFT_S,
    CliRun,
    StubFactory,
    bench_args,
)
from tests.fakes.clock import ScriptedClock
from tests.fakes.openai_stub import STUB_API_KEY, STUB_MODEL, reply_instants
from tools.bench.args import API_KEY_ENV, DEFAULT_PROMPT, parse_args
from tools.bench.cli import run_bench

REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# The reported rates are the rates of the timeline the client recorded


def test_reports_the_rates_of_the_recorded_timeline(stub: StubFactory) -> None:
    """A whole run through the real client and stub, with every stream reading a known timeline.

    Each stream's clock replays `reply_instants`: sent at 0, the empty role chunk at 0, token i at
    TTFT + i * 20 ms. Counting the role chunk as the first token, dividing by the wrong interval
    or by the wrong token count changes these numbers; the machine's load cannot.
    """
    server = stub()
    args = parse_args(
        bench_args(server, "--tokens", "20", "--runs", "3", "--concurrency", "1,2", "--json")
    )
    log: list[str] = []
    clock = ScriptedClock(reply_instants(20, TTFT_S, SECONDS_PER_TOKEN))
    report = run_bench(args, server.base_url, STUB_API_KEY, log.append, clock=clock)

    assert report["model"] == STUB_MODEL, "the model must come from /v1/models when not given"
    assert report["ok"] is True
    assert len(report["requests"]) == 3 * 1 + 3 * 2
    reply_s = TTFT_S + 19 * SECONDS_PER_TOKEN
    for record in report["requests"]:
        assert record["status"] == "ok", record
        assert (record["completion_tokens"], record["token_source"]) == (20, "usage")
        assert record["finish_reason"] == "length"
        # TTFT is measured to the first *content*, not the empty role chunk sent at once.
        assert record["ttft_s"] == pytest.approx(TTFT_S, rel=1e-12), record
        # 19 tokens after the first over the 19 gaps after it.
        assert record["decode_tokens_per_s"] == pytest.approx(STUB_RATE, rel=1e-12), record
        assert record["ms_per_token"] == pytest.approx(1000 * SECONDS_PER_TOKEN, rel=1e-12)
        assert record["total_s"] == pytest.approx(reply_s, rel=1e-12)

    one, two = report["levels"]
    for level in (one, two):
        assert level["decode_tokens_per_s"]["median"] == pytest.approx(STUB_RATE, rel=1e-12)
        assert level["decode_tokens_per_s"]["min"] == level["decode_tokens_per_s"]["max"]
        assert level["token_sources"] == ["usage"]
    assert one["decode_tokens_per_s"]["n"] == 3
    assert two["decode_tokens_per_s"]["n"] == 6
    # Both streams of a round span the same timeline: the round's tokens over one reply's time.
    assert one["aggregate_tokens_per_s"]["median"] == pytest.approx(20 / reply_s, rel=1e-12)
    assert two["aggregate_tokens_per_s"]["median"] == pytest.approx(40 / reply_s, rel=1e-12)
    assert one["round_wall_s"] == pytest.approx([reply_s] * 3, rel=1e-12)

    progress = [line for line in log if line.startswith("[concurrency")]
    assert len(progress) == 6, log
    assert progress[0] == (
        "[concurrency 1, round 1/3] 1/1 ok, 20 tokens in 0.48 s = 41.67 tok/s aggregate"
    )
    assert progress[-1] == (
        "[concurrency 2, round 3/3] 2/2 ok, 40 tokens in 0.48 s = 83.33 tok/s aggregate"
    )


def test_requests_ask_for_exactly_the_token_count(stub: StubFactory, run_cli: CliRun) -> None:
    server = stub()
    code, _, err = run_cli(
        *bench_args(server, "--tokens", "7", "--runs", "1", "--concurrency", "2")
    )
    assert code == 0, err
    assert len(server.requests) == 2
    for body in server.requests:
        assert body["model"] == STUB_MODEL
        assert body["stream"] is True
        assert body["max_tokens"] == 7
        assert body["min_tokens"] == 7
        assert body["ignore_eos"] is True
        assert body["stream_options"] == {"include_usage": True}
        assert body["messages"] == [{"role": "user", "content": DEFAULT_PROMPT}]


# --------------------------------------------------------------------------------------------
# A rejected API key is one clear line and a non-zero exit


def test_wrong_api_key_is_a_clear_error(stub: StubFactory, run_cli: CliRun) -> None:
    server = stub()
    code, out, err = run_cli(*bench_args(server, key="wrong-key"))
    assert code == 1
    assert out == ""
    assert err == (
        f"error: the server at {server.base_url} rejected the API key (HTTP 401); pass the "
        "deployment's key with --api-key or GEMMA_GRAVITON_API_KEY "
        "(`pulumi stack output --show-secrets apiKey`)\n"
    )
    assert server.requests == []


def test_wrong_api_key_with_explicit_model_stops_after_the_first_round(
    stub: StubFactory, run_cli: CliRun
) -> None:
    server = stub()
    code, out, err = run_cli(
        *bench_args(server, "--model", STUB_MODEL, "--runs", "3", key="wrong-key")
    )
    assert code == 1
    assert out == ""
    assert err.splitlines()[-1].startswith(
        f"error: the server at {server.base_url} rejected the API key (HTTP 401)"
    )
    assert "[concurrency" not in err, "no round may be reported as if it measured something"


def test_missing_api_key_says_none_was_given(stub: StubFactory, run_cli: CliRun) -> None:
    server = stub()
    code, _, err = run_cli("--endpoint", server.root_url)
    assert code == 1
    assert err.startswith(
        f"error: the server at {server.base_url} requires an API key (HTTP 401) and none was given"
    )


def test_api_key_from_environment_is_used(
    stub: StubFactory, run_cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = stub()
    monkeypatch.setenv(API_KEY_ENV, STUB_API_KEY)
    code, _, err = run_cli(
        "--endpoint", server.root_url, "--tokens", "3", "--runs", "1", "--concurrency", "1"
    )
    assert code == 0, err


# --------------------------------------------------------------------------------------------
# Bad arguments exit 2 with one exact line


ENDPOINT = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--concurrency", "0"],
            "`--concurrency` must be a comma-separated list of whole numbers of at least 1, "
            "got '0'; pass e.g. --concurrency 1,2,4",
        ),
        (
            ["--concurrency", "1,,4"],
            "`--concurrency` must be a comma-separated list of whole numbers of at least 1, "
            "got '1,,4'; pass e.g. --concurrency 1,2,4",
        ),
        (
            ["--tokens", "-5"],
            "`--tokens` must be a whole number of at least 2 (the decode rate needs tokens after "
            "the first), got '-5'; pass e.g. --tokens 100",
        ),
        (
            ["--tokens", "1"],
            "`--tokens` must be a whole number of at least 2 (the decode rate needs tokens after "
            "the first), got '1'; pass e.g. --tokens 100",
        ),
        (
            ["--runs", "x"],
            "`--runs` must be a whole number of at least 1, got 'x'; pass e.g. --runs 3",
        ),
        (
            ["--runs", "0"],
            "`--runs` must be a whole number of at least 1, got '0'; pass e.g. --runs 3",
        ),
        (
            ["--timeout", "0"],
            "`--timeout` must be a number of seconds greater than 0, got '0'; "
            "pass e.g. --timeout 120",
        ),
        (
            ["--prompt", "  "],
            "`--prompt` must not be empty; pass the text to send, or leave the flag out for the "
            "default prompt",
        ),
        (
            ["--bogus"],
            "unrecognized arguments: --bogus; run `python -m tools.bench --help` for the flags",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str], message: str, run_cli: CliRun) -> None:
    code, out, err = run_cli("--endpoint", ENDPOINT, *argv)
    assert code == 2
    assert out == ""
    assert err == f"error: {message}\n"


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        (
            "lb.example.com/v1",
            "`--endpoint` must be an http(s) URL such as http://<load-balancer>/v1, got "
            "'lb.example.com/v1'; pass the `endpoint` stack output",
        ),
        (
            "http://lb.example.com/v1/chat/completions",
            "`--endpoint` must be the OpenAI base URL ending in /v1, not a route below it, got "
            "'http://lb.example.com/v1/chat/completions'; pass e.g. http://lb.example.com/v1",
        ),
    ],
)
def test_bad_endpoint_exits_2(endpoint: str, message: str, run_cli: CliRun) -> None:
    code, _, err = run_cli("--endpoint", endpoint)
    assert code == 2
    assert err == f"error: {message}\n"


def test_no_endpoint_and_no_pulumi_exits_2(
    run_cli: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = run_cli()
    assert code == 2
    assert out == ""
    assert err == (
        "error: `--endpoint` is required when no `pulumi` executable is on PATH; pass --endpoint "
        "http://<load-balancer>/v1 and --api-key KEY (or set GEMMA_GRAVITON_API_KEY)\n"
    )


def test_module_entry_point_exits_2_without_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--endpoint", ENDPOINT, "--concurrency", "0"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: `--concurrency` must be")
    assert "Traceback" not in done.stderr
