"""Shared slots and open routes against one client, for real (loopback, bounded):

- `grammar_share_check`: while client B holds a structured (json_schema) stream, client A's
  structured request is served, and B's second one is refused 429: the grammar slot is per
  client address, not one for the pod;
- `static_flood_check`: `STATIC_CALLS` GETs of the chat page from one address on one keep-alive
  connection: at most the open routes' burst and rate are served, the rest answered 429.
"""

from __future__ import annotations

import http.client
import json
import math
import time
from collections import Counter

from components.manifests.gatekeeper_conf import OPEN_BURST, OPEN_PER_SECOND
from infra.rehearse.checks import Check
from infra.rehearse.front_door.door_checks import CLIENT, Door, ask, chat

HOLDER = "127.0.0.5"
FLOODER = "127.0.0.6"
STATIC_CALLS = 1000
#: B's stream: long enough to be in flight while A and B ask again.
HOLD_TOKENS = 400
SMALL_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def _structured(door: Door, tokens: int, stream: bool = False) -> dict[str, object]:
    return chat(
        door,
        tokens,
        stream=stream,
        ignore_eos=True,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "share", "schema": SMALL_SCHEMA},
        },
    )


def grammar_share_check(door: Door) -> Check:
    """B holds one structured stream; A's structured request is served, B's second refused."""
    held = http.client.HTTPConnection(door.host, door.port, timeout=60, source_address=(HOLDER, 0))
    held.request(
        "POST",
        "/v1/chat/completions",
        body=json.dumps(_structured(door, HOLD_TOKENS, stream=True)).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {door.api_key}"},
    )
    try:
        response = held.getresponse()
        # The first event: B's request is in flight and holds its grammar slot.
        first = response.read1(65536)
        other = ask(door, "POST", "/v1/chat/completions", _structured(door, 2), source=CLIENT)
        again = ask(door, "POST", "/v1/chat/completions", _structured(door, 2), source=HOLDER)
        still = not response.isclosed()
    finally:
        held.close()
    ok = response.status == 200 and bool(first) and other.status == 200 and again.status == 429
    return Check(
        "grammar slot per client",
        "A's structured request served while B holds one; B's second 429",
        f"B stream {response.status} (in flight: {still}); A {other.status} in "
        f"{other.seconds:.2f} s; B again {again.status}",
        ok,
    )


def static_flood_check(door: Door) -> Check:
    """1,000 GETs of / from one address: the burst and the rate served, the rest 429."""
    connection = http.client.HTTPConnection(
        door.host, door.port, timeout=10, source_address=(FLOODER, 0)
    )
    statuses: Counter[int] = Counter()
    began = time.monotonic()
    try:
        for _ in range(STATIC_CALLS):
            try:
                connection.request("GET", "/")
                response = connection.getresponse()
                response.read()
                statuses[response.status] += 1
                if response.getheader("Connection", "").lower() == "close":
                    connection.close()
            except (OSError, http.client.HTTPException):
                statuses[0] += 1
                connection.close()
    finally:
        connection.close()
    took = time.monotonic() - began
    # The first call, the burst and the rate over the run (a second of clock slack).
    served = 1 + OPEN_BURST + math.ceil(OPEN_PER_SECOND * (took + 1))
    shown = ", ".join(f"{n}x {status or 'error'}" for status, n in sorted(statuses.items()))
    ok = statuses[429] > 0 and statuses[200] <= served and set(statuses) <= {200, 429}
    return Check(
        "chat page flood",
        f"{STATIC_CALLS} GETs of / from one address: at most {OPEN_BURST} + "
        f"{OPEN_PER_SECOND}/s served, the rest 429",
        f"{shown} in {took:.1f} s",
        ok,
    )
