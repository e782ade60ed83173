"""Decode never streams more than the node's chip can: the bandwidth ceiling, as a property.

For every catalogue model, type and weight format `--compare` plans, what one stream reads per token
times its tokens/s stays within the node's bound, computed here from the chip's channels alone
(`catalog.MEMORY_SYSTEMS`), not from the planner's own helper.
"""

from __future__ import annotations

import datetime as dt

import pytest

from infra.plan import catalog, compare
from infra.plan.stackfile import load_stack

FORMATS = ("bf16", "int8", "int4")


def _chip_gbps(generation: str) -> float:
    channels, mts = catalog.MEMORY_SYSTEMS[generation]
    return channels * mts * 8 / 1000 * catalog.ACHIEVABLE_BANDWIDTH_FRACTION


def _violations() -> list[str]:
    cfg = load_stack("dev")
    need = compare.default_need(cfg, "dev")
    # Every catalogue model: a mixture of experts' bytes per token are its active ones.
    result = compare.compare(cfg, need, "dev", dt.date(2026, 12, 2), FORMATS, tuple(catalog.MODELS))
    rows = [c.to_json() for c in (*result.ranked, *result.short)]
    assert len(rows) > 40  # every type that starts, in every format
    bad = []
    for row in rows:
        generation = catalog.INSTANCE_TYPES[str(row["instance_type"])].generation
        streamed = (
            float(row["decode_bytes_per_token_one_stream"])  # type: ignore[arg-type]
            * float(row["decode_tokens_per_s_one_stream"])  # type: ignore[arg-type]
            / 1e9
        )
        # 1% for the JSON's rounding of tokens/s to two decimals.
        if streamed > _chip_gbps(generation) * 1.01:
            bad.append(
                f"{row['instance_type']} {row['weights']} {row['model']}: {streamed:.0f} GB/s"
            )
    return bad


def test_no_single_stream_reads_faster_than_its_chip() -> None:
    assert _violations() == []


def test_the_property_catches_a_plan_without_the_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    # The per-vCPU rate alone: c7g.8xlarge's 32 vCPUs x 16.5 GB/s = 528 GB/s, above Graviton3's
    # 8 x DDR5-4800 (307.2 GB/s in theory).
    monkeypatch.setattr(
        catalog, "node_decode_gbps", lambda instance, cpu: instance.decode_gbps_per_vcpu * cpu
    )
    assert any(v.startswith("c7g.8xlarge") for v in _violations())


def test_a_small_node_keeps_its_calibrated_rate_and_a_large_one_its_chip() -> None:
    small = catalog.INSTANCE_TYPES["m7g.2xlarge"]
    large = catalog.INSTANCE_TYPES["c7g.8xlarge"]
    assert catalog.node_decode_gbps(small, 6) == pytest.approx(16.5 * 6)
    assert catalog.decode_bound(small, 6) == "16.5 GB/s per vCPU x 6 (calibrated)"
    assert catalog.node_decode_gbps(large, 30) == pytest.approx(8 * 4800 * 8 / 1000 * 0.85)
    assert catalog.decode_bound(large, 30) == (
        "the chip's memory: 8 x 4800 MT/s x 8 B x 0.85 achievable = 261 GB/s (ceiling)"
    )
