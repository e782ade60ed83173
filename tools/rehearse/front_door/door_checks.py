"""The front door held against one client, for real: the gatekeeper in front of the real vLLM
leader, attacked the ways a penetration test found (issue 21), each row bounded in time and in
count and sent only to loopback.

One client is one loopback address: the attacker sends from `ATTACKER` (127.0.0.3) and the
ordinary client from `CLIENT` (127.0.0.2), both on the `lo` interface Linux gives every 127/8
address, so the per-client limits tell them apart as they would two addresses behind the load
balancer. The rows:

- `connections_check`: 600 idle and trickling connections from one client while a keyed request
  from another is served within 2 s;
- `multiplying_check`: bodies that ask for thousands of sequences are refused, and an ordinary
  request's latency beside them stays within `LATENCY_FACTOR` of its latency alone;
- `cut_check`: a stream still flowing at the reply timeout is cut with a final error event (a
  second gatekeeper, the same config with a reply timeout halfway through the tiny model's
  capped stream, `stream_timing`);
- `amplifier_check`: the 3 KB request that returned 30 MB is refused, and the longest reply
  allowed stays within the planned reply bytes;
- `health_check`: 2,000 /health calls reach vLLM about once a second (counted in vLLM's own
  access log);
- `schema_check`: a 49 KB schema is refused at once, a small one served;
- `forged_headers_check`: forged X-Request-Id, X-Forwarded-For, load-metrics, priority, session
  and trace headers change nothing vLLM writes;
- `door_errors.errors_check`: every status the gatekeeper produces that a client can provoke is
  JSON.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from components.manifests.gatekeeper import GatekeeperLimits
from components.manifests.gatekeeper_conf import OPEN_BURST, OPEN_PER_SECOND
from tools.rehearse.checks import Check

ATTACKER = "127.0.0.3"
CLIENT = "127.0.0.2"
#: Sockets the attacker opens: more than the old `worker_connections 512` that one client filled.
ATTACK_SOCKETS = 600
#: The keyed request beside the attack must be served within this.
KEYED_WITHIN_S = 2.0
#: An ordinary request beside the refused multiplying ones may be at most this much slower.
LATENCY_FACTOR = 2.0
HEALTH_CALLS = 2000
HEALTH_THREADS = 4
#: The schema the penetration test compiled for 8 s.
BIG_SCHEMA_BYTES = 49_000
#: The cut must land this long after the first chunk and before the last, or the tiny model's
#: stream is too short to show it.
CUT_MARGIN_S = 0.1


@dataclass(frozen=True)
class Door:
    """Where the rows send: the gatekeeper's host and port, the key, the model, vLLM's log."""

    host: str
    port: int
    api_key: str
    model: str
    vllm_log: Callable[[], str]
    #: The gatekeeper's probe listener (the kubelet's and the workers' port).
    probe_port: int = 0


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float


def ask(
    door: Door,
    method: str,
    path: str,
    body: object | None = None,
    *,
    source: str = CLIENT,
    keyed: bool = True,
    headers: dict[str, str] | None = None,
    timeout: float = 60,
) -> Answer:
    """One request from `source`; the whole reply read."""
    began = time.monotonic()
    connection = http.client.HTTPConnection(
        door.host, door.port, timeout=timeout, source_address=(source, 0)
    )
    sent = {"Content-Type": "application/json", **(headers or {})}
    if keyed:
        sent["Authorization"] = f"Bearer {door.api_key}"
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        read = response.read()
        return Answer(response.status, dict(response.getheaders()), read, time.monotonic() - began)
    finally:
        connection.close()


def raw(door: Door, data: bytes, source: str = CLIENT, timeout: float = 10) -> bytes:
    """Bytes sent as they are; everything the gatekeeper writes before it closes."""
    with socket.create_connection((door.host, door.port), timeout, (source, 0)) as sock:
        sock.sendall(data)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)


def chat(door: Door, tokens: int, **extra: object) -> dict[str, object]:
    return {
        "model": door.model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": tokens,
        **extra,
    }


def _param(answer: Answer) -> str:
    try:
        return str(json.loads(answer.body)["error"]["param"])
    except (ValueError, KeyError, TypeError):
        return "no JSON error"


# --------------------------------------------------------------------------------------------


def connections_check(door: Door, limits: GatekeeperLimits) -> Check:
    """600 sockets from one client, a third idle, a third trickling a header, a third a body;
    a keyed chat from another client meanwhile."""
    held: list[socket.socket] = []
    closed = 0
    starts = (b"", b"GET /health HTTP/1.1\r\nHo", b"GET /health HTTP/1.1\r\nContent-Length: 99")
    for index in range(ATTACK_SOCKETS):
        try:
            sock = socket.create_connection((door.host, door.port), 5, (ATTACKER, 0))
            if starts[index % 3]:
                sock.sendall(starts[index % 3])
            held.append(sock)
        except OSError:
            closed += 1
    try:
        time.sleep(0.5)
        open_now = sum(1 for sock in held if _still_open(sock))
        for sock in held:  # one more byte each, as a trickler does
            with contextlib.suppress(OSError):
                sock.send(b"s")
        answer = ask(door, "POST", "/v1/chat/completions", chat(door, 1))
    finally:
        for sock in held:
            sock.close()
    ok = (
        answer.status == 200
        and answer.seconds < KEYED_WITHIN_S
        and open_now <= limits.client_connections
    )
    return Check(
        "600 sockets, one client",
        f"at most {limits.client_connections} held; a keyed chat from another client within "
        f"{KEYED_WITHIN_S:g} s",
        f"{open_now} held, {ATTACK_SOCKETS - open_now} closed at once; chat {answer.status} in "
        f"{answer.seconds:.2f} s",
        ok,
    )


def _still_open(sock: socket.socket) -> bool:
    """True while the gatekeeper has not closed the socket (nothing to read, no EOF)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


#: The penetration test's multiplying bodies (issue 21), and the field each must be refused for.
def _multipliers(model: str) -> list[tuple[str, str, dict[str, object]]]:
    return [
        (
            "/v1/completions",
            "prompt",
            {"model": model, "prompt": ["hi"] * 4, "n": 16384, "max_tokens": 40},
        ),
        (
            "/v1/completions",
            "prompt",
            {"model": model, "prompt": ["a b c d"] * 1000, "max_tokens": 40},
        ),
        ("/v1/completions", "n", {"model": model, "prompt": "hi", "n": "16384"}),
        ("/v1/completions", "best_of", {"model": model, "prompt": "hi", "best_of": 64}),
        (
            "/v1/chat/completions",
            "n",
            {"model": model, "messages": [{"role": "user", "content": "hi"}], "n": 4096},
        ),
        (
            "/v1/chat/completions",
            "use_beam_search",
            {
                "model": model,
                "messages": [{"role": "user", "content": "hi"}],
                "use_beam_search": True,
            },
        ),
    ]


def multiplying_check(door: Door) -> Check:
    """Each multiplying body refused with 400 naming its field; an ordinary 8-token chat as
    fast beside a stream of them as alone (median of three each)."""
    alone = statistics.median(
        ask(door, "POST", "/v1/chat/completions", chat(door, 8)).seconds for _ in range(3)
    )
    refused: list[tuple[str, int, str]] = []
    stop = threading.Event()

    def attack() -> None:
        while not stop.is_set():
            for path, field, body in _multipliers(door.model):
                answer = ask(door, "POST", path, body, source=ATTACKER)
                refused.append((field, answer.status, _param(answer)))

    thread = threading.Thread(target=attack)
    thread.start()
    try:
        beside = statistics.median(
            ask(door, "POST", "/v1/chat/completions", chat(door, 8)).seconds for _ in range(3)
        )
    finally:
        stop.set()
        thread.join()
    wrong = [r for r in refused if r[1] != 429 and (r[1] != 400 or r[0] != r[2])]
    statuses = Counter(status for _, status, _ in refused)
    shown = ", ".join(f"{n}x {status}" for status, n in sorted(statuses.items()))
    factor = beside / alone
    return Check(
        "multiplying requests",
        f"400 naming n/best_of/prompt/use_beam_search; an ordinary chat within x{LATENCY_FACTOR:g}",
        f"{len(refused)} sent: {shown}, {len(wrong)} wrong; chat {alone:.2f} s alone, "
        f"{beside:.2f} s beside (x{factor:.2f})",
        bool(refused) and not wrong and statuses[400] > 0 and factor <= LATENCY_FACTOR,
    )


def _stream(door: Door) -> tuple[int, list[tuple[float, bytes]]]:
    """A capped chat stream: its status and each event with its arrival time."""
    connection = http.client.HTTPConnection(door.host, door.port, timeout=30)
    body = chat(door, 1000, stream=True, ignore_eos=True)
    began = time.monotonic()
    connection.request(
        "POST",
        "/v1/chat/completions",
        body=json.dumps(body),
        headers={"Authorization": f"Bearer {door.api_key}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    events = []
    while line := response.readline():
        if line.startswith(b"data: "):
            events.append((time.monotonic() - began, line.strip()))
    connection.close()
    return response.status, events


def stream_timing(door: Door) -> tuple[float, float]:
    """When the first and the last chunk of a capped stream arrive, through `door`."""
    _, events = _stream(door)
    if len(events) < 2:
        return 0.0, 0.0
    return events[0][0], events[-1][0]


def cut_timeout(first: float, last: float) -> float | None:
    """A reply timeout halfway through the stream, or None when it is too short to cut."""
    if last - first < 2 * CUT_MARGIN_S:
        return None
    return round((first + last) / 2, 3)


def cut_check(door: Door, timeout: float | None, timing: tuple[float, float]) -> Check:
    """Through a gatekeeper whose reply timeout falls mid-stream: the stream ends with the
    error event and [DONE], at the timeout, before vLLM's last token."""
    first, last = timing
    if timeout is None:
        return Check(
            "stream cut at the reply timeout",
            "error event and [DONE] mid-stream",
            f"the capped stream took only {last - first:.2f} s after its first chunk",
            False,
        )
    status, events = _stream(door)
    error = next((e for _, e in events if b'"error"' in e), None)
    ended = bool(events) and events[-1][1] == b"data: [DONE]"
    closed = events[-1][0] if events else 0.0
    chunks = sum(1 for _, e in events if b'"choices"' in e)
    ok = status == 200 and error is not None and ended and closed < last
    return Check(
        "stream cut at the reply timeout",
        f"error event and [DONE] at {timeout:.2f} s (uncut: last chunk at {last:.2f} s)",
        f"{status}, {chunks} chunks, {'error event' if error else 'no error event'}, "
        f"{'[DONE]' if ended else 'no [DONE]'} at {closed:.2f} s",
        ok,
    )


def amplifier_check(door: Door, limits: GatekeeperLimits) -> Check:
    """The 3 KB echo/logprobs/n request is refused in a small reply; the longest reply allowed
    (a stream to the reply cap) stays within the planned reply bytes."""
    amplifier = {
        "model": door.model,
        "prompt": "word " * 600,
        "echo": True,
        "logprobs": 20,
        "prompt_logprobs": 20,
        "n": 8,
        "max_tokens": 40,
    }
    refused = ask(door, "POST", "/v1/completions", amplifier)
    longest = ask(
        door, "POST", "/v1/chat/completions", chat(door, 1000, stream=True, ignore_eos=True)
    )
    ok = (
        refused.status == 400
        and len(refused.body) < 1024
        and longest.status == 200
        and len(longest.body) <= limits.max_reply_bytes
    )
    return Check(
        "amplifying request",
        f"refused in < 1 KB; the longest reply within {limits.max_reply_bytes:,} bytes",
        f"{refused.status} ({_param(refused)}) in {len(refused.body)} bytes; longest "
        f"{len(longest.body):,} bytes",
        ok,
    )


def health_check(door: Door) -> Check:
    """2,000 /health calls in `HEALTH_THREADS` keep-alive connections; vLLM's access log says
    how many reached it."""
    before = door.vllm_log().count("GET /health")
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def calls(count: int) -> None:
        connection = http.client.HTTPConnection(
            door.host, door.port, timeout=10, source_address=(ATTACKER, 0)
        )
        for _ in range(count):
            connection.request("GET", "/health")
            response = connection.getresponse()
            response.read()
            with lock:
                statuses[response.status] += 1
        connection.close()

    began = time.monotonic()
    threads = [
        threading.Thread(target=calls, args=(HEALTH_CALLS // HEALTH_THREADS,))
        for _ in range(HEALTH_THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - began
    time.sleep(0.5)  # vLLM writes its access line after the reply
    reached = door.vllm_log().count("GET /health") - before
    allowed = int(took) + 2
    # One address gets the open routes' burst and rate, the rest 429 (gatekeeper_conf
    # OPEN_PER_SECOND, OPEN_BURST); never a 5xx, and vLLM still sees about one call a second.
    # The first call, the burst, and the rate over the flood plus a second of clock slack.
    served = 1 + OPEN_BURST + math.ceil(OPEN_PER_SECOND * (took + 1))
    shown = ", ".join(f"{n}x {status}" for status, n in sorted(statuses.items()))
    return Check(
        "/health flood",
        f"{HEALTH_CALLS} calls from one address: at most {OPEN_BURST} + {OPEN_PER_SECOND}/s "
        "answered 200, the rest 429; vLLM sees ~1/s",
        f"{shown} in {took:.1f} s; {reached} reached vLLM (at most {allowed})",
        set(statuses) <= {200, 429}
        and 0 < statuses[200] <= served
        and statuses[429] == HEALTH_CALLS - statuses[200]
        and reached <= allowed,
    )


def schema_check(door: Door, limits: GatekeeperLimits) -> Check:
    """A 49 KB JSON schema refused before vLLM compiles it; a small one served."""
    properties = {f"field_{i:05d}": {"type": "string", "maxLength": 8} for i in range(1500)}
    schema = {"type": "object", "properties": properties}
    while len(json.dumps(schema)) < BIG_SCHEMA_BYTES:
        properties[f"more_{len(properties)}"] = {"type": "integer"}
    big = ask(
        door,
        "POST",
        "/v1/chat/completions",
        chat(
            door,
            4,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "big", "schema": schema},
            },
        ),
    )
    small_schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    small = ask(
        door,
        "POST",
        "/v1/chat/completions",
        chat(
            door,
            4,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "small", "schema": small_schema},
            },
        ),
    )
    ok = big.status == 400 and big.seconds < 1 and small.status == 200
    return Check(
        "big schema",
        f"{len(json.dumps(schema)) // 1000} KB refused at once (limit "
        f"{limits.max_schema_bytes:,} bytes); a small one served",
        f"{big.status} in {big.seconds:.2f} s; small {small.status} in {small.seconds:.2f} s",
        ok,
    )


FORGED = {
    "X-Request-Id": "forged-request-id-4242",
    "X-Forwarded-For": "203.0.113.99",
    "endpoint-load-metrics-format": "JSON",
    "X-Vllm-Priority": "-100",
    "X-Session-ID": "forged-session-4242",
    "X-data-parallel-rank": "7",
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}


def forged_headers_check(door: Door) -> Check:
    """Forged headers change neither the reply nor vLLM's log."""
    answer = ask(door, "POST", "/v1/chat/completions", chat(door, 2), headers=FORGED)
    leaks = []
    if b"forged-request-id" in answer.body or "forged" in answer.headers.get("X-Request-Id", ""):
        leaks.append("request id")
    if any(name.lower() == "endpoint-load-metrics" for name in answer.headers):
        leaks.append("load metrics")
    if "203.0.113.99" in door.vllm_log():
        leaks.append("X-Forwarded-For in vLLM's log")
    return Check(
        "forged headers",
        "no forged id, no load metrics, no forged address in vLLM's log",
        f"{answer.status}; " + (", ".join(leaks) if leaks else "none of them reached vLLM"),
        answer.status == 200 and not leaks,
    )
