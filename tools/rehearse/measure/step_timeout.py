"""The step-timeout row: the plan's engine step timeout, from the probe's measured rate, on a real
group.

The engine's step timeout (`VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`) is the plan's stall bound: the
longest step (`infra.plan.prefill.step_seconds`, the last chunk of a maximum-length prompt) times
the pipeline's in-flight factor (`infra.plan.liveness.stall_seconds`). This row feeds that same
formula the rate the prefill probe just measured here and checks both sides of it on the
rehearsal's own two-rank group, behind the gatekeeper:

- under the derived timeout, a maximum-length prompt completes with 200 (a healthy long prompt is
  not killed);
- under half of it, the same prompt is caught: the engine core dies on its deadline and the
  gatekeeper answers 503.

How vLLM 0.31 applies the timeout (read in the 0.31.0+cpu wheel, 2026-12-02):
`MultiprocExecutor.collective_rpc` (v1/executor/multiproc_executor.py) fixes each RPC's deadline
when it is sent, and the engine core sends a batch's `execute_model` and `sample_tokens` at once;
with two stages it keeps two batches in flight (`VllmConfig.max_concurrent_batches` = the
pipeline size, v1/engine/core.py `step_with_batch_queue`), and the scheduler advances a prompt's
computed tokens when it schedules a chunk (v1/core/sched/scheduler.py `_update_after_schedule`),
so the next chunk of the same prompt is sent while the previous one runs. The second chunk's
deadline thus covers the rest of the first chunk and all of its own: 1.5 steps when the two
stages run side by side on their own cores, 2 when they share one (hence the in-flight factor 2,
the safe end). This row's prompt is three chunks (256 + 256 + 8 tokens), so one prompt already
puts two batches in flight: its longest wait is ~1.5 of the row's real steps, against a derived
timeout of 2 modelled steps and a half of 1: a margin of ~1.3 on the pass and ~1.5 on the catch
when the real step is the modelled one.

That holds only if the real step is the modelled one, on a machine shared with other work:

- the rate is the probe's GFLOP per CPU-second (`prefill_probe.figures`), not per wall-clock
  second: measured here on 2026-12-02 at load 1.8 and 23, it moved 1.3x (8.5 vs 6.7) where the
  wall-clock prefill tokens/s per layer moved 12x (36 vs 3);
- while the prompt runs, the ranks run at `ROW_NICE`, their scheduling groups included
  (`_prioritise`; root only, the row says when it could not), so each rank gets close to a whole
  core of CPU seconds however busy the machine is. Only for the prompt: the group starts at
  normal priority.

The tiny model is widened (`tiny_checkpoint` `target_bytes`) so that a step takes seconds at the
measured rate: a step shorter than the planner's floor (`liveness.MIN_STALL_S`) would leave half
the timeout above it and nothing to catch.
"""

from __future__ import annotations

import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.adapters.wiring import server_spec
from infra.plan import liveness, prefill
from infra.plan.loading import load_config
from infra.plan.sizing import Plan, plan
from tools.rehearse.checks import Check
from tools.rehearse.front_door import gatekeeper_run
from tools.rehearse.group.endpoint import json_request
from tools.rehearse.group.ranks import (
    RankFailure,
    RankGroup,
    free_port,
    group_cpu_seconds,
    loopback_ports,
    rank_launches,
)
from tools.rehearse.group.tiny_plan import (
    checkpoint_bytes,
    ensure_tiny_model,
    model_config,
    tiny_model_config,
    tiny_profile,
    tiny_stack_values,
)
from tools.rehearse.group.workspace import LOGS_DIR

#: What the leader's executor raises when a step passes its deadline, which kills the engine
#: core (v1/executor/multiproc_executor.py `collective_rpc`).
_DEADLINE = re.compile(r"RPC call to (execute_model|sample_tokens) timed out")
#: The row's context and batch: a maximum-length prompt of two steps.
ROW_BATCHED = 256
ROW_MAX_LEN = 2 * ROW_BATCHED + 16
#: The modelled step the widened model is sized for: the planner's floor on the stall bound, so
#: half the derived timeout is shorter than one step.
ROW_STEP_S = 1.2 * liveness.MIN_STALL_S / 2
#: Niceness of the ranks while the prompt runs: the highest priority, so CPU seconds are wall
#: seconds on a shared machine (a nice -20 task outweighs ~87 nice-0 ones, kernel/sched/core.c
#: `sched_prio_to_weight`).
ROW_NICE = -20


@dataclass(frozen=True)
class Outcome:
    status: int | None
    seconds: float
    text: str
    #: CPU seconds the ranks' live processes used while the prompt ran (how much of their two
    #: cores they got); an engine that died takes its own seconds with it.
    cpu_s: float = 0.0

    def said(self) -> str:
        cpu = f"{self.cpu_s:.1f} CPU-s on the ranks" if self.cpu_s > 0 else "CPU-s not counted"
        return f"{self.status} after {self.seconds:.1f} s ({cpu})"


def widened_bytes(measured_gflops_per_core: float, stages: int) -> int:
    """bf16 bytes of a model whose `ROW_BATCHED`-token step through `stages` one-core ranks takes
    `ROW_STEP_S` at the measured rate (a step runs its stages in series, so the whole model
    counts)."""
    params = ROW_STEP_S * measured_gflops_per_core * 1e9 / (2 * ROW_BATCHED)
    return int(2 * params)


def derived_timeout(tiny_plan: Plan, cfg_profile: Any, gflops_per_core: float) -> tuple[float, int]:
    """The plan's formula with the measured rate: (longest step, engine step timeout)."""
    work = prefill.stage_work(
        cfg_profile, [(r.sliding_layers, r.full_layers) for r in tiny_plan.ranks]
    )
    # One core per rank (`ranks.rank_env`); the weights of a model this small stream in
    # microseconds, so the bandwidth term is left out.
    node = prefill.Node(gflops_per_core * 1e9, float("inf"))
    step = prefill.step_seconds(
        cfg_profile, work, node, tiny_plan.max_num_batched_tokens, tiny_plan.max_model_len
    )
    return step, liveness.stall_seconds(step, len(work))


def _ask(url: str, key: str, model: str, tokens: int, wait_s: float) -> Outcome:
    ids = [8 + (i * 37) % 500 for i in range(tokens)]
    body = {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0}
    began = time.monotonic()
    try:
        with urllib.request.urlopen(json_request(url, key, body), timeout=wait_s) as response:
            response.read()
            return Outcome(int(response.status), time.monotonic() - began, "complete")
    except urllib.error.HTTPError as error:
        return Outcome(int(error.code), time.monotonic() - began, error.read()[:120].decode())
    except (urllib.error.URLError, OSError) as error:
        return Outcome(None, time.monotonic() - began, str(error)[:120])


def _prioritise(group: RankGroup, itself: bool = False) -> bool:
    """Raise every rank (and with `itself` this process) to `ROW_NICE`; whether that was allowed.

    Each rank leads its own session, so with the kernel's autogroup scheduling
    (/proc/sys/kernel/sched_autogroup_enabled, on for this runner) it is its own scheduling
    group and competes with every other session as one: its threads' niceness alone weighs
    them only against each other (sched(7), "The autogroup feature"). So the rank's autogroup
    is raised (/proc/PID/autogroup), and its threads too (`PRIO_PGRP` reaches every thread of
    the process group) for a kernel without autogroups.
    """
    targets = [(f"/proc/{p.pgid}/autogroup", os.PRIO_PGRP, p.pgid) for p in group.processes]
    if itself:
        targets.append(("/proc/self/autogroup", os.PRIO_PROCESS, 0))
    try:
        for autogroup, which, who in targets:
            if Path(autogroup).exists():
                Path(autogroup).write_text(str(ROW_NICE))
            os.setpriority(which, who, ROW_NICE)
    except OSError:
        return False
    return True


def _run_once(
    tiny_plan: Plan,
    spec: Any,
    model_dir: Path,
    python: Path,
    timeout: int,
    tag: str,
    progress: Callable[[str], None],
    start_s: float,
) -> tuple[Outcome, bool, bool]:
    """Start the group with `timeout` as its step timeout, send one maximum-length prompt through
    the gatekeeper at `ROW_NICE`; (what the client got, whether the leader's engine died, whether
    the priority was raised)."""
    ports = loopback_ports()
    key = gatekeeper_run.rehearsal_key()
    launches = rank_launches(
        spec.engine(),
        str(python.parent / "vllm"),
        model_dir,
        ports,
        key,
        engine_env={"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": str(timeout)},
    )
    log_dir = LOGS_DIR / time.strftime(f"step-timeout-%Y%m%d-%H%M%S-{tag}")
    group = RankGroup(launches, log_dir, progress=progress)
    front = free_port()
    with group:
        group.wait_ready(f"http://127.0.0.1:{ports[0]}/health", start_s, progress)
        with gatekeeper_run.running_gate(
            gatekeeper_run.find_nginx(),
            tiny_plan.front_door,
            key,
            front,
            ports[0],
            log_dir / "gatekeeper",
            progress,
        ):
            prompt = tiny_plan.max_model_len - 8
            raised = _prioritise(group)
            progress(f"step timeout {timeout} s: a {prompt}-token prompt through the gatekeeper")
            cpu = sum(group_cpu_seconds(p.pgid) for p in group.processes)
            outcome = _ask(
                f"http://127.0.0.1:{front}/v1/completions",
                key,
                tiny_plan.model,
                prompt,
                float(tiny_plan.front_door.reply_timeout_seconds),
            )
            cpu = sum(group_cpu_seconds(p.pgid) for p in group.processes) - cpu
            log = group.processes[0].log_text()
    outcome = Outcome(outcome.status, outcome.seconds, outcome.text, cpu)
    return outcome, _DEADLINE.search(log) is not None, raised


def timeout_checks(
    values: Mapping[str, Any],
    stages: int,
    gflops: float,
    python: Path,
    progress: Callable[[str], None],
    start_s: float,
) -> list[Check]:
    """The row: the derived timeout passes a maximum-length prompt, half of it is caught.

    `gflops` is the probe's measured GFLOP per CPU-second of one core (`prefill_probe.figures`).
    """
    base = load_config(values).profile()
    model_dir = ensure_tiny_model(
        python,
        tiny_model_config(base, stages),
        progress,
        target_bytes=widened_bytes(gflops, stages),
    )
    profile = tiny_profile(model_config(model_dir), checkpoint_bytes(model_dir))
    row_values = {
        **tiny_stack_values(values, profile, stages),
        "maxModelLen": ROW_MAX_LEN,
        "maxNumBatchedTokens": ROW_BATCHED,
        "firstByteTimeoutSeconds": "auto",
    }
    cfg = load_config(row_values)
    tiny_plan = plan(cfg, "step-timeout")
    spec = server_spec(cfg, tiny_plan)
    step, timeout = derived_timeout(tiny_plan, cfg.profile(), gflops)
    why = f"step {step:.1f} s modelled at {gflops:.2f} GFLOP per CPU-second (probe)"
    try:
        full, full_died, full_raised = _run_once(
            tiny_plan, spec, model_dir, python, timeout, "full", progress, start_s
        )
        half_s = max(1, timeout // 2)
        half, half_died, half_raised = _run_once(
            tiny_plan, spec, model_dir, python, half_s, "half", progress, start_s
        )
    except RankFailure as failure:
        return [
            Check("step timeout: derived", "200", f"group did not start: {failure.summary}", False)
        ]
    return [
        Check(
            "step timeout: derived",
            f"{timeout} s ({why}): a {tiny_plan.max_model_len}-token prompt gets 200",
            full.said() + _priority(full_raised),
            full.status == 200 and not full_died,
        ),
        Check(
            "step timeout: half",
            f"{half_s} s: the engine dies, the gatekeeper answers 503",
            f"{half.said()}; engine died: "
            + ("yes" if half_died else "no")
            + _priority(half_raised),
            half.status == 503 and half_died,
            note="" if half.status == 503 else half.text,
        ),
    ]


def _priority(raised: bool) -> str:
    return "" if raised else f"; ranks NOT at nice {ROW_NICE} (not root): the machine's load counts"
