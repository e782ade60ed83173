"""The plan as a buying guide: costs, served tokens and the comparison hold together."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.plan import catalog, prices
from infra.plan.compare import Need, compare
from infra.plan.config import ConfigError
from infra.plan.economics import economics
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests.plan.test_verdict_and_advice import TODAY, _json, _out


@settings(max_examples=60, deadline=None)
@given(
    instance_type=st.sampled_from(sorted(catalog.INSTANCE_TYPES)),
    stack=st.sampled_from(["dev", "prod"]),
    replicas=st.integers(1, 3),
    context_cap=st.sampled_from([1024, 4096, 8192, 16384]),
)
def test_a_plan_that_starts_costs_money_and_serves_tokens(
    instance_type: str, stack: str, replicas: int, context_cap: int
) -> None:
    cfg = load_stack(
        stack,
        # prod is elastic: its groups are `maxGroups` (with `replicas` it is refused).
        {
            "instanceType": instance_type,
            ("replicas" if stack == "dev" else "maxGroups"): replicas,
            "maxContextCap": context_cap,
        },
        TODAY,
    )
    try:
        p = plan(cfg, stack)
    except ConfigError:
        return
    e = economics(cfg, p, TODAY)
    assert e.costs.usd_per_hour is not None and e.costs.usd_per_hour > 0
    assert sum(line.usd_per_hour for line in e.costs.lines) == pytest.approx(
        e.costs.usd_per_hour, abs=1e-3
    )
    assert all(line.usd_per_hour >= 0 and line.source for line in e.costs.lines)
    for point in (e.served.one, e.served.planned, e.served.limit):
        assert point.aggregate_tokens_per_s > 0
    assert e.served.planned.aggregate_tokens_per_s >= e.served.one.aggregate_tokens_per_s * 0.99
    assert 0 < e.served.ttft_1k_s <= e.served.ttft_max_len_s or p.max_model_len < 1000
    full = e.served.planned.aggregate_tokens_per_s * p.replicas
    assert e.usd_per_million_full == pytest.approx(
        e.costs.usd_per_hour / (full * 3600) * 1e6, abs=0.01
    )


def test_ranking_follows_the_itemised_costs() -> None:
    cfg = load_stack("dev", today=TODAY)
    result = compare(cfg, Need(4096, 1), "dev", TODAY)
    assert len(result.ranked) >= 12
    per_million = []
    for c in result.ranked:
        assert c.econ is not None and c.plan is not None
        hourly = sum(line.usd_per_hour for line in c.econ.costs.lines)
        tokens = c.econ.served.planned.aggregate_tokens_per_s * c.plan.replicas
        per_million.append(hourly / (tokens * 3600) * 1e6)
    assert per_million == sorted(per_million)
    every = {c.instance_type for c in (*result.ranked, *result.short, *result.refused)}
    assert every == set(catalog.INSTANCE_TYPES)
    assert all(c.refusal and "\n" not in c.refusal for c in result.refused)


def test_json_carries_the_buying_figures_as_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys)
    for key in (
        "usd_per_hour",
        "usd_per_month",
        "usd_per_million_tokens_full_load",
        "usd_per_million_tokens_one_stream",
        "max_num_seqs",
    ):
        assert isinstance(data[key], int | float), key
    served = data["served"]
    assert isinstance(served["planned"]["aggregate_tokens_per_s"], float)
    assert isinstance(served["ttft_max_len_s"], float)
    assert {line["item"] for line in data["costs"]["lines"]} >= {
        "nodes",
        "eks control plane",
        "load balancer",
        "node disks",
        "public ipv4",
        "cloudwatch logs",
    }
    assert data["cheaper"].startswith("cheaper: 1 x m7g.4xlarge")


def test_table_states_units_provenance_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    out = _out(capsys)
    assert "/hour" in out and "/month" in out and "tokens/s" in out
    assert "calibrated on the field report's measured 4.0" in out
    assert catalog.PREFILL_SOURCE in out
    assert "$ per million tokens" in out
    assert "request limit" in out and "request = limit" in out
    assert "decode, short requests" in out
    assert "kv cache size" in out and "tokens (as vLLM will log it)" in out
    assert "why:" in out and "page cache is charged outside the engine container" in out
    assert "without the weight prefetch the guard would see 0.58 GiB" in out


def test_extended_support_is_priced_from_its_date() -> None:
    cfg = load_stack("dev", {"kubernetesVersion": "1.33"}, TODAY)
    e = economics(cfg, plan(cfg), TODAY)
    eks = next(line for line in e.costs.lines if line.item == "eks control plane")
    assert eks.usd_per_hour == prices.SERVICES["eks_extended"].usd


@pytest.mark.parametrize(
    ("stack", "detail"),
    [
        ("dev", "3 addresses: 2 for the NLB, 1 for the NAT gateway"),
        # Every admitted range private: the NLB is internal, its addresses private.
        ("minimal", "1 addresses: none for the internal NLB, 1 for the NAT gateway"),
    ],
)
def test_only_an_internet_facing_nlb_pays_for_public_addresses(stack: str, detail: str) -> None:
    cfg = load_stack(stack, {}, TODAY)
    e = economics(cfg, plan(cfg), TODAY)
    ipv4 = next(line for line in e.costs.lines if line.item == "public ipv4")
    assert ipv4.basis == detail
    assert ipv4.usd_per_hour == pytest.approx(
        int(detail[0]) * prices.SERVICES["public_ipv4_hour"].usd
    )


def test_compare_json_and_need(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "--compare", "--need", "context=8192,concurrency=10,decode=1")
    assert data["need"] == {"context": 8192, "concurrency": 10, "decode": 1.0}
    assert all(c["max_concurrency"] >= 10 for c in data["ranked"])
    assert data["cannot_start"] and all(c["refusal"] for c in data["cannot_start"])
