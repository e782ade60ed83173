"""The fault rehearsal's clients and its kubelet: a client that waits at most the plan's
first-byte bound for any byte, and the pods' own liveness commands run every period
(`tools.rehearse.measure.faults` breaks the group around them)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.manifests import programs
from tools.rehearse.group.endpoint import json_request
from tools.rehearse.measure import own_step

# --------------------------------------------------------------------------------------------
# Clients


@dataclass
class ClientResult:
    """One client request: what it got and when it ended, seconds from the reference instant."""

    label: str
    outcome: str = "waiting"
    status: int | None = None
    ended_s: float | None = None
    first_byte_s: float | None = None
    tokens: int = 0

    @property
    def server_error(self) -> bool:
        return self.status is not None and self.status >= 500


def run_client(
    result: ClientResult,
    url: str,
    api_key: str,
    body: Mapping[str, Any],
    bound_s: float,
    t0: Callable[[], float],
    started: threading.Event | None = None,
) -> None:
    """Send one completion and read it to the end, never waiting more than `bound_s` for a byte.

    The socket timeout applies to every read: the first byte, and each byte after it. Without the
    front door this is the client-side half of the bounded wait.
    """
    try:
        with urllib.request.urlopen(json_request(url, api_key, body), timeout=bound_s) as response:
            result.status = int(response.status)
            result.first_byte_s = time.monotonic() - t0()
            done = False
            for raw in response:
                line = raw.decode(errors="replace").strip()
                if not body.get("stream"):
                    continue
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    chunk = json.loads(line[6:])
                    if "error" in chunk:
                        error = chunk["error"]
                        code = error.get("code", "") if isinstance(error, dict) else ""
                        result.outcome = f"error event {code}".rstrip()
                    elif chunk.get("choices"):
                        result.tokens += 1
                        if started is not None and result.tokens == 3:
                            started.set()
            if result.outcome == "waiting":
                result.outcome = "complete" if done or not body.get("stream") else "cut off"
    except urllib.error.HTTPError as error:
        result.status = int(error.code)
        result.outcome = f"HTTP {error.code}"
    except TimeoutError:
        result.outcome = f"no byte for {bound_s:.0f} s"
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        result.outcome = f"connection: {_short(reason)}"
    finally:
        result.ended_s = time.monotonic() - t0()
        if started is not None:
            started.set()


def _short(value: object) -> str:
    text = value.get("message", value) if isinstance(value, dict) else value
    return str(text).splitlines()[0][:60]


# --------------------------------------------------------------------------------------------
# The kubelet's side: liveness probes


class Prober:
    """Runs one container's liveness command every period, as the kubelet does, in a thread.

    `failed_at` is the instant (monotonic) the failure threshold was reached.
    """

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        env: Mapping[str, str],
        period_s: float,
        failures: int,
        timeout_s: float,
        cgroup: Path | None = None,
    ) -> None:
        # The pod runs the check in its container's process; here the same file runs under this
        # interpreter, once per period, inside `cgroup` if given (as the pod's container's).
        self.name, self.argv = name, programs.local(command, sys.executable)
        if cgroup is not None:
            self.argv = own_step.in_cgroup(self.argv, cgroup / "cgroup.procs")
        self.env, self.period_s, self.failures, self.timeout_s = env, period_s, failures, timeout_s
        self.runs: list[tuple[float, bool, str]] = []
        self.slowest_s = 0.0
        self.failed_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"probe-{name}")

    def run_once(self) -> tuple[bool, str]:
        try:
            done = subprocess.run(
                self.argv,
                env=dict(self.env),
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False, f"timed out after {self.timeout_s:.0f} s"
        return done.returncode == 0, (done.stdout.strip() or done.stderr.strip())[-160:]

    def _loop(self) -> None:
        streak = 0
        while not self._stop.is_set():
            began = time.monotonic()
            ok, text = self.run_once()
            self.slowest_s = max(self.slowest_s, time.monotonic() - began)
            self.runs.append((time.monotonic(), ok, text))
            streak = 0 if ok else streak + 1
            if streak >= self.failures and self.failed_at is None:
                self.failed_at = time.monotonic()
            self._stop.wait(max(0.0, self.period_s - (time.monotonic() - began)))

    def start(self) -> Prober:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout_s + 1)

    def failed_runs(self) -> list[str]:
        return [text for _, ok, text in self.runs if not ok]
