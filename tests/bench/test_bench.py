"""Tests for `infra.bench`: measured rates against a stub with known timing, loud cut-offs, errors.

The end-to-end tests run the real CLI entry (`main`) and the real `openai` client against
`tests.fakes.openai_stub`, whose token timing is fixed, so a wrong measurement (counting the role
chunk as the first token, dividing by the wrong interval, serialising "concurrent" requests) shows
up as a number outside tolerance rather than passing by luck.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infra.bench import cli as bench
from tests.fakes.openai_stub import STUB_API_KEY, STUB_MODEL, StubConfig, StubServer

REPO_ROOT = Path(__file__).resolve().parents[2]

# 50 tokens/s with 20 tokens keeps a round under half a second while leaving 19 decode intervals
# of 20 ms each, long enough that scheduling jitter stays far inside the 10% tolerance.
SECONDS_PER_TOKEN = 0.02
STUB_RATE = 1 / SECONDS_PER_TOKEN
TTFT_S = 0.1

StubFactory = Callable[..., StubServer]


@pytest.fixture
def stub() -> Iterator[StubFactory]:
    """Start stub servers with the given `StubConfig` fields; all are stopped after the test."""
    started: list[StubServer] = []

    def start(**config: Any) -> StubServer:
        defaults: dict[str, Any] = {"seconds_per_token": SECONDS_PER_TOKEN, "ttft_s": TTFT_S}
        server = StubServer(StubConfig(**{**defaults, **config})).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's exported key must not change what these tests send."""
    monkeypatch.delenv(bench.API_KEY_ENV, raising=False)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run `main` in-process; return exit code, stdout and stderr."""
    code = bench.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def bench_args(server: StubServer, *extra: str, key: str = STUB_API_KEY) -> list[str]:
    return ["--endpoint", server.base_url, "--api-key", key, *extra]


# --------------------------------------------------------------------------------------------
# (1) The measured decode rate is the stub's known rate


def test_reports_the_stub_decode_rate_within_ten_percent(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub()
    code, out, err = run_cli(
        capsys,
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


def test_requests_ask_for_exactly_the_token_count(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub()
    code, _, err = run_cli(
        capsys, *bench_args(server, "--tokens", "7", "--runs", "1", "--concurrency", "2")
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
        assert body["messages"] == [{"role": "user", "content": bench.DEFAULT_PROMPT}]


def test_complete_run_labels_length_at_the_requested_count_as_expected(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub()
    code, out, err = run_cli(
        capsys,
        *bench_args(server, "--tokens", "5", "--runs", "1", "--concurrency", "1"),
        "--model",
        "any-model",
    )
    assert code == 0, err
    row = next(line for line in out.splitlines() if "5/5" in line)
    assert "length (expected)" in row
    assert row.endswith("ok")
    assert "CUT OFF" not in out and "SHORT" not in out and "!!!" not in out
    assert 'finish_reason "length" there is the expected end of a fixed-length run' in out
    assert server.requests[0]["model"] == "any-model", "--model must skip discovery"


def test_missing_usage_falls_back_to_counting_chunks_and_says_so(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub(send_usage=False)
    code, out, err = run_cli(
        capsys, *bench_args(server, "--tokens", "6", "--runs", "1", "--concurrency", "1", "--json")
    )
    assert code == 0, err
    (record,) = json.loads(out)["requests"]
    assert record["token_source"] == "chunks"
    assert record["completion_tokens"] == 6

    code, out, _ = run_cli(
        capsys, *bench_args(server, "--tokens", "6", "--runs", "1", "--concurrency", "1")
    )
    assert code == 0
    assert "tokens counted from: content chunks (no usage sent)" in out


# --------------------------------------------------------------------------------------------
# (2) A reply cut off early is loud in the table, the JSON and the exit code


def test_cut_off_reply_is_flagged_in_table_and_exit_code(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub(cut_off_at=12)
    code, out, err = run_cli(
        capsys, *bench_args(server, "--tokens", "20", "--runs", "1", "--concurrency", "1")
    )
    assert code == 1
    row = next(line for line in out.splitlines() if "12/20" in line)
    assert row.endswith("CUT OFF")
    assert "length (EARLY)" in row
    assert "length (expected)" not in out
    level_row = next(line for line in out.splitlines() if "0/1 ok" in line)
    assert "1 CUT OFF" in level_row
    assert (
        '!!! conc 1 round 1 stream 1: CUT OFF: finish_reason "length" after 12 of 20 requested '
        "tokens; the server stopped the reply early (context or max-tokens limit)"
    ) in out
    assert "1 CUT OFF" in err, "the progress line must say so too"


def test_cut_off_reply_is_flagged_in_json(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub(cut_off_at=12)
    code, out, _ = run_cli(
        capsys, *bench_args(server, "--tokens", "20", "--runs", "1", "--concurrency", "1", "--json")
    )
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    assert report["cut_off_or_short"] == 1
    (record,) = report["requests"]
    assert record["status"] == "cut_off"
    assert record["ok"] is False
    assert record["finish_reason"] == "length"
    assert record["completion_tokens"] == 12
    assert record["note"].startswith('CUT OFF: finish_reason "length" after 12 of 20')
    (level,) = report["levels"]
    assert (level["ok"], level["cut_off"], level["short"], level["failed"]) == (0, 1, 0, 0)
    assert report["problems"] == [
        {
            "concurrency": 1,
            "round": 1,
            "stream": 1,
            "status": "cut_off",
            "note": record["note"],
        }
    ]


def test_reply_that_stops_early_is_short(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub(stop_at=4)
    code, out, _ = run_cli(
        capsys, *bench_args(server, "--tokens", "10", "--runs", "1", "--concurrency", "1")
    )
    assert code == 1
    row = next(line for line in out.splitlines() if "4/10" in line)
    assert row.endswith("SHORT")
    assert (
        '!!! conc 1 round 1 stream 1: SHORT: 4 of 10 requested tokens, finish_reason "stop"; '
        "the server did not hold the reply to min_tokens/ignore_eos"
    ) in out


# --------------------------------------------------------------------------------------------
# (3) A rejected API key is one clear line and a non-zero exit


def test_wrong_api_key_is_a_clear_error(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub()
    code, out, err = run_cli(capsys, *bench_args(server, key="wrong-key"))
    assert code == 1
    assert out == ""
    assert err == (
        f"error: the server at {server.base_url} rejected the API key (HTTP 401); pass the "
        "deployment's key with --api-key or GEMMA_GRAVITON_API_KEY "
        "(`pulumi stack output --show-secrets apiKey`)\n"
    )
    assert server.requests == []


def test_wrong_api_key_with_explicit_model_stops_after_the_first_round(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub()
    code, out, err = run_cli(
        capsys, *bench_args(server, "--model", STUB_MODEL, "--runs", "3", key="wrong-key")
    )
    assert code == 1
    assert out == ""
    assert err.splitlines()[-1].startswith(
        f"error: the server at {server.base_url} rejected the API key (HTTP 401)"
    )
    assert "[concurrency" not in err, "no round may be reported as if it measured something"


def test_missing_api_key_says_none_was_given(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub()
    code, _, err = run_cli(capsys, "--endpoint", server.root_url)
    assert code == 1
    assert err.startswith(
        f"error: the server at {server.base_url} requires an API key (HTTP 401) and none was given"
    )


def test_api_key_from_environment_is_used(
    stub: StubFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = stub()
    monkeypatch.setenv(bench.API_KEY_ENV, STUB_API_KEY)
    code, _, err = run_cli(
        capsys, "--endpoint", server.root_url, "--tokens", "3", "--runs", "1", "--concurrency", "1"
    )
    assert code == 0, err


# --------------------------------------------------------------------------------------------
# (4) Bad arguments exit 2 with one exact line


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
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "--endpoint", ENDPOINT, *argv)
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
def test_bad_endpoint_exits_2(
    endpoint: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "--endpoint", endpoint)
    assert code == 2
    assert err == f"error: {message}\n"


def test_no_endpoint_and_no_pulumi_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = run_cli(capsys)
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


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://lb.example.com", "http://lb.example.com/v1"),
        ("http://lb.example.com/", "http://lb.example.com/v1"),
        ("http://lb.example.com/v1", "http://lb.example.com/v1"),
        ("https://lb.example.com/v1/", "https://lb.example.com/v1"),
        ("http://lb.example.com:8000/gemma", "http://lb.example.com:8000/gemma/v1"),
    ],
)
def test_endpoint_is_accepted_with_or_without_v1(given: str, expected: str) -> None:
    assert bench.normalize_base_url(given) == expected


def test_parse_args_defaults_match_the_field_report() -> None:
    args = bench.parse_args(["--endpoint", "http://lb.example.com"])
    assert (args.runs, args.tokens, args.concurrency) == (3, 100, (1, 2, 4))
    assert args.endpoint == "http://lb.example.com/v1"
    assert args.model is None and args.api_key is None and args.json_output is False


# --------------------------------------------------------------------------------------------
# Endpoint and key from Pulumi


def _fake_pulumi(outputs: dict[str, tuple[int, str, str]]) -> tuple[Any, list[list[str]]]:
    calls: list[list[str]] = []

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        code, stdout, stderr = outputs[command[-1]]
        return subprocess.CompletedProcess(command, code, stdout, stderr)

    return run, calls


def test_pulumi_outputs_fill_endpoint_and_key() -> None:
    run, calls = _fake_pulumi(
        {"endpoint": (0, "http://lb.example.com\n", ""), "apiKey": (0, "s3cret\n", "")}
    )
    args = bench.parse_args([])
    endpoint, key = bench.resolve_target(args, {}, which=lambda _: "/bin/pulumi", run=run)
    assert (endpoint, key) == ("http://lb.example.com/v1", "s3cret")
    assert calls == [
        ["pulumi", "stack", "output", "endpoint"],
        ["pulumi", "stack", "output", "--show-secrets", "apiKey"],
    ]


def test_environment_key_wins_over_the_stack_key() -> None:
    run, calls = _fake_pulumi({"endpoint": (0, "http://lb.example.com/v1", "")})
    args = bench.parse_args([])
    endpoint, key = bench.resolve_target(
        args, {bench.API_KEY_ENV: "from-env"}, which=lambda _: "/bin/pulumi", run=run
    )
    assert (endpoint, key) == ("http://lb.example.com/v1", "from-env")
    assert len(calls) == 1


def test_failing_pulumi_names_the_command_and_the_fix() -> None:
    run, _ = _fake_pulumi({"endpoint": (255, "", "error: no stack selected\n")})
    with pytest.raises(bench.UsageError) as caught:
        bench.resolve_target(bench.parse_args([]), {}, which=lambda _: "/bin/pulumi", run=run)
    assert str(caught.value) == (
        "`pulumi stack output endpoint` failed (error: no stack selected); pass --endpoint "
        "http://<load-balancer>/v1, or run from the project with a stack selected"
    )


# --------------------------------------------------------------------------------------------
# (5) Statistics helpers


def test_median_of_odd_and_even_counts() -> None:
    assert bench.median([3.0, 1.0, 2.0]) == 2.0
    assert bench.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert bench.median([7.0]) == 7.0
    with pytest.raises(ValueError, match="median of no values"):
        bench.median([])


def test_spread_is_min_and_max() -> None:
    assert bench.spread([4.02, 3.98, 4.0]) == (3.98, 4.02)
    with pytest.raises(ValueError, match="spread of no values"):
        bench.spread([])


def test_summarize_ignores_missing_values() -> None:
    summary = bench.summarize([None, 4.0, 3.0, None, 5.0, 10.0])
    assert summary == bench.Summary(median=4.5, min=3.0, max=10.0, n=4)
    assert summary.format(1) == "4.5 (3.0..10.0)"
    assert summary.to_json() == {"median": 4.5, "min": 3.0, "max": 10.0, "n": 4}
    assert bench.summarize([None]) is None


def test_consume_stream_times_from_first_content_not_the_role_chunk() -> None:
    def chunk(content: str | None, finish: str | None = None) -> SimpleNamespace:
        delta = SimpleNamespace(content=content)
        return SimpleNamespace(
            choices=[SimpleNamespace(delta=delta, finish_reason=finish)], usage=None
        )

    usage = SimpleNamespace(choices=[], usage=SimpleNamespace(completion_tokens=5))
    # Five tokens in three content chunks: usage, not the chunk count, is the token count.
    chunks = [chunk(""), chunk("a"), chunk("b c"), chunk("d e", "length"), usage]
    ticks = iter([1.0, 2.0, 3.0, 4.0, 4.5])
    record = bench.RequestRecord(concurrency=1, round=1, stream=1, requested=5, started=0.5)
    bench.consume_stream(chunks, record, clock=lambda: next(ticks))
    record.ended = 4.5
    assert (record.first_token_at, record.last_token_at) == (2.0, 4.0)
    assert record.content_chunks == 3
    assert (record.completion_tokens, record.token_source) == (5, "usage")
    assert record.ttft_s == 1.5
    assert record.decode_tokens_per_s == 2.0  # (5 - 1) tokens over 4.0 - 2.0 s
    assert record.ms_per_token == 500.0
    assert record.total_s == 4.0
    assert record.verdict.status == "ok"


@pytest.mark.parametrize(
    ("tokens", "finish", "source", "error", "status", "ok"),
    [
        (100, "length", "usage", None, "ok", True),
        (100, "stop", "usage", None, "ok", True),
        (60, "length", "usage", None, "cut_off", False),
        (60, "stop", "usage", None, "short", False),
        (60, "stop", "chunks", None, "short", False),
        (101, "length", "usage", None, "long", False),
        (100, None, "usage", None, "unfinished", False),
        (100, "abort", "usage", None, "unexpected_finish", False),
        (0, None, "chunks", "connection failed", "failed", False),
    ],
)
def test_classify_reply(
    tokens: int, finish: str | None, source: str, error: str | None, status: str, ok: bool
) -> None:
    verdict = bench.classify_reply(100, tokens, finish, source, error)
    assert (verdict.status, verdict.ok) == (status, ok)
    if not ok:
        assert verdict.note.split(":")[0].isupper(), "problems must be loud"
    if source == "chunks" and error is None:
        assert "counted from content chunks" in verdict.note


def test_length_at_requested_count_is_labelled_expected() -> None:
    verdict = bench.classify_reply(100, 100, "length")
    assert verdict.note == (
        'finish_reason "length" at the requested 100 tokens: the expected end of a fixed-length run'
    )


# --------------------------------------------------------------------------------------------
# (6) The JSON document has the documented keys


def test_json_output_has_the_documented_keys(
    stub: StubFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub()
    code, out, _ = run_cli(
        capsys, *bench_args(server, "--tokens", "4", "--runs", "2", "--concurrency", "1", "--json")
    )
    assert code == 0
    report = json.loads(out)
    assert set(report) == {
        "endpoint",
        "model",
        "requested_tokens",
        "runs",
        "concurrency",
        "prompt",
        "ok",
        "failed",
        "cut_off_or_short",
        "problems",
        "levels",
        "requests",
    }
    assert (report["endpoint"], report["requested_tokens"], report["runs"]) == (
        server.base_url,
        4,
        2,
    )
    assert report["concurrency"] == [1]
    (level,) = report["levels"]
    assert set(level) == {
        "concurrency",
        "rounds",
        "requests",
        "ok",
        "failed",
        "cut_off",
        "short",
        "statuses",
        "finish_reasons",
        "token_sources",
        "round_wall_s",
        "round_completion_tokens",
        "aggregate_tokens_per_s",
        "decode_tokens_per_s",
        "ms_per_token",
        "ttft_s",
        "total_s",
    }
    assert (level["rounds"], level["requests"], level["ok"]) == (2, 2, 2)
    assert level["finish_reasons"] == {"length": 2}
    assert level["round_completion_tokens"] == [4, 4]
    for key in ("aggregate_tokens_per_s", "decode_tokens_per_s", "ms_per_token", "ttft_s"):
        assert set(level[key]) == {"median", "min", "max", "n"}, key
    assert len(report["requests"]) == 2
    for record in report["requests"]:
        assert set(record) == {
            "concurrency",
            "round",
            "stream",
            "status",
            "ok",
            "note",
            "requested_tokens",
            "completion_tokens",
            "token_source",
            "finish_reason",
            "ttft_s",
            "decode_tokens_per_s",
            "ms_per_token",
            "total_s",
            "error",
        }
    assert [r["round"] for r in report["requests"]] == [1, 2]
