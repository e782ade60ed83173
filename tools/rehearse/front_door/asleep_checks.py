"""The door of an elastic stack while the model sleeps, for real: the door's own nginx.conf
(`components.manifests.asleep`) run by a real nginx whose upstream port has nothing behind it, as
the leaders' Service has no endpoints while no group runs; then a relay on that port to a serving
upstream (the rehearsal's vLLM leader, or the stub in the unit tests), as kube-proxy forwards once
a group is ready.

The rows, a few seconds in all, say what each expects: `asleep_rows` (the model request, /health
and the wake flag KEDA's metrics-api trigger reads) and `awake_row` (the relay up).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from components.manifests.asleep import WAKE_FIELD, WAKE_PATH, Asleep
from components.manifests.gatekeeper import GatekeeperLimits
from tools.rehearse.checks import Check
from tools.rehearse.front_door import gatekeeper_run
from tools.rehearse.group.ranks import free_port
from tools.rehearse.group.workspace import poll

#: The rehearsal's flag lasts this long, so the row can see it fall (the plan's is longer than
#: KEDA's polling interval).
SIGNAL_SECONDS = 2
#: How long a row waits for the flag to rise after an answer.
FLAG_WAIT_SECONDS = 1.0


@contextlib.contextmanager
def relay(port: int, target: int) -> Iterator[None]:
    """A TCP relay from 127.0.0.1:`port` to 127.0.0.1:`target`: the Service's endpoint appears."""
    listener = socket.create_server(("127.0.0.1", port))
    listener.settimeout(0.2)
    stop = threading.Event()

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", target))
            except OSError:  # the leader is gone: the client sees a refused upstream
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        listener.close()


@dataclass(frozen=True)
class Sleeper:
    """What the rows need: the door's limits and asleep answers, the key, the model."""

    limits: GatekeeperLimits
    asleep: Asleep
    api_key: str
    model: str


def _error(reply: gatekeeper_run.Reply) -> dict[str, object]:
    try:
        found = json.loads(reply.body)
        return found["error"] if isinstance(found.get("error"), dict) else {}
    except (ValueError, AttributeError):
        return {}


def _wake(door: gatekeeper_run.Gate) -> object:
    try:
        return json.loads(gatekeeper_run.request(door.metrics_url, "GET", WAKE_PATH).body)[
            WAKE_FIELD
        ]
    except (ValueError, KeyError, OSError):
        return "no answer"


def _wake_within(door: gatekeeper_run.Gate, seconds: float) -> object:
    """The flag, polled until it is 1 or `seconds` pass: the subrequest that raises it is
    detached, so it may land a moment after the answer (KEDA polls every few tens of seconds)."""
    return poll(lambda: _wake(door), lambda found: found == 1, seconds)


def asleep_rows(door: gatekeeper_run.Gate, sleeper: Sleeper) -> list[Check]:
    """The rows while nothing listens behind the door."""
    health = gatekeeper_run.request(door.base_url, "GET", "/health")
    models = gatekeeper_run.request(door.base_url, "GET", "/v1/models", None, sleeper.api_key)
    after_health = _wake(door)
    chat = gatekeeper_run.chat_body(sleeper.model, max_tokens=2)
    unkeyed = gatekeeper_run.request(door.base_url, "POST", "/v1/chat/completions", chat)
    after_unkeyed = _wake_within(door, FLAG_WAIT_SECONDS)
    reply = gatekeeper_run.request(
        door.base_url, "POST", "/v1/chat/completions", chat, sleeper.api_key
    )
    after_request = _wake_within(door, FLAG_WAIT_SECONDS)
    error = _error(reply)
    message = str(error.get("message", ""))
    retry = reply.headers.get("Retry-After")
    wake = sleeper.asleep.wake_seconds
    try:
        health_status = json.loads(health.body).get("status")
    except (ValueError, AttributeError):
        health_status = "no JSON body"
    time.sleep(SIGNAL_SECONDS + 1)
    after_flag = _wake(door)
    return [
        Check(
            "asleep: model request",
            f"503, Retry-After {wake}, OpenAI error body with the wake time; no key: 401",
            f"{reply.status}, Retry-After {retry}, {error.get('type', 'no error body')}: "
            f'"{message}"; no key: {unkeyed.status}',
            reply.status == 503
            and retry == str(wake)
            and error.get("type") == "service_unavailable_error"
            and "asleep" in message
            and f"within {wake} s" in message
            and unkeyed.status == 401,
        ),
        Check(
            "asleep: /health",
            '503 "asleep"; the door itself answers (/v1/models 200)',
            f"{health.status} {json.dumps(health_status)}; /v1/models {models.status}",
            health.status == 503 and health_status == "asleep" and models.status == 200,
        ),
        Check(
            "wake signal",
            f"{WAKE_PATH} 0 after /health and an unkeyed request, 1 after the model request, "
            f"0 after {SIGNAL_SECONDS} s",
            f"{after_health}, {after_unkeyed}, {after_request}, {after_flag}",
            (after_health, after_unkeyed, after_request, after_flag) == (0, 0, 1, 0),
        ),
    ]


def awake_row(door: gatekeeper_run.Gate, sleeper: Sleeper) -> Check:
    """The same door once its upstream answers."""
    chat = gatekeeper_run.chat_body(sleeper.model, max_tokens=2)
    reply = gatekeeper_run.request(
        door.base_url, "POST", "/v1/chat/completions", chat, sleeper.api_key
    )
    health = gatekeeper_run.request(door.base_url, "GET", "/health")
    return Check(
        "awake: upstream back",
        "chat 200, /health 200",
        f"chat {reply.status}, /health {health.status}",
        reply.status == 200 and health.status == 200,
    )


def door_sleep_checks(
    nginx: str,
    sleeper: Sleeper,
    target_port: int,
    work_dir: Path,
    progress: Callable[[str], None],
) -> list[Check]:
    """A door whose upstream port is empty (asleep rows), then relayed to `target_port`."""
    upstream = free_port()
    with gatekeeper_run.running_gate(
        nginx,
        sleeper.limits,
        sleeper.api_key,
        free_port(),
        upstream,
        work_dir,
        progress,
        asleep=sleeper.asleep,
    ) as door:
        checks = asleep_rows(door, sleeper)
        with relay(upstream, target_port):
            checks.append(awake_row(door, sleeper))
    return checks


def rehearsal_asleep(wake_seconds: int) -> Asleep:
    """The rehearsal's asleep answers: the plan's wake time, a flag short enough to see fall."""
    return Asleep(wake_seconds=wake_seconds, signal_seconds=SIGNAL_SECONDS)
