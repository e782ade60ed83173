"""What one liveness check costs the node, the two ways the pods could run it: the CPU time of
`python3 liveness.py check ...` spawned per period (what an exec probe runs: the design until
2026-12), and that of one `GET /live` answered by the long-lived `liveness.py serve` process the
pods now start once per container. The same file, the same arguments, against the same leader.

Not counted: the container runtime's part of an exec probe (the kubelet's CRI call, containerd
and `runc exec`, each period) and the kubelet's own HTTP client; the first is the larger, so the
figures understate the saving. The serving process's memory is printed beside them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from components.manifests import ProbeSpec, probe_command, programs
from components.manifests.probes import check_args
from tools.rehearse.checks import Check
from tools.rehearse.group.ranks import cpu_seconds, free_port

#: Checks measured spawned, and served (each a fraction of a 10 ms clock tick, so more of them):
#: enough ticks for either figure to within a few percent.
CHECKS = 40
SERVED_CHECKS = 400
#: A check that proves an idle pipeline by generating is rare (once a minute): both ways measure
#: the common run, /health and /metrics, after one proof.
IDLE_S = 3600


@dataclass(frozen=True)
class ProbeCost:
    """CPU milliseconds per check, spawned and served, and the serving process's memory."""

    spawned_ms: float
    served_ms: float
    served_rss_mib: float
    checks: int


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _spawned_cpu_s(argv: list[str], env: dict[str, str]) -> float:
    """One check as its own process; the CPU it used (its own rusage, not other children's:
    the rehearsal's probers run beside it)."""
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def measure(
    port: int, model: str, env: dict[str, str], work: Path, checks: int = CHECKS
) -> ProbeCost:
    """Both figures against the leader's vLLM on loopback `port` (`env` carries its key)."""
    probes = ProbeSpec(idle_check_s=IDLE_S)
    env = {**os.environ, **env}
    spawned_state = str(work / "spawned.json")
    command = probe_command(
        probes, "leader", port, model, host="127.0.0.1", state_file=spawned_state
    )
    argv = programs.local(command, sys.executable)
    _spawned_cpu_s(argv, env)  # the one proof
    spawned = sum(_spawned_cpu_s(argv, env) for _ in range(checks)) / checks

    listen = free_port()
    served_args = check_args(
        probes, "leader", port, model, host="127.0.0.1", state_file=str(work / "served.json")
    )
    serve = ["python3", f"{programs.MOUNT}/liveness.py", "serve", f"listen={listen}", *served_args]
    server = subprocess.Popen(programs.local(serve, sys.executable), env=env)
    try:
        url = f"http://127.0.0.1:{listen}/live"
        for _ in range(200):
            try:
                _get(url)  # the one proof
                break
            except OSError:
                time.sleep(0.05)
        start = cpu_seconds(server.pid)
        for _ in range(checks * SERVED_CHECKS // CHECKS):
            _get(url)
        served = (cpu_seconds(server.pid) - start) / (checks * SERVED_CHECKS // CHECKS)
        rss = _rss_mib(server.pid)
    finally:
        server.kill()
        server.wait()
    return ProbeCost(round(spawned * 1000, 1), round(served * 1000, 1), round(rss, 1), checks)


def row(port: int, model: str, api_key: str, work: Path) -> Check:
    """The rehearsal's row: the served check must cost less CPU than the spawned one."""
    work.mkdir(parents=True, exist_ok=True)
    cost = measure(port, model, {"VLLM_API_KEY": api_key}, work)
    return Check(
        "liveness check CPU",
        "served < spawned python3",
        f"{cost.spawned_ms:.1f} ms spawned, {cost.served_ms:.1f} ms served per check",
        cost.served_ms < cost.spawned_ms,
        note=(
            f"liveness check CPU: python3 spawned per check ({cost.checks} runs) "
            f"{cost.spawned_ms:.1f} ms, one GET /live to the check process {cost.served_ms:.1f} ms "
            f"(that process holds {cost.served_rss_mib:.0f} MiB; an exec probe's runtime cost "
            "is not counted)"
        ),
    )
