"""The step-timeout row: the plan's engine step timeout, from the probe's measured rate, on a real
group.

The engine's step timeout (`VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`) is the plan's stall bound: the
longest step (`infra.plan.prefill.step_seconds`, the last chunk of a maximum-length prompt) times
the pipeline's in-flight factor (`infra.plan.liveness.stall_seconds`). This row feeds that same
formula the rate the prefill probe just measured here (wall-clock GFLOP/s per core: what a rank
bound to one core of this shared machine gets) and checks both sides of it on the rehearsal's own
two-rank group, behind the gatekeeper:

- under the derived timeout, a maximum-length prompt completes with 200 (a healthy long prompt is
  not killed);
- under half of it, the same prompt is caught: the engine core dies on its deadline and the
  gatekeeper answers 503.

The tiny model is widened (`tiny_model` `target_bytes`) so that a step takes seconds at the
measured rate: a step shorter than the planner's floor (`liveness.MIN_STALL_S`) would leave half
the timeout above it and nothing to catch.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.plan import liveness, prefill
from infra.plan.config import load_config
from infra.plan.sizing import Plan, plan
from infra.plan.wiring import gatekeeper_limits, server_spec
from infra.rehearse import gate
from infra.rehearse.checks import Check
from infra.rehearse.prefill_probe import Measured
from infra.rehearse.ranks import RankFailure, RankGroup, free_port, loopback_ports, rank_launches
from infra.rehearse.tiny import (
    checkpoint_bytes,
    ensure_tiny_model,
    model_config,
    tiny_model_config,
    tiny_profile,
    tiny_stack_values,
)
from infra.rehearse.workspace import LOGS_DIR

#: What the leader's executor raises when a step passes its deadline, which kills the engine
#: core (v1/executor/multiproc_executor.py `collective_rpc`).
_DEADLINE = re.compile(r"RPC call to (execute_model|sample_tokens) timed out")
#: The row's context and batch: a maximum-length prompt of two steps.
ROW_BATCHED = 256
ROW_MAX_LEN = 2 * ROW_BATCHED + 16
#: The modelled step the widened model is sized for: the planner's floor on the stall bound, so
#: half the derived timeout is shorter than one step.
ROW_STEP_S = 1.2 * liveness.MIN_STALL_S / 2


@dataclass(frozen=True)
class Outcome:
    status: int | None
    seconds: float
    text: str


def widened_bytes(measured_gflops_per_core: float, stages: int) -> int:
    """bf16 bytes of a model whose `ROW_BATCHED`-token step through `stages` one-core ranks takes
    `ROW_STEP_S` at the measured rate (ranks run in series, so the whole model counts)."""
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
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    began = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=wait_s) as response:
            response.read()
            return Outcome(int(response.status), time.monotonic() - began, "complete")
    except urllib.error.HTTPError as error:
        return Outcome(int(error.code), time.monotonic() - began, error.read()[:120].decode())
    except (urllib.error.URLError, OSError) as error:
        return Outcome(None, time.monotonic() - began, str(error)[:120])


def _run_once(
    tiny_plan: Plan,
    spec: Any,
    model_dir: Path,
    python: Path,
    timeout: int,
    tag: str,
    progress: Callable[[str], None],
    start_s: float,
) -> tuple[Outcome, bool]:
    """Start the group with `timeout` as its step timeout, send one maximum-length prompt through
    the gatekeeper; (what the client got, whether the leader's engine died)."""
    ports = loopback_ports()
    key = gate.rehearsal_key()
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
        with gate.running_gate(
            gate.find_nginx(),
            gatekeeper_limits(tiny_plan),
            key,
            front,
            ports[0],
            log_dir / "gatekeeper",
            progress,
        ):
            prompt = tiny_plan.max_model_len - 8
            progress(f"step timeout {timeout} s: a {prompt}-token prompt through the gatekeeper")
            outcome = _ask(
                f"http://127.0.0.1:{front}/v1/completions",
                key,
                tiny_plan.model,
                prompt,
                float(tiny_plan.front_door.reply_timeout_seconds),
            )
            log = group.processes[0].log_text()
    return outcome, _DEADLINE.search(log) is not None


def timeout_checks(
    values: Mapping[str, Any],
    stages: int,
    measured: Measured,
    python: Path,
    progress: Callable[[str], None],
    start_s: float,
) -> list[Check]:
    """The row: the derived timeout passes a maximum-length prompt, half of it is caught."""
    gflops = measured.flop / measured.step_s / 1e9 / measured.cores
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
    why = f"step {step:.1f} s modelled at {gflops:.2f} GFLOP/s per core (probe, wall clock)"
    try:
        full, full_died = _run_once(
            tiny_plan, spec, model_dir, python, timeout, "full", progress, start_s
        )
        half_s = max(1, timeout // 2)
        half, half_died = _run_once(
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
            f"{full.status} after {full.seconds:.1f} s",
            full.status == 200 and not full_died,
        ),
        Check(
            "step timeout: half",
            f"{half_s} s: the engine dies, the gatekeeper answers 503",
            f"{half.status} after {half.seconds:.1f} s; engine died: "
            + ("yes" if half_died else "no"),
            half.status == 503 and half_died,
            note="" if half.status == 503 else half.text,
        ),
    ]
