"""The vLLM ranks of a rehearsal: their command lines, their environment, and their processes.

Command lines: `rehearsal_argv` is the LeaderWorkerSet's own builder (`engine_args`) with only
the rank wiring swapped for loopback, `rank_env` each rank's environment, `rank_launches` both
for a whole group, each rank started through `seccomp.py`. Processes: `RankGroup`, always stopped
by process group. Signals: `termination_unwinds`.

A group is made from plain `RankLaunch` records, so a rehearsal that kills or stops ranks can
recreate the group from the same launches (in a new log directory), as the LeaderWorkerSet
recreates a group after a failure.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from components.manifests import EngineSpec, engine_args
from infra.plan.config import ConfigError
from tools.rehearse.group.endpoint import http_status
from tools.rehearse.group.vllm_logs import first_fatal_error
from tools.rehearse.group.workspace import RehearsalError
from tools.venvs import RehearsalEnvError, tail

#: Seconds between SIGTERM and SIGKILL of a rank's process group.
STOP_GRACE_S = 20.0
#: Seconds to wait for a killed group's members to disappear.
REAP_WAIT_S = 10.0
#: After one rank exits, seconds to let the others write their own error before quoting.
SETTLE_S = 2.0
POLL_S = 0.5
LOG_TAIL_LINES = 30

#: Every rank starts through this: the NUMA memory-policy calls fail as in the pod (`seccomp.py`).
SECCOMP_WRAPPER = (sys.executable, str(Path(__file__).with_name("seccomp.py")), "--")
#: vLLM logs this on every rank once the gloo group has formed.
_RANK_ASSIGNED = re.compile(r"\brank (\d+) in world size (\d+) is assigned as\b")
#: The flags `rehearsal_argv` replaces, and the memory figures the tiny plan gives.
WIRING_FLAGS = ("--nnodes", "--node-rank", "--master-addr", "--master-port", "--port")
MEMORY_FLAGS = (
    "--kv-cache-memory-bytes",
    "--max-model-len",
    "--max-num-batched-tokens",
    # The reply cap follows the context (`maxReplyTokens: auto`).
    "--override-generation-config",
)


def rehearsal_argv(
    engine: EngineSpec,
    model_dir: Path | str,
    rank: int,
    master_port: int,
    port: int,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """`vllm` arguments of one loopback rank: the LWS's builder with only the rank wiring swapped.

    `engine` is `server_spec(tiny_cfg, tiny_plan).engine()`, so every flag except the wiring comes
    from the same plan-to-command-line path the LeaderWorkerSet uses. `extra_args` are appended
    verbatim (to break a flag on purpose, or to debug).
    """
    local = dataclasses.replace(
        engine,
        model=str(model_dir),
        nnodes=str(engine.pipeline_stages),
        node_rank=str(rank),
        master_addr="127.0.0.1",
        master_port=master_port,
        port=port,
    )
    role: Literal["leader", "worker"] = "leader" if rank == 0 else "worker"
    return [*engine_args(local, role), *extra_args]


def rank_env(rank: int, api_key: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A rank's environment: its own core, loopback, offline, the key on the leader only.

    Ambient `VLLM_*` variables are dropped so the shell a rehearsal runs from cannot change it.
    Like the LWS, only the leader gets `VLLM_API_KEY`: headless ranks serve no HTTP.
    """
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("VLLM_")}
    cores = os.cpu_count() or 1
    env.update(
        {
            "VLLM_CPU_OMP_THREADS_BIND": str(rank % cores),
            "VLLM_HOST_IP": "127.0.0.1",
            "HF_HUB_OFFLINE": "1",
        }
    )
    if rank == 0:
        env["VLLM_API_KEY"] = api_key
    return env


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now, below the kernel's ephemeral range
    (`net.ipv4.ip_local_port_range`): a port the kernel hands out could go to any outgoing
    connection before its user binds it (EADDRINUSE), one below the range only to a listener."""
    ranges = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(ranges.read_text().split()[0]) if ranges.exists() else 32768
    for port in random.sample(range(max(1024, low - 12_000), low), 200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe, suppress(OSError):
            probe.bind(("127.0.0.1", port))
            return port
    raise RuntimeError(f"no free TCP port on 127.0.0.1 below {low} after 200 tries")


def loopback_ports() -> tuple[int, int]:
    """Two different free ports on 127.0.0.1: the leader's HTTP port and the group's master port."""
    port, master_port = free_port(), free_port()
    while master_port == port:
        master_port = free_port()
    return port, master_port


@dataclass(frozen=True)
class RankLaunch:
    """One process to start: its rank, full argv and environment."""

    rank: int
    argv: Sequence[str]
    env: Mapping[str, str]


def rank_launches(
    engine: EngineSpec,
    vllm: str,
    model_dir: Path | str,
    ports: tuple[int, int],
    api_key: str,
    extra_args: Sequence[str] = (),
    engine_env: Mapping[str, str] | None = None,
) -> list[RankLaunch]:
    """One launch per pipeline rank of `engine`: the `vllm` executable, its argv and its env.

    `ports` is (HTTP port, master port), as `loopback_ports` gives them. `engine_env` is what the
    pod templates set for the engine beyond the rank wiring (`manifests.engine_timeout_env`).
    """
    port, master_port = ports
    return [
        RankLaunch(
            rank,
            [
                *SECCOMP_WRAPPER,
                vllm,
                *rehearsal_argv(engine, model_dir, rank, master_port, port, extra_args),
            ],
            {**rank_env(rank, api_key), **(engine_env or {})},
        )
        for rank in range(engine.pipeline_stages)
    ]


@dataclass
class RankProcess:
    """A started rank: its process (leader of its own process group) and its log."""

    launch: RankLaunch
    log_path: Path
    popen: subprocess.Popen[bytes]
    log_handle: Any = field(repr=False)

    @property
    def rank(self) -> int:
        return self.launch.rank

    @property
    def pgid(self) -> int:
        # start_new_session makes the child the leader of a new process group.
        return self.popen.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""


class RankFailure(RuntimeError):
    """The group did not come up: a rank exited, or `/health` stayed silent.

    `summary` says what happened to the processes; `quote` is vLLM's own reason, from its log.
    """

    def __init__(self, summary: str, quote: str) -> None:
        self.summary, self.quote = summary, quote
        super().__init__(f"{summary}; {quote}")


@dataclass(frozen=True)
class Readiness:
    """When the group formed (every rank logged its assignment) and `/health` turned 200."""

    group_formed_s: float | None
    healthy_s: float


def quote_failure(log_text: str) -> str:
    """vLLM's own reason for a failed start: its first fatal error line, else its last line."""
    fatal = first_fatal_error(log_text)
    if fatal is not None:
        if fatal.kind == "argparse":
            return f"vllm serve: error: {fatal.message}"
        return f"{fatal.kind}: {fatal.message}"
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    return lines[-1] if lines else "(the log is empty)"


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command may hold spaces and parentheses: fields start after the last ")".
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (proc(5), fields 14 and 15, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of every live process in process group `pgid`."""
    return sum(cpu_seconds(pid) for pid in group_members(pgid))


def group_gone(pgid: int) -> bool:
    """True once no live process is left in the group (`killpg(pgid, 0)` finds none)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # Zombies answer kill(); they hold no memory and wait only for their reaper.
    return not group_members(pgid)


class RankGroup:
    """The rehearsal's processes: started as separate process groups, always stopped by group,
    because a headless rank does not exit when its leader dies and vLLM's workers ignore SIGTERM.

    Use as a context manager; leaving it (normally, on an exception or on Ctrl-C) stops every
    group: SIGTERM, SIGKILL after `grace_s`, then a check that no member is left.
    """

    def __init__(
        self,
        launches: Sequence[RankLaunch],
        log_dir: Path,
        grace_s: float = STOP_GRACE_S,
        progress: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.launches = tuple(launches)
        self.progress = progress
        self.log_dir = log_dir
        self.grace_s = grace_s
        self.processes: list[RankProcess] = []
        self.started_at = 0.0
        #: Seconds from start until every rank had logged its place in the group.
        self.formed_at: float | None = None
        #: Filled by `stop`: process groups that were still alive afterwards, and how long it took.
        self.leftovers: list[int] = []
        self.stop_seconds = 0.0

    def __enter__(self) -> RankGroup:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.started_at = time.monotonic()
        for launch in self.launches:
            log_path = self.log_dir / f"rank{launch.rank}.log"
            handle = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
            try:
                popen = subprocess.Popen(
                    list(launch.argv),
                    stdin=subprocess.DEVNULL,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    env=dict(launch.env),
                    start_new_session=True,
                )
            except OSError as error:
                handle.close()
                raise RehearsalError(f"rank {launch.rank} could not start: {error}") from error
            self.processes.append(RankProcess(launch, log_path, popen, handle))

    def elapsed(self) -> float:
        return time.monotonic() - self.started_at

    def exited(self) -> list[RankProcess]:
        return [p for p in self.processes if p.popen.poll() is not None]

    def formed(self) -> bool:
        """Every rank has logged its place in the group."""
        return all(
            any(int(m[1]) == p.rank for m in _RANK_ASSIGNED.finditer(p.log_text()))
            for p in self.processes
        )

    def early_exit(self) -> RankFailure:
        """Which rank exited, with what code, quoting vLLM's own error.

        The other ranks get `SETTLE_S` to write theirs: the root cause may be logged by a rank
        that is still shutting down (a leader refusing its KV budget outlives its headless peer).
        """
        time.sleep(SETTLE_S)
        first = self.exited()[0]
        others = [p for p in self.processes if p is not first]
        source = next(
            (p for p in [first, *others] if first_fatal_error(p.log_text()) is not None), first
        )
        return RankFailure(
            f"rank {first.rank} exited with code {first.popen.returncode} after "
            f"{self.elapsed():.0f} s",
            f"rank {source.rank} log: {quote_failure(source.log_text())}",
        )

    def wait_ready(
        self, health_url: str, timeout_s: float, progress: Callable[[str], None]
    ) -> Readiness:
        """Wait until `/health` answers 200; raise RankFailure at once if a rank exits, quoting
        vLLM's own error line."""
        while True:
            if self.exited():
                raise self.early_exit()
            if self.formed_at is None and self.formed():
                self.formed_at = self.elapsed()
                progress(f"group formed: {len(self.processes)} ranks in {self.formed_at:.0f} s")
            if http_status(health_url) == 200:
                return Readiness(self.formed_at, self.elapsed())
            if self.elapsed() > timeout_s:
                raise RankFailure(
                    f"no 200 from /health within {timeout_s:.0f} s while every rank kept "
                    f"running (group {'formed' if self.formed_at else 'not formed'})",
                    f"rank 0 log: {quote_failure(self.processes[0].log_text())}",
                )
            time.sleep(POLL_S)

    def stop(self) -> None:
        """Stop every process group; record any that is still alive afterwards.

        Ctrl-C and SIGTERM are held back meanwhile, so a second interrupt cannot leave a rank
        behind; they are delivered once every group is gone.
        """
        held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            self._stop_groups()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _stop_groups(self) -> None:
        began = time.monotonic()
        for process in self.processes:
            signal_group(process.pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for process in self.processes:
            while not group_gone(process.pgid) and time.monotonic() < deadline:
                process.popen.poll()
                time.sleep(0.2)
        for process in self.processes:
            if not group_gone(process.pgid):
                signal_group(process.pgid, signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                process.popen.wait(timeout=REAP_WAIT_S)
        deadline = time.monotonic() + REAP_WAIT_S
        while time.monotonic() < deadline and not all(group_gone(p.pgid) for p in self.processes):
            for process in self.processes:
                signal_group(process.pgid, signal.SIGKILL)
            time.sleep(0.2)
        self.leftovers = [p.pgid for p in self.processes if not group_gone(p.pgid)]
        for process in self.processes:
            process.log_handle.close()
        self.stop_seconds = time.monotonic() - began
        if self.processes:
            self.progress(
                f"stopped {len(self.processes)} process group(s) in {self.stop_seconds:.1f} s"
                if not self.leftovers
                else f"process groups STILL ALIVE after SIGKILL: {self.leftovers}"
            )


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def log_tails(processes: Sequence[RankProcess], lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of every rank's log, each under a header naming the file."""
    parts = []
    for process in processes:
        shown = tail(process.log_text(), lines) or "(empty)"
        parts.append(f"---- {process.log_path} (last {lines} lines) ----\n{shown}")
    return "\n".join(parts)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def termination_unwinds() -> Iterator[None]:
    """A SIGTERM or SIGHUP unwinds like Ctrl-C while inside, so the group's context manager stops
    every started rank whichever way the run ends."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_code(run: Callable[[], int], *could_not_run: type[Exception]) -> int:
    """A rehearsal command's exit code: `run()`'s own; 2 for bad input (`ConfigError`); 1 for a
    step that could not run (`RehearsalError`, `RehearsalEnvError`, `could_not_run`); 130 when
    interrupted. Each error is one line on stderr; SIGTERM unwinds as Ctrl-C does, so every rank
    started inside is stopped (`termination_unwinds`)."""
    with termination_unwinds():
        try:
            return run()
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        except (RehearsalError, RehearsalEnvError, *could_not_run) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            return 130
