"""Tests for `tools.bench.report`: loud cut-offs, the documented JSON, rates from known instants."""

from __future__ import annotations

import json

import pytest

from tests.bench.support import CliRun, StubFactory, bench_args
from tools.bench.args import parse_args
from tools.bench.client import RequestRecord, RoundResult
from tools.bench.report import build_report


def test_complete_run_labels_length_at_the_requested_count_as_expected(
    stub: StubFactory, run_cli: CliRun
) -> None:
    server = stub()
    code, out, err = run_cli(
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
    stub: StubFactory, run_cli: CliRun
) -> None:
    server = stub(send_usage=False)
    code, out, err = run_cli(
        *bench_args(server, "--tokens", "6", "--runs", "1", "--concurrency", "1", "--json")
    )
    assert code == 0, err
    (record,) = json.loads(out)["requests"]
    assert record["token_source"] == "chunks"
    assert record["completion_tokens"] == 6

    code, out, _ = run_cli(
        *bench_args(server, "--tokens", "6", "--runs", "1", "--concurrency", "1")
    )
    assert code == 0
    assert "tokens counted from: content chunks (no usage sent)" in out


# --------------------------------------------------------------------------------------------
# A reply cut off early is loud in the table, the JSON and the exit code


def test_cut_off_reply_is_flagged_in_table_and_exit_code(
    stub: StubFactory, run_cli: CliRun
) -> None:
    server = stub(cut_off_at=12)
    code, out, err = run_cli(
        *bench_args(server, "--tokens", "20", "--runs", "1", "--concurrency", "1")
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


def test_cut_off_reply_is_flagged_in_json(stub: StubFactory, run_cli: CliRun) -> None:
    server = stub(cut_off_at=12)
    code, out, _ = run_cli(
        *bench_args(server, "--tokens", "20", "--runs", "1", "--concurrency", "1", "--json")
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


def test_reply_that_stops_early_is_short(stub: StubFactory, run_cli: CliRun) -> None:
    server = stub(stop_at=4)
    code, out, _ = run_cli(
        *bench_args(server, "--tokens", "10", "--runs", "1", "--concurrency", "1")
    )
    assert code == 1
    row = next(line for line in out.splitlines() if "4/10" in line)
    assert row.endswith("SHORT")
    assert (
        '!!! conc 1 round 1 stream 1: SHORT: 4 of 10 requested tokens, finish_reason "stop"; '
        "the server did not hold the reply to min_tokens/ignore_eos"
    ) in out


# --------------------------------------------------------------------------------------------
# The JSON document has the documented keys


def test_json_output_has_the_documented_keys(stub: StubFactory, run_cli: CliRun) -> None:
    server = stub()
    code, out, _ = run_cli(
        *bench_args(server, "--tokens", "4", "--runs", "2", "--concurrency", "1", "--json")
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
        "plan_predictions",
    }
    assert report["plan_predictions"]["stack"] == "dev"
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


def _reply(stream: int, started: float, first: float, last: float, ended: float) -> RequestRecord:
    return RequestRecord(
        concurrency=2,
        round=1,
        stream=stream,
        requested=20,
        started=started,
        first_token_at=first,
        last_token_at=last,
        ended=ended,
        content_chunks=20,
        usage_tokens=20,
        finish_reason="length",
    )


def test_level_rates_come_from_the_recorded_instants() -> None:
    """Two overlapping streams with known instants give exactly these per-level numbers."""
    # Stream 1: sent at 0, tokens from 0.1 to 0.48 (19 gaps of 20 ms), closed at 0.5.
    # Stream 2: sent at 0.02, tokens from 0.2 to 0.5 (19 gaps over 0.3 s), closed at 0.6.
    rnd = RoundResult(2, 1, (_reply(1, 0.0, 0.1, 0.48, 0.5), _reply(2, 0.02, 0.2, 0.5, 0.6)))
    args = parse_args(["--endpoint", "http://x/v1", "--tokens", "20", "--concurrency", "2"])
    (level,) = build_report("http://x/v1", "m", args, [(2, [rnd])])["levels"]

    # The round spans the first send (0) to the last close (0.6): 40 tokens over 0.6 s.
    assert level["round_wall_s"] == [pytest.approx(0.6, rel=1e-12)]
    assert level["aggregate_tokens_per_s"]["median"] == pytest.approx(40 / 0.6, rel=1e-12)
    decode = level["decode_tokens_per_s"]
    assert (decode["min"], decode["max"]) == (
        pytest.approx(19 / 0.38, rel=1e-12),
        pytest.approx(19 / 0.3, rel=1e-12),
    )
    assert decode["median"] == pytest.approx((19 / 0.3 + 19 / 0.38) / 2, rel=1e-12)
    assert level["ttft_s"]["median"] == pytest.approx((0.1 + 0.18) / 2, rel=1e-12)
    assert level["total_s"]["max"] == pytest.approx(0.58, rel=1e-12)
    assert level["ms_per_token"]["min"] == pytest.approx(1000 * 0.3 / 19, rel=1e-12)
