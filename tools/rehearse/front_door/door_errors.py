"""Every error the front door can produce is OpenAI-style JSON, provoked for real: raw requests
that nginx refuses while reading them (bad request line, URI or headers too long, TRACE, an
unknown transfer encoding, HTTP/2.0 on the HTTP/1 port), refusals of the gatekeeper's own (key,
path, body size, the failure rate) and a gatekeeper whose vLLM is gone (503). Part of the front
door rows (`door_checks`).

Not provoked: 408 (nginx closes a timed-out connection without writing, so there is no page to
check), 500 and 502 (answered as 503, checked in the config's unit tests), 504 (the cut check's
gatekeeper answers a stream, which is cut rather than refused).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from tools.rehearse.checks import Check
from tools.rehearse.front_door.door_checks import Door, ask, raw


def is_error(body: bytes, status: int) -> bool:
    try:
        error = json.loads(body)["error"]
        return error["code"] == status and bool(error["message"])
    except (ValueError, KeyError, TypeError):
        return False


def _json_error(reply: bytes) -> tuple[int, bool]:
    """The status line's code and whether the body is an OpenAI-style error."""
    head, _, body = reply.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0, False
    return status, is_error(body, status)


def errors_check(door: Door, dead: Door) -> Check:
    """Every status a client can provoke, sent raw; `dead` is a gatekeeper whose vLLM is gone
    (503) and whose reply timeout is short (504 comes from the cut gatekeeper)."""
    key = door.api_key
    host = f"Host: {door.host}\r\n"
    probes: Sequence[tuple[int, Door, bytes]] = [
        (400, door, b"GARBAGE\r\n\r\n"),
        (
            400,
            door,
            f"POST /v1/chat/completions HTTP/1.1\r\n{host}Authorization: Bearer {key}"
            f"\r\nContent-Length: 5\r\nConnection: close\r\n\r\nnope!".encode(),
        ),
        (401, door, f"GET /v1/models HTTP/1.1\r\n{host}Connection: close\r\n\r\n".encode()),
        (404, door, f"GET /nope HTTP/1.1\r\n{host}Connection: close\r\n\r\n".encode()),
        (405, door, f"TRACE / HTTP/1.1\r\n{host}Connection: close\r\n\r\n".encode()),
        (
            413,
            door,
            f"POST /v1/completions HTTP/1.1\r\n{host}Authorization: Bearer {key}\r\n"
            f"Content-Length: 99999999\r\nConnection: close\r\n\r\n".encode(),
        ),
        (414, door, b"GET /" + b"a" * 70_000 + f" HTTP/1.1\r\n{host}\r\n".encode()),
        (431, door, f"GET /health HTTP/1.1\r\n{host}X-Big: {'b' * 70_000}\r\n\r\n".encode()),
        (
            501,
            door,
            f"POST /v1/completions HTTP/1.1\r\n{host}Transfer-Encoding: gzip\r\n"
            "Connection: close\r\n\r\n".encode(),
        ),
        (505, door, f"GET /health HTTP/2.0\r\n{host}\r\n".encode()),
        (
            503,
            dead,
            f"GET /health HTTP/1.1\r\nHost: {dead.host}\r\nConnection: close\r\n\r\n".encode(),
        ),
    ]
    seen = []
    bad = []
    for expected, target, data in probes:
        status, is_json = _json_error(raw(target, data))
        seen.append(status)
        if status != expected or not is_json:
            bad.append(f"{expected}->{status}{'' if is_json else ' (not JSON)'}")
    # The failure limiter: wrong keys past its burst get 429, JSON too.
    wrong = [ask(door, "GET", "/v1/models", keyed=False, source="127.0.0.5") for _ in range(15)]
    limited = [a for a in wrong if a.status == 429]
    if not limited or not is_error(limited[0].body, 429):
        bad.append("429 on failed keys missing")
    else:
        seen.append(429)
    return Check(
        "every error JSON",
        "400 401 404 405 413 414 429 431 501 503 505 as OpenAI JSON",
        " ".join(str(s) for s in sorted(set(seen))) + (f"; wrong: {', '.join(bad)}" if bad else ""),
        not bad,
    )
