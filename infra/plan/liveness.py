"""How fast a broken group is noticed, and how long a client may wait: pure arithmetic on a plan.

A pipeline-parallel group can break without any process exiting: a headless rank that hangs, a
node that goes NotReady, a partition between the ranks. vLLM 0.31's leader then keeps answering
`/health` with 200 (it only reports an engine it already knows is dead,
`entrypoints/serve/instrumentator/health.py`) while every request waits. So the leader's liveness
probe proves that tokens come out of the last stage, and the engine is told to give up on a step
that takes far longer than any healthy one (`VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`, read by
`v1/executor/multiproc_executor.py` for the `execute_model` and `sample_tokens` RPCs; 300 s by
default, after which the engine core dies, `/health` answers 503 and every request in flight ends
with an error).

Both bounds rest on the longest healthy step: one batch of `max_num_batched_tokens` prefilled
through every stage in series. Its cost is calibrated on the field report: vLLM's CPU warm-up is a
profile run of `max_num_batched_tokens` tokens through each rank (`v1/worker/cpu_model_runner.py`
`warming_up_model` -> `profile_run`), and the whole warm-up took ~50 s for 4,096 tokens through
~12.6 GiB of weights on 6 Graviton3 vCPUs. Taking the whole warm-up as the prefill time makes the
estimate an upper bound: a healthy step is never slower than the plan says, so a busy group is
never restarted for being slow. (`catalog.PREFILL_GFLOPS_PER_VCPU`, the throughput model's
unmeasured range of 40-115 GFLOP/s per Graviton3 vCPU, would make that profile run take 80-230 s,
which the field's ~50 s warm-up rules out; a measured prefill should replace both figures.)

From the step follow, in order:
- the stall bound: twice the step (pipeline parallelism keeps one batch per stage in flight, so a
  batch may wait for the one ahead of it), at least `MIN_STALL_S`;
- the probe: `PROBE_FAILURES` failures in a row, a period that keeps stall + failures x period +
  timeout within `DETECTION_BUDGET_S`;
- the batch cap: the largest `max_num_batched_tokens` whose step leaves that budget reachable;
- the first-byte bound a client waits at most: a maximum-length prompt prefilled step by step,
  plus the stall bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: A broken group must be noticed within this many seconds.
DETECTION_BUDGET_S = 60
#: Consecutive probe failures before the kubelet restarts the container: one lost probe (a
#: scheduling hiccup, a garbage-collection pause) never restarts a group.
PROBE_FAILURES = 3
#: Probe period when the budget allows it, and the shortest one the planner accepts.
PROBE_PERIOD_S = 5
MIN_PROBE_PERIOD_S = 2
#: Deadline of each HTTP call the probe makes (the idle path's one-token generation included).
PROBE_REQUEST_S = 5
#: The probe makes at most three calls (/health, /metrics, one generation); it is stopped after
#: this many seconds (the pod's `timeoutSeconds`).
PROBE_TIMEOUT_S = PROBE_REQUEST_S + 3
#: Never call a pipeline stalled sooner than this: scheduling noise on a loaded node.
MIN_STALL_S = 10
#: A batch may wait for the batch ahead of it in the pipeline.
STALL_STEPS = 2
#: The shortest first-byte bound the plan gives a client.
MIN_FIRST_BYTE_S = 30

#: Calibration (field report): the warm-up's profile run, 4,096 tokens through a 12.59 GiB rank
#: on 6 vCPUs, within ~50 s. Seconds per token per GiB of rank weights on one vCPU.
PREFILL_S_PER_TOKEN_GIB_VCPU = 50 * 6 / (4096 * 12.59)


@dataclass(frozen=True)
class Liveness:
    """The probe's and the engine's bounds for one plan; every figure in whole seconds."""

    #: Longest healthy step: `max_num_batched_tokens` through every stage in series (estimate).
    step_s: float
    #: A busy engine that emits nothing for longer is stuck: the probe's stall bound, and
    #: `VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS` on the ranks.
    stall_s: int
    #: Liveness probe period, consecutive failures and per-run timeout (`timeoutSeconds`).
    period_s: int
    failures: int
    timeout_s: int
    #: Deadline of each HTTP call inside the probe.
    request_s: int
    #: Worst case from a break to the restart decision: stall + failures x period + timeout.
    detection_s: int
    #: Longest a client waits for a first byte before the front door answers 504.
    first_byte_s: int


def step_seconds(rank_weights_gib: Sequence[float], batched_tokens: int, cpu: int) -> float:
    """One batch of `batched_tokens` prefilled through every rank in series (upper bound)."""
    return sum(rank_weights_gib) * batched_tokens * PREFILL_S_PER_TOKEN_GIB_VCPU / cpu


def stall_seconds(step_s: float) -> int:
    return max(MIN_STALL_S, math.ceil(STALL_STEPS * step_s))


def probe_period(stall_s: int) -> int:
    """The longest period up to `PROBE_PERIOD_S` that notices a stall within the budget."""
    room = DETECTION_BUDGET_S - stall_s - PROBE_TIMEOUT_S
    return min(PROBE_PERIOD_S, room // PROBE_FAILURES)


def detection_seconds(stall_s: int, period_s: int) -> int:
    return stall_s + PROBE_FAILURES * period_s + PROBE_TIMEOUT_S


def fits_budget(step_s: float) -> bool:
    """Whether a group with this step can be noticed within `DETECTION_BUDGET_S`."""
    return probe_period(stall_seconds(step_s)) >= MIN_PROBE_PERIOD_S


def max_batched_tokens(rank_weights_gib: Sequence[float], cpu: int, choices: Sequence[int]) -> int:
    """The largest of `choices` whose step still fits the budget (the smallest if none does)."""
    fitting = [b for b in choices if fits_budget(step_seconds(rank_weights_gib, b, cpu))]
    return max(fitting) if fitting else min(choices)


def liveness(
    rank_weights_gib: Sequence[float],
    batched_tokens: int,
    cpu: int,
    prefill_steps_at_max_len: int,
    first_byte_s: int | None = None,
) -> Liveness:
    """The bounds of a plan. `first_byte_s` is the stack's own bound, or None for the planned one.

    The caller refuses a plan whose `detection_s` exceeds `DETECTION_BUDGET_S` (`fits_budget`).
    """
    step = step_seconds(rank_weights_gib, batched_tokens, cpu)
    stall = stall_seconds(step)
    period = max(MIN_PROBE_PERIOD_S, probe_period(stall))
    planned_first_byte = max(MIN_FIRST_BYTE_S, math.ceil(prefill_steps_at_max_len * step + stall))
    return Liveness(
        step_s=round(step, 2),
        stall_s=stall,
        period_s=period,
        failures=PROBE_FAILURES,
        timeout_s=PROBE_TIMEOUT_S,
        request_s=PROBE_REQUEST_S,
        detection_s=detection_seconds(stall, period),
        first_byte_s=planned_first_byte if first_byte_s is None else first_byte_s,
    )
