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

Both bounds rest on the longest healthy step: one batch of `max_num_batched_tokens` prompt tokens,
the last chunk of a maximum-length prompt (attention grows with the context), through every stage
in series, at the SLOW end of the prefill rate (`infra.plan.prefill`, the one prefill model of the
plan). A healthy step is then never slower than the plan says even if the fast end is wrong, so a
busy group is never restarted for being slow. (Until 2026-12 the step was calibrated on the field
report's ~50 s warm-up, read as an upper bound; the rehearsal's prefill probe measures whether a
warm-up bounds a step at all, and the rate now comes from it.)

From the step follow, in order:
- the stall bound and the engine's step timeout: the step times the pipeline's in-flight factor
  (vLLM keeps `max_concurrent_batches` = the pipeline size in flight, and an RPC's deadline runs
  from when it is sent, so a batch may wait for every batch ahead of it), at least `MIN_STALL_S`;
- the probe: `PROBE_FAILURES` failures in a row, a period that keeps stall + failures x period +
  timeout within `DETECTION_BUDGET_S` when it can;
- the batch cap: the largest `max_num_batched_tokens` whose step leaves that budget reachable;
- the first-byte bound a client waits at most: a maximum-length prompt's prefill at the slow end,
  plus the stall bound. The modelled time to first token (its slow end included) never exceeds it.

The slow end is of the linear path the plan assumes (`prefillPath`, `catalog.PREFILL_EFFICIENCY`),
which the leader checks at start. Within it, every leader measures its own step on its own node
before it takes traffic (`components.manifests.probes`, the startup probe): `CALIBRATION_RUNS`
one-token requests of `max_num_batched_tokens` prompt tokens, the first a warm-up, the slowest
of the rest kept. Its liveness then calls a busy engine stalled after

    measured step x growth x `STEP_MARGIN`, within [`MIN_STALL_S`, the slow end's stall bound]

where growth is the modelled ratio of the longest step (the last chunk of a maximum-length
prompt) to the measured one (a chunk at the start of a prompt), the largest at any rate of the
range. No in-flight factor: the progress the probe reads moves each time a batch leaves the last
stage, at most one whole step through every stage apart; the engine's own RPC deadline runs from
when a batch is sent, so `VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS` keeps the slow end's bound times the
batches in flight. That variable is read once when the executor starts
(`v1/executor/multiproc_executor.py`), so it cannot follow the measurement: it stays at the safe
end. A node at the fast half of the range (the middle rate or faster) is then noticed within
`fast_half_detection_s`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from components.manifests.probes import ProbeSpec
from infra.plan import prefill
from infra.plan.catalog import ModelProfile
from infra.plan.prefill import Node, StageWork

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
#: An idle group proves its pipeline with one generated token at most this often: 1,440 a day
#: instead of one every probe period (43,200 a day at 2 s), each a request vLLM's metrics and the
#: dashboard count as traffic. A pipeline broken while idle is then noticed within this, plus
#: the failures' periods and timeouts.
IDLE_CHECK_S = 60
#: Never call a pipeline stalled sooner than this: scheduling noise on a loaded node.
MIN_STALL_S = 10
#: The shortest first-byte bound the plan gives a client.
MIN_FIRST_BYTE_S = 30
#: The leader's start-up measurement: this many one-token requests of `max_num_batched_tokens`
#: prompt tokens; the first is a warm-up (the first step of a shape pays oneDNN's primitive
#: creation), the slowest of the others is the measured step.
CALIBRATION_RUNS = 3
#: The measured step times this is the longest quiet a healthy busy engine shows: room for a
#: step that runs slower than the one measured on an idle engine (a busy node's memory traffic,
#: the gatekeeper's and the kubelet's work on the same cores) and for the probe period.
STEP_MARGIN = 1.5


@dataclass(frozen=True)
class Liveness:
    """The liveness bounds of one plan: the pods' probes as the component takes them, and what
    the plan reports beside them; every figure in whole seconds."""

    #: The probes and the engine's step bound (`components.manifests.probes.ProbeSpec`): stall
    #: bound, period, failures, timeouts, the leader's start-up measurement.
    probes: ProbeSpec
    #: Longest healthy step: `max_num_batched_tokens` at the longest context through every stage
    #: in series, at the slow end of the prefill rate (modelled).
    step_s: float
    #: Worst case from a break to the restart decision: stall + failures x period + timeout.
    detection_s: int
    #: A maximum-length prompt's prefill at the slow end (the time-to-first-token upper end).
    prefill_max_len_s: float
    #: Longest a client waits for a first byte before the front door answers 504.
    first_byte_s: int
    #: How soon a pipeline broken while idle is noticed.
    idle_detection_s: int = 0
    #: The slow end's step of the prompt a leader measures (`calibrate_tokens` at a prompt's
    #: start, modelled): a healthy node's measured step is at most this, and the dashboard draws
    #: it beside every leader's own.
    calibrate_step_s: float = 0.0
    #: The stall bound and detection a leader measures at the middle rate of the range, the
    #: slowest of its fast half.
    fast_half_stall_s: int = 0
    fast_half_detection_s: int = 0


@dataclass(frozen=True)
class Prefill:
    """What the bounds are computed from: the model, its stages' work, the nodes at the slow end,
    middle and fast end of the prefill rate, and the linear path that range is of."""

    profile: ModelProfile
    work: list[StageWork]
    slow: Node
    mid: Node
    fast: Node
    path: str = "onednn"

    def step(self, batched: int, context: int, node: Node | None = None) -> float:
        return prefill.step_seconds(self.profile, self.work, node or self.slow, batched, context)

    def growth(self, batched: int, context: int) -> float:
        """The longest step over the one a leader measures (a chunk at a prompt's start), the
        largest at any rate of the range."""
        return max(
            self.step(batched, context, node) / self.step(batched, batched, node)
            for node in (self.slow, self.mid, self.fast)
        )


def stall_seconds(step_s: float, in_flight: int) -> int:
    return max(MIN_STALL_S, math.ceil(in_flight * step_s))


def measured_stall_seconds(
    step_s: float,
    growth: float,
    ceiling_s: int,
    margin: float = STEP_MARGIN,
    floor_s: int = MIN_STALL_S,
) -> int:
    """The stall bound a leader takes from its measured step (the probe's own arithmetic, kept
    equal by a test): step x growth x margin, within [`floor_s`, `ceiling_s`]. Plans use
    `MIN_STALL_S`; only the rehearsal's tiny model, whose steps are milliseconds, takes less."""
    return min(ceiling_s, max(floor_s, math.ceil(step_s * growth * margin)))


def probe_period(stall_s: int) -> int:
    """The longest period up to `PROBE_PERIOD_S` that notices a stall within the budget."""
    room = DETECTION_BUDGET_S - stall_s - PROBE_TIMEOUT_S
    return min(PROBE_PERIOD_S, room // PROBE_FAILURES)


def detection_seconds(stall_s: int, period_s: int) -> int:
    return stall_s + PROBE_FAILURES * period_s + PROBE_TIMEOUT_S


def fast_half_stall(model: Prefill, batched: int, context: int) -> int:
    """The stall bound a leader measures at the middle rate of the range."""
    ceiling = stall_seconds(model.step(batched, context), len(model.work))
    step = model.step(batched, batched, model.mid)
    return measured_stall_seconds(step, model.growth(batched, context), ceiling)


def fits_budget(stall_s: int) -> bool:
    """Whether a stall bound can be noticed within `DETECTION_BUDGET_S`."""
    return probe_period(stall_s) >= MIN_PROBE_PERIOD_S


def max_batched_tokens(model: Prefill, context: int, choices: Sequence[int]) -> int:
    """The largest of `choices` whose measured stall bound at the middle rate of the range still
    fits the budget (the smallest if none does)."""
    fitting = [b for b in choices if fits_budget(fast_half_stall(model, b, context))]
    return max(fitting) if fitting else min(choices)


def liveness(
    model: Prefill, batched_tokens: int, max_model_len: int, first_byte_s: int | None = None
) -> Liveness:
    """The bounds of a plan. `first_byte_s` is the stack's own bound, or None for the planned one.

    The caller reports a plan whose `detection_s` exceeds `DETECTION_BUDGET_S`, with the batch
    size that would fit (`max_batched_tokens`).
    """
    in_flight = len(model.work)
    step = model.step(batched_tokens, max_model_len)
    stall = stall_seconds(step, in_flight)
    period = max(MIN_PROBE_PERIOD_S, probe_period(stall))
    prompt = prefill.prefill_seconds(
        model.profile, model.work, model.slow, max_model_len, batched_tokens
    )
    planned_first_byte = max(MIN_FIRST_BYTE_S, math.ceil(prompt + stall))
    fast_stall = fast_half_stall(model, batched_tokens, max_model_len)
    probes = ProbeSpec(
        stall_s=stall,
        period_s=period,
        failures=PROBE_FAILURES,
        timeout_s=PROBE_TIMEOUT_S,
        request_s=PROBE_REQUEST_S,
        idle_check_s=IDLE_CHECK_S,
        calibrate_tokens=batched_tokens,
        calibrate_runs=CALIBRATION_RUNS,
        # A request longer than the engine's step timeout would be killed by the engine itself.
        calibrate_s=stall,
        growth=round(model.growth(batched_tokens, max_model_len), 3),
        margin=STEP_MARGIN,
        floor_s=MIN_STALL_S,
        in_flight=in_flight,
        path="fallback" if model.path == "fallback" else "onednn",
        vocab_size=model.profile.vocab_size,
    )
    return Liveness(
        probes=probes,
        step_s=round(step, 2),
        detection_s=detection_seconds(stall, period),
        prefill_max_len_s=round(prompt, 1),
        first_byte_s=planned_first_byte if first_byte_s is None else first_byte_s,
        # A proof that times out fails the probe only after the stall bound (a first step may be
        # running unseen), then the failures' periods and timeouts.
        idle_detection_s=IDLE_CHECK_S + fast_stall + PROBE_FAILURES * (period + PROBE_TIMEOUT_S),
        calibrate_step_s=round(model.step(batched_tokens, batched_tokens), 2),
        fast_half_stall_s=fast_stall,
        fast_half_detection_s=detection_seconds(fast_stall, period),
    )
