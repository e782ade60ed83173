"""The tiny MoE group: a random-weight Gemma 4 mixture of experts served by real vLLM behind the
gatekeeper, as one rank and as two (pipeline), in bf16 and int8.

    python -m tools.rehearse.measure.moe_group [--stack dev] [--timeout 600] [--skip-quality]

It rehearses gemma-4-26B-A4B-it as `tools.rehearse` rehearses the dense model: the tiny model
(`tiny_moe`: the 26B's attention layout in lowest terms, a few experts, top-k 2) is planned by the
stack's planner from a `modelProfile` with its experts, and its ranks run the LeaderWorkerSet's
own command lines (`ranks.rank_launches`) on 127.0.0.1, with the pod's nginx config in front.
Rows per group (ranks x format):

- the group serves: the ranks the plan gives, /health 200;
- the MoE kernels vLLM logged on every rank (vLLM 0.31 `fused_moe/oracle/*.py` "Using ... MoE
  backend", and the GEMM dispatch lines; `moe_probe.kernel_lines`, at VLLM_LOGGING_LEVEL=DEBUG);
- the KV cache tokens and concurrency vLLM logged against the planner's (`checks.kv_checks`);
- one completion through the gatekeeper, its answer quoted (random weights: words, no sense);
- lm-eval on the project's task through the gatekeeper (`quality_step`), on the bf16 groups;
- every process stopped.

int8 is the checkpoint the quantize Job makes (`infra.quantize`, W8A8: attention, MLP and experts
int8, router bf16). The int8 group runs the bf16 plan's command lines (the same KV arithmetic:
the KV budget and layout do not depend on the weight format) on the int8 directory. On AMD Zen with
AVX-512 the int8 ranks get zentorch (`moe_probe.zentorch_runs`); on an x86 CPU without AMX or
zentorch vLLM 0.31 has no int8 MoE kernel; the row then says
"not runnable on this CPU: <vLLM's reason>" and is not counted as passed.

Exit codes: 0 every row passed, 1 a row failed or was not runnable here, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.manifests import engine_timeout_env
from components.manifests import quantize as quantize_manifests
from infra.adapters.wiring import server_spec
from infra.plan import moe
from infra.plan.config import ConfigError, StackConfig
from infra.plan.sizing import Plan
from infra.plan.stackfile import REPO, stack_values
from tools.rehearse.checks import (
    Check,
    kv_budget_check,
    kv_checks,
    labelled,
    render_verdict,
    stopped_check,
)
from tools.rehearse.front_door import gatekeeper_run
from tools.rehearse.group.endpoint import json_request
from tools.rehearse.group.ranks import (
    RankFailure,
    RankGroup,
    exit_code,
    free_port,
    loopback_ports,
    rank_launches,
)
from tools.rehearse.group.tiny_moe import plan_tiny_moe, tiny_moe_config
from tools.rehearse.group.tiny_plan import ensure_tiny_model
from tools.rehearse.group.workspace import LOGS_DIR, Progress, RehearsalError
from tools.rehearse.measure.moe_probe import kernel_lines, zentorch_runs
from tools.rehearse.measure.quality_step import QualityStep
from tools.rehearse.measure.quantized import ensure_quantized
from tools.venvs import (
    QUALITY_VENV_DIR,
    QUANTIZE_VENV_DIR,
    VENV_DIR,
    ensure_env,
    ensure_quality_env,
    ensure_quantize_env,
    ensure_zentorch,
)

#: (pipeline ranks, weight format) of every group, in the order they are served.
GROUPS = ((1, "bf16"), (2, "bf16"), (1, "int8"), (2, "int8"))
#: vLLM 0.31's refusal of an int8 MoE layer on a CPU without one of its int8 MoE kernels
#: (`fused_moe/oracle/int8.py`: CPUExpertsInt8 needs AMX, ZenCPUExpertsInt8 zentorch,
#: ArmCPUExpertsInt8 an Arm CPU).
NO_INT8_MOE = "No Int8 MoE backend supports the deployment configuration"
ANSWER_TOKENS = 8
PROMPT = "How many tokens fit in the cache?"
#: The MoE kernel lines vLLM must log on every rank: its MoE backend choice.
MOE_KERNEL_KEYS = ("MoE backend", "Experts")


def chosen_kernels(log_text: str) -> list[str]:
    """The kernel lines of a rank's log, less the debug lines of backends it passed over
    ("... does not support the deployment configuration ...")."""
    return [line for line in kernel_lines(log_text) if "does not support" not in line]


def moe_kernels(log_text: str) -> list[str]:
    """The kernel lines of a rank's log that name its MoE backend or experts class."""
    return [line for line in chosen_kernels(log_text) if any(k in line for k in MOE_KERNEL_KEYS)]


def kernels_check(label: str, logs: Sequence[str]) -> Check:
    """Every rank logged the MoE backend it picked; the row names them (and the GEMM lines)."""
    per_rank = [moe_kernels(text) for text in logs]
    seen = dict.fromkeys(line for text in logs for line in chosen_kernels(text))
    return Check(
        f"{label}: MoE kernels",
        f"a MoE backend named on each of {len(logs)} rank(s)",
        "; ".join(seen) or "no kernel line in the logs",
        all(per_rank),
    )


_PASSED_OVER = re.compile(
    r"(\w+ MoE backend \w+) does not support the deployment configuration "
    r"since (.*?)\.?$",
    re.M,
)


def passed_over(log_text: str) -> list[str]:
    """vLLM's reason for each MoE backend it passed over ("Int8 MoE backend CPU: kernel does
    not support current device cpu"), each once, from its DEBUG lines (`fused_moe/oracle/*.py`)."""
    return list(
        dict.fromkeys(f"{match[1]}: {match[2]}" for match in _PASSED_OVER.finditer(log_text))
    )


def not_runnable(label: str, quote: str, log_text: str = "") -> Check | None:
    """The row for a group vLLM refused because this CPU has no kernel for it, not passed (None:
    another failure, which is a plain FAIL). The note lists every backend vLLM tried and why."""
    if NO_INT8_MOE not in quote:
        return None
    reason = quote.split(": ", 1)[-1] if quote.startswith("rank ") else quote
    return Check(
        f"{label}: group serving",
        "/health 200",
        f"not runnable on this CPU: {reason.split(' (weight_key')[0]}",
        None,
        note="; ".join(passed_over(log_text)) or quote,
    )


def answer_check(label: str, gate_url: str, api_key: str, model: str) -> Check:
    """One chat completion through the gatekeeper: 200, tokens, the answer quoted."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": ANSWER_TOKENS,
        "temperature": 0,
    }
    request = json_request(f"{gate_url}/chat/completions", api_key, body)
    name, expected = f"{label}: completion via gatekeeper", "200, tokens"
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            reply = json.loads(response.read())
    except OSError as error:
        return Check(name, expected, "no answer", False, note=str(error))
    tokens = int((reply.get("usage") or {}).get("completion_tokens", 0))
    text = (reply["choices"][0]["message"].get("content") or "").replace("\n", " ")
    return Check(name, expected, f"200, {tokens} tokens: {text[:40]!a}", tokens > 0)


def planner_check(
    label: str, values: Mapping[str, Any], model_dir: Path, stages: int, weights: str
) -> Check:
    """What the planner says of the tiny MoE in `weights`: a plan, or its one-line refusal (a
    format with no MoE kernel). Either is the planner doing its job."""
    try:
        plan_tiny_moe(values, model_dir, stages, weights)
    except ConfigError as error:
        return Check(
            f"{label}: planner",
            "a plan, or a refusal naming the key",
            f"refused, `{error.key}`: {error.rule.split(' (')[0]}",
            True,
            note=str(error),
        )
    return Check(f"{label}: planner", "a plan, or a refusal naming the key", "planned", True)


def kernel_check(label: str, python: Path, weights: str) -> Check:
    """The quantize Job's first container (`components.manifests.quantize._KERNEL_CHECK`), run
    on this machine's vLLM: it passes where vLLM has the format's MoE ops, and otherwise stops
    in one line before anything is downloaded."""
    ops = moe.KERNEL_OPS.get(weights, ())
    name = f"{label}: the quantize Job's kernel check"
    if not ops:
        return Check(name, "no op to check", "none needed", True)
    env = {"PATH": os.environ.get("PATH", ""), "REQUIRED_OPS": ",".join(ops), "SCHEME": weights}
    done = subprocess.run(
        [str(python), "-c", quantize_manifests.KERNEL_CHECK],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    line = (done.stderr.strip().splitlines() or [""])[-1]
    has = done.returncode == 0 and done.stdout.strip() == f"the image's vLLM has {ops[0]}"
    stops = done.returncode == 1 and line.startswith(f"the image's vLLM has no {ops[0]}")
    observed = "passed: " + done.stdout.strip() if has else f"exit {done.returncode}: {line}"
    return Check(name, "passes, or stops in one line", observed, has or stops)


@dataclass(frozen=True)
class Run:
    """What every group needs."""

    values: Mapping[str, Any]
    nginx: str
    vllm: str
    python: Path
    quantize_python: Path | None
    quality: QualityStep | None
    timeout_s: float
    #: The int8 ranks' extra environment: zentorch on PYTHONPATH where it runs (`moe_probe`).
    int8_env: Mapping[str, str]


def group_rows(run: Run, stages: int, weights: str, progress: Progress) -> list[Check]:
    """Build (once), plan and serve the tiny MoE at `stages` ranks in `weights`; its rows."""
    label = f"{stages} rank{'s' if stages > 1 else ''} {weights}"
    model_dir = ensure_tiny_model(run.python, tiny_moe_config(stages), progress)
    rows: list[Check] = []
    cfg, tiny_plan = plan_tiny_moe(run.values, model_dir, stages)
    served = model_dir
    if weights != "bf16":
        rows.append(planner_check(label, run.values, model_dir, stages, weights))
        rows.append(kernel_check(label, run.python, weights))
        assert run.quantize_python is not None
        served = ensure_quantized(run.quantize_python, model_dir, weights, progress)
    progress(
        f"{label}: {'the bf16 ' if weights != 'bf16' else ''}plan {tiny_plan.stages} rank(s), "
        f"KV {tiny_plan.kv_cache_tokens:,} tokens at {tiny_plan.max_concurrency:.2f}x"
    )
    extra = run.int8_env if weights != "bf16" else {}
    return rows + _serve(run, label, served, cfg, tiny_plan, weights == "bf16", progress, extra)


def _serve(
    run: Run,
    label: str,
    served: Path,
    cfg: StackConfig,
    tiny_plan: Plan,
    quality: bool,
    progress: Progress,
    extra_env: Mapping[str, str],
) -> list[Check]:
    spec = server_spec(cfg, tiny_plan)
    ports, api_key = loopback_ports(), secrets.token_hex(24)
    env = {**engine_timeout_env(spec.probes), "VLLM_LOGGING_LEVEL": "DEBUG", **extra_env}
    launches = rank_launches(spec.engine(), run.vllm, served, ports, api_key, (), env)
    slug = label.replace(" ", "-")
    log_dir = LOGS_DIR / f"{time.strftime('%Y%m%d-%H%M%S')}-moe-group-{slug}"
    progress(f"{label}: starting {len(launches)} rank(s) (logs in {log_dir.relative_to(REPO)})")
    group = RankGroup(launches, log_dir, progress=progress)
    rows: list[Check] = []
    with group:
        try:
            ready = group.wait_ready(f"http://127.0.0.1:{ports[0]}/health", run.timeout_s, progress)
        except RankFailure as failure:
            refused = not_runnable(label, failure.quote, group.processes[0].log_text())
            rows.append(
                refused
                or Check(
                    f"{label}: group serving", "/health 200", failure.summary, False, failure.quote
                )
            )
        else:
            rows.append(
                Check(
                    f"{label}: group serving",
                    f"{tiny_plan.stages} rank(s) (planner)",
                    f"{len(launches)} rank(s), /health 200 after {ready.healthy_s:.0f} s",
                    len(launches) == tiny_plan.stages,
                )
            )
            logs = [p.log_text() for p in group.processes]
            kv = [*kv_checks(tiny_plan, logs[0]), kv_budget_check(tiny_plan, logs)]
            rows += [kernels_check(label, logs), *labelled(label, kv)]
            with gatekeeper_run.running_gate(
                run.nginx,
                tiny_plan.front_door,
                api_key,
                free_port(),
                ports[0],
                log_dir / "gatekeeper",
                progress,
            ) as door:
                gate_url = f"{door.base_url}/v1"
                rows.append(answer_check(label, gate_url, api_key, tiny_plan.model))
                if quality and run.quality is not None:
                    rows.append(
                        run.quality.row(label.replace(" ", "-"), gate_url, api_key, tiny_plan.model)
                    )
    return rows + labelled(label, [stopped_check(group)])


def rehearse(
    stack: str, timeout_s: float, quality: bool, formats: Sequence[str], progress: Progress
) -> list[Check]:
    values = stack_values(stack)
    nginx = gatekeeper_run.find_nginx()
    python = ensure_env(VENV_DIR, progress)
    quantize_python = (
        ensure_quantize_env(QUANTIZE_VENV_DIR, progress) if set(formats) - {"bf16"} else None
    )
    step = None
    if quality:
        step = QualityStep(
            ensure_quality_env(QUALITY_VENV_DIR, progress),
            LOGS_DIR / time.strftime("%Y%m%d-%H%M%S-moe-quality"),
            progress,
        )
    zen = {}
    if quantize_python and zentorch_runs(Path("/proc/cpuinfo").read_text()):
        zen = {"PYTHONPATH": str(ensure_zentorch(python, progress))}
    vllm = str(python.parent / "vllm")
    run = Run(values, nginx, vllm, python, quantize_python, step, timeout_s, zen)
    rows: list[Check] = []
    for stages, weights in GROUPS:
        if weights not in formats:
            continue
        try:
            rows += group_rows(run, stages, weights, progress)
        except (RehearsalError, OSError) as error:
            name = f"{stages} rank(s) {weights}: group serving"
            rows.append(Check(name, "served", "could not run", False, str(error)))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev", help="stack whose values shape the engine")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for /health")
    parser.add_argument("--skip-quality", action="store_true", help="leave out the lm-eval rows")
    parser.add_argument("--formats", default="bf16,int8", help="comma-separated: bf16, int8")
    args = parser.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in ("bf16", "int8")]
    if bad or not formats:
        print(
            f"error: `--formats` {bad[0] if bad else args.formats!r} must list bf16 and/or int8; "
            "pass --formats bf16,int8",
            file=sys.stderr,
        )
        return 2
    progress = Progress()

    def run() -> int:
        rows = rehearse(args.stack, args.timeout, not args.skip_quality, formats, progress)
        print(render_verdict(rows))
        print(f"took {progress.elapsed():.0f} s")
        return 0 if all(c.ok is True for c in rows) and rows else 1

    return exit_code(run)


if __name__ == "__main__":
    sys.exit(main())
