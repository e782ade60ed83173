"""The fault rehearsal's rows on the leader's own step (`faults`): measured at start, and again
with the ranks' CPU held back by a cgroup cpu quota.

Every group the fault rehearsal starts runs its leader's startup phase once (the pod's startup
probe, `manifests.probe_command(..., phase="startup")`), as the kubelet would before any client:
it checks vLLM's warnings log for the linear fallback and measures the step, and the liveness
runs that follow take their stall bound from the state file it wrote. The tiny plan's floor is
lowered to `REHEARSAL_FLOOR_S`: its steps are milliseconds, and the plan's `MIN_STALL_S` (10 s)
would hide any change in them.

The CPU row puts each rank's processes into a cgroup v1 cpu group of its own (as each rank is a
pod with its own CPU limit), held to a quota per `CPU_PERIOD_US` (CFS bandwidth control, Linux
`Documentation/scheduler/sched-bwc.rst`: a group may run `cpu.cfs_quota_us` in every
`cpu.cfs_period_us`), and measures again into a fresh state file, the probe in the leader's group
(the pod's check runs inside its container). The quotas of `CPU_QUOTAS_US` are tried in turn,
each tighter, until the stall bound grows: a node slowed too far is refused by the startup probe
(its step x growth x margin x batches in flight beyond the engine's step timeout), and how far a
quota slows the ranks depends on what else the machine runs. Then one prompt of nearly the whole
context goes through the gatekeeper while both ranks' liveness probes run every period in their
rank's group. Then every process goes back to the group it came from and the groups are removed.

Pure pieces here (the state file read, the bounds, the commands, the checks); the processes are
`faults`'.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from components.manifests import ProbeSpec
from infra.plan import liveness
from tools.rehearse.checks import Check
from tools.rehearse.group.workspace import aligned

#: The rehearsal's least stall bound (`ProbeSpec.floor_s`), in place of the plan's `MIN_STALL_S`.
REHEARSAL_FLOOR_S = 1
#: The cgroup v1 cpu controller, and each rank's share of one core in the CPU row.
CPU_ROOT = Path("/sys/fs/cgroup/cpu")
CPU_PERIOD_US = 100_000
#: The quotas tried, each tighter (50%, 35%, 25%, 20%, 16% and 12.5% of one core): the first that
#: lengthens the stall bound is kept. How far one slows the ranks depends on the linear path: on
#: torch's fallback (an AVX2-only AMD EPYC, 2026-12-06) 25% already took a 0.25 s step to 1.5 s,
#: past the engine's step timeout; on oneDNN (an avx512_bf16 EPYC) 25% gave 0.20 s.
CPU_QUOTAS_US = (50_000, 35_000, 25_000, 20_000, 16_000, 12_500)
#: Name of the lines vLLM itself writes to its stdout under the pod's logging config (its
#: default format, `engine_logging_config`): "(APIServer pid=15674) INFO 11-29 15:10:08 [...]".
VLLM_STDOUT_MARK = "(APIServer pid="


@dataclass(frozen=True)
class StepMeasure:
    """One run of the leader's startup phase: its verdict and what it kept and announced."""

    ok: bool
    #: The probe's own verdict line.
    text: str
    step_s: float | None = None
    stall_s: int | None = None
    runs_s: tuple[float, ...] = ()
    #: The line it wrote to the container's log (`announce`), or "".
    announced: str = ""

    @classmethod
    def read(cls, ok: bool, text: str, state_file: Path, announce_file: Path) -> StepMeasure:
        """The verdict with what the run left in its state file and its announce file."""
        try:
            state = json.loads(state_file.read_text())
        except (OSError, ValueError):
            state = {}
        try:
            announced = announce_file.read_text().strip()
        except OSError:
            announced = ""
        step, stall = state.get("step_s"), state.get("stall_s")
        return cls(
            ok,
            text,
            None if step is None else float(step),
            None if stall is None else int(stall),
            tuple(float(t) for t in state.get("runs_s", ())),
            announced,
        )

    @property
    def measured(self) -> bool:
        return self.ok and self.step_s is not None and self.stall_s is not None


def expected_stall(step_s: float, probes: ProbeSpec) -> int:
    """The stall bound the planner's arithmetic gives a measured step, with the spec's floor."""
    return liveness.measured_stall_seconds(
        step_s, probes.growth, probes.stall_s, probes.margin, probes.floor_s
    )


def detection_bound(stall_s: int, probes: ProbeSpec) -> int:
    """The longest a stall goes unnoticed: stall + failures x period + the last run's timeout."""
    return stall_s + probes.failures * probes.period_s + probes.timeout_s


def bound_text(stall_s: int, probes: ProbeSpec) -> str:
    return (
        f"{detection_bound(stall_s, probes)} s (stall {stall_s} + {probes.failures} x "
        f"{probes.period_s} + {probes.timeout_s})"
    )


def in_cgroup(argv: Sequence[str], procs: Path) -> list[str]:
    """`argv` started inside a cgroup: a shell writes its own pid to `procs`, then execs."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *argv]


def long_prompt(length: int, vocab_size: int, seed: int = 0) -> list[int]:
    """`length` token ids below `vocab_size` and above its first ones (the special tokens'), as
    the startup probe draws them; a different `seed` starts a different sequence, so no prefix
    of it is cached from an earlier request."""
    low = min(1000, vocab_size // 4)
    span = max(1, vocab_size - low)
    return [low + (seed + i * 7919) % span for i in range(length)]


def cgroup_of(proc_cgroup: str, controller: str = "cpu") -> str | None:
    """The path of `controller`'s group in a `/proc/<pid>/cgroup` text (v1 lines
    "hierarchy:controllers:path"; "1:cpu:/" or "3:cpu,cpuacct:/kubepods/..."), or None."""
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            return parts[2]
    return None


def cpu_unavailable(root: Path = CPU_ROOT) -> str | None:
    """Why this machine cannot hold the ranks to a cpu quota, or None if it can."""
    if os.geteuid() != 0:
        return f"not root (id -u is {os.geteuid()}): cgroups need root"
    if not (root / "cpu.cfs_quota_us").is_file():
        return f"no cgroup v1 cpu controller with CFS quotas at {root} (no cpu.cfs_quota_us)"
    probe = root / f"gemma-cpu-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as error:
        return f"the cgroup v1 cpu controller at {root} is not writable: {error}"
    return None


@dataclass
class CpuQuota:
    """One cgroup v1 cpu group per rank under `root`, each held to quota per period."""

    root: Path
    name: str
    quota_us: int = CPU_QUOTAS_US[0]
    period_us: int = CPU_PERIOD_US
    #: Each moved pid and the group path it came from.
    moved: dict[int, str] = field(default_factory=dict)
    groups: list[Path] = field(default_factory=list)

    @property
    def share(self) -> str:
        return f"{100 * self.quota_us / self.period_us:g}% of one core"

    def group(self, rank: int) -> Path:
        return self.root / self.name / f"rank{rank}"

    def create(self, ranks: int) -> None:
        (self.root / self.name).mkdir()
        self.groups.append(self.root / self.name)
        for rank in range(ranks):
            path = self.group(rank)
            path.mkdir()
            self.groups.append(path)
            # The period first: a quota is checked against the period in force.
            (path / "cpu.cfs_period_us").write_text(str(self.period_us))
            (path / "cpu.cfs_quota_us").write_text(str(self.quota_us))

    def set(self, quota_us: int) -> None:
        """Every rank's group to a new quota (the period stays)."""
        self.quota_us = quota_us
        for path in self.groups[1:]:
            (path / "cpu.cfs_quota_us").write_text(str(quota_us))

    def join(self, rank: int, pids: Iterable[int]) -> None:
        """Move processes (each with all its threads: v1 `cgroup.procs`) into a rank's group."""
        for pid in pids:
            try:
                origin = cgroup_of(Path(f"/proc/{pid}/cgroup").read_text()) or "/"
                # One pid per write: the kernel takes one per write(2).
                (self.group(rank) / "cgroup.procs").write_text(str(pid))
            except (OSError, ValueError):
                continue  # gone meanwhile
            self.moved[pid] = origin

    def throttled(self, rank: int) -> tuple[int, float]:
        """Periods the rank's group was throttled in, and the seconds it waited (`cpu.stat`)."""
        stat = dict(
            line.split(" ", 1) for line in (self.group(rank) / "cpu.stat").read_text().splitlines()
        )
        return int(stat.get("nr_throttled", 0)), int(stat.get("throttled_time", 0)) / 1e9

    def release(self, wait_s: float = 10.0) -> list[str]:
        """Every moved process back where it was, then the groups removed; what failed."""
        problems = []
        for pid, origin in self.moved.items():
            target = self.root / origin.lstrip("/") / "cgroup.procs"
            try:
                target.write_text(str(pid))
            except ProcessLookupError:
                continue
            except OSError as error:
                if Path(f"/proc/{pid}").exists():
                    problems.append(f"pid {pid} not moved back to {origin}: {error}")
        for path in reversed(self.groups):
            deadline = time.monotonic() + wait_s
            while path.exists():
                try:
                    path.rmdir()
                except OSError as error:
                    if time.monotonic() > deadline:
                        problems.append(f"{path} not removed: {error}")
                        break
                    time.sleep(0.2)
        return problems


# --------------------------------------------------------------------------------------------
# Rows and checks


@dataclass
class SlowedRun:
    """The CPU row: the measurement under the quota and the long prompt that followed."""

    how: str
    measure: StepMeasure | None = None
    prompt_tokens: int = 0
    status: int | None = None
    outcome: str = "not sent"
    reply_tokens: int = 0
    seconds: float | None = None
    probe_runs: int = 0
    probe_failures: list[str] = field(default_factory=list)
    throttled: list[tuple[int, float]] = field(default_factory=list)
    #: Each quota tried before the one kept: its share and what was measured under it.
    tried: list[str] = field(default_factory=list)
    #: Why the row could not run (no writable cgroup), or what went wrong around it.
    problem: str = ""


def _measure_text(measure: StepMeasure | None) -> tuple[str, str, str]:
    if measure is None:
        return "-", "-", "-"
    if not measure.measured:
        return "not measured", "-", measure.text
    runs = ", ".join(f"{t:.3f}" for t in measure.runs_s)
    return f"{measure.step_s:.3f} s", f"{runs} s", f"{measure.stall_s} s"


def tried_text(share: str, measure: StepMeasure) -> str:
    """One quota tried: "25% of one core: 0.30 s, stall 1 s"."""
    if not measure.measured:
        return f"{share}: {measure.text}"
    return f"{share}: {measure.step_s:.2f} s, stall {measure.stall_s} s"


def render_step_table(
    start: Sequence[StepMeasure], slowed: SlowedRun | None, probes: ProbeSpec
) -> str:
    """The own-step rows: each group's measurement at start, and the CPU-slowed run."""
    header = ("own step", "measured step", "runs (first a warm-up)", "stall bound", "notes")
    limits = f"floor {probes.floor_s} s (rehearsal), ceiling {probes.stall_s} s (plan)"
    lines = []
    for number, measure in enumerate(start, start=1):
        step, runs, stall = _measure_text(measure)
        lines.append((f"step measured at start, group {number}", step, runs, stall, limits))
    if slowed is not None:
        step, runs, stall = _measure_text(slowed.measure)
        if slowed.problem and slowed.measure is None:
            note = slowed.problem
        else:
            waited = ", ".join(
                f"rank {r}: {n} periods, {s:.1f} s" for r, (n, s) in enumerate(slowed.throttled)
            )
            note = (
                f"{slowed.prompt_tokens}-token prompt: {slowed.outcome}"
                + (f" ({slowed.status})" if slowed.status else "")
                + (
                    f", {slowed.reply_tokens} tokens in {slowed.seconds:.1f} s"
                    if slowed.seconds
                    else ""
                )
                + f"; liveness {slowed.probe_runs} runs, {len(slowed.probe_failures)} failed"
                + (f"; throttled {waited}" if waited else "")
                + (f"; tried first {', '.join(slowed.tried)}" if slowed.tried else "")
                + (f"; {slowed.problem}" if slowed.problem else "")
            )
        lines.append((f"CPU slowed ({slowed.how})", step, runs, stall, note))
    return "\n".join(aligned([header, *lines], " | "))


#: What vLLM 0.31 logs (debug, `model_executor/layers/utils.py`) once a process chose its bf16
#: linear: oneDNN, sgl-kernel, zentorch or torch's fallback.
DISPATCH = "CPU unquantized GEMM dispatch: "


def start_checks(
    start: Sequence[StepMeasure], probes: ProbeSpec, leader_log: str, warnings_log: Path
) -> list[Check]:
    """Every group measured its step at start, by the planner's arithmetic; vLLM still logs to
    its stdout under the pod's logging config, and its warnings file exists."""
    bad = [m for m in start if not m.measured]
    off = [m for m in start if m.measured and m.stall_s != expected_stall(m.step_s or 0.0, probes)]
    quiet = [m for m in start if m.measured and "measured step" not in m.announced]
    first = start[0] if start else None
    observed = (
        "no group started"
        if first is None
        else f"{len(start) - len(bad)} of {len(start)} groups; group 1: step "
        f"{first.step_s} s, stall bound {first.stall_s} s"
    )
    checks = [
        Check(
            "step measured at start",
            f"every group; stall = step x {probes.growth} x {probes.margin} within "
            f"{probes.floor_s}-{probes.stall_s} s; one line announced",
            observed,
            bool(start) and not bad and not off and not quiet,
            note="; ".join(m.text for m in [*bad, *off, *quiet][:2]),
        )
    ]
    stdout_lines = sum(VLLM_STDOUT_MARK in line for line in leader_log.splitlines())
    text = warnings_log.read_text(errors="replace") if warnings_log.is_file() else ""
    # The linear path as vLLM chose it: its dispatch line, which the startup probe reads.
    dispatch = sorted({line.split("] ", 1)[-1] for line in text.splitlines() if DISPATCH in line})
    checks.append(
        Check(
            "vLLM logging config",
            "vLLM logs to stdout; the warnings file holds vLLM's linear dispatch line",
            f"{stdout_lines} vLLM lines on stdout; "
            + (
                f"{warnings_log.name} {len(text.splitlines())} lines: "
                + ("; ".join(dispatch) if dispatch else "no dispatch line")
                if warnings_log.is_file()
                else f"no {warnings_log.name}"
            ),
            stdout_lines > 0 and bool(dispatch),
        )
    )
    return checks


def slowed_checks(
    start: StepMeasure | None, slowed: SlowedRun, probes: ProbeSpec, reply_tokens: int
) -> list[Check]:
    """Under the quota the step and the stall bound grow, and the long prompt completes with
    every liveness run passing."""
    measure = slowed.measure
    if measure is None:
        return [Check(f"CPU slowed ({slowed.how})", "runs", slowed.problem or "did not run", False)]
    grew = (
        start is not None
        and start.measured
        and measure.measured
        and (measure.step_s or 0) > (start.step_s or 0)
        and (measure.stall_s or 0) > (start.stall_s or 0)
    )
    before = "-" if start is None else f"{start.step_s} s / {start.stall_s} s"
    return [
        Check(
            f"CPU slowed ({slowed.how}): step grows",
            f"step and stall bound above {before}",
            f"{measure.step_s} s / {measure.stall_s} s" if measure.measured else measure.text,
            grew,
        ),
        Check(
            "CPU slowed: long prompt",
            f"{slowed.prompt_tokens} + {reply_tokens} tokens, 200 complete; no liveness run fails",
            f"{slowed.outcome} ({slowed.status}), {slowed.reply_tokens} tokens; "
            f"{len(slowed.probe_failures)} of {slowed.probe_runs} liveness runs failed",
            slowed.status == 200
            and slowed.outcome == "complete"
            and slowed.reply_tokens == reply_tokens
            and slowed.probe_runs > 0
            and not slowed.probe_failures
            and not slowed.problem,
            note="; ".join([*slowed.probe_failures[:3], slowed.problem]).strip("; "),
        ),
    ]
