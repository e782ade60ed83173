"""`python -m tools.bench.capacity`: bad input, the key's path, results read back, the table.

The results are those a real `vllm bench serve` (vLLM 0.31.0) saved in `make rehearse` against
the tiny group through the gatekeeper (tests/fixtures/vllm/bench-serve/); the failed and cut-off
cases are that recording with one request changed as the generator records a failure (output
length 0 and its error) and a short stream (fewer tokens, still completed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tools.bench import capacity
from tools.bench import loadtest_job as loadtest
from tools.bench.capacity_plan import Prediction
from tools.bench.capacity_table import Row, measured_text, planned_text, render, report
from tools.bench.loadgen import LoadPoint, PointResult, ResultError, parse_result, read_result

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm" / "bench-serve"
#: The points the recording's rehearsal sent
#: (`tools.rehearse.measure.capacity_step.rehearsal_points`).
SHORT = LoadPoint(1000, 16, 2, 7.5, 4)
LONG = LoadPoint(2000, 16, 2, 7.5, 4)


def _recorded(point: LoadPoint) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{point.name}.json").read_text(encoding="utf-8"))


def test_a_recorded_run_reads_as_every_reply_full() -> None:
    for point in (SHORT, LONG):
        raw = _recorded(point)
        result = parse_result(raw, point)
        assert result.ok, point.name
        assert (result.completed, result.failed, result.cut_off) == (4, 0, 0)
        assert result.prompt_tokens == max(raw["input_lens"])
        assert result.ttft_s["median"] == pytest.approx(raw["median_ttft_ms"] / 1000)
        assert result.ttft_s["p90"] == pytest.approx(raw["p90_ttft_ms"] / 1000)
        assert result.stream_tokens_per_s == pytest.approx(1000 / raw["median_tpot_ms"])
        assert result.requests_per_s == raw["request_throughput"]
        assert result.output_tokens_per_s == raw["output_throughput"]


def test_a_failed_request_and_a_short_reply_are_counted_never_averaged_away() -> None:
    raw = _recorded(SHORT)
    # Request 1 failed as the generator records a failure; request 2's stream ended after 7 of 16.
    raw["completed"] -= 1
    raw["failed"] = raw.get("failed", 0) + 1
    raw["output_lens"][1:3] = [0, 7]
    raw["errors"][1] = "Traceback ...\nTooManyRequests: 429"
    result = parse_result(raw, SHORT)
    assert (result.completed, result.failed, result.cut_off) == (3, 1, 1)
    assert not result.ok
    assert result.errors == ("TooManyRequests: 429",)
    assert measured_text(result, SHORT).startswith("2/4 full, 1 FAILED, 1 CUT OFF; TTFT ")
    table = render([Row(SHORT, None, result)], "h").splitlines()
    assert table[-1] == f"!!! {SHORT.name}: TooManyRequests: 429"
    assert "2/4 full, 1 FAILED, 1 CUT OFF" in table[2]


def test_requests_missing_from_the_result_count_as_failed() -> None:
    raw = _recorded(SHORT)
    fewer = LoadPoint(SHORT.input_tokens, 16, 2, 7.5, 6)
    result = parse_result(raw, fewer)
    assert (result.completed, result.failed) == (4, 2)


def test_a_file_that_is_not_a_detailed_result_is_refused(tmp_path: Path) -> None:
    raw = _recorded(SHORT)
    del raw["output_lens"]
    with pytest.raises(ResultError, match="missing 'output_lens'"):
        parse_result(raw, SHORT)
    with pytest.raises(ResultError, match="no result"):
        read_result(tmp_path, SHORT)


def _rows(results: Sequence[PointResult | None]) -> list[Row]:
    predicted = Prediction((1.0, 3.0), 4.25, 0.05, 6.4)
    return [Row(p, predicted, r) for p, r in zip((SHORT, LONG), results, strict=True)]


def test_the_table_sets_each_measured_figure_beside_the_plan_s() -> None:
    short, long = (parse_result(_recorded(p), p) for p in (SHORT, LONG))
    lines = render(_rows([short, long]), "capacity of x").splitlines()
    assert lines[0] == "capacity of x"
    header = lines[1].split()
    assert header[:4] == ["prompt", "conc", "rate/s", "replies"]
    cells = lines[2].split()
    assert cells[:6] == [str(short.prompt_tokens), "2", "7.5", "4/4", "full", "1.00-3.00"]
    assert cells[6] == f"{short.ttft_s['median']:.2f}"
    assert cells[7] == f"({short.ttft_s['p90']:.2f})"
    assert cells[8:] == [
        "4.25",
        f"{short.stream_tokens_per_s:.2f}",
        "6.40",
        f"{short.output_tokens_per_s:.2f}",
        "0.050",
        f"{short.requests_per_s:.3f}",
    ]
    assert lines[3].split()[0] == str(long.prompt_tokens)
    assert planned_text(None) == "no plan"
    missing = render(_rows([short, None]), "h").splitlines()[3]
    assert "0/4, NO RESULT" in missing


def test_the_json_report_holds_the_same_figures_and_no_infinity() -> None:
    short = parse_result(_recorded(SHORT), SHORT)
    unbounded = LoadPoint(1000, 16, 1, math.inf, 2)
    rows = [*_rows([short, None]), Row(unbounded, None, None)]
    document = json.loads(json.dumps(report(rows), allow_nan=False))
    assert document[0]["measured"]["ok"] is True
    assert document[0]["measured"]["ttft_s"]["median"] == short.ttft_s["median"]
    assert document[0]["predicted"]["ttft_s"] == [1.0, 3.0]
    assert document[1]["measured"] is None
    assert document[2]["point"]["request_rate"] is None


def test_each_point_runs_with_the_key_in_its_environment_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "an-unrelated-ambient-key")
    seen: list[tuple[Sequence[str], Mapping[str, str]]] = []

    def runner(argv: Sequence[str], env: Mapping[str, str], log_path: Path, log: Any) -> int:
        seen.append((argv, env))
        point = SHORT if "--random-input-len=1000" in argv else LONG
        (tmp_path / f"{point.name}.json").write_text(json.dumps(_recorded(point)))
        return 0

    lines: list[str] = []
    target = capacity.Target("http://127.0.0.1:9", "tiny", "/tok")
    argvs = capacity.point_argvs("vllm", [SHORT, LONG], target, str(tmp_path))
    results = capacity.run_points(
        [SHORT, LONG], argvs, "the-key", tmp_path, lines.append, runner, {"HF_HUB_OFFLINE": "1"}
    )
    assert [r is not None and r.ok for r in results] == [True, True]
    assert all(env["OPENAI_API_KEY"] == "the-key" for _, env in seen)
    assert all(env["HF_HUB_OFFLINE"] == "1" for _, env in seen)
    assert not any("the-key" in arg for argv, _ in seen for arg in argv)
    assert lines[0].startswith("[point 1/2] 1000-token prompts, 16-token replies, concurrency 2")
    assert lines[1].startswith("  4/4 completed, 0 failed, 0 cut off in ")

    # Without a key, an ambient OPENAI_API_KEY is not passed on either.
    seen.clear()
    capacity.run_points([SHORT], argvs[:1], None, tmp_path, lines.append, runner)
    assert "OPENAI_API_KEY" not in seen[0][1]


def test_a_point_that_leaves_no_result_is_reported(tmp_path: Path) -> None:
    lines: list[str] = []
    argvs = capacity.point_argvs("vllm", [SHORT], capacity.Target("u", "m", "t"), str(tmp_path))
    results = capacity.run_points([SHORT], argvs, None, tmp_path, lines.append, lambda *_: 1)
    assert results == [None]
    assert lines[-1].startswith("  no result (exit 1): ")


def test_the_job_s_logs_give_back_each_point_s_result() -> None:
    short = _recorded(SHORT)
    log = "\n".join(
        [
            "INFO starting",
            f"{loadtest.RESULT_MARKER}{SHORT.name}",
            json.dumps(short),
            "",
            f"{loadtest.RESULT_MARKER}{LONG.name}",
            "cat: /work/results/x.json: No such file or directory",
        ]
    )
    first, second = capacity.parse_logs(log, [SHORT, LONG])
    assert first is not None and first.ok and first.completed == 4
    assert second is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--input-lengths", "1000,x"],
            "error: `--input-lengths` must be comma-separated whole numbers of at least 1, got "
            "'1000,x'; pass e.g. --input-lengths 1000",
        ),
        (
            ["--input-lengths", "8100"],
            "error: `--input-lengths` plus `--output-tokens` must fit the 8192-token context, "
            "got 8228; pass at most 8064 tokens of prompt",
        ),
        (
            ["--output-tokens", "1"],
            "error: `--output-tokens` must be a whole number of at least 2, got '1'; "
            "pass e.g. --output-tokens 128",
        ),
        (
            ["--endpoint", "ftp://x"],
            "error: `--endpoint` must be an http(s) URL such as http://<load-balancer>/v1, got "
            "'ftp://x'; pass the `endpoint` stack output",
        ),
        (
            ["--endpoint", "http://lb.example.com/v1/chat/completions"],
            "error: `--endpoint` must be the OpenAI base URL ending in /v1, not a route below it, "
            "got 'http://lb.example.com/v1/chat/completions'; pass e.g. http://lb.example.com/v1",
        ),
        (
            ["--quick", "--output-tokens", "1"],
            "error: `--output-tokens` must be a whole number of at least 2, got '1'; "
            "pass e.g. --output-tokens 128",
        ),
        (
            [],  # no pulumi on PATH
            "error: `--endpoint` is required when no `pulumi` executable is on PATH; pass "
            "--endpoint http://<load-balancer>/v1 and --api-key KEY (or set "
            "GEMMA_GRAVITON_API_KEY)",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert capacity.main(argv) == 2
    assert capsys.readouterr().err == message + "\n"


def test_quick_is_the_field_report_s_run_and_a_flag_beside_it_wins() -> None:
    def points(*argv: str) -> list[LoadPoint]:
        return capacity.plan_points(capacity._parser().parse_args(list(argv)))[2]

    (quick,) = points("--quick")
    assert quick == LoadPoint(100, 100, 1, quick.request_rate, 3)
    assert [(p.concurrency, p.prompts) for p in points("--quick", "--concurrency", "1,4")] == [
        (1, 3),
        (4, 12),
    ]
    # Without it, the capacity run's own defaults.
    assert {(p.output_tokens, p.prompts // p.concurrency) for p in points()} == {(128, 2)}
    # Replies cannot end early, so a short one is counted as cut off.
    argv = capacity.point_argvs("vllm", [quick], capacity.Target("u", "m", "t"), "/r")[0]
    assert {"--ignore-eos", "--random-output-len=100", "--random-input-len=100"} <= set(argv)


def test_a_recorded_run_against_a_dead_engine_is_all_failed_with_no_figures() -> None:
    # Recorded in `make rehearse` after the tiny group's engine had died: the gatekeeper
    # answered every request 503, and the generator wrote 0 for every latency.
    raw = json.loads((FIXTURES / f"engine-dead-{SHORT.name}.json").read_text(encoding="utf-8"))
    result = parse_result(raw, SHORT)
    assert (result.completed, result.failed, result.cut_off) == (0, 4, 0)
    assert result.errors == ("Service Temporarily Unavailable",)
    assert result.ttft_s == {} and result.stream_tokens_per_s is None
    assert measured_text(result, SHORT) == (
        "0/4 full, 4 FAILED; TTFT - s, - tok/s/stream, 0.00 tok/s, 0.000 req/s"
    )
