"""The planner's prediction of vLLM's memory guard, with and without the weight prefetch
(`tools.rehearse.guard.guard_prediction`)."""

from __future__ import annotations

from infra.plan.stackfile import stack_values
from tests.rehearse.support import TWELVE_B
from tools.rehearse.group.tiny_plan import tiny_model_config, tiny_profile
from tools.rehearse.guard import guard_prediction, memory_guard


def guard_profile(weights_bytes: int) -> dict:
    return tiny_profile(tiny_model_config(TWELVE_B, 1), weights_bytes)


def test_the_planner_refuses_without_prefetch_and_accepts_with_it() -> None:
    values = stack_values("dev", {})
    profile = guard_profile(memory_guard.DEFAULT_TARGET_BYTES)
    kv = int(memory_guard.DEFAULT_KV_GIB * 2**30)
    limit = guard_prediction.planner_pod_gib(values, profile, kv)
    assert limit == 12.75
    assert guard_prediction.predict(values, profile, limit - 0.25, kv, prefetch=True).accepts
    assert not guard_prediction.predict(values, profile, limit - 0.5, kv, prefetch=True).accepts
    engine_reads = guard_prediction.predict(values, profile, limit, kv, prefetch=False)
    prefetched = guard_prediction.predict(values, profile, limit, kv, prefetch=True)
    assert (engine_reads.accepts, engine_reads.guard_gib) == (False, 0.58)
    assert engine_reads.reason.startswith("`kvCacheBytes` 1610612736 (1.50 GiB) is more than")
    assert prefetched.accepts is True
    assert prefetched.guard_gib * 2**30 >= kv
    # The pod is sized for its weights either way: only the page cache decides.
    assert prefetched.guard_gib - engine_reads.guard_gib < 4.8e9 / 2**30
