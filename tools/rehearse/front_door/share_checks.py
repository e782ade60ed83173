"""Shared slots and the prefill against one client and against a crowd, for real (loopback,
bounded): `grammar_share_check` (one grammar slot per client address), `fair_share_check` (B
beside client A at its limit) and `crowd_check` (B beside twelve addresses at theirs), each
latency held to the plan's bound at the prefill rate measured alone in the same run.
"""

from __future__ import annotations

import http.client
import json
import math
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from components.manifests.gatekeeper import GatekeeperLimits
from tools.rehearse.checks import Check
from tools.rehearse.front_door.door_checks import CLIENT, Answer, Door, ask, chat, shown, structured

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
#: Twelve addresses at their limits with A's long prompts (issue 43: the victim's median went from
#: 0.35 s to 22.2 s); the victim chats from `CLIENT` this often, at least `CROWD_LEAST` times.
CROWD = tuple(f"127.0.0.{n}" for n in range(51, 63))
VICTIM_EVERY_S = 0.5
CROWD_LEAST = 3
#: A clean refusal beyond the global in-flight cap: 503 with Retry-After within this.
CLEAN_WITHIN_S = 1.0
#: B's stream: long enough to be in flight while A and B ask again.
HOLD_TOKENS = 400
SMALL_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def grammar_share_check(door: Door) -> Check:
    """B holds one structured stream; A's structured request is served, B's second refused: the
    grammar slot is per client address, not one for the pod."""
    held = http.client.HTTPConnection(door.host, door.port, timeout=60, source_address=(HOLDER, 0))
    held.request(
        "POST",
        "/v1/chat/completions",
        body=json.dumps(
            structured(door, HOLD_TOKENS, SMALL_SCHEMA, stream=True, ignore_eos=True)
        ).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {door.api_key}"},
    )
    try:
        response = held.getresponse()
        # The first event: B's request is in flight and holds its grammar slot.
        first = response.read1(65536)
        # A's request, then B's second, in that order.
        body = structured(door, 2, SMALL_SCHEMA, ignore_eos=True)
        other, again = (
            ask(door, "POST", "/v1/chat/completions", body, source=s) for s in (CLIENT, HOLDER)
        )
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
    return chat(door, 1, messages=[{"role": "user", "content": prompt}])


def _latency(door: Door, source: str) -> tuple[int, float]:
    answer = ask(door, "POST", "/v1/chat/completions", chat(door, 8), source=source, timeout=60)
    return answer.status, answer.seconds


@dataclass(frozen=True)
class _Prefill:
    """A's long prompt, its tokens, their prefill rate alone, and B's median latency alone."""

    body: dict[str, object]
    tokens: int
    rate: float
    alone: float

    def allowed(self, tokens: int) -> float:
        """B's median latency alone, plus `tokens` of prefill ahead of it, plus the slack."""
        return self.alone + (tokens / self.rate if self.rate else math.inf) + FAIR_SLACK_S


def _prefill(door: Door) -> _Prefill:
    alone = statistics.median(_latency(door, CLIENT)[1] for _ in range(5))
    for words in LONG_PROMPT_WORDS:
        long_chat = _long_chat(door, words)
        solo = ask(door, "POST", "/v1/chat/completions", long_chat, source=HEAVY, timeout=120)
        if solo.status != 400:  # 400: longer than the context
            break
    tokens = int(json.loads(solo.body)["usage"]["prompt_tokens"]) if solo.status == 200 else 0
    return _Prefill(long_chat, tokens, tokens / solo.seconds if solo.seconds > 0 else 0.0, alone)


@contextmanager
def _at_limit(door: Door, addresses: tuple[str, ...], body: object) -> Iterator[Counter[int]]:
    """`HEAVY_THREADS` senders of `body` per address, each again as soon as it is answered (a
    refused one after a pause, longer the more addresses, so the refusals do not take the CPU);
    their statuses (0: no answer), until the block ends."""
    stop = threading.Event()
    statuses: Counter[int] = Counter()

    def hold(address: str) -> None:
        while not stop.is_set():
            try:
                status = ask(door, "POST", "/v1/chat/completions", body, source=address).status
            except OSError:
                status = 0
            statuses[status] += 1
            if status != 200:
                stop.wait(0.05 * len(addresses))

    threads = [
        threading.Thread(target=hold, args=(address,))
        for address in addresses
        for _ in range(HEAVY_THREADS)
    ]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    try:
        yield statuses
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)


def fair_share_checks(door: Door, limits: GatekeeperLimits) -> list[Check]:
    """B's latency beside A at its limit, then beside `CROWD`, on the same prefill rate."""
    prefill = _prefill(door)
    return [fair_share_check(door, limits, prefill), crowd_check(door, limits, prefill)]


def fair_share_check(door: Door, limits: GatekeeperLimits, prefill: _Prefill) -> Check:
    """B's latency beside A at its limit (as many long prompts in flight as its token tiers
    admit) for `FAIR_SECONDS`: B is never refused, and its median grows by at most what the plan
    says A can hold, `client_tokens_bound` tokens of prefill (plus `FAIR_SLACK_S`)."""
    beside: list[tuple[int, float]] = []
    with _at_limit(door, (HEAVY,), prefill.body) as heavy:
        began = time.monotonic()
        while time.monotonic() - began < FAIR_SECONDS:
            beside.append(_latency(door, CLIENT))
    during = statistics.median(seconds for _, seconds in beside)
    bound_tokens = limits.client_tokens_bound
    allowed = prefill.allowed(bound_tokens)
    refused = sum(1 for status, _ in beside if status != 200)
    ok = prefill.tokens > 0 and refused == 0 and during <= allowed and heavy[200] > 0
    return Check(
        "fair share",
        f"A at its limit ({limits.client_concurrent_requests} in flight, at most "
        f"{bound_tokens:,} tokens): B never refused, median within {prefill.alone:.2f} s alone + "
        f"{bound_tokens:,} tokens at the measured prefill rate + {FAIR_SLACK_S:g} s = "
        f"{allowed:.2f} s",
        f"B {len(beside) - refused}/{len(beside)} served, median {during:.2f} s; A's "
        f"{prefill.tokens}-token prompts {shown(heavy)}; prefill {prefill.rate:,.0f} tokens/s "
        "alone",
        ok,
    )


def crowd_check(door: Door, limits: GatekeeperLimits, prefill: _Prefill) -> Check:
    """The victim chats every `VICTIM_EVERY_S` beside `CROWD`, each address at its limit with
    long prompts: the plan's bound (`frontdoor._all_requests_reason`) is a 503 with Retry-After
    at once beyond `all_requests` at vLLM, and admitted, at most `all_requests` - 1 full-length
    prompts of prefill ahead."""
    ahead = (limits.all_requests - 1) * limits.max_model_len
    allowed = prefill.allowed(ahead)
    wait, victim = min(2 * allowed, 120), list[Answer | None]()
    with _at_limit(door, CROWD, prefill.body) as crowd:
        began = time.monotonic()
        while time.monotonic() - began < FAIR_SECONDS or len(victim) < CROWD_LEAST:
            try:
                victim.append(
                    ask(door, "POST", "/v1/chat/completions", chat(door, 8), timeout=wait)
                )
            except OSError:
                victim.append(None)
            time.sleep(VICTIM_EVERY_S)
    ok, seen = crowd_verdict(victim, allowed)
    return Check(
        "crowd at its limits",
        f"{len(CROWD)} addresses at their limits: the victim's median within {prefill.alone:.2f} "
        f"s alone + {ahead:,} tokens ({limits.all_requests} - 1 full-length prompts) at the "
        f"measured prefill rate + {FAIR_SLACK_S:g} s = {allowed:.2f} s, or a 503 with "
        f"Retry-After within {CLEAN_WITHIN_S:g} s; never unanswered",
        f"{seen}; the crowd's {prefill.tokens}-token prompts {shown(crowd)}",
        ok and prefill.tokens > 0 and crowd[200] > 0,
    )


def crowd_verdict(victim: list[Answer | None], allowed: float) -> tuple[bool, str]:
    """Served within `allowed` at the median, every refusal a 503 with Retry-After within
    `CLEAN_WITHIN_S`, none unanswered (None); and the figures."""
    served = [a.seconds for a in victim if a is not None and a.status == 200]
    refused = [a for a in victim if a is not None and a.status != 200]
    clean = [a for a in refused if (a.status, "Retry-After" in a.headers) == (503, True)]
    median = statistics.median(served) if served else 0.0
    slowest = max((a.seconds for a in refused), default=0.0)
    unanswered = victim.count(None)
    ok = victim and not unanswered and len(clean) == len(refused) and slowest <= CLEAN_WITHIN_S
    return bool(ok) and median <= allowed, (
        f"victim {len(served)} served (median {median:.2f} s), {len(refused)} refused "
        f"({len(clean)} 503 with Retry-After, slowest {slowest:.2f} s), {unanswered} unanswered"
    )
