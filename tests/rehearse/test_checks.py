"""The verdict's checks: the planner's prediction against vLLM's own log lines (the real
fixtures in tests/fixtures/vllm), the endpoint's rows against the OpenAI stub, and the verdict
table (`tools.rehearse.checks`)."""

from __future__ import annotations

import dataclasses

import pytest

from infra.plan.sizing import Plan
from tests.fakes.openai_stub import STUB_API_KEY, STUB_MODEL, StubConfig, StubServer
from tests.rehearse.support import fixture, tiny_plan_for
from tools.rehearse.checks import (
    Check,
    endpoint_checks,
    kv_budget_check,
    kv_checks,
    render_verdict,
    verdict_ok,
)


@pytest.fixture(scope="module")
def tiny_plan() -> Plan:
    return tiny_plan_for("dev")[1]


@pytest.mark.parametrize(
    ("log", "rows"),
    [
        # The planner predicts what vLLM logged.
        (
            "pp2-tiny-rank0.log",
            [("30,840 (vLLM; 0.0% off)", True), ("15.06x at 2,048 (vLLM)", True)],
        ),
        # Another layout's log is a mismatch; a log without the lines fails.
        (
            "pp2-12b-layout-rank0.log",
            [("2,186 (vLLM; 92.9% off)", False), ("1.07x at 2,048 (vLLM)", False)],
        ),
        ("argparse-invalid-choice.log", [("no line in the log", False)] * 2),
    ],
)
def test_the_kv_rows_hold_the_planner_to_what_vllm_logged(
    tiny_plan: Plan, log: str, rows: list[tuple[str, bool]]
) -> None:
    checks = kv_checks(tiny_plan, fixture(log))
    assert [c.name for c in checks] == ["KV cache tokens", "max concurrency"]
    assert [(c.observed, c.ok) for c in checks] == rows


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


def test_every_rank_must_accept_the_kv_budget(tiny_plan: Plan) -> None:
    both = [fixture("pp2-tiny-rank0.log"), fixture("pp2-tiny-rank1-headless.log")]
    accepted = kv_budget_check(tiny_plan, both)
    assert accepted.ok is True
    assert accepted.observed == "rank 0: 0.06/10.34, rank 1: 0.06/11.09 GiB"
    refused = kv_budget_check(tiny_plan, [fixture("refused-memory-guard-rank0.log"), both[1]])
    assert refused.ok is False
    auto = kv_budget_check(tiny_plan, [fixture("pp2-tiny-auto-utilization-rank0.log"), both[1]])
    assert auto.ok is False


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


def _endpoint_rows(api_key: str = STUB_API_KEY, **config: object) -> list[tuple[str, str, bool]]:
    lines: list[str] = []
    with StubServer(StubConfig(ttft_s=0.0, seconds_per_token=0.0, **config)) as stub:
        rows = endpoint_checks(stub.base_url, api_key, STUB_MODEL, lines.append)
        sent = stub.requests
    assert len(lines) == 1
    if sent:
        # Asked for the fixed length, and that the model may not end it early.
        last = sent[-1]
        assert (last["max_tokens"], last["min_tokens"], last["ignore_eos"]) == (16, 16, True)
    return [(row.name, row.observed, bool(row.ok)) for row in rows]


def test_the_endpoint_rows_pass_on_a_full_reply_with_the_key() -> None:
    assert _endpoint_rows() == [
        ("request without key", "401", True),
        ("request with key", "200", True),
        ("finish_reason", '"length" after 16 tokens', True),
    ]


def test_the_endpoint_rows_fail_on_a_reply_cut_off_or_stopped_early() -> None:
    assert _endpoint_rows(cut_off_at=5)[2] == ("finish_reason", '"length" after 5 tokens', False)
    assert _endpoint_rows(stop_at=3)[2] == ("finish_reason", '"stop" after 3 tokens', False)


def test_the_endpoint_rows_fail_on_a_wrong_key() -> None:
    rows = _endpoint_rows(api_key="wrong")
    assert rows[1] == ("request with key", "401", False)
    assert rows[2] == ("finish_reason", "null after 0 tokens", False)
