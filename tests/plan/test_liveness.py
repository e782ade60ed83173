"""The liveness figures of a plan: probe period and threshold, stall bound, batch cap and the
client's first-byte bound (`infra.plan.liveness`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components.manifests.gatekeeper import nginx_conf
from infra.plan import liveness, sizing
from infra.plan.cli import main
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack, stack_names
from infra.plan.wiring import gatekeeper_limits


def test_the_calibration_reproduces_the_field_warm_up() -> None:
    # The report's profile run: 4,096 tokens through a 12.59 GiB rank on 6 vCPUs in ~50 s.
    assert liveness.step_seconds([12.59], 4096, 6) == pytest.approx(50)


def test_dev_figures_follow_from_its_step() -> None:
    p = plan(load_stack("dev"), "dev")
    live = p.liveness
    assert p.max_num_batched_tokens == 512
    step = liveness.step_seconds([r.weights_gib for r in p.ranks], 512, p.pod_cpu)
    assert live.step_s == round(step, 2)
    assert live.stall_s == max(liveness.MIN_STALL_S, -(-2 * step // 1))
    assert (live.period_s, live.failures, live.timeout_s) == (5, 3, 8)
    assert live.detection_s == live.stall_s + 3 * live.period_s + live.timeout_s
    assert live.detection_s <= liveness.DETECTION_BUDGET_S
    assert live.first_byte_s == -(-(p.prefill_steps_at_max_len * step + live.stall_s) // 1)


@pytest.mark.parametrize("stack", stack_names())
def test_every_stack_notices_a_broken_group_within_the_budget(stack: str) -> None:
    live = plan(load_stack(stack), stack).liveness
    assert live.detection_s <= liveness.DETECTION_BUDGET_S
    assert live.period_s >= liveness.MIN_PROBE_PERIOD_S
    assert live.timeout_s > live.request_s


def test_auto_batch_is_the_largest_whose_step_fits_and_the_next_does_not() -> None:
    p = plan(load_stack("dev"), "dev")
    weights = [r.weights_gib for r in p.ranks]
    assert liveness.fits_budget(liveness.step_seconds(weights, 512, p.pod_cpu))
    assert not liveness.fits_budget(liveness.step_seconds(weights, 1024, p.pod_cpu))
    assert liveness.max_batched_tokens(weights, p.pod_cpu, (512, 1024, 2048)) == 512


def test_a_bigger_node_gets_a_bigger_batch() -> None:
    big = plan(load_stack("dev", {"instanceType": "m7g.4xlarge"}), "dev")
    assert big.max_num_batched_tokens > 512
    assert big.liveness.detection_s <= liveness.DETECTION_BUDGET_S


def test_an_explicit_batch_beyond_the_budget_is_planned_and_says_so() -> None:
    p = plan(load_stack("dev", {"maxNumBatchedTokens": 4096}), "dev")
    assert p.liveness.detection_s > liveness.DETECTION_BUDGET_S
    (line,) = [r for r in p.reasons if r.startswith("liveness ")]
    assert "beyond the 60 s budget (`maxNumBatchedTokens` 512 or auto fits it)" in line


def test_the_first_byte_bound_is_the_stacks_when_set() -> None:
    own = plan(load_stack("dev", {"firstByteTimeoutSeconds": 90}), "dev")
    assert own.liveness.first_byte_s == 90
    tiny = liveness.liveness([0.001, 0.001], 256, 6, 8)
    assert tiny.stall_s == liveness.MIN_STALL_S
    assert tiny.first_byte_s == liveness.MIN_FIRST_BYTE_S


def test_the_plan_shows_the_probe(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    rows = {
        line.split("  ", 1)[0]: line.split("  ", 1)[1].strip()
        for line in out.splitlines()
        if "  " in line and not line.startswith(" ")
    }
    assert rows["liveness"].startswith("every 5 s, 3 failures, timeout 8 s")
    assert rows["first byte"] == "within 218 s (longest prompt + stall bound)"


def test_the_gatekeeper_waits_for_the_first_byte_and_the_longest_reply() -> None:
    """A non-streamed reply's first byte is its last token: the gatekeeper's one timeout is the
    first-byte bound plus the capped reply's decode, so a stack's own first-byte bound moves it."""
    auto = plan(load_stack("dev"), "dev")
    own = plan(load_stack("dev", {"firstByteTimeoutSeconds": 90}), "dev")
    for p in (auto, own):
        door = p.front_door
        decode = -(-door.max_reply_tokens * 1.25 // p.decode_tokens_per_s)
        assert door.reply_timeout_seconds >= p.liveness.first_byte_s + decode - 1
        assert door.reply_timeout_seconds <= p.liveness.first_byte_s + decode + 1
    assert auto.front_door.reply_timeout_seconds - own.front_door.reply_timeout_seconds == (
        auto.liveness.first_byte_s - 90
    )
    conf = nginx_conf(gatekeeper_limits(own))
    assert f"proxy_read_timeout {own.front_door.reply_timeout_seconds * 1000}ms;" in conf


def test_the_probe_period_is_whole_seconds_and_the_shortest_accepted_one_fits() -> None:
    # 60 s budget - 41 s stall - 8 s probe timeout leaves 11 s for 3 failures: 3 s periods.
    period = liveness.probe_period(41)
    assert period == 3 and isinstance(period, int)
    # A stall of 44 s leaves exactly MIN_PROBE_PERIOD_S (2 s) a period: still noticed in time.
    assert liveness.stall_seconds(22.0) == 44
    assert liveness.probe_period(44) == liveness.MIN_PROBE_PERIOD_S
    assert liveness.fits_budget(22.0)
    assert liveness.detection_seconds(44, 2) <= liveness.DETECTION_BUDGET_S
    assert not liveness.fits_budget(23.5)


def test_the_step_is_shown_to_the_hundredth() -> None:
    live = liveness.liveness([1.0], 100, 7, 1)
    exact = liveness.step_seconds([1.0], 100, 7)
    assert exact != round(exact, 2)
    assert live.step_s == round(exact, 2) > 0


def test_a_group_noticed_in_exactly_the_budget_is_in_time() -> None:
    live = liveness.liveness([12.0], 512, 6, 1)
    exact = replace(live, stall_s=37, period_s=5, detection_s=liveness.detection_seconds(37, 5))
    assert exact.detection_s == liveness.DETECTION_BUDGET_S
    assert "a broken group is noticed within 60 s;" in sizing._why_liveness(exact, 512)
    late = replace(exact, detection_s=61)
    assert "noticed only after 61 s, beyond the 60 s budget" in sizing._why_liveness(late, 512)
