"""Tests for `infra.bench.cli`: a whole run against the stub, rejected keys, bad arguments.

The end-to-end tests run the real CLI entry (`main`) and the real `openai` client against
`tests.fakes.openai_stub`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.bench.args import API_KEY_ENV, DEFAULT_PROMPT
from tests.bench.support import (
    SECONDS_PER_TOKEN,
    STUB_RATE,
    TTFT_S,
    CliRun,
    StubFactory,
    bench_args,
)
from tests.fakes.openai_stub import STUB_API_KEY, STUB_MODEL

REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# The measured decode rate is the stub's known rate


def test_reports_the_stub_decode_rate_within_ten_percent(
    stub: StubFactory, run_cli: CliRun
) -> None:
    server = stub()
    code, out, err = run_cli(
        *bench_args(server, "--tokens", "20", "--runs", "3", "--concurrency", "1,2", "--json"),
    )
    assert code == 0, err
    report = json.loads(out)

    assert report["model"] == STUB_MODEL, "the model must come from /v1/models when not given"
    assert report["ok"] is True
    assert len(report["requests"]) == 3 * 1 + 3 * 2
    for record in report["requests"]:
        assert record["status"] == "ok", record
        assert record["completion_tokens"] == 20
        assert record["token_source"] == "usage"
        assert record["finish_reason"] == "length"
        assert record["decode_tokens_per_s"] == pytest.approx(STUB_RATE, rel=0.10), record
        # TTFT is measured to the first *content*, not the empty role chunk sent at once.
        assert TTFT_S <= record["ttft_s"] < TTFT_S + 0.08, record

    one, two = report["levels"]
    for level in (one, two):
        assert level["decode_tokens_per_s"]["median"] == pytest.approx(STUB_RATE, rel=0.10)
        assert level["ms_per_token"]["median"] == pytest.approx(1000 * SECONDS_PER_TOKEN, rel=0.10)
        assert level["decode_tokens_per_s"]["min"] <= level["decode_tokens_per_s"]["median"]
        assert level["decode_tokens_per_s"]["median"] <= level["decode_tokens_per_s"]["max"]
        assert level["token_sources"] == ["usage"]
    assert one["decode_tokens_per_s"]["n"] == 3
    assert two["decode_tokens_per_s"]["n"] == 6

    # A round of 20 tokens takes TTFT + 19 gaps; two concurrent streams double the aggregate
    # only if they really ran at the same time.
    round_s = TTFT_S + 19 * SECONDS_PER_TOKEN
    assert one["aggregate_tokens_per_s"]["median"] == pytest.approx(20 / round_s, rel=0.10)
    assert two["aggregate_tokens_per_s"]["median"] == pytest.approx(40 / round_s, rel=0.10)

    progress = [line for line in err.splitlines() if line.startswith("[concurrency")]
    assert len(progress) == 6, err
    assert progress[0].startswith("[concurrency 1, round 1/3] 1/1 ok, 20 tokens in ")
    assert progress[-1].startswith("[concurrency 2, round 3/3] 2/2 ok, 40 tokens in ")


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
            "unrecognized arguments: --bogus; run `python -m infra.bench --help` for the flags",
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
        [sys.executable, "-m", "infra.bench", "--endpoint", ENDPOINT, "--concurrency", "0"],
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
