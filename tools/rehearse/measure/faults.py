"""`python -m tools.rehearse --faults`: break the stack's vLLM group on purpose and measure.

The real two-rank group runs on loopback as the plain rehearsal runs it (the LWS's command lines,
the pods' engine environment, the gatekeeper's nginx config in front of the leader, and every
client going through it), and this module plays the kubelet and the LeaderWorkerSet around it:
the pods' own liveness commands (`manifests.probe_command`, the same program with the tiny plan's
bounds, only the port differs) run every period on both ranks, and when a liveness probe
reaches its failure threshold or a rank exits, the whole group is stopped and started again
(`RecreateGroupOnPodRestart`). Every group's leader first runs its startup phase once, as the
kubelet's startup probe does before any client: it measures the step, and the liveness runs take
their stall bound from what it measured (`own_step`; the tiny plan's floor lowered to 1 s).

Faults, one after another on the same running group:
- `worker kill -9`: the headless rank's process group killed;
- `worker SIGSTOP`: the headless rank frozen (a hung rank, a partition: nothing exits), to be
  caught within the group's measured bound (measured stall + failures x period + timeout);
- `leader kill -9`: the leader's process group killed;
- `flood 2x`: twice the planned concurrency of streams at once, for several probe periods.

For each: requests in flight when it happens and one arriving just after, each a client that
waits at most the plan's first-byte bound for any byte; the time until a probe or an exit reveals
it; what the clients got; the time until the recreated group serves a completion again; and
whether any process outlived its group. The flood instead must leave the liveness probe passing
and every answer a 200 or a planned 429/503 (the gatekeeper sheds one address's requests beyond
its planned concurrency with 429).

After the flood, the liveness check's own CPU cost, spawned per period as an exec probe would
run it and served by the pods' long-lived check process (`probe_cost`).

Then the CPU row (`own_step`): each rank held to a cgroup cpu quota, the leader measures again,
and one prompt of nearly the whole context must complete with no liveness run failing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.manifests import ServerSpec, engine_timeout_env, probe_command
from components.manifests.gatekeeper import GatekeeperLimits
from components.manifests.probes import engine_logging_config, leader_startup_probe
from infra.plan.sizing import Plan
from infra.plan.stackfile import REPO
from tools.rehearse.checks import Check
from tools.rehearse.front_door import gatekeeper_run
from tools.rehearse.group.ranks import (
    RankFailure,
    RankGroup,
    free_port,
    group_members,
    log_tails,
    loopback_ports,
    rank_launches,
    signal_group,
)
from tools.rehearse.group.workspace import LOGS_DIR, aligned
from tools.rehearse.measure import own_step, probe_cost
from tools.rehearse.measure.fault_clients import ClientResult, Prober, run_client
from tools.rehearse.measure.own_step import CpuQuota, SlowedRun, StepMeasure

#: Grace between SIGTERM and SIGKILL when the rehearsal recreates a group (the pods have 30 s;
#: a shorter grace only shortens the rehearsal).
RECREATE_GRACE_S = 5.0
#: Streams in flight when a fault is injected; each asks for the longest reply the front door
#: allows (`maxReplyTokens`), to be mid-stream when the fault lands.
IN_FLIGHT = 2
#: Tokens each flood request asks for.
FLOOD_TOKENS = 32
#: A fault not revealed within this many seconds counts as undetected.
GIVE_UP_S = 90.0
#: Status codes the front door plans for an overloaded or broken group.
PLANNED_REFUSALS = (429, 503)
PROMPT = "Tell the pipeline a long story."


def fixed_body(
    model: str, prompt: str | list[int], tokens: int, stream: bool = False
) -> dict[str, Any]:
    """A completion of exactly `tokens` tokens (`min_tokens`, `ignore_eos`)."""
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "min_tokens": tokens}
    return {**body, "ignore_eos": True, "stream": stream}


# --------------------------------------------------------------------------------------------
# The LeaderWorkerSet's side: one group, recreated whole


@dataclass
class Group:
    """A running group, the gatekeeper in front of its leader, and its containers' liveness."""

    ranks: RankGroup
    #: vLLM's port (the leader's loopback), the gatekeeper's and its probe listener's.
    port: int
    front_port: int
    log_dir: Path
    probe_port: int = field(default_factory=free_port)
    gatekeeper: ExitStack = field(default_factory=ExitStack)
    probers: list[Prober] = field(default_factory=list)
    #: The leader's startup phase, run once before any client; its state file, which the
    #: liveness runs read their stall bound from.
    measured: StepMeasure | None = None
    state_file: Path | None = None

    @property
    def warnings_log(self) -> Path:
        """Where the leader's vLLM writes its warnings (`engine_logging_config`)."""
        return self.log_dir / "vllm-warnings.log"

    @property
    def completions(self) -> str:
        """Where clients go: the gatekeeper's completions route."""
        return f"http://127.0.0.1:{self.front_port}/v1/completions"


@dataclass
class Rehearsal:
    """What every group of the run is made from."""

    spec: ServerSpec
    tiny_plan: Plan
    vllm: str
    model_dir: Path
    api_key: str
    run_dir: Path
    progress: Callable[[str], None]
    timeout_s: float
    nginx: str
    limits: GatekeeperLimits
    groups: int = 0
    #: Each group's measurement at start, in order.
    measures: list[StepMeasure] = field(default_factory=list)

    @property
    def bound_s(self) -> float:
        """The plan's first-byte bound: the longest any client waits for a byte."""
        return float(self.tiny_plan.liveness.first_byte_s)

    def start_group(self) -> Group:
        """Start a group, wait until it serves, then start the kubelet's probes on it."""
        self.groups += 1
        ports = loopback_ports()
        launches = rank_launches(
            self.spec.engine(),
            self.vllm,
            self.model_dir,
            ports,
            self.api_key,
            engine_env=engine_timeout_env(self.spec.probes),
        )
        log_dir = self.run_dir / f"group{self.groups}"
        log_dir.mkdir(parents=True, exist_ok=True)
        # As the pod's leader does: vLLM's logging config in a file, named by the environment.
        config = log_dir / "vllm-logging.json"
        config.write_text(json.dumps(engine_logging_config(str(log_dir / "vllm-warnings.log"))))
        leader = launches[0]
        launches[0] = dataclasses.replace(
            leader, env={**leader.env, "VLLM_LOGGING_CONFIG_PATH": str(config)}
        )
        ranks = RankGroup(launches, log_dir, grace_s=RECREATE_GRACE_S, progress=self.progress)
        ranks.start()
        group = Group(ranks, ports[0], free_port(), log_dir)
        try:
            ranks.wait_ready(f"http://127.0.0.1:{group.port}/health", self.timeout_s, self.progress)
            # The gatekeeper is recreated with its pod: the same config builder as the pod's.
            group.gatekeeper.enter_context(
                gatekeeper_run.running_gate(
                    self.nginx,
                    self.limits,
                    self.api_key,
                    group.front_port,
                    group.port,
                    log_dir / "gatekeeper",
                    self.progress,
                    probe_port=group.probe_port,
                )
            )
            # The kubelet's startup probe, before any client.
            group.state_file = log_dir / "liveness.json"
            group.measured = self.measure_step(group, group.state_file)
        except BaseException:
            group.gatekeeper.close()
            ranks.stop()
            raise
        self.measures.append(group.measured)
        self.progress(
            f"group {self.groups} serving behind the gatekeeper on {group.front_port}; "
            + (group.measured.announced or group.measured.text)
        )
        return group

    def probe_env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "VLLM_API_KEY": self.api_key,
            "LWS_LEADER_ADDRESS": "127.0.0.1",
        }

    def leader_command(self, group: Group, state_file: Path, **phase: str) -> list[str]:
        """The leader's liveness command on loopback, its state in `state_file`."""
        return probe_command(
            self.spec.probes,
            "leader",
            group.port,
            self.tiny_plan.model,
            host="127.0.0.1",
            state_file=str(state_file),
            **phase,
        )

    def measure_step(
        self, group: Group, state_file: Path, cgroup: Path | None = None
    ) -> StepMeasure:
        """One run of the leader's startup phase into a fresh `state_file`, bounded as the
        pod's startup probe is (`leader_startup_probe`)."""
        state_file.unlink(missing_ok=True)
        announce = state_file.with_suffix(".announce.log")
        announce.unlink(missing_ok=True)
        command = self.leader_command(
            group,
            state_file,
            phase="startup",
            warnings_log=str(group.warnings_log),
            announce=str(announce),
        )
        timeout = leader_startup_probe(self.spec.probes, 0)["timeoutSeconds"]
        prober = Prober("leader startup", command, self.probe_env(), 1, 1, timeout, cgroup)
        ok, text = prober.run_once()
        return StepMeasure.read(ok, text, state_file, announce)

    def start_probes(self, group: Group, cgroups: Sequence[Path | None] = (None, None)) -> None:
        """Both ranks' liveness every period; the leader's reads the group's state file."""
        probes = self.spec.probes
        leader = self.leader_command(group, group.state_file or group.log_dir / "liveness.json")
        # As in the pod: the worker reaches its leader through the gatekeeper's probe listener.
        worker = probe_command(probes, "worker", group.probe_port, self.tiny_plan.model)
        group.probers = [
            Prober(
                name,
                command,
                self.probe_env(),
                probes.period_s,
                probes.failures,
                probes.timeout_s,
                cgroup,
            ).start()
            for (name, command), cgroup in zip(
                (("leader", leader), ("worker", worker)), cgroups, strict=True
            )
        ]

    def stop_probes(self, group: Group) -> list[str]:
        """Stop the group's liveness runs; each failed run, named by its container."""
        for prober in group.probers:
            prober.stop()
        return [f"{p.name}: {text}" for p in group.probers for text in p.failed_runs()]

    def stop_group(self, group: Group) -> list[int]:
        """Stop the probes and every process group, as LWS deletes a group's pods."""
        self.stop_probes(group)
        # A frozen rank must run again to be told to stop; SIGKILL would end it anyway.
        for process in group.ranks.processes:
            signal_group(process.pgid, signal.SIGCONT)
        group.gatekeeper.close()
        group.ranks.stop()
        return group.ranks.leftovers

    def serves(self, group: Group) -> bool:
        result = ClientResult("check")
        body = {"model": self.tiny_plan.model, "prompt": "ping", "max_tokens": 4}
        run_client(result, group.completions, self.api_key, body, self.bound_s, lambda: 0.0)
        return result.status == 200 and result.outcome == "complete"


# --------------------------------------------------------------------------------------------
# Faults


@dataclass
class FaultRow:
    fault: str
    detected_s: float | None
    detected_by: str
    #: When the first container's liveness reached its failure threshold, and whose.
    liveness_s: float | None
    liveness_by: str
    clients: list[ClientResult]
    serves_again_s: float | None
    leftovers: list[int]
    bound_s: float
    #: The measured detection bound of the broken group (`own_step.detection_bound`), and how
    #: it is made up.
    detect_bound_s: int | None = None
    detect_bound_text: str = ""
    #: A fault no process exit reveals in a cluster (a frozen rank, a partition): the liveness
    #: probe itself must catch it within the measured bound, whatever exits here.
    liveness_must_catch: bool = False

    @property
    def within_bound(self) -> bool:
        if self.detect_bound_s is None:
            return True
        caught = [self.liveness_s] if self.liveness_must_catch else [self.detected_s]
        return all(s is not None and s <= self.detect_bound_s for s in caught)

    @property
    def clients_bounded(self) -> bool:
        return all(c.ended_s is not None and c.ended_s <= self.bound_s + 1 for c in self.clients)

    @property
    def ok(self) -> bool:
        return (
            self.detected_s is not None
            and self.detected_s < 60
            and self.within_bound
            and self.clients_bounded
            and self.serves_again_s is not None
            and not self.leftovers
        )


def _client_text(clients: Sequence[ClientResult]) -> str:
    """Clients of one kind with one outcome on one line: "2 streams: error event 500 at 10.0 s"."""
    groups: dict[tuple[str, str], list[ClientResult]] = {}
    for client in clients:
        kind = client.label.rsplit(" ", 1)[0] if client.label[-1].isdigit() else client.label
        groups.setdefault((kind, client.outcome), []).append(client)
    parts = []
    for (kind, outcome), members in groups.items():
        ended = [c.ended_s for c in members if c.ended_s is not None]
        when = f" at {max(ended):.1f} s" if len(ended) == len(members) else ", still waiting"
        parts.append(
            f"{len(members)} {kind}s: {outcome}{when}"
            if len(members) > 1
            else f"{kind}: {outcome}{when}"
        )
    return "; ".join(parts)


INJECT: dict[str, tuple[int, signal.Signals]] = {
    "worker kill -9": (1, signal.SIGKILL),
    "worker SIGSTOP": (1, signal.SIGSTOP),
    "leader kill -9": (0, signal.SIGKILL),
}
#: Faults nothing exits for in a cluster: here the leader's engine ends itself at its step bound
#: (the plan's ceiling), but only the measured liveness follows the node.
NOTHING_EXITS = frozenset({"worker SIGSTOP"})


def break_group(rehearsal: Rehearsal, group: Group, fault: str) -> tuple[FaultRow, Group]:
    """Inject `fault`, watch as the kubelet and LWS would, recreate the group, measure."""
    rank, sig = INJECT[fault]
    model, key = rehearsal.tiny_plan.model, rehearsal.api_key
    probes = rehearsal.spec.probes
    measured = group.measured
    stall = measured.stall_s if measured is not None and measured.measured else probes.stall_s
    rehearsal.start_probes(group)
    stream_body = fixed_body(model, PROMPT, rehearsal.spec.limits.max_reply_tokens, stream=True)
    injected = [0.0]
    since = lambda: injected[0]  # noqa: E731 - read when each client ends
    flying = [ClientResult(f"stream {i + 1}") for i in range(IN_FLIGHT)]
    started = threading.Event()
    url = group.completions
    threads = [
        threading.Thread(
            target=run_client,
            args=(r, url, key, stream_body, rehearsal.bound_s, since, started),
            daemon=True,
        )
        for r in flying
    ]
    injected[0] = time.monotonic()
    for thread in threads:
        thread.start()
    started.wait(rehearsal.bound_s)
    process = group.ranks.processes[rank]
    injected[0] = time.monotonic()
    signal_group(process.pgid, sig)
    rehearsal.progress(f"{fault}: injected into rank {rank} (process group {process.pgid})")
    # A client that arrives a second after the fault.
    late = ClientResult("new request")
    late_body = {"model": model, "prompt": "ping", "max_tokens": 8}
    arrival = threading.Timer(
        1.0, run_client, args=(late, url, key, late_body, rehearsal.bound_s, since)
    )
    arrival.daemon = True
    arrival.start()
    threads.append(arrival)

    exit_s = liveness_s = None
    liveness_by = ""
    while time.monotonic() - injected[0] < GIVE_UP_S:
        if exit_s is None and group.ranks.exited():
            exit_s = time.monotonic() - injected[0]
            first = group.ranks.exited()[0]
            rehearsal.progress(f"{fault}: rank {first.rank} exited after {exit_s:.1f} s")
        failed = [p for p in group.probers if p.failed_at is not None]
        if failed and liveness_s is None:
            liveness_s = min(p.failed_at for p in failed) - injected[0]  # type: ignore[type-var]
            names = liveness_by = ", ".join(p.name for p in failed)
            rehearsal.progress(f"{fault}: {names} liveness failed after {liveness_s:.1f} s")
        # After a rank exit, keep watching until a probe fails too: a node that went NotReady
        # leaves nothing else to notice it by.
        if liveness_s is not None:
            break
        time.sleep(0.2)
    for thread in threads:
        thread.join(timeout=max(0.0, rehearsal.bound_s - (time.monotonic() - injected[0])) + 1)
    detected = [(s, how) for s, how in ((exit_s, "rank exit"), (liveness_s, "liveness")) if s]
    detected_s, detected_by = min(detected) if detected else (None, "not detected")
    # LWS starts over at detection: the group's pods are deleted and created again.
    recreate_began = time.monotonic()
    leftovers = rehearsal.stop_group(group)
    rehearsal.progress(f"{fault}: recreating the group")
    new_group = rehearsal.start_group()
    recreated = time.monotonic() - recreate_began
    serves_again = (
        detected_s + recreated if detected_s is not None and rehearsal.serves(new_group) else None
    )
    row = FaultRow(
        fault,
        detected_s,
        detected_by,
        liveness_s,
        liveness_by,
        [*flying, late],
        serves_again,
        leftovers,
        rehearsal.bound_s,
        own_step.detection_bound(stall, probes),
        own_step.bound_text(stall, probes),
        liveness_must_catch=fault in NOTHING_EXITS,
    )
    return row, new_group


@dataclass
class FloodResult:
    concurrency: int
    seconds: float
    statuses: dict[str, int]
    probe_runs: int
    #: Leader probe runs that found requests in the engine (no probe request sent).
    busy_runs: int
    slowest_probe_s: float
    probe_failures: list[str]
    clients: list[ClientResult]
    bound_s: float

    @property
    def ok(self) -> bool:
        bad = [c for c in self.clients if c.server_error and c.status not in PLANNED_REFUSALS]
        late = [c for c in self.clients if c.ended_s is None]
        return not bad and not late and not self.probe_failures and self.probe_runs > 0


def flood(rehearsal: Rehearsal, group: Group) -> FloodResult:
    """Twice the planned concurrency of requests, back to back, for several probe periods.

    The flood goes to vLLM itself: from this one address the gatekeeper would admit only its
    per-address concurrency and answer the rest 429 (`make rehearse` checks that), while many
    client addresses together can fill the engine to any depth. So the engine, and the probe
    that watches it, sees the full flood here."""
    probes = rehearsal.spec.probes
    concurrency = 2 * math.ceil(rehearsal.tiny_plan.max_concurrency)
    seconds = float(max(30, 2 * probes.failures * probes.period_s))
    rehearsal.start_probes(group)
    results: list[ClientResult] = []
    lock = threading.Lock()
    began = time.monotonic()
    body = fixed_body(rehearsal.tiny_plan.model, PROMPT, FLOOD_TOKENS)

    def worker(index: int) -> None:
        while time.monotonic() - began < seconds:
            result = ClientResult(f"flood {index}")
            sent = time.monotonic()
            run_client(
                result,
                f"http://127.0.0.1:{group.port}/v1/completions",
                rehearsal.api_key,
                body,
                rehearsal.bound_s,
                lambda sent=sent: sent,
            )
            with lock:
                results.append(result)
            if result.status in PLANNED_REFUSALS:
                time.sleep(1.0)  # Retry-After

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + rehearsal.bound_s + 5)
    failures = rehearsal.stop_probes(group)
    statuses: dict[str, int] = {}
    for result in results:
        key = str(result.status) if result.status is not None else result.outcome
        statuses[key] = statuses.get(key, 0) + 1
    leader = group.probers[0]
    group.probers = []
    busy = sum("requests in the engine" in text for _, _, text in leader.runs)
    return FloodResult(
        concurrency,
        seconds,
        statuses,
        len(leader.runs),
        busy,
        leader.slowest_s,
        failures,
        results,
        rehearsal.bound_s,
    )


def cpu_slowed(rehearsal: Rehearsal, group: Group) -> SlowedRun:
    """The leader measures again with each rank held to a cpu quota, then one prompt of nearly
    the whole context goes through the gatekeeper while both ranks' liveness runs every period
    (`own_step`). Every process goes back where it was, and the groups are removed."""
    quota = CpuQuota(own_step.CPU_ROOT, f"gemma-rehearsal-{os.getpid()}")
    run = SlowedRun("cgroup cpu quota")
    why = own_step.cpu_unavailable(quota.root)
    if why is not None:
        run.problem = why
        return run
    probes, spec = rehearsal.spec.probes, rehearsal.spec
    reply = spec.limits.max_reply_tokens
    run.prompt_tokens = rehearsal.tiny_plan.max_model_len - reply
    before = group.measured.stall_s if group.measured and group.measured.measured else 0
    try:
        quota.create(len(group.ranks.processes))
        for process in group.ranks.processes:
            quota.join(process.rank, group_members(process.pgid))
        cgroups = [quota.group(p.rank) for p in group.ranks.processes]
        group.state_file = group.log_dir / "liveness-slowed.json"
        for quota_us in own_step.CPU_QUOTAS_US:
            quota.set(quota_us)
            run.measure = rehearsal.measure_step(group, group.state_file, cgroups[0])
            rehearsal.progress(
                f"cpu: {len(quota.moved)} rank processes held to {quota.share} each "
                f"({quota.quota_us} us per {quota.period_us} us): "
                + (run.measure.announced or run.measure.text)
            )
            if not run.measure.measured or (run.measure.stall_s or 0) > before:
                break
            run.tried.append(own_step.tried_text(quota.share, run.measure))
        run.how = f"cgroup cpu quota, {quota.share} per rank"
        rehearsal.start_probes(group, cgroups)
        prompt = own_step.long_prompt(run.prompt_tokens, probes.vocab_size, seed=7)
        body = fixed_body(rehearsal.tiny_plan.model, prompt, reply, stream=True)
        result = ClientResult("long prompt")
        began = time.monotonic()
        run_client(
            result, group.completions, rehearsal.api_key, body, rehearsal.bound_s, lambda: began
        )
        run.status, run.outcome, run.reply_tokens = result.status, result.outcome, result.tokens
        run.seconds = result.ended_s
        rehearsal.progress(
            f"cpu: {run.prompt_tokens}-token prompt: {result.outcome} ({result.status}), "
            f"{result.tokens} tokens in {_s(result.ended_s)}"
        )
        # The probes keep running through a whole failure threshold after it.
        time.sleep(probes.failures * probes.period_s)
    except OSError as error:
        run.problem = f"cgroup: {error}"
    finally:
        run.probe_failures = rehearsal.stop_probes(group)
        run.probe_runs = sum(len(p.runs) for p in group.probers)
        group.probers = []
        with contextlib.suppress(OSError, ValueError):
            run.throttled = [quota.throttled(r) for r in range(len(group.ranks.processes))]
        problems = quota.release()
        if problems:
            run.problem = "; ".join([run.problem, *problems]).strip("; ")
        rehearsal.progress(
            "cpu: processes moved back, cgroups removed" + (f": {problems[0]}" if problems else "")
        )
    return run


# --------------------------------------------------------------------------------------------
# Report


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def render_table(rows: Sequence[FaultRow], flooded: FloodResult | None) -> str:
    header = (
        "fault",
        "detected",
        "measured bound",
        "liveness failed",
        "clients (from the fault)",
        "serves again",
        "left behind",
    )
    lines = [
        (
            row.fault,
            f"{_s(row.detected_s)} ({row.detected_by})",
            row.detect_bound_text or "-",
            f"{row.liveness_by} at {_s(row.liveness_s)}" if row.liveness_s else "-",
            _client_text(row.clients),
            _s(row.serves_again_s),
            "none" if not row.leftovers else f"process groups {row.leftovers}",
        )
        for row in rows
    ]
    if flooded is not None:
        slowest = max((c.ended_s or 0.0 for c in flooded.clients), default=0.0)
        lines.append(
            (
                f"flood {flooded.concurrency} at once",
                "-",
                "-",
                f"{flooded.probe_runs} runs ({flooded.busy_runs} busy), "
                f"{len(flooded.probe_failures)} failed, slowest {flooded.slowest_probe_s:.1f} s",
                f"{len(flooded.clients)} requests in {flooded.seconds:.0f} s: "
                + ", ".join(f"{k} x{v}" for k, v in sorted(flooded.statuses.items()))
                + f"; slowest {slowest:.1f} s",
                "-",
                "-",
            )
        )
    return "\n".join(aligned([header, *lines], " | "))


def fault_checks(rows: Sequence[FaultRow], flooded: FloodResult | None) -> list[Check]:
    checks = []
    for row in rows:
        by = "liveness" if row.liveness_must_catch else "detected"
        expected = "< 60 s" + (
            f", {by} within {row.detect_bound_text}" if row.detect_bound_s is not None else ""
        )
        observed = _s(row.detected_s) + (
            f" ({row.detected_by}); liveness {_s(row.liveness_s)}"
            if row.liveness_must_catch
            else ""
        )
        checks.append(Check(f"{row.fault}: detected", expected, observed, row.ok))
    if flooded is not None:
        checks.append(
            Check(
                "flood: liveness and answers",
                "probe never fails; no 5xx but 429/503",
                f"{len(flooded.probe_failures)} probe failures; "
                + ", ".join(f"{k} x{v}" for k, v in sorted(flooded.statuses.items())),
                flooded.ok,
                note="; ".join(flooded.probe_failures[:3]),
            )
        )
    return checks


FAULTS = ("worker kill -9", "worker SIGSTOP", "leader kill -9")


def run_faults(
    spec: ServerSpec,
    tiny_plan: Plan,
    python: Path,
    model_dir: Path,
    progress: Callable[[str], None],
    timeout_s: float,
) -> tuple[str, list[Check]]:
    """The whole fault rehearsal; returns the fault table and the verdict's checks."""
    run_dir = LOGS_DIR / time.strftime("faults-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    # The tiny model's steps are milliseconds: the plan's 10 s floor would hide them.
    spec = dataclasses.replace(
        spec, probes=dataclasses.replace(spec.probes, floor_s=own_step.REHEARSAL_FLOOR_S)
    )
    rehearsal = Rehearsal(
        spec,
        tiny_plan,
        str(python.parent / "vllm"),
        model_dir,
        secrets.token_hex(24),
        run_dir,
        progress,
        timeout_s,
        gatekeeper_run.find_nginx(),
        tiny_plan.front_door,
    )
    live = tiny_plan.liveness.probes
    progress(
        f"faults: probes every {live.period_s} s, {live.failures} failures, stall bound "
        f"measured at start within {spec.probes.floor_s}-{live.stall_s} s (engine step bound "
        f"{live.stall_s} s), first-byte bound {tiny_plan.liveness.first_byte_s} s "
        f"(logs in {run_dir.relative_to(REPO)})"
    )
    rows: list[FaultRow] = []
    cost = Check("liveness check CPU", "served < spawned python3", "not reached", None)
    flooded: FloodResult | None = None
    slowed: SlowedRun | None = None
    group = rehearsal.start_group()
    first_log = group.ranks.processes[0].log_path
    try:
        for fault in FAULTS:
            row, group = break_group(rehearsal, group, fault)
            rows.append(row)
            progress(f"{fault}: {'ok' if row.ok else 'FAILED'}")
        flooded = flood(rehearsal, group)
        progress(f"flood: {'ok' if flooded.ok else 'FAILED'}")
        work, model = rehearsal.run_dir / "probe-cost", rehearsal.tiny_plan.model
        cost = probe_cost.row(group.port, model, rehearsal.api_key, work)
        progress(cost.note)
        slowed = cpu_slowed(rehearsal, group)
    except RankFailure as failure:
        progress(f"a group did not come up: {failure}")
        print(log_tails(group.ranks.processes), file=sys.stderr)
        rows.append(FaultRow("group start", None, str(failure), None, "", [], None, [], 0))
    finally:
        leftovers = rehearsal.stop_group(group)
    probes = rehearsal.spec.probes
    first = rehearsal.measures[0] if rehearsal.measures else None
    checks = own_step.start_checks(
        rehearsal.measures,
        probes,
        first_log.read_text(errors="replace"),
        first_log.parent / "vllm-warnings.log",
    )
    checks += [*fault_checks(rows, flooded), cost]
    if slowed is None:
        checks.append(Check("CPU slowed", "runs", "not reached", None))
    else:
        # The long prompt's group was the last one started: compare with its own measurement.
        last = rehearsal.measures[-1] if rehearsal.measures else first
        checks += own_step.slowed_checks(
            last, slowed, probes, rehearsal.spec.limits.max_reply_tokens
        )
    checks.append(
        Check("processes stopped", "no process group left", str(leftovers or "none"), not leftovers)
    )
    tables = [
        render_table(rows, flooded),
        own_step.render_step_table(rehearsal.measures, slowed, probes),
    ]
    return "\n\n".join(tables), checks
