"""The verdict's checks: the planner's prediction against vLLM's own log lines (the real
fixtures in tests/fixtures/vllm), the benchmark's report, and the verdict table
(`tools.rehearse.checks`)."""

from __future__ import annotations

import dataclasses

import pytest

from infra.plan.sizing import Plan
from tests.rehearse.support import fixture, tiny_plan_for
from tools import bench
from tools.rehearse import checks as rehearse_checks
from tools.rehearse.checks import Check, kv_budget_check, kv_checks, render_verdict, verdict_ok


@pytest.fixture(scope="module")
def tiny_plan() -> Plan:
    return tiny_plan_for("dev")[1]


def test_the_planner_predicts_what_vllm_logged(tiny_plan: Plan) -> None:
    checks = kv_checks(tiny_plan, fixture("pp2-tiny-rank0.log"))
    assert [(c.name, c.ok) for c in checks] == [
        ("KV cache tokens", True),
        ("max concurrency", True),
    ]
    assert checks[0].observed == "30,840 (vLLM; 0.0% off)"
    assert checks[1].observed == "15.06x at 2,048 (vLLM)"


def test_tokens_may_differ_by_one_percent_concurrency_not_at_all(tiny_plan: Plan) -> None:
    log = fixture("pp2-tiny-rank0.log")
    near = dataclasses.replace(tiny_plan, kv_cache_tokens=int(30_840 * 1.009))
    far = dataclasses.replace(tiny_plan, kv_cache_tokens=int(30_840 * 1.02))
    assert kv_checks(near, log)[0].ok is True
    assert kv_checks(far, log)[0].ok is False
    off = dataclasses.replace(tiny_plan, max_concurrency=15.07)
    assert kv_checks(off, log)[1].ok is False
    longer = dataclasses.replace(tiny_plan, max_model_len=4096)
    assert kv_checks(longer, log)[1].ok is False


def test_another_layouts_log_is_a_mismatch(tiny_plan: Plan) -> None:
    checks = kv_checks(tiny_plan, fixture("pp2-12b-layout-rank0.log"))
    assert [c.ok for c in checks] == [False, False]
    assert checks[0].observed.startswith("2,186 (vLLM")
    assert checks[1].observed == "1.07x at 2,048 (vLLM)"


def test_a_log_without_the_lines_fails(tiny_plan: Plan) -> None:
    checks = kv_checks(tiny_plan, fixture("argparse-invalid-choice.log"))
    assert [(c.observed, c.ok) for c in checks] == [
        ("no line in the log", False),
        ("no line in the log", False),
    ]


def test_every_rank_must_accept_the_kv_budget(tiny_plan: Plan) -> None:
    both = [fixture("pp2-tiny-rank0.log"), fixture("pp2-tiny-rank1-headless.log")]
    accepted = kv_budget_check(tiny_plan, both)
    assert accepted.ok is True
    assert accepted.observed == "rank 0: 0.06/10.34, rank 1: 0.06/11.09 GiB"
    refused = kv_budget_check(tiny_plan, [fixture("refused-memory-guard-rank0.log"), both[1]])
    assert refused.ok is False
    auto = kv_budget_check(tiny_plan, [fixture("pp2-tiny-auto-utilization-rank0.log"), both[1]])
    assert auto.ok is False


def _record(tokens: int, finish: str) -> bench.RequestRecord:
    record = bench.RequestRecord(concurrency=1, round=1, stream=1, requested=32)
    record.started, record.first_token_at, record.last_token_at, record.ended = 0, 0.1, 1.1, 1.2
    record.usage_tokens, record.finish_reason = tokens, finish
    return record


def test_bench_check_fails_on_a_cut_off_reply() -> None:
    args = bench.parse_args(["--endpoint", "http://x/v1", "--tokens", "32", "--concurrency", "1"])
    good = bench.RoundResult(1, 1, (_record(32, "length"),))
    cut = bench.RoundResult(1, 2, (_record(10, "length"),))
    passed = rehearse_checks.bench_check(bench.build_report("e", "m", args, [(1, [good])]))
    assert passed.ok is True
    assert passed.observed.startswith("31.0 tok/s decode median, 1/1 ok, 0 cut off")
    failed = rehearse_checks.bench_check(bench.build_report("e", "m", args, [(1, [good, cut])]))
    assert failed.ok is False
    assert "1 cut off or short" in failed.observed


def test_verdict_passes_only_when_every_check_passed() -> None:
    ok = [Check("a", "1", "1", True), Check("b", "2", "2", True)]
    assert verdict_ok(ok)
    assert render_verdict(ok).splitlines()[-1] == "verdict: PASS"
    failed = [
        Check("a", "1", "1", True),
        Check("/health", "200", "rank 0 exited", False, note="rank 0 log: ValueError: no"),
        Check("c", "3", "not reached", None),
    ]
    assert not verdict_ok(failed)
    text = render_verdict(failed)
    assert "/health: rank 0 log: ValueError: no" in text
    assert text.splitlines()[-1] == "verdict: FAIL (/health; 1 checks not reached)"
    unrun = [Check("a", "1", "1", True), Check("int8", "200", "not runnable here", None)]
    assert not verdict_ok(unrun)
    assert render_verdict(unrun).splitlines()[-1] == "verdict: FAIL (1 checks not reached)"


def test_bench_arguments_survive_a_key_that_looks_like_a_flag() -> None:
    args = rehearse_checks.bench_args("http://127.0.0.1:9/v1", "-abc")
    assert (args.api_key, args.endpoint) == ("-abc", "http://127.0.0.1:9/v1")
    assert (args.runs, args.tokens, args.concurrency) == (2, 32, (1,))
