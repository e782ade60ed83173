"""The quantized groups: the tiny model made int8 and int4 by `infra.quantize`, then served.

The stack's quantize Job runs `python -m infra.quantize` on the model; this runs the same module
(in the quantizer's virtualenv, `tools.venvs.ensure_quantize_env`) on the rehearsal's tiny bf16
model, so what vLLM serves here was made the way the Job makes it. Each format is then served as the
stack's group would serve it at `weights: int8` (or int4): the stack's values with that key go
through the same config model and planner, whose stage count and memory figures the tiny plan
keeps (`tiny_plan.plan_tiny`, the profile read from the bf16 tiny model, as the planner sizes a
format from the bf16 checkpoint), and the ranks run the LeaderWorkerSet's own command lines
(`ranks.rank_launches`) on the quantized directory, behind the real gatekeeper.

Rows per format: the ranks the plan gives and /health; the linear kernel vLLM selected, from
its log (vLLM 0.31 `model_executor/kernels/linear/__init__.py` logs "Selected <kernel> for
<scheme>" for int8 and "Using <kernel> for mixed-precision linear" for int4); the KV cache
tokens and concurrency against the planner; a reply streamed through the gatekeeper; for int8,
lm-eval's score on the shipped task (`quality_step`); every process stopped.
"""

from __future__ import annotations

import re
import secrets
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.manifests import engine_timeout_env
from infra.adapters.wiring import server_spec
from infra.plan.loading import load_config
from infra.plan.sizing import plan
from infra.plan.stackfile import REPO
from tools.rehearse.checks import Check, kv_checks, labelled, stopped_check
from tools.rehearse.front_door import gatekeeper_run
from tools.rehearse.group.ranks import (
    RankFailure,
    RankGroup,
    free_port,
    loopback_ports,
    rank_launches,
)
from tools.rehearse.group.tiny_plan import plan_tiny
from tools.rehearse.group.workspace import LOGS_DIR, RehearsalError
from tools.rehearse.measure.quality_step import QualityStep
from tools.venvs import tail

SCHEMES = ("int8", "int4")
#: The linear kernel vLLM 0.31's CPU build must select for each format.
EXPECTED_KERNELS = {"int8": "CPUInt8ScaledMMLinearKernel", "int4": "Dynamic4bitLinearKernel"}
_KERNEL_LINE = re.compile(r"(?:Selected|Using) (\w+LinearKernel) for ")


@dataclass(frozen=True)
class Served:
    """What a quantized group needs from the rest of the rehearsal."""

    #: The stack's values (after --set), to which `weights` is added.
    values: Mapping[str, Any]
    stack: str
    nginx: str
    #: The rehearsal env's `vllm` executable and the quantizer env's Python.
    vllm: str
    quantize_python: Path
    #: The tiny bf16 model the formats are made from.
    model_dir: Path
    timeout_s: float
    extra_args: tuple[str, ...] = ()
    #: Scores the int8 group with lm-eval, for the difference from bf16 (None: no quality row).
    quality: QualityStep | None = None


def selected_kernels(log_text: str) -> list[str]:
    """The linear kernels a vLLM log says it selected, each once, in order."""
    return list(dict.fromkeys(match[1] for match in _KERNEL_LINE.finditer(log_text)))


def kernel_check(scheme: str, log_text: str) -> Check:
    """vLLM selected exactly the format's expected kernel for its quantized layers."""
    expected = EXPECTED_KERNELS[scheme]
    found = selected_kernels(log_text)
    return Check(
        f"{scheme}: linear kernel",
        expected,
        ", ".join(found) or "no kernel line in the log",
        found == [expected],
    )


def quantized_dir(model_dir: Path, scheme: str) -> Path:
    """Where the tiny model's `scheme` checkpoint is kept, beside the bf16 one."""
    return model_dir.parent / f"{model_dir.name}-{scheme}"


def ensure_quantized(
    python: Path, model_dir: Path, scheme: str, progress: Callable[[str], None]
) -> Path:
    """Run `python -m infra.quantize` on the tiny model (it skips when its marker matches)."""
    out = quantized_dir(model_dir, scheme)
    argv = [str(python), "-m", "infra.quantize", "--source", str(model_dir)]
    argv += ["--scheme", scheme, "--out", str(out)]
    began = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RehearsalError(
            f"quantizing the tiny model failed (exit {done.returncode}): {shlex.join(argv)}\n"
            + tail(done.stdout + done.stderr)
        )
    # llm-compressor logs to stdout too; the command's own line is the last.
    said = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    progress(f"{scheme}: {said} ({time.monotonic() - began:.0f} s)")
    return out


def quantized_rows(served: Served, progress: Callable[[str], None]) -> list[Check]:
    """Every format's rows, one group at a time."""
    rows: list[Check] = []
    for scheme in SCHEMES:
        rows += _group_rows(served, scheme, progress)
    return rows


def _group_rows(served: Served, scheme: str, progress: Callable[[str], None]) -> list[Check]:
    values = {**served.values, "weights": scheme}
    stages = plan(load_config(values), served.stack).stages
    tiny_cfg, tiny_plan = plan_tiny(values, served.model_dir, stages)
    out = ensure_quantized(served.quantize_python, served.model_dir, scheme, progress)
    spec = server_spec(tiny_cfg, tiny_plan)
    ports, api_key = loopback_ports(), secrets.token_hex(24)
    launches = rank_launches(
        spec.engine(),
        served.vllm,
        out,
        ports,
        api_key,
        served.extra_args,
        engine_timeout_env(spec.probes),
    )
    log_dir = LOGS_DIR / f"{time.strftime('%Y%m%d-%H%M%S')}-{scheme}"
    progress(f"{scheme}: starting {len(launches)} rank(s) (logs in {log_dir.relative_to(REPO)})")
    group = RankGroup(launches, log_dir, progress=progress)
    rows: list[Check] = []
    with group:
        health = f"http://127.0.0.1:{ports[0]}/health"
        try:
            ready = group.wait_ready(health, served.timeout_s, progress)
        except RankFailure as failure:
            name = f"{scheme}: group serving"
            return [Check(name, "/health 200", failure.summary, False, note=failure.quote)]
        rows.append(
            Check(
                f"{scheme}: group serving",
                f"{stages} rank(s) (planner at weights={scheme})",
                f"{len(launches)} rank(s), /health 200 after {ready.healthy_s:.0f} s",
                len(launches) == stages,
            )
        )
        leader_log = group.processes[0].log_text()
        rows.append(kernel_check(scheme, leader_log))
        rows += labelled(scheme, kv_checks(tiny_plan, leader_log))
        limits = tiny_plan.front_door
        with gatekeeper_run.running_gate(
            served.nginx, limits, api_key, free_port(), ports[0], log_dir / "gatekeeper", progress
        ) as door:
            streamed = gatekeeper_run.streaming_check(door, api_key, tiny_plan.model)
            rows += labelled(scheme, [streamed])
            if served.quality is not None and scheme == "int8":
                rows.append(
                    served.quality.row(scheme, f"{door.base_url}/v1", api_key, tiny_plan.model)
                )
    return rows + labelled(scheme, [stopped_check(group)])
