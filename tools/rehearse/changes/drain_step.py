"""The drain, rehearsed for real: two tiny groups, each behind its own gatekeeper (the pod's
nginx.conf, as in the leader pod), a stand-in for the NLB in front (`balancer`). While a client
streams a long reply from group A, A is told to stop as Kubernetes stops a pod: the balancer's
health check sees A terminating, and A's three preStop hooks (the gatekeeper's shell command, the
leader's and the worker's engine scripts, exactly as `components.manifests.drain` builds them)
run in parallel; each container gets SIGTERM when its own hook returns. The stream must finish,
new requests must reach group B, and nothing may answer 5xx.

The drain's bounds are the plan's shape on a shorter clock (`REHEARSAL_DRAIN`, and a health
check every `CHECK_EVERY_S` instead of ten seconds), so the whole row takes seconds rather than a
minute.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from components.manifests import drain, gatekeeper, programs
from tools.rehearse.changes.balancer import Balancer, Target
from tools.rehearse.checks import Check, not_reached
from tools.rehearse.front_door.gatekeeper_run import request
from tools.rehearse.group.workspace import poll

#: The balancer's health check on the rehearsal's clock: every quarter second, two failures.
CHECK_EVERY_S = 0.25
CHECK_FAILURES = 2
#: The plan's drain on that clock: the gatekeeper accepts for the balancer's detection window
#: (2 x 0.25 s + one check in flight, 0.75 s, rounded up to whole seconds) and then quits; the
#: engine waits for 2 s of no request. The balancer's check, in the spec's whole seconds, is
#: rounded up the same way, and the NLB's two windows follow the plan's rule (`plan_drain`:
#: the accept window, and it plus a reply); no NLB reads them here.
REHEARSAL_DRAIN = drain.DrainSpec(
    health_check_interval_s=math.ceil(CHECK_EVERY_S),
    health_check_timeout_s=math.ceil(CHECK_EVERY_S),
    health_check_threshold=CHECK_FAILURES,
    accept_s=1,
    reply_s=120,
    settle_s=2,
    deregistration_delay_s=1,
    unhealthy_draining_s=1 + 120,
    grace_s=drain.grace(1, 120, 2),
)
#: No readiness period: in a pod it lets the kubelet take the pod out of the Service before
#: nginx stops listening, and there is no kubelet here (the balancer's check stands for both).
#: So nginx quits 1 s after the stop, inside the tiny plan's 40-token stream (~3 s and more on
#: this machine).
READY_PERIOD_S = 0
#: New requests arrive this often while A drains.
NEW_REQUEST_EVERY_S = 0.4
NOT_REACHED = (
    ("drain: stream from A", "finishes (length, [DONE]) after A's nginx is told to quit"),
    ("drain: new requests", "reach B, no 5xx"),
    ("drain: stop order", "vLLM after its streams, the worker after its leader"),
)


@dataclass
class Stream:
    """The long reply read through the balancer."""

    status: int = 0
    first_at: float | None = None
    done_at: float | None = None
    chunks: int = 0
    finish_reason: str | None = None
    finished: bool = False
    error: str = ""


@dataclass
class GroupA:
    """What stopping group A needs: its ports and its processes' groups."""

    vllm_port: int
    master_port: int
    leader_pgid: int
    worker_pgids: list[int]
    gate_run_dir: Path
    gate_port: int
    gate_pgid: int


@dataclass
class Stopped:
    """When each of A's containers was sent SIGTERM (monotonic), by name."""

    at: dict[str, float] = field(default_factory=dict)
    hook_logs: dict[str, str] = field(default_factory=dict)


def _stream(port: int, api_key: str, model: str, tokens: int, out: Stream) -> None:
    body = {
        "model": model,
        "prompt": "Tell a long story.",
        "max_tokens": tokens,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0,
    }
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        connection.request(
            "POST",
            "/v1/completions",
            body=json.dumps(body),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
        )
        response = connection.getresponse()
        out.status = response.status
        for raw in response:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                out.finished, out.done_at = True, time.monotonic()
                break
            event = json.loads(line[6:])
            if "error" in event:  # the engine's or the gatekeeper's error event: say which
                out.error = f"error event: {event['error'].get('message', event['error'])}"
            out.chunks += 1
            out.first_at = out.first_at or time.monotonic()
            for choice in event.get("choices", []):
                out.finish_reason = choice.get("finish_reason") or out.finish_reason
    except (OSError, http.client.HTTPException, ValueError) as error:
        out.error, out.done_at = repr(error), time.monotonic()
    finally:
        connection.close()


def _short(port: int, api_key: str, model: str) -> int:
    body = json.dumps({"model": model, "prompt": "Hi", "max_tokens": 2, "temperature": 0})
    try:
        return request(
            f"http://127.0.0.1:{port}",
            "POST",
            "/v1/completions",
            body.encode(),
            api_key,
            extra={"Connection": "close"},
        ).status
    except (OSError, http.client.HTTPException):
        return 0


def _hook(
    name: str,
    argv: list[str],
    env: dict[str, str],
    pgids: list[int],
    stopped: Stopped,
    grace_s: float,
) -> None:
    """A container's stop as the kubelet does it: its preStop, then SIGTERM (at the grace at the
    latest)."""
    process = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        output, _ = process.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    stopped.hook_logs[name] = output.strip()
    stopped.at[name] = time.monotonic()
    for pgid in pgids:
        with suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)


def stop_group_a(a: GroupA) -> tuple[list[threading.Thread], Stopped]:
    """Run A's three preStop hooks in parallel, each followed by SIGTERM to its container."""
    spec = REHEARSAL_DRAIN
    stopped = Stopped()
    env = {**os.environ, "LWS_LEADER_ADDRESS": "127.0.0.1"}
    # The same scripts the pods run; in the pod the image's python3, here this one.
    leader = drain.engine_pre_stop(spec, "leader", a.vllm_port, a.master_port, a.gate_port)
    worker = drain.engine_pre_stop(spec, "worker", a.vllm_port, a.master_port, a.gate_port)
    hooks = [
        (
            "gatekeeper",
            gatekeeper.pre_stop(spec, str(a.gate_run_dir), READY_PERIOD_S),
            [a.gate_pgid],
        ),
        ("vllm leader", programs.local(leader, sys.executable), [a.leader_pgid]),
        ("vllm worker", programs.local(worker, sys.executable), a.worker_pgids),
    ]
    threads = [
        threading.Thread(
            target=_hook, args=(name, argv, env, pgids, stopped, spec.grace_s), daemon=True
        )
        for name, argv, pgids in hooks
    ]
    for thread in threads:
        thread.start()
    return threads, stopped


def drain_checks(
    a: GroupA,
    b_gate_port: int,
    api_key: str,
    model: str,
    reply_tokens: int,
    progress: Callable[[str], None],
) -> list[Check]:
    """The drain rows: the stream, the new requests, the stop order (times from A's stop)."""
    targets = [Target("A", a.gate_port), Target("B", b_gate_port)]
    spec = REHEARSAL_DRAIN
    with Balancer(targets, CHECK_EVERY_S, CHECK_FAILURES) as lb:
        stream = Stream()
        reader = threading.Thread(
            target=_stream, args=(lb.port, api_key, model, reply_tokens, stream), daemon=True
        )
        reader.start()
        poll(lambda: stream.first_at is not None or not reader.is_alive(), bool, 60)
        if stream.first_at is None:
            seen = f"no first chunk (status {stream.status}) {stream.error}".strip()
            return [
                Check(NOT_REACHED[0][0], NOT_REACHED[0][1], seen, False),
                *not_reached(NOT_REACHED[1:]),
            ]
        t0 = time.monotonic()
        progress("drain: stream from A under way; telling A to stop as the kubelet does")
        targets[0].terminating = True
        threads, stopped = stop_group_a(a)
        statuses: list[tuple[float, int]] = []
        while any(t.is_alive() for t in threads) or reader.is_alive():
            statuses.append((time.monotonic(), _short(lb.port, api_key, model)))
            time.sleep(NEW_REQUEST_EVERY_S)
            if time.monotonic() - t0 > spec.grace_s + 10:
                break
        reader.join(timeout=5)
        # Connection 0 is the stream; the new requests follow in order.
        served = [name for _, name in lb.connections[1 : 1 + len(statuses)]]
        return _rows(stream, statuses, served, stopped, targets[0], t0)


def _rows(
    stream: Stream,
    statuses: list[tuple[float, int]],
    served: list[str],
    stopped: Stopped,
    target_a: Target,
    t0: float,
) -> list[Check]:
    def at(moment: float | None) -> str:
        return "-" if moment is None else f"{moment - t0:+.1f} s"

    quit_at = stopped.at.get("gatekeeper")
    # Still streaming when the gatekeeper's preStop sent nginx its graceful quit.
    quit_sent = t0 + REHEARSAL_DRAIN.accept_s + READY_PERIOD_S
    in_flight = stream.done_at is not None and stream.done_at > quit_sent
    stream_ok = (
        stream.status == 200
        and stream.finished
        and stream.finish_reason == "length"
        and not stream.error
        and in_flight
    )
    counts = Counter(code for _, code in statuses)
    after_unhealthy = [
        name
        for (moment, _), name in zip(statuses, served, strict=False)
        if target_a.unhealthy_at is not None and moment > target_a.unhealthy_at + 0.5
    ]
    new_ok = (
        bool(statuses)
        and set(counts) == {200}
        and bool(after_unhealthy)
        and set(after_unhealthy) == {"B"}
    )
    leader, worker = stopped.at.get("vllm leader"), stopped.at.get("vllm worker")
    order_ok = (
        leader is not None
        and worker is not None
        and stream.done_at is not None
        and leader >= stream.done_at
        and worker >= leader
    )
    return [
        Check(
            NOT_REACHED[0][0],
            NOT_REACHED[0][1],
            f"{stream.chunks} chunks, finish_reason {stream.finish_reason}, [DONE] at "
            f"{at(stream.done_at)}; A unhealthy at {at(target_a.unhealthy_at)}, its nginx told "
            f"to quit at {at(quit_sent)}, gone at {at(quit_at)}"
            + (f"; {stream.error}" if stream.error else ""),
            stream_ok,
        ),
        Check(
            "drain: new requests",
            "reach B, no 5xx",
            f"{len(statuses)} over {at(statuses[-1][0] if statuses else None)}: "
            f"{dict(sorted(counts.items()))}; served {dict(Counter(served))}, after A turned "
            f"unhealthy all by {sorted(set(after_unhealthy)) or '-'}",
            new_ok,
        ),
        Check(
            "drain: stop order",
            "vLLM after its streams, the worker after its leader",
            f"stream done {at(stream.done_at)}, leader SIGTERM {at(leader)}, worker SIGTERM "
            f"{at(worker)}",
            order_ok,
            note="; ".join(
                f"{name}: {log.splitlines()[-1] if log else '(no output)'}"
                for name, log in stopped.hook_logs.items()
            ),
        ),
    ]
