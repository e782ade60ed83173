"""Properties of the one prefill model: every bound that can cut off or kill work sits above the
modelled time it bounds, for every stack, every `--compare` row and any node type, batch size
and context length (`infra.plan.prefill`, `infra.plan.liveness`, `infra.plan.frontdoor`).

- time to first token (its slow end) <= first-byte bound <= the gatekeeper's reply timeout;
- the engine's step timeout (the stall bound) >= the slowest modelled step (any chunk of a
  maximum-length prompt) x the pipeline's in-flight factor (its size).
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from infra.plan import catalog, prefill
from infra.plan.compare import compare, default_need
from infra.plan.config import ConfigError, StackConfig
from infra.plan.economics import economics
from infra.plan.sizing import Plan, plan
from infra.plan.stackfile import load_stack, stack_names
from tests import builders

TODAY = dt.date(2026, 12, 1)


def _slowest_step(cfg: StackConfig, p: Plan) -> float:
    """Every chunk of a maximum-length prompt, at the slow end of the rate: the longest."""
    profile = cfg.profile()
    instance = catalog.INSTANCE_TYPES[p.instance_type]
    work = prefill.stage_work(profile, [(r.sliding_layers, r.full_layers) for r in p.ranks])
    slow, _, _ = prefill.nodes(instance, p.pod_cpu)
    batched, steps = p.max_num_batched_tokens, []
    for end in range(batched, p.max_model_len + batched, batched):
        chunk = min(batched, p.max_model_len - (end - batched))
        steps.append(prefill.step_seconds(profile, work, slow, chunk, min(end, p.max_model_len)))
    return max(steps)


def assert_coherent(cfg: StackConfig, p: Plan) -> None:
    served = economics(cfg, p, TODAY).served
    ttft_upper = served.ttft_max_len_range_s[1]
    live, door = p.liveness, p.front_door
    what = (p.instance_type, p.max_model_len, p.max_num_batched_tokens)
    assert ttft_upper <= live.first_byte_s <= door.reply_timeout_seconds, what
    # The pods take these very probes: test_liveness.py.
    assert live.probes.stall_s >= _slowest_step(cfg, p) * p.stages, what
    assert live.probes.in_flight == p.stages


def test_every_compare_row_is_coherent() -> None:
    cfg = load_stack("dev")
    result = compare(cfg, default_need(cfg, "dev"), "dev", TODAY)
    rows = [*result.ranked, *result.short]
    assert rows
    for row in rows:
        assert row.plan is not None
        candidate = cfg.model_copy(
            update={
                "instance_type": row.instance_type,
                "pod_memory_gib": "auto",
                "pipeline_stages": "auto",
                "kv_cache_bytes": "auto",
                "max_num_batched_tokens": "auto",
                "max_context_cap": max(cfg.max_context_cap, result.need.context),
            }
        )
        assert_coherent(candidate, row.plan)


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        *((stack, {}) for stack in stack_names()),
        # `--set maxModelLen=131072` on a type that holds it: every bound stretches together.
        ("dev", {"instanceType": "r8g.4xlarge", "maxModelLen": 131072}),
        # Three stages: the stall bound counts three batches in flight.
        ("dev", {"pipelineStages": 3}),
    ],
)
def test_every_stack_a_long_context_and_a_longer_pipeline_are_coherent(
    stack: str, overrides: dict[str, object]
) -> None:
    cfg = load_stack(stack, overrides)
    assert_coherent(cfg, plan(cfg, stack))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    instance_type=st.sampled_from(sorted(catalog.INSTANCE_TYPES)),
    batched=st.sampled_from(["auto", 256, 512, 1024, 2048, 4096]),
    context=st.sampled_from(["auto", 1024, 2048, 4096, 8192, 32768, 131072]),
)
def test_any_type_batch_and_context_is_coherent(
    instance_type: str, batched: object, context: object
) -> None:
    overrides = {
        "instanceType": instance_type,
        "maxNumBatchedTokens": batched,
        "maxModelLen": context,
    }
    try:
        cfg, p = builders.planned("dev", overrides)
    except ConfigError:
        assume(False)
        return
    assert_coherent(cfg, p)


def test_every_graviton_prefill_figure_says_how_it_is_known() -> None:
    kinds = {value.split(":", 1)[0] for value in catalog.PREFILL_PROVENANCE.values()}
    assert kinds <= {"measured", "derived", "assumed", "unmeasured"}
    # Each path's slow end rests on a measurement on that path and sits below it, never above:
    # half the 59.2% measured on oneDNN (2026-12-02/03), and under the 10.9% measured on the
    # fallback (2026-12-02).
    onednn, fallback = catalog.PREFILL_EFFICIENCY["onednn"], catalog.PREFILL_EFFICIENCY["fallback"]
    onednn_key = f"efficiency on vLLM's oneDNN path, slow end ({100 * onednn[0]:.0f}%)"
    assert catalog.PREFILL_PROVENANCE[onednn_key].startswith("derived: half of 59.2-59.9%")
    assert onednn[0] <= 0.592 / 2
    fallback_key = f"efficiency on torch's fallback, slow end ({100 * fallback[0]:.0f}%)"
    assert catalog.PREFILL_PROVENANCE[fallback_key].startswith("derived: 10.9% measured")
    assert fallback[0] <= 0.109
    assert onednn[1] == fallback[1]
    fast_key = f"efficiency, fast end ({100 * onednn[1]:.0f}%)"
    assert fast_key in catalog.PREFILL_PROVENANCE
