"""`python -m tools.rehearse`: the stack's vLLM group, for real, on this machine.

    python -m tools.rehearse [--stack dev] [--set KEY=VALUE ...] [--timeout 600] [--keep]
                             [--prefill] [--extra-arg=ARG ...]

A deployment takes minutes of node boot and download before vLLM says whether it accepts the
command lines. The rehearsal says it in about a minute: it serves a tiny random-weight model of the
stack's family (the same sliding:full layer pattern, KV-head and head-dim ratios, split over the
same number of pipeline ranks) with a real CPU build of vLLM, as separate processes on 127.0.0.1,
and checks what the plan promised:

- the command lines are the LeaderWorkerSet's own (`components.manifests.engine_args` on the
  stack's `ServerSpec.engine()`); only the rank wiring (model path, --nnodes, --node-rank,
  --master-addr, --master-port, --port) and the memory figures, which the tiny model's own plan
  gives, differ (`ranks.rehearsal_argv`);
- the group forms and `/health` answers, and vLLM logs the KV cache tokens and the concurrency
  the same planner (`infra.plan.sizing.plan`) predicted for the tiny model;
- then, in `rehearse`'s order: the gatekeeper (the pod's own nginx.conf, run by a real nginx in
  front of the leader; every later request to the group goes through it) and the front door
  (`front_door`, one module per group of rows), the chat page in headless Chromium, capacity
  (`vllm bench serve`) and lm-eval's score, the changes (`--skip-changes`), the int8 and int4
  groups (`--skip-quantized`), and the prefill probe (the short slice, or with `--prefill` one
  whole period of the model's pattern and the step-timeout row). docs/development.md ("Rehearsal
  before `pulumi up`") tells every row.

Every process it starts is its own process group and is stopped by group (SIGTERM, then SIGKILL)
whatever happens, including Ctrl-C; a headless rank does not exit when its leader dies, so nothing
else would stop it. A rank that exits early fails the run at once with vLLM's own error line.
Logs go to `.rehearsal/logs/<timestamp>/rank<N>.log`.

This module is the orchestration only: the order of the steps, their timings, the progress lines
and the exit codes (the package's notes map the rest).

Exit codes: 0 every check passed, 1 a check failed or vLLM refused, 2 bad input (one line naming
the key, the rule and the fix), 130 interrupted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from components.manifests import chat, engine_timeout_env
from components.manifests.gatekeeper import GatekeeperLimits
from infra.adapters.wiring import server_spec
from infra.plan.config import ConfigError, StackConfig
from infra.plan.loading import load_config
from infra.plan.sizing import Plan, plan
from infra.plan.stackfile import REPO, add_stack_arguments, parse_overrides, stack_values
from tools.rehearse.changes import change_steps
from tools.rehearse.changes.change_steps import SecondGroup as _SecondGroup
from tools.rehearse.checks import (
    Check,
    endpoint_checks,
    kv_budget_check,
    kv_checks,
    not_reached,
    render_verdict,
    seccomp_check,
    stopped_check,
    verdict_ok,
)
from tools.rehearse.front_door import (
    chat_page,
    door_checks,
    gatekeeper_run,
    leak_checks,
    share_checks,
    siege_checks,
    vllm_headers,
)
from tools.rehearse.group.endpoint import CHECK_TOKENS
from tools.rehearse.group.ranks import (
    RankFailure,
    RankGroup,
    RankLaunch,
    exit_code,
    free_port,
    log_tails,
    loopback_ports,
    rank_launches,
)
from tools.rehearse.group.tiny_plan import ensure_tiny_model, plan_tiny, tiny_model_config
from tools.rehearse.group.workspace import LOGS_DIR, Progress, RehearsalError
from tools.rehearse.measure import capacity_step, prefill_probe
from tools.rehearse.measure.faults import run_faults
from tools.rehearse.measure.metrics_capture import capture_check
from tools.rehearse.measure.prefill_probe import QUICK_SLIDING, figures, probe_checks, run_probe
from tools.rehearse.measure.quality_step import QualityStep
from tools.rehearse.measure.quantized import Served, quantized_rows
from tools.rehearse.measure.step_timeout import timeout_checks
from tools.venvs import (
    QUALITY_VENV_DIR,
    QUANTIZE_VENV_DIR,
    VENV_DIR,
    ensure_env,
    ensure_quality_env,
    ensure_quantize_env,
)

DEFAULT_TIMEOUT_S = 600.0


@dataclass
class Options:
    stack: str
    overrides: dict[str, Any]
    timeout_s: float
    keep: bool
    extra_args: tuple[str, ...]
    faults: bool = False
    #: The fuller prefill probe: one whole period of the model's pattern, not the short slice.
    prefill: bool = False
    #: Sliding layers in the probe's slice (None: `QUICK_SLIDING`, or with `prefill` one period
    #: of the model's pattern).
    prefill_sliding: int | None = None
    #: Serve the tiny model quantized to int8 and int4 after the bf16 group (`quantized`).
    quantized: bool = True
    #: Rotate the key and drain the group under a stream beside a second group (`change_steps`).
    changes: bool = True


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    began = time.monotonic()
    try:
        yield
    finally:
        timings[name] = time.monotonic() - began


NOT_REACHED = (
    ("request without key", "401"),
    ("request with key", "200"),
    ("finish_reason", f'"length" after {CHECK_TOKENS} tokens'),
    ("NUMA calls refused", "every rank filtered, still serving"),
    ("KV cache tokens", "planner's"),
    ("max concurrency", "planner's"),
    ("KV budget accepted", "every rank"),
    ("metrics listener", "vLLM's families"),
)
GATE_NOT_REACHED = (
    ("routes without key", "none 2xx but /health"),
    ("600 sockets, one client", "a keyed chat within 2 s"),
    ("multiplying requests", "400 naming the field"),
    ("stream cut at the reply timeout", "error event and [DONE]"),
    ("longest reply", "within the planned reply bytes"),
    ("big schema", "refused at once"),
    ('{"$ref": "#"} schema', "400, no Retry-After; the next chat served"),
    ("unencodable bodies", "400 naming the field"),
    ("vLLM memory under them", "API server USS flat"),
    ("vLLM's request headers", "the reviewed list"),
    ("streamed via gatekeeper", "incremental"),
    ("no max_tokens", "planned cap"),
)
CHAT_NOT_REACHED = tuple(
    (name, "as the page promises")
    for name in (
        "chat page files",
        "chat page streams",
        "chat cut-off note",
        "chat context meter",
        "chat wrong key",
        "chat New chat",
        "chat at phone width",
        "chat cut-off mutant caught",
    )
)


def rehearse(options: Options, progress: Progress) -> tuple[list[Check], dict[str, float]]:
    """Run the rehearsal; return the verdict's checks and the step timings.

    Raises ConfigError (bad stack input) before anything is started.
    """
    timings: dict[str, float] = {}
    nginx = gatekeeper_run.find_nginx()
    python, model_dir, tiny_cfg, tiny_plan = prepare(options, progress, timings)
    page = None
    if tiny_plan.front_door.chat_page:
        chat_page.find_browser()
        door = tiny_plan.front_door
        page = chat.files(
            chat.ChatPage(tiny_plan.model, door.max_reply_tokens, tiny_plan.max_model_len)
        )
    ports = loopback_ports()
    api_key = gatekeeper_run.rehearsal_key()
    spec = server_spec(tiny_cfg, tiny_plan)
    vllm = str(python.parent / "vllm")
    timeouts = engine_timeout_env(spec.probes)

    def launched(on: Sequence[int]) -> list[RankLaunch]:
        return rank_launches(
            spec.engine(), vllm, model_dir, on, api_key, options.extra_args, timeouts
        )

    launches = launched(ports)
    log_dir = _log_dir(launches)
    base_url = f"http://127.0.0.1:{ports[0]}/v1"
    front = _Front(
        nginx,
        free_port(),
        log_dir / "gatekeeper",
        vllm_headers.installed_package(python),
        page,
    )
    load = capacity_step.CapacityRun(vllm, model_dir, tiny_cfg, tiny_plan, log_dir / "capacity")
    with _timed(timings, "env"):
        quality = QualityStep(
            ensure_quality_env(QUALITY_VENV_DIR, progress), log_dir / "quality", progress
        )
    progress(f"starting {len(launches)} ranks (logs in {log_dir.relative_to(REPO)})")
    group = RankGroup(launches, log_dir, progress=progress)
    checks: list[Check] = []
    try:
        with group:
            checks += _check_group(
                group, options, tiny_plan, base_url, api_key, timings, front, load, quality
            )
            if options.changes and not options.keep:
                b_ports = loopback_ports()
                second = _SecondGroup(launched(b_ports), b_ports, log_dir)
                with _timed(timings, "drain and rotation"):
                    checks += change_steps.change_rows(
                        group, ports, second, front.nginx, tiny_plan, api_key, options.timeout_s
                    )
    finally:
        timings["stop"] = group.stop_seconds
    checks.append(stopped_check(group))
    if not verdict_ok(checks):
        print(log_tails(group.processes), file=sys.stderr)
    if options.quantized:
        with _timed(timings, "int8 and int4"):
            checks += _quantized_rows(options, nginx, vllm, model_dir, quality, progress)
        checks.append(quality.difference_row())
    checks += _prefill_rows(options, python, progress, timings)
    return checks, timings


def probe_sliding(options: Options) -> int | None:
    """Sliding layers of the probe's slice: the short slice unless `--prefill` asks for the
    model's whole pattern (None); `--prefill-sliding` wins."""
    if options.prefill_sliding is not None:
        return options.prefill_sliding
    return None if options.prefill else QUICK_SLIDING


def _quantized_rows(
    options: Options,
    nginx: str,
    vllm: str,
    model_dir: Path,
    quality: QualityStep,
    progress: Progress,
) -> list[Check]:
    """The tiny model quantized by `infra.quantize` and served at `weights` int8 and int4."""
    python = ensure_quantize_env(QUANTIZE_VENV_DIR, progress)
    served = Served(
        stack_values(options.stack, options.overrides),
        options.stack,
        nginx,
        vllm,
        python,
        model_dir,
        options.timeout_s,
        options.extra_args,
        quality,
    )
    try:
        return quantized_rows(served, progress)
    except (RankFailure, RehearsalError, OSError) as error:
        return [Check("int8 and int4 groups", "served", "could not run", False, str(error))]


def _prefill_rows(
    options: Options, python: Path, progress: Progress, timings: dict[str, float]
) -> list[Check]:
    """The prefill probe's rows, then the step-timeout row fed the rate it measured."""
    values = stack_values(options.stack, options.overrides)
    real_plan = plan(load_config(values), options.stack)
    try:
        with _timed(timings, "prefill probe"):
            measured = run_probe(
                values,
                real_plan.max_num_batched_tokens,
                python,
                progress,
                options.timeout_s,
                probe_sliding(options),
            )
    except (RankFailure, RehearsalError, OSError) as error:
        return [Check("prefill tokens/s per layer", "measured", "probe failed", False, str(error))]
    rows = probe_checks(measured)
    # The step-timeout rows start two more groups (minutes each), so they run with `--prefill`
    # (`make rehearse-prefill`) and not in every rehearsal.
    if options.prefill:
        with _timed(timings, "step timeout"):
            rows += timeout_checks(
                values,
                real_plan.stages,
                figures(measured).gflops_per_core,
                python,
                progress,
                options.timeout_s,
            )
    return rows


def check_input(options: Options) -> None:
    """Refuse bad stack input (ConfigError, exit 2) before looking for nginx or building
    anything: a typo is told as such on a machine that has neither yet."""
    plan(load_config(stack_values(options.stack, options.overrides)), options.stack)


def prepare(
    options: Options, progress: Progress, timings: dict[str, float]
) -> tuple[Path, Path, StackConfig, Plan]:
    """The stack's plan, the rehearsal env's Python, the tiny model and its config and plan."""
    values = stack_values(options.stack, options.overrides)
    cfg = load_config(values)
    real_plan = plan(cfg, options.stack)
    progress(
        f"plan: {options.stack} splits {real_plan.model} into {real_plan.stages} stage(s); "
        "rehearsing that split on a tiny model"
    )
    with _timed(timings, "env"):
        python = ensure_env(VENV_DIR, progress)
    with _timed(timings, "model"):
        model_dir = ensure_tiny_model(
            python, tiny_model_config(cfg.profile(), real_plan.stages), progress
        )
    tiny_cfg, tiny_plan = plan_tiny(values, model_dir, real_plan.stages)
    progress(
        f"tiny plan: {tiny_plan.stages} ranks, KV {tiny_plan.kv_cache_bytes} bytes, max len "
        f"{tiny_plan.max_model_len}, batched {tiny_plan.max_num_batched_tokens}: predicts "
        f"{tiny_plan.kv_cache_tokens:,} tokens at {tiny_plan.max_concurrency:.2f}x"
    )
    return python, model_dir, tiny_cfg, tiny_plan


def _log_dir(launches: Sequence[RankLaunch]) -> Path:
    """A new timestamped log directory holding every rank's command line."""
    log_dir = LOGS_DIR / time.strftime("%Y%m%d-%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "commands.txt").write_text(
        "".join(f"rank {launch.rank}: {shlex.join(launch.argv)}\n" for launch in launches),
        encoding="utf-8",
    )
    return log_dir


@dataclass(frozen=True)
class _Front:
    """Where the gatekeeper runs: its nginx, its port and its scratch directory."""

    nginx: str
    port: int
    work_dir: Path
    #: The rehearsal environment's `vllm` package, whose request headers are checked.
    vllm_package: Path | None = None
    #: The chat page's files (`chat.files`), when the stack serves the page.
    page_files: Mapping[str, str] | None = None


def _check_group(
    group: RankGroup,
    options: Options,
    tiny_plan: Plan,
    base_url: str,
    api_key: str,
    timings: dict[str, float],
    front: _Front,
    load: capacity_step.CapacityRun,
    quality: QualityStep,
) -> list[Check]:
    """Every check that needs the running group, in order; a failed start ends the list early.

    `base_url` is vLLM on loopback; once it is healthy every request goes through the gatekeeper,
    except the read of vLLM's own route list."""
    ranks = f"{len(group.launches)} ranks"
    with _timed(timings, "start-up"):
        try:
            ready = group.wait_ready(
                base_url.removesuffix("/v1") + "/health", options.timeout_s, group.progress
            )
        except RankFailure as failure:
            formed = group.formed_at is not None or group.formed()
            return [
                Check("group formed", ranks, _formed_text(group.formed_at, formed), formed),
                Check("/health", "200", failure.summary, False, note=failure.quote),
                *not_reached(
                    (*GATE_NOT_REACHED, *CHAT_NOT_REACHED, *NOT_REACHED, *capacity_step.NOT_REACHED)
                ),
            ]
    checks = [
        Check("group formed", ranks, _formed_text(ready.group_formed_s, True), True),
        Check(
            "/health",
            f"200 within {options.timeout_s:.0f} s",
            f"200 after {ready.healthy_s:.0f} s",
            True,
        ),
    ]
    group.progress(f"/health 200 after {ready.healthy_s:.0f} s")
    limits = tiny_plan.front_door
    vllm_root = base_url.removesuffix("/v1")
    vllm_port = int(vllm_root.rsplit(":", 1)[1])
    with gatekeeper_run.running_gate(
        front.nginx,
        limits,
        api_key,
        front.port,
        vllm_port,
        front.work_dir,
        group.progress,
        page_files=front.page_files,
    ) as door:
        gate_url = f"{door.base_url}/v1"
        with _timed(timings, "checks"):
            checks += [
                gatekeeper_run.routes_check(door, vllm_root),
                gatekeeper_run.streaming_check(door, api_key, tiny_plan.model),
                gatekeeper_run.default_cap_check(
                    door, api_key, tiny_plan.model, tiny_plan.front_door.max_reply_tokens
                ),
            ]
            checks += _door_checks(group, front, limits, api_key, tiny_plan.model, vllm_port, door)
            checks.append(vllm_headers.headers_check(front.vllm_package))
            checks += endpoint_checks(gate_url, api_key, tiny_plan.model, group.progress)
            checks.append(seccomp_check(group))
            logs = [p.log_text() for p in group.processes]
            checks += kv_checks(tiny_plan, logs[0])
            checks.append(kv_budget_check(tiny_plan, logs))
        with _timed(timings, "chat page"):
            checks += _chat_rows(door, front, api_key, tiny_plan, vllm_port, group.progress)
        with _timed(timings, "capacity"):
            checks += capacity_step.capacity_checks(load, gate_url, api_key, group.progress)
        with _timed(timings, "quality"):
            checks.append(quality.row("bf16", gate_url, api_key, tiny_plan.model))
        # After the traffic above, so the latency histograms have observations.
        try:
            checks.append(capture_check(door.metrics_url, vllm_root))
        except OSError as error:
            checks.append(Check("metrics listener", "/metrics 200", "no answer", False, str(error)))
        if options.keep:
            _keep_serving(group, gate_url, api_key)
    return checks


def _chat_rows(
    door: gatekeeper_run.Gate,
    front: _Front,
    api_key: str,
    tiny_plan: Plan,
    vllm_port: int,
    progress: Progress,
) -> list[Check]:
    """The chat page in headless Chromium, against this gatekeeper, then against one serving a
    mutant of the page; screenshots beside the logs, in chat/."""
    if front.page_files is None:
        return []
    from selenium.common.exceptions import WebDriverException

    files, shots = front.page_files, front.work_dir.parent / "chat"
    limits = tiny_plan.front_door

    def serve(mutant: Mapping[str, str]) -> Any:
        work = front.work_dir.parent / "gatekeeper-mutant"
        return gatekeeper_run.running_gate(
            front.nginx, limits, api_key, free_port(), vllm_port, work, progress, page_files=mutant
        )

    try:
        checks = chat_page.chat_checks(door, api_key, tiny_plan.max_model_len, shots)
        checks.append(chat_page.mutant_check(serve, files, api_key, shots))
    except (WebDriverException, RehearsalError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        return [Check("chat page", "driven in Chromium", "browser step failed", False, note=first)]
    progress(f"chat page: screenshots in {shots.relative_to(REPO)}")
    return checks


def _door_checks(
    group: RankGroup,
    front: _Front,
    limits: GatekeeperLimits,
    api_key: str,
    model: str,
    vllm_port: int,
    gate: gatekeeper_run.Gate,
) -> list[Check]:
    """The front door's rows: the running gatekeeper `gate`, one with a short reply timeout
    (the cut) and one that takes dev's largest body (its cost)."""
    probe_port = int(gate.probe_url.rsplit(":", 1)[1])

    def door(port: int) -> door_checks.Door:
        return door_checks.Door("127.0.0.1", port, api_key, model, probe_port, gate.log_entries)

    main = door(front.port)
    group.progress("front door: one client against the gatekeeper")
    checks = [
        door_checks.connections_check(main, limits),
        siege_checks.siege_check(main, limits),
        siege_checks.keyed_siege_check(main, limits),
        door_checks.multiplying_check(main),
        door_checks.longest_reply_check(main, limits),
        door_checks.schema_check(main, limits),
        leak_checks.ref_schema_check(main),  # after the group's first grammar (`schema_check`)
        # Last of one client's rows: what the straight-to-vLLM run leaks stays in the API server.
        *leak_checks.leak_rows(
            main, door(vllm_port), leak_checks.process_uss(group.processes[0].pgid)
        ),
    ]
    if limits.max_schema_bytes:
        checks.append(share_checks.grammar_share_check(main))
    checks += share_checks.fair_share_checks(main, limits)
    timing = door_checks.stream_timing(main)
    timeout = door_checks.cut_timeout(*timing)
    short = replace(limits, reply_timeout_seconds=timeout or limits.reply_timeout_seconds)
    costly = replace(limits, max_request_bytes=door_checks.COSTLY_BYTES)
    cut_port, costly_port = free_port(), free_port()
    with (
        gatekeeper_run.running_gate(
            front.nginx, short, api_key, cut_port, vllm_port, front.work_dir / "cut"
        ),
        gatekeeper_run.running_gate(
            front.nginx, costly, api_key, costly_port, vllm_port, front.work_dir / "costly"
        ) as costly_gate,
    ):
        checks.append(door_checks.cut_check(door(cut_port), timeout, timing))
        cpu = door_checks.gate_cpu(costly_gate.pgid)
        checks.append(door_checks.costly_body_check(door(costly_port), cpu))
    return checks


def _formed_text(seconds: float | None, formed: bool) -> str:
    if not formed:
        return "no"
    return "yes" if seconds is None else f"yes, in {seconds:.0f} s"


def _keep_serving(group: RankGroup, base_url: str, api_key: str) -> None:
    progress = group.progress
    progress(f"--keep: serving at {base_url} with key {api_key}; Ctrl-C stops every rank")
    try:
        while not group.exited():
            time.sleep(1)
        progress("a rank exited; stopping the group")
    except KeyboardInterrupt:
        # Re-raised: one Ctrl-C or SIGTERM (`termination_unwinds`) ends the whole run, not just
        # this loop; the group's context stops every rank on the way out.
        progress("stopping the group and the run")
        raise


def _rehearse_faults(options: Options, progress: Progress) -> int:
    """The fault rehearsal (`tools.rehearse.measure.faults`): its table, then the verdict; its
    leaders measure their own step, so the group is planned on the linear path this CPU takes."""
    options = replace(options, overrides={**prefill_probe.cpu_path(progress), **options.overrides})
    python, model_dir, tiny_cfg, tiny_plan = prepare(options, progress, {})
    table, checks = run_faults(
        server_spec(tiny_cfg, tiny_plan), tiny_plan, python, model_dir, progress, options.timeout_s
    )
    print(table)
    print()
    print(render_verdict(checks))
    print(f"took {progress.elapsed():.0f} s")
    return 0 if verdict_ok(checks) else 1


# --------------------------------------------------------------------------------------------
# CLI


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.rehearse",
        description="Serve a tiny model of the stack's layout with real vLLM, two ranks on "
        "127.0.0.1, using the stack's own command lines, and check the plan's numbers.",
    )
    add_stack_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for /health (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="after the checks, keep the group serving until Ctrl-C",
    )
    parser.add_argument(
        "--faults",
        action="store_true",
        help="break the group on purpose (worker killed, worker frozen, leader killed, a flood "
        "at twice the planned concurrency) and print how each was noticed and recovered",
    )
    parser.add_argument(
        "--prefill",
        action="store_true",
        help="the fuller prefill probe: one whole period of the model's sliding:full pattern "
        "(5 + 1 full-width layers of gemma-4-12B-it, ~8-10 minutes) instead of the short slice "
        "of one sliding and one full layer",
    )
    parser.add_argument(
        "--skip-changes",
        action="store_true",
        help="leave out the changes: the key rotation with an overlap, and the drain of the group "
        "under a long stream beside a second group",
    )
    parser.add_argument(
        "--skip-quantized",
        action="store_true",
        help="serve only the bf16 group, not the tiny model quantized to int8 and int4",
    )
    parser.add_argument(
        "--prefill-sliding",
        type=int,
        default=None,
        metavar="N",
        help="sliding layers in the prefill probe's slice, before its one full layer "
        "(default: 1, or with --prefill the model's own pattern, 5 for gemma-4-12B-it)",
    )
    parser.add_argument(
        "--extra-arg",
        dest="extra_args",
        action="append",
        default=[],
        metavar="ARG",
        help="append ARG to every rank's vllm arguments (repeatable; write --extra-arg=--flag)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    progress = Progress()

    def run() -> int:
        if args.timeout <= 0:
            raise ConfigError(
                "--timeout", f"must be positive (got {args.timeout:g})", "pass seconds such as 600"
            )
        options = Options(
            stack=args.stack,
            overrides=parse_overrides(args.overrides),
            timeout_s=args.timeout,
            keep=args.keep,
            extra_args=tuple(args.extra_args),
            faults=args.faults,
            prefill=args.prefill,
            prefill_sliding=args.prefill_sliding,
            quantized=not args.skip_quantized,
            changes=not args.skip_changes,
        )
        check_input(options)
        if options.faults:
            return _rehearse_faults(options, progress)
        checks, timings = rehearse(options, progress)
        print(render_verdict(checks))
        shown = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items())
        print(f"timings: {shown}; total {progress.elapsed():.1f} s")
        return 0 if verdict_ok(checks) else 1

    return exit_code(run)
