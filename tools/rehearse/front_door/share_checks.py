"""Shared slots and open routes against one client, for real (loopback, bounded):

- `grammar_share_check`: while client B holds a structured (json_schema) stream, client A's
  structured request is served, and B's second one is refused 429: the grammar slot is per
  client address, not one for the pod;
- `fair_share_check`: client A at its limit with long prompts (as many in flight as its token
  tiers admit) for `FAIR_SECONDS`, while client B chats: B is never refused and its median
  latency grows by at most what the plan says A can hold, `client_tokens_bound` tokens of A's
  prefill, at the prefill rate measured alone in the same run (plus `FAIR_SLACK_S`);
- `static_flood_check`: `STATIC_CALLS` GETs of the chat page from one address on one keep-alive
  connection: at most the open routes' burst and rate are served, the rest answered 429.
"""

from __future__ import annotations

import http.client
import json
import math
import statistics
import threading
import time
from collections import Counter

from components.manifests.gatekeeper import GatekeeperLimits
from components.manifests.gatekeeper_conf import OPEN_BURST, OPEN_PER_SECOND
from tools.rehearse.checks import Check
from tools.rehearse.front_door.door_checks import CLIENT, Door, ask, chat

HOLDER = "127.0.0.5"
HEAVY = "127.0.0.7"
#: How long client A holds its limit while B's latency is measured.
FAIR_SECONDS = 12.0
#: A's threads: more than its tiers admit for long prompts, so it is at its limit (some 429).
HEAVY_THREADS = 8
#: B's latency may also grow by scheduling noise on a shared 2-core machine.
FAIR_SLACK_S = 0.5
#: A's prompt: the longest of these many words that vLLM takes (each word is one or more tokens
#: of the served tokenizer, which the row does not assume): long, within the context.
LONG_PROMPT_WORDS = (1500, 900, 500, 250)
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


def _long_chat(door: Door, words: int) -> dict[str, object]:
    prompt = " ".join(f"w{i % 97}" for i in range(words))
    return {
        "model": door.model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 1,
    }


def _latency(door: Door, source: str) -> tuple[int, float]:
    answer = ask(door, "POST", "/v1/chat/completions", chat(door, 8), source=source, timeout=60)
    return answer.status, answer.seconds


def fair_share_check(door: Door, limits: GatekeeperLimits, bound_tokens: int) -> Check:
    """B's latency beside A at its limit, against A's planned share of the prefill."""
    alone = statistics.median(_latency(door, CLIENT)[1] for _ in range(5))
    for words in LONG_PROMPT_WORDS:
        long_chat = _long_chat(door, words)
        solo = ask(door, "POST", "/v1/chat/completions", long_chat, source=HEAVY, timeout=120)
        if solo.status != 400:  # 400: longer than the context
            break
    prompt_tokens = (
        int(json.loads(solo.body)["usage"]["prompt_tokens"]) if solo.status == 200 else 0
    )
    rate = prompt_tokens / solo.seconds if solo.seconds > 0 else 0.0
    stop = threading.Event()
    heavy: Counter[int] = Counter()

    def hold() -> None:
        while not stop.is_set():
            answer = ask(door, "POST", "/v1/chat/completions", long_chat, source=HEAVY)
            heavy[answer.status] += 1
            if answer.status == 429:
                stop.wait(0.05)

    threads = [threading.Thread(target=hold) for _ in range(HEAVY_THREADS)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    beside: list[tuple[int, float]] = []
    began = time.monotonic()
    try:
        while time.monotonic() - began < FAIR_SECONDS:
            beside.append(_latency(door, CLIENT))
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    during = statistics.median(seconds for _, seconds in beside)
    allowed = alone + (bound_tokens / rate if rate else math.inf) + FAIR_SLACK_S
    refused = sum(1 for status, _ in beside if status != 200)
    shown = ", ".join(f"{n}x {status}" for status, n in sorted(heavy.items()))
    ok = prompt_tokens > 0 and refused == 0 and during <= allowed and heavy[200] > 0
    return Check(
        "fair share",
        f"A at its limit ({limits.client_concurrent_requests} in flight, at most "
        f"{bound_tokens:,} tokens): B never refused, median within {alone:.2f} s alone + "
        f"{bound_tokens:,} tokens at the measured prefill rate + {FAIR_SLACK_S:g} s = "
        f"{allowed:.2f} s",
        f"B {len(beside) - refused}/{len(beside)} served, median {during:.2f} s; A's "
        f"{prompt_tokens}-token prompts {shown}; prefill {rate:,.0f} tokens/s alone",
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
