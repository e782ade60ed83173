"""Decode bandwidth: calibrated on the one type measured, a range on every other, and never more
than the node's chip can stream. Properties over every catalogue row and every `--compare` row.

The bounds are computed here from the measurement and the chip's channels alone (the field
report's 16.5 GB/s per vCPU x 6 on m7g.2xlarge; the facts table's [generations]), not from the
planner's own helpers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re

import pytest

from infra.adapters.cli import main
from infra.adapters.verdict import verdict_lines
from infra.plan import advice, catalog, compare
from infra.plan.config import ConfigError
from infra.plan.economics import economics
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests import builders

FORMATS = ("bf16", "int8", "int4")
TODAY = dt.date(2026, 12, 2)
#: What the field report's pods of 6 vCPUs on m7g.2xlarge streamed (GB/s): the most any type
#: that was not measured may promise.
MEASURED_GBPS = 16.5 * 6


def _chip_gbps(generation: str) -> float:
    """The chip's DDR channels x their MT/s x 8 bytes a transfer x the achievable fraction."""
    g = catalog.FACTS.generations[generation]
    return g.ddr_channels * g.mt_per_s * 8 / 1000 * g.achievable_fraction


def _measured(name: str, cpu: float) -> bool:
    return name == "m7g.2xlarge" and cpu <= 6


ROWS = [(name, cpu) for name, t in catalog.INSTANCE_TYPES.items() for cpu in range(1, t.vcpu + 1)]


@pytest.mark.parametrize(("name", "cpu"), ROWS)
def test_every_catalogue_row_is_a_range_within_its_chip_and_calibrated_only_where_measured(
    name: str, cpu: int
) -> None:
    instance = catalog.INSTANCE_TYPES[name]
    band = catalog.decode_bandwidth(instance, cpu)
    assert band.low <= band.high <= _chip_gbps(instance.generation) + 1e-9
    assert band.low <= MEASURED_GBPS + 1e-9
    assert band.measured == _measured(name, cpu)
    assert ("calibrated" in band.basis) == band.measured, band.basis
    if not band.measured:
        assert band.basis.startswith("extrapolated: "), band.basis
        assert band.basis.endswith(f"one `make bench` on {name} settles it"), band.basis
    # Every promise rests on the low end.
    assert catalog.node_decode_gbps(instance, cpu) == band.low


@pytest.mark.parametrize("name", sorted(catalog.INSTANCE_TYPES))
def test_a_larger_pod_of_the_same_chip_never_streams_less(name: str) -> None:
    instance = catalog.INSTANCE_TYPES[name]
    lows = [catalog.decode_bandwidth(instance, cpu).low for cpu in range(1, instance.vcpu + 1)]
    assert lows == sorted(lows)
    if instance.generation == "graviton3" and instance.vcpu >= 6:
        # At least what the measured node streams: the low end is that measurement.
        assert lows[-1] == pytest.approx(MEASURED_GBPS)


def _candidates() -> tuple[compare.Candidate, ...]:
    cfg = load_stack("dev")
    need = compare.default_need(cfg, "dev")
    # Every catalogue model: a mixture of experts' bytes per token are its active ones.
    result = compare.compare(cfg, need, "dev", TODAY, FORMATS, tuple(catalog.MODELS))
    return (*result.ranked, *result.short)


@functools.cache
def _rows() -> tuple[dict[str, object], ...]:
    return tuple(c.to_json() for c in _candidates())


def _violations(rows: tuple[dict[str, object], ...]) -> list[str]:
    assert len(rows) > 40  # every type that starts, in every format
    bad = []
    for row in rows:
        name = str(row["instance_type"])
        what = f"{name} {row['weights']} {row['model']}"
        generation = catalog.INSTANCE_TYPES[name].generation
        per_token = float(row["decode_bytes_per_token_one_stream"])  # type: ignore[arg-type]
        low = per_token * float(row["decode_tokens_per_s_one_stream"]) / 1e9  # type: ignore[arg-type]
        high = per_token * float(row["decode_tokens_per_s_one_stream_high"]) / 1e9  # type: ignore[arg-type]
        measured = bool(row["bandwidth_measured"])
        # 1% for the JSON's rounding of tokens/s to two decimals.
        if high > _chip_gbps(generation) * 1.01:
            bad.append(f"{what}: {high:.0f} GB/s at the high end, above its chip")
        if low > MEASURED_GBPS * 1.01:
            bad.append(f"{what}: one stream promised at {low:.0f} GB/s, above what was measured")
        if not float(row["node_bandwidth_gbps"]) <= float(row["node_bandwidth_high_gbps"]):  # type: ignore[arg-type]
            bad.append(f"{what}: low end above high end")
        # Calibrated only on the measured type (with its measured pod size: the catalogue test).
        label = str(row["bandwidth_bound"])
        if (measured and name != "m7g.2xlarge") or ("calibrated" in label) != measured:
            bad.append(f"{what}: labelled {label!r}")
    return bad


def test_every_compare_row_promises_the_low_end_within_its_chip() -> None:
    assert _violations(_rows()) == []
    assert any(row["bandwidth_measured"] for row in _rows())  # dev's own m7g.2xlarge


def test_every_compare_rows_verdict_says_calibrated_only_where_measured() -> None:
    for c in _candidates():
        assert c.plan is not None and c.econ is not None
        decode = next(line for line in verdict_lines(c.plan, c.econ, None, []) if "stream" in line)
        measured = c.econ.served.bandwidth_measured
        dense_bf16 = c.weights == "bf16" and not catalog.MODELS[c.model].is_moe
        assert ("calibrated" in decode) == (measured and dense_bf16), decode
        assert ("extrapolated: the low end, up to" in decode) != measured, decode


def test_the_property_catches_a_plan_without_the_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    # The per-vCPU rate alone: c7g.8xlarge's 32 vCPUs x 16.5 GB/s = 528 GB/s, above Graviton3's
    # 8 x DDR5-4800 (307.2 GB/s in theory).
    monkeypatch.setattr(catalog, "chip_bandwidth_gbps", lambda generation: float("inf"))
    assert any(
        v.startswith("c7g.8xlarge") and "above its chip" in v
        for v in _violations(tuple(c.to_json() for c in _candidates()))
    )


def test_the_property_catches_a_promise_at_the_high_end(monkeypatch: pytest.MonkeyPatch) -> None:
    real = catalog.decode_bandwidth

    def high_end(instance: catalog.InstanceType, cpu: float) -> catalog.DecodeBandwidth:
        return dataclasses.replace(real(instance, cpu), low=real(instance, cpu).high)

    monkeypatch.setattr(catalog, "decode_bandwidth", high_end)
    assert any(
        v.startswith("m7g.4xlarge bf16") and "above what was measured" in v
        for v in _violations(tuple(c.to_json() for c in _candidates()))
    )


def test_the_measured_node_one_larger_and_one_at_its_chip() -> None:
    small = catalog.decode_bandwidth(catalog.INSTANCE_TYPES["m7g.2xlarge"], 6)
    assert (small.low, small.high, small.measured) == (pytest.approx(99), pytest.approx(99), True)
    assert small.basis == "16.5 GB/s per vCPU x 6 (calibrated)"
    larger = catalog.decode_bandwidth(catalog.INSTANCE_TYPES["m7g.4xlarge"], 14)
    assert (larger.low, larger.high) == (pytest.approx(99), pytest.approx(231))
    assert larger.basis == (
        "extrapolated: at least 99 GB/s, what m7g.2xlarge's 6 vCPUs stream (measured); at most "
        "231 GB/s, 16.5 GB/s per vCPU x 14; one `make bench` on m7g.4xlarge settles it"
    )
    large = catalog.decode_bandwidth(catalog.INSTANCE_TYPES["c8g.8xlarge"], 30)
    assert large.high == pytest.approx(12 * 5600 * 8 / 1000 * 0.85)
    assert large.basis == (
        "extrapolated: at least 99 GB/s, what m7g.2xlarge's 6 vCPUs stream (measured), "
        "graviton4's faster memory not counted; at most 457 GB/s, the chip's memory, 12 x 5600 "
        "MT/s x 8 B x 0.85 achievable (ceiling); one `make bench` on c8g.8xlarge settles it"
    )


def test_a_type_never_measured_is_extrapolated_on_every_screen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--stack", "dev", "--set", "instanceType=m7g.4xlarge"]) == 0
    out = capsys.readouterr().out
    assert (
        "decode: 4.24 tokens/s for one stream (extrapolated: the low end, up to 9.90; one "
        "`make bench` on m7g.4xlarge settles it)" in out
    )
    assert "node bandwidth               99-231 GB/s for decode, extrapolated: at least 99" in out
    assert "4.24 tokens/s at the bandwidth's low end, up to 9.90 at its high end" in out
    assert "calibrated" not in out.replace("calibrated on m7g.2xlarge", "")


@functools.cache
def _starting_types() -> tuple[str, ...]:
    names = []
    for name in catalog.INSTANCE_TYPES:
        try:
            plan(load_stack("dev", {"instanceType": name}, TODAY), "dev")
        except ConfigError:
            continue
        names.append(name)
    return tuple(names)


def test_the_verdict_and_cheaper_rest_on_the_low_end_for_every_type() -> None:
    """For dev on every type that starts it, a `cheaper:` or `faster` line quotes the named
    type's low-end single stream (what each type's verdict says: the compare rows' test above)."""
    rows = {(str(r["instance_type"]), str(r["weights"]), str(r["model"])): r for r in _rows()}
    assert len(_starting_types()) > 10
    for name in _starting_types():
        cfg, p = builders.planned("dev", {"instanceType": name}, TODAY)
        e = economics(cfg, p, TODAY)
        line = advice.buy_line(cfg, p, e, "dev", TODAY)
        if line is None:
            continue
        found = re.search(r"x (\S+), .* ([\d.]+) tokens/s per stream", line)
        assert found is not None, line
        row = rows[(found.group(1), cfg.weights, cfg.model)]
        assert float(found.group(2)) == row["decode_tokens_per_s_one_stream"], line
        assert ("(extrapolated: the low end)" in line) != row["bandwidth_measured"], line
