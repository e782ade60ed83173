"""The liveness figures of a plan: probe period and threshold, stall bound, batch cap and the
client's first-byte bound (`infra.plan.liveness`), all from the one prefill model
(`infra.plan.prefill`)."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace

import pytest

from components.manifests.gatekeeper_conf import KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S
from infra.adapters.cli import main
from infra.plan import catalog, compare, frontdoor, liveness, prefill, reasons, sizing, weights
from infra.plan.catalog import MODELS
from infra.plan.config import ConfigError
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack, stack_names
from tests import builders

TODAY = dt.date(2026, 12, 3)

GEMMA = MODELS["google/gemma-4-12B-it"]


def _model(p: sizing.Plan) -> liveness.Prefill:
    instance = catalog.INSTANCE_TYPES[p.instance_type]
    work = prefill.stage_work(GEMMA, [(r.sliding_layers, r.full_layers) for r in p.ranks])
    low, high = catalog.PREFILL_GFLOPS_PER_VCPU["onednn"][instance.generation]
    bandwidth = instance.decode_gbps_per_vcpu * p.pod_cpu * 1e9
    slow, mid, fast = (
        prefill.Node(f * p.pod_cpu * 1e9, bandwidth) for f in (low, (low + high) / 2, high)
    )
    return liveness.Prefill(GEMMA, work, slow, mid, fast)


def test_dev_figures_follow_from_its_slowest_step() -> None:
    p = plan(load_stack("dev"), "dev")
    live = p.liveness
    model = _model(p)
    batched = p.max_num_batched_tokens
    # The slowest step is the last chunk of the longest prompt.
    chunks = [model.step(batched, end) for end in range(batched, p.max_model_len + 1, batched)]
    assert chunks == sorted(chunks) and chunks[0] < chunks[-1]
    step = model.step(batched, p.max_model_len)
    assert live.step_s == round(step, 2) == round(chunks[-1], 2)
    assert live.probes.in_flight == p.stages == 2
    assert live.probes.stall_s == max(liveness.MIN_STALL_S, math.ceil(2 * step))
    assert (
        live.detection_s == live.probes.stall_s + 3 * live.probes.period_s + live.probes.timeout_s
    )
    prompt = prefill.prefill_seconds(GEMMA, model.work, model.slow, p.max_model_len, batched)
    assert live.first_byte_s == math.ceil(prompt + live.probes.stall_s)
    # The dashboard's step: what a leader measures (a chunk at a prompt's start) has its own slow
    # end, drawn beside every leader's measurement; growth takes it to the plan's longest step.
    assert live.probes.calibrate_tokens == batched
    assert live.calibrate_step_s == round(model.step(batched, batched), 2)
    assert live.calibrate_step_s < live.step_s
    # Growth is the largest ratio over the range: at the slow end it reaches the longest step.
    assert live.calibrate_step_s * live.probes.growth >= live.step_s * (1 - 1e-3)  # both rounded


def test_attention_grows_with_the_context_on_full_layers_only() -> None:
    work = prefill.StageWork(1e9, 2e9, sliding_layers=5, full_layers=0)
    near = prefill.attention_flops(GEMMA, work, 512, GEMMA.sliding_window)
    assert prefill.attention_flops(GEMMA, work, 512, 8 * GEMMA.sliding_window) == near
    full = replace(work, sliding_layers=0, full_layers=1)
    assert prefill.attention_flops(GEMMA, full, 512, 8192) == 4 * 16 * 512 * 512 * 8192


def test_a_long_context_lengthens_every_bound_together() -> None:
    same = {"instanceType": "r8g.4xlarge", "maxNumBatchedTokens": 256}
    short = plan(load_stack("dev", {**same, "maxModelLen": 8192}), "dev")
    long = plan(load_stack("dev", {**same, "maxModelLen": 131072}), "dev")
    assert long.liveness.step_s > short.liveness.step_s
    assert long.liveness.first_byte_s > short.liveness.first_byte_s
    assert long.front_door.reply_timeout_seconds > long.liveness.first_byte_s


def test_auto_batch_is_the_largest_whose_step_fits() -> None:
    big = plan(load_stack("dev", {"instanceType": "m7g.4xlarge"}), "dev")
    model = _model(big)
    fits = [
        b
        for b in (512, 1024, 2048)
        if liveness.fits_budget(liveness.fast_half_stall(model, b, big.max_model_len))
    ]
    assert fits == [512, 1024] and big.max_num_batched_tokens == 1024


def test_detection_beyond_the_budget_says_how_slow_and_what_shortens_it() -> None:
    p = plan(load_stack("dev", {"maxNumBatchedTokens": 4096}), "dev")
    fast = p.liveness.fast_half_detection_s
    assert fast > liveness.DETECTION_BUDGET_S
    (line,) = [r for r in p.reasons if r.startswith("liveness ")]
    assert f"noticed only after {fast} s at the fast half of the range, beyond the 60 s" in line
    assert "`maxNumBatchedTokens` " in line


def test_the_first_byte_bound_is_refused_too_low_and_moves_the_reply_timeout() -> None:
    auto = plan(load_stack("dev"), "dev")
    least = auto.liveness.first_byte_s
    with pytest.raises(ConfigError) as caught:
        plan(load_stack("dev", {"firstByteTimeoutSeconds": least - 1}), "dev")
    assert str(caught.value) == (
        f"`firstByteTimeoutSeconds` {least - 1} s is below the slowest modelled first token of "
        f"a 8192-token prompt ({auto.liveness.prefill_max_len_s:.0f} s) plus the stall bound "
        f"({auto.liveness.probes.stall_s} s); set it to at least {least} or auto, or lower "
        "`maxModelLen`"
    )
    own = plan(load_stack("dev", {"firstByteTimeoutSeconds": least + 100}), "dev")
    assert own.liveness.first_byte_s == least + 100
    # A non-streamed reply's first byte is its last token: the gatekeeper's one timeout is the
    # first-byte bound plus the capped reply's decode, so a stack's own first-byte bound moves it.
    for p in (auto, own):
        door = p.front_door
        decode = -(-door.max_reply_tokens * 1.25 // p.decode_tokens_per_s)
        assert door.reply_timeout_seconds >= p.liveness.first_byte_s + decode - 1
        assert door.reply_timeout_seconds <= p.liveness.first_byte_s + decode + 1
    assert own.front_door.reply_timeout_seconds - auto.front_door.reply_timeout_seconds == 100


def test_the_plan_shows_the_probe(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    rows = {
        line.split("  ", 1)[0]: line.split("  ", 1)[1].strip()
        for line in out.splitlines()
        if "  " in line and not line.startswith(" ")
    }
    live = plan(load_stack("dev"), "dev").liveness
    assert rows["liveness"].startswith(f"every {live.probes.period_s} s, 3 failures, timeout 8 s")
    assert rows["first byte"] == f"within {live.first_byte_s} s (longest prompt + stall bound)"


def test_the_probe_period_is_whole_seconds_and_the_shortest_accepted_one_fits() -> None:
    # 60 s budget - 41 s stall - 8 s probe timeout leaves 11 s for 3 failures: 3 s periods.
    period = liveness.probe_period(41)
    assert period == 3 and isinstance(period, int)
    # A stall of 44 s leaves exactly MIN_PROBE_PERIOD_S (2 s) a period: still noticed in time.
    assert liveness.stall_seconds(22.0, 2) == 44
    assert liveness.stall_seconds(22.0, 3) == 66
    assert liveness.probe_period(44) == liveness.MIN_PROBE_PERIOD_S
    assert liveness.fits_budget(liveness.stall_seconds(22.0, 2))
    assert liveness.detection_seconds(44, 2) <= liveness.DETECTION_BUDGET_S
    assert not liveness.fits_budget(liveness.stall_seconds(23.5, 2))
    assert not liveness.fits_budget(liveness.stall_seconds(22.0, 3))


def test_a_tiny_model_gets_the_floors_and_detection_in_the_budget_is_in_time() -> None:
    p = plan(load_stack("dev"), "dev")
    model = _model(p)
    tiny = liveness.Prefill(
        GEMMA,
        [replace(w, params=1.0, weight_bytes=1.0) for w in model.work],
        model.slow,
        model.mid,
        model.fast,
    )
    live = liveness.liveness(tiny, 256, 512)
    assert live.probes.stall_s == liveness.MIN_STALL_S
    assert live.first_byte_s == liveness.MIN_FIRST_BYTE_S
    # A group noticed in exactly the budget is in time.
    exact = replace(p.liveness, fast_half_detection_s=liveness.detection_seconds(37, 5))
    assert exact.fast_half_detection_s == liveness.DETECTION_BUDGET_S
    why = reasons.why_liveness(exact, model, p.max_model_len, 256)
    assert "a broken group is noticed within 60 s at the fast half of the range" in why
    late = replace(exact, fast_half_detection_s=61)
    why = reasons.why_liveness(late, model, p.max_model_len, 256)
    assert "noticed only after 61 s at the fast half of the range, beyond the 60 s budget" in why


def test_the_fallback_path_keeps_its_own_slower_bounds() -> None:
    fast = plan(load_stack("dev"), "dev")
    slow = plan(load_stack("dev", {"prefillPath": "fallback"}), "dev")
    assert slow.liveness.probes.path == "fallback"
    assert slow.liveness.probes.stall_s > fast.liveness.probes.stall_s
    assert slow.front_door.reply_timeout_seconds > fast.front_door.reply_timeout_seconds
    assert slow.drain.grace_s > fast.drain.grace_s


@pytest.mark.parametrize("stack", stack_names())
def test_every_stack_keeps_its_waiting_bounds_practical_and_its_pods_take_its_probes(
    stack: str,
) -> None:
    """The bounds a rollout, a node's removal or a client waits for rest on the oneDNN path's
    slow end and stay within 20 minutes; a broken group on a node at the fast half of the range
    is noticed within the 60 s budget, and the plan states it. One type at the seam: the
    program's server spec carries the plan's ProbeSpec itself, and every bound in it is the
    plan's own figure."""
    cfg, p = builders.planned(stack)
    live = p.liveness
    assert live.probes.path == "onednn"
    assert live.probes.period_s >= liveness.MIN_PROBE_PERIOD_S
    assert live.probes.timeout_s > live.probes.request_s
    assert p.front_door.reply_timeout_seconds <= 20 * 60
    assert p.drain.grace_s <= 20 * 60  # also the autoscaler's --max-graceful-termination-sec
    assert live.fast_half_detection_s <= liveness.DETECTION_BUDGET_S
    (line,) = [r for r in p.reasons if r.startswith("liveness ")]
    assert f"noticed within {live.fast_half_detection_s} s at the fast half of the range" in line
    # The measured bound can never exceed the engine's own step timeout it sits under.
    assert live.fast_half_stall_s <= live.probes.stall_s
    probes = builders.planned_spec(stack).probes
    # The very object the planner made: nothing copies it field by field.
    assert probes is live.probes
    assert probes.calibrate_runs == liveness.CALIBRATION_RUNS
    assert probes.floor_s == liveness.MIN_STALL_S
    assert probes.calibrate_s == probes.stall_s
    assert probes.path == cfg.prefill_path
    assert probes.vocab_size == cfg.profile().vocab_size


def _tls(stack: str) -> dict[str, str]:
    region = load_stack(stack).region
    return {
        "tlsCertificateArn": f"arn:aws:acm:{region}:210987654321:certificate/"
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    }


@pytest.mark.parametrize("stack", stack_names())
def test_no_connection_of_any_stack_or_compared_row_is_cut_while_it_waits(stack: str) -> None:
    """Every shipped stack on either listener, and every row `--compare` starts: however long a
    first byte takes, the gatekeeper's keepalives come within the load balancer's idle timeout,
    and a TLS listener answers them on the client's side (the row names that source). The
    rendered listeners carry them: tests/components/test_probe_listener.py."""
    assert KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S < catalog.NLB_IDLE_TIMEOUT_S
    plans = [plan(load_stack(stack, overrides), stack) for overrides in ({}, _tls(stack))]
    cfg = load_stack(stack)
    result = compare.compare(
        cfg, compare.default_need(cfg, stack), stack, TODAY, tuple(sorted(weights.FORMATS))
    )
    plans += [c.plan for c in (*result.ranked, *result.short) if c.plan is not None]
    assert len(plans) > 2
    for p in plans:
        row = frontdoor.idle_cut(p.front_door, p.liveness.first_byte_s)
        assert row.startswith("none: the gatekeeper's TCP keepalives start after 60 s"), row
        if p.front_door.tls:
            assert "sends its own keepalives to the client every 20 s" in row
            assert '"Connection idle timeout"' in row
    # The case that matters is among them: a TLS plan whose first byte can outlast the timeout.
    assert any(
        p.front_door.tls and p.liveness.first_byte_s > catalog.NLB_IDLE_TIMEOUT_S for p in plans
    )
