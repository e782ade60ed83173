"""What the planner says vLLM's memory guard will see in a single-rank pod of a given limit.

The memory-guard experiment (`memory_guard`) compares vLLM's answer with this prediction. It is
pure: the stack's values, rewritten for one rank of the guard model in a pod of `limit_gib`, go
through the stack's own config model and planner (`infra.plan.sizing.plan`), with and without
`weightPrefetch`, so the experiment tests the very rule the deployment is sized by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.plan.budget import CPU_DEFAULT_BATCHED_TOKENS_PER_RANK
from infra.plan.loading import load_config
from infra.plan.sizing import PlanError, plan

GUARD_MODEL_NAME = "rehearsal/guard-gemma4"
#: Step of the automatic pod limit.
LIMIT_STEP_GIB = 0.25
MAX_MODEL_LEN = 2048
BATCHED_TOKENS = CPU_DEFAULT_BATCHED_TOKENS_PER_RANK


@dataclass(frozen=True)
class Prediction:
    """What the planner says vLLM's guard will see, and whether the KV budget passes it."""

    prefetch: bool
    guard_gib: float
    accepts: bool
    #: The planner's refusal line, when it refuses.
    reason: str


def guard_values(
    values: Mapping[str, Any], profile: Mapping[str, Any], limit_gib: float, prefetch: bool
) -> dict[str, Any]:
    """The stack's values for one single-rank pod of `limit_gib` serving the guard model."""
    return {
        **values,
        "model": GUARD_MODEL_NAME,
        "modelProfile": dict(profile),
        "pipelineStages": 1,
        "podMemoryGiB": limit_gib,
        "maxModelLen": MAX_MODEL_LEN,
        "maxNumBatchedTokens": BATCHED_TOKENS,
        "weightPrefetch": prefetch,
    }


def planner_pod_gib(values: Mapping[str, Any], profile: Mapping[str, Any], kv_bytes: int) -> float:
    """The pod the planner would size for `kv_bytes` with the prefetch, plus one step.

    The smallest multiple of `LIMIT_STEP_GIB` at which the planner accepts the budget: below it,
    the planner itself refuses (weights and runtime do not fit, or the guard sees too little).
    """
    limit = LIMIT_STEP_GIB
    while True:
        try:
            if predict(values, profile, limit, kv_bytes, prefetch=True).accepts:
                return limit + LIMIT_STEP_GIB
        except PlanError as error:
            if error.key == "podMemoryGiB":  # past what the stack's node can give a pod
                raise
        limit += LIMIT_STEP_GIB


def predict(
    values: Mapping[str, Any],
    profile: Mapping[str, Any],
    limit_gib: float,
    kv_bytes: int,
    prefetch: bool,
) -> Prediction:
    """The planner's guard figure for the pod, and its verdict on `kv_bytes`.

    Raises PlanError when the planner refuses the pod for another reason than the KV budget (the
    weights and runtime do not fit the limit): then the experiment is mis-sized.
    """
    base = guard_values(values, profile, limit_gib, prefetch)
    guard = plan(load_config({**base, "kvCacheBytes": "auto"}), "memory-guard").guard_available_gib
    try:
        plan(load_config({**base, "kvCacheBytes": kv_bytes}), "memory-guard")
    except PlanError as error:
        if error.key != "kvCacheBytes":
            raise
        return Prediction(prefetch, guard, False, str(error))
    return Prediction(prefetch, guard, True, "")
