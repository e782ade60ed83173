"""The front door's limits follow the plan unless the stack sets them: each rule on its own."""

from __future__ import annotations

import math

import pytest

from components.manifests.gatekeeper import PROBE_TIMEOUT_S
from infra.plan import catalog, frontdoor
from infra.plan.config import ConfigError
from infra.plan.frontdoor import (
    BODY_BYTES_PER_TOKEN,
    BODY_OVERHEAD_BYTES,
    HEADER_TIMEOUT_SECONDS,
    plan_front_door,
)
from infra.plan.loading import load_config
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from infra.plan.vllm_key import REPLY_TIMEOUT_FLOOR_SECONDS
from tests.plan.profiles import REQUIRED as BASE

CERT = "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d"


def _door(
    max_len: int = 8192,
    concurrency: float = 3.17,
    decode: float = 4.3,
    first_byte: int = 218,
    **keys: object,
):
    cfg = load_config({**BASE, **keys})
    return plan_front_door(cfg, cfg.model, max_len, concurrency, decode, first_byte)


def test_automatic_limits_follow_the_context_and_the_concurrency() -> None:
    door = _door()
    assert door.max_request_bytes == 8192 * BODY_BYTES_PER_TOKEN + BODY_OVERHEAD_BYTES
    assert door.max_request_bytes == 8192 * 32 + 64 * 1024
    assert (door.client_concurrent_requests, door.client_requests_per_minute) == (3, 180)
    assert door.client_burst == 6
    assert door.max_reply_tokens == 1024
    # A non-streamed reply's first byte is its last token: the first-byte bound, then the
    # capped reply's decode with its margin.
    assert door.reply_timeout_seconds == 218 + math.ceil(1024 / 4.3 * 1.25)
    assert _door(first_byte=300).reply_timeout_seconds == door.reply_timeout_seconds + 82
    assert _door(maxReplyTokens=100).reply_timeout_seconds == 218 + math.ceil(100 / 4.3 * 1.25)
    assert door.header_timeout_seconds == HEADER_TIMEOUT_SECONDS == 5
    assert (door.tls, door.listener_port) == (False, 80)


def test_less_than_one_full_length_request_still_gets_one_slot() -> None:
    door = _door(concurrency=0.6)
    assert (door.client_concurrent_requests, door.client_requests_per_minute) == (1, 60)
    assert door.client_burst == 2
    assert _door(concurrency=1.99).client_concurrent_requests == 1


def test_a_short_context_caps_replies_at_a_quarter_and_waits_at_least_the_floor() -> None:
    door = _door(max_len=1000, decode=100.0, first_byte=30)
    assert door.max_reply_tokens == 250
    assert door.reasons[3].startswith("replies stop after 250 tokens (auto;")
    assert door.reply_timeout_seconds == REPLY_TIMEOUT_FLOOR_SECONDS == 120
    assert _door(max_len=1000, decode=100.0, first_byte=116).reply_timeout_seconds == 120
    assert _door(max_len=1000, decode=100.0, first_byte=117).reply_timeout_seconds == 121
    assert _door(max_len=3, decode=100.0).max_reply_tokens == 1


def test_values_the_stack_sets_are_kept() -> None:
    door = _door(
        maxRequestBytes=4096,
        clientConcurrentRequests=7,
        clientRequestsPerMinute=11,
        maxReplyTokens=100,
        tlsCertificateArn=CERT,
        allowedCidrs=["203.0.113.0/24"],
    )
    assert door.max_request_bytes == 4096
    assert (door.client_concurrent_requests, door.client_requests_per_minute) == (7, 11)
    assert door.client_burst == 14
    assert door.max_reply_tokens == 100
    assert (door.tls, door.listener_port) == (True, 443)
    assert door.reasons[1].startswith("request body at most 4,096 bytes (as the stack sets: ")
    assert "and 7 sequences in flight (as the stack sets: the 3.17 " in door.reasons[2]


def test_a_reply_cap_that_leaves_no_prompt_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        _door(max_len=2048, maxReplyTokens=2048)
    assert str(error.value) == (
        "`maxReplyTokens` 2048 leaves no room for a prompt in the 2048-token context; use at most "
        "2047, or auto"
    )
    assert _door(max_len=2048, maxReplyTokens=2047).max_reply_tokens == 2047


def test_reasons_say_what_each_limit_is_and_where_it_comes_from() -> None:
    assert list(_door().reasons) == [
        "listener plain HTTP on 80; only POST /v1/chat/completions and POST /v1/completions "
        "reach vLLM, GET /v1/models is answered by the gatekeeper (the served name only) and "
        "GET /health from a one-second cache (vLLM sees ~1 call/s however many arrive); every "
        "other path is 404, and every request but /health needs the API key (failures are "
        "rate-limited per client too)",
        "request body at most 327,680 bytes (auto: 32 bytes per token of a 8192-token prompt plus "
        "64 KiB, and never over 1,048,576: njs may hold 106x a body while it parses it, within "
        "0.25 of the gatekeeper's memory); larger bodies get 413 before vLLM parses them",
        "per client address 180 requests/min (burst 6) and 3 sequences in flight (auto: the 3.17 "
        "full-length requests the KV cache holds at once), so 3 request(s) of up to 1 "
        "sequence(s); above that 429 with Retry-After",
        "replies stop after 1024 tokens (auto; vLLM's generation-config max_new_tokens, which "
        "caps every request, and so one without max_tokens)",
        "a reply not finished within 516 s is cut: 504 before its first byte, a final error event "
        "in a stream (a first token within 218 s, then 1024 tokens at ~4.3 tokens/s x1.25); "
        "request headers whole within 5 s; streams pass through unbuffered",
        "a chat page at http://<endpoint>/ (`chatPage`): the gatekeeper serves its three files "
        "(/, /app.js, /app.css) itself, under a same-origin-only Content-Security-Policy; the "
        "page loads without the key and sends the key typed into it with each call, replies up "
        "to 1024 tokens",
        "per client address 5 connections (auto: one per request in flight + 2), counted when a "
        "connection opens, before a byte is read; more are closed at once, logged",
        "12,856 public connections in all, closed at once beyond (logged): the gatekeeper's 440 "
        "MiB less 16 MiB for nginx, 33.1 MiB for the one body njs parses at a time (its VM, up "
        "to 106x the body, measured; gone with the check's request, before vLLM) and 56.8 MiB "
        "for the keyed requests in progress (the 3 at vLLM among them), over 27,246 bytes a "
        "connection that has shown no key (nginx 1.30 16,800 for a head held at its 32 lines, "
        "measured on 1.30.4, the kernel 9,150, 3 slots of 432); so 2,571 addresses "
        "at their cap of 5, each connection holding a head, fill it and refuse a keyed client's"
        " new connection (4,062 whose connections send nothing; on nginx 1.22, which counts no "
        "lines, 1,678 sending 31,300-byte heads of `a:` lines, measured); one nginx worker with"
        " 40,119 connections (3 per public connection, 4 per keyed request in progress, one per"
        " request at vLLM, 64 for the probe listener's 32 and 24 for listeners, scrapes and "
        "wake calls) and 40,183 files",
        "keyed requests in progress (body read, checked or at vLLM) at most 323 with a body "
        "under 10,000 bytes and 42 with a larger (or chunked), counted before a byte of the "
        "body, then 503 at once: each holds up to 73,100 or 69,700 + its 327,680-byte buffer "
        "(measured on nginx 1.22.1, njs 0.7.9; modelled the same on the pod's 1.30.5, njs "
        "1.0.1), and its body again while the check server judges it (modelled), 0.125 of the "
        "memory for the two beside the 3 at vLLM; nginx has no total body deadline (only 5 s "
        "between reads), so 65 keyed addresses trickling small bodies at their cap of 5, or 20 "
        "trickling large ones at their 2 beside 3 large bodies at vLLM, refuse a keyed newcomer"
        " with a body of that size for as long as they trickle",
        "bodies of 10,000 bytes or more (or chunked) at most 91 a minute per client address "
        "(2 at once), above that 429: parsing costs njs up to 73 ns a byte (measured), so one "
        "client at its limits takes 37 ms of CPU a second, at most 0.5 of the gatekeeper's 75m "
        "(its CPU request = limit), and its burst 52 ms, which that quota spends in 0.69 s: the "
        "probe listener's /health waits at most that behind it, within the probes' 5 s; idle "
        "upstream connections close after 4 s, before vLLM's own 5 s",
        "at most 3 request(s) at vLLM from all clients together: the full-length requests the KV "
        "cache holds at once, so nothing waits in vLLM for KV-cache room and its first-come "
        "order only orders prefill; beyond that 503 with Retry-After 5 at once; with 1 client(s) "
        "at their 3 in flight a newcomer is refused so; admitted, its first token waits behind "
        "at most 2 other prompt(s), up to 16,384 tokens of prefill: a full-length prompt behind "
        "full-length ones within 3 x the first-byte bound, 654 s (modelled), past the 516 s "
        "reply timeout (cut, 504)",
        "at most 1 sequence(s) per request (auto): `n`, `best_of` and lists of prompts above it "
        "get 400 naming the field, so the limits above count sequences",
        "log-probabilities up to 0 (auto; also vLLM's --max-logprobs) and no `echo`: a reply at "
        "most 540,672 bytes (1 x 1024 tokens x 512 bytes + 16 KiB), cut there",
        "schemas, tools and other grammar input at most 9,852 bytes (auto: a schema this size "
        "compiles within ~1.0 s at the 9,852 bytes/s of the costliest shape tried, many optional "
        "properties, against a 262,144-token vocabulary; the bytes do not bound counted "
        "repetitions: a string's `maxLength` costs ~0.1 s per unit of its count, a pattern's "
        "`{n,m}` ~0.01 s, so `maxLength`, `minLength`, `maxItems`, `minItems`, `maxProperties` "
        "and `minProperties` above 10 and a pattern's count above 100, or all of them together "
        "above one compile, get 400 naming the field) and 1 such request in flight per client "
        "address, held until its reply ends (nginx cannot see the compile end), so one client's "
        "structured replies never refuse another's; vLLM compiles them one at a time, so a "
        "compile may wait for one of each other client's",
        "per client address at most 12,984 KV-cache tokens in flight (`clientTokensInFlight`, "
        "auto: 0.5 of the 25,968 tokens the KV cache holds): a request counts as its body's "
        "bytes (every prompt token takes at least one byte of the body, so the count errs high) "
        "plus the longest reply it may ask for, at most the 8,192-token context; of its 3 "
        "request(s) in flight at most 3 over 1,024, 1 over 2,048, 1 over 4,096 tokens, so at "
        "most 12,288 tokens in all; one client at its limit leaves 13,680 tokens (1.67 "
        "full-length requests) to the others, whose requests wait behind at most 12,288 tokens "
        "of its prefill; above it 429",
    ]
    off = _door(chatPage=False)
    assert "no chat page (`chatPage: false`): / is 404 like any path outside the API" in off.reasons
    assert (off.chat_page, _door().chat_page) == (False, True)
    tls = _door(tlsCertificateArn=CERT, allowedCidrs=["203.0.113.0/24"]).reasons[0]
    assert tls.startswith("listener HTTPS on 443 (ACM certificate; TLS ends at the load balancer)")


def test_connections_follow_the_gatekeeper_s_memory_and_the_body() -> None:
    door = _door()
    # The one body njs parses at a time (106x it at worst) and the keyed requests in progress (an
    # eighth of the memory, half for small bodies and half for large ones beside the 3 at vLLM,
    # each beyond an idle connection its VM, its body twice, the two hops' socket pairs and four
    # slots) come first; the rest at the pod's worst of a connection that shows no key.
    hops, half = 2 * (5_600 + 2 * 432) - 6_800, 440 * 2**20 // 16
    small, large = 73_100 + 10_000 + hops, 69_700 + 2 * 327_680 + hops
    assert (door.keyed_requests, door.keyed_large) == (323, 3 + 39)
    assert (half // small, half // large) == (323, 39)
    keyed = 323 * small + 42 * large
    reserve = 3 + 2 * 32 + 24
    free = 440 * 2**20 - 16 * 2**20 - 327_680 * 106 - keyed - reserve * 432
    assert door.connection_capacity == free // (16_800 + 9_150 + 3 * 432) == 12_856
    # Three per public connection, four per keyed request (the two hops), one per request at
    # vLLM, two per probe connection held back for the probes, and the listeners', scrapes' and
    # wake calls' own.
    assert door.worker_connections == 3 * door.connection_capacity + reserve + 4 * (323 + 42)
    assert door.probe_connections == 32
    assert door.client_connections == 3 + 2
    assert door.all_requests == 3
    # A smaller body holds less at vLLM: more connections fit.
    assert _door(maxRequestBytes=65_536).connection_capacity > door.connection_capacity
    # Auto follows a client's requests in flight, up to what vLLM admits from all clients: a
    # client's requests beyond that are refused at once, so they need no connection held.
    crowded = _door(concurrency=40.0)
    assert (crowded.all_requests, crowded.client_connections) == (40, 40 + 2)
    assert _door(clientConnections=30).client_connections == 30
    # An elastic stack's door fronts every group that may run.
    assert _door(minGroups=0, maxGroups=3).all_requests == 3 * 3


def test_a_larger_body_is_charged_its_buffer_and_the_door_fits_its_memory() -> None:
    # A large body's slot holds a buffer of up to `maxRequestBytes`, and another while judged.
    body, hops = 700_000, 2 * (5_600 + 2 * 432) - 6_800
    large = 69_700 + 2 * body + hops
    door = _door(concurrency=60.0, maxRequestBytes=body)
    assert (door.all_requests, door.keyed_large) == (60, 60 + 440 * 2**20 // 16 // large)
    spent = 16 * 2**20 + body * 106 + (60 + 24 + 64) * 432
    spent += door.keyed_requests * (73_100 + 10_000 + hops) + door.keyed_large * large
    spent += door.connection_capacity * (16_800 + 9_150 + 3 * 432)
    assert 440 * 2**20 - 2**20 < spent <= 440 * 2**20


def test_the_largest_body_is_what_njs_parses_at_worst_in_a_quarter_of_the_memory() -> None:
    most = math.floor(424 * 2**20 * 0.25 / 106)
    assert most == 1_048_576
    # auto: 32 bytes a token of the context, but never more (a 131,072-token context).
    assert _door(max_len=131_072).max_request_bytes == most
    assert _door(maxRequestBytes=most).max_request_bytes == most
    with pytest.raises(ConfigError) as error:
        _door(maxRequestBytes=most + 1)
    assert str(error.value) == (
        "`maxRequestBytes` 1048577 bytes may take njs 106x that to parse, more than 0.25 of the "
        "gatekeeper's memory beside nginx's own; use at most 1048576, or auto"
    )


def test_the_large_body_rate_holds_one_client_to_half_the_gatekeeper_s_cpu() -> None:
    door = _door()
    small = 9_999 * frontdoor.PARSE_NS_PER_BYTE / 1e6
    large = 327_680 * frontdoor.PARSE_NS_PER_BYTE / 1e6
    assert round(large) == 24  # the measured worst body
    per_s = door.client_requests_per_minute / 60
    spent = door.large_bodies_per_minute / 60 * (large - small) + per_s * small
    assert spent <= 0.5 * catalog.GATEKEEPER_MILLICPU < spent + (large - small) / 60
    # Its burst (two large bodies and the rest of the request burst small: nginx admits one
    # more than each `burst`) is spent within a second, well within the probes' timeout.
    burst = 2 * large + door.client_burst * small
    assert burst / catalog.GATEKEEPER_MILLICPU < 1 < PROBE_TIMEOUT_S


def test_the_requests_at_vllm_hold_at_most_half_the_gatekeeper_s_memory() -> None:
    # Each holds its 700 KB body, charged twice (judged) with its fixed part: half of 424 MiB
    # holds 150.
    large = 69_700 + 2 * 700_000 + 2 * (5_600 + 2 * 432) - 6_800
    door = _door(concurrency=200.0, maxRequestBytes=700_000)
    assert door.all_requests == math.floor(212 * 2**20 / large) == 150
    assert (
        "at most 150 request(s) at vLLM from all clients together: what 0.5 of the "
        in (door.reasons[10])
    )
    assert "of the 200 full-length requests the KV cache holds;" in door.reasons[10]
    # A smaller body, more of them.
    assert _door(concurrency=200.0, maxRequestBytes=327_680).all_requests == 200
    assert door.connection_capacity > 1_000


def test_sequences_count_against_the_client_s_limits() -> None:
    door = _door(concurrency=8.5, maxSequencesPerRequest=4)
    assert door.max_sequences == 4
    # 8 sequences in flight per client: 2 requests of 4; the rate in sequences too.
    assert (door.client_concurrent_requests, door.client_requests_per_minute) == (2, 120)
    assert door.client_burst == 4
    assert door.max_reply_bytes == 4 * 1024 * 512 + 16 * 1024
    assert _door().max_sequences == 1


def test_logprobs_and_schemas_follow_their_keys() -> None:
    door = _door()
    assert (door.max_logprobs, door.max_schema_bytes, door.schema_concurrency) == (0, 9852, 1)
    # Each count alone compiles within the byte bound's second at its measured per-unit cost.
    assert door.max_schema_counts == (10, 100)
    assert door.max_reply_bytes == 1024 * 512 + 16 * 1024
    raised = _door(maxLogprobs=5, maxSchemaBytes=20_000)
    assert (raised.max_logprobs, raised.max_schema_bytes) == (5, 20_000)
    # What a set bound buys follows its bytes at the costliest shape's rate.
    assert any(
        "(as the stack sets: a schema this size compiles within ~2.0 s" in r for r in raised.reasons
    )
    # Each token carries its own and five alternatives' log-probabilities.
    assert raised.max_reply_bytes == 1024 * (512 + 160 * 6) + 16 * 1024
    off = _door(maxSchemaBytes=0)
    assert off.max_schema_bytes == 0
    assert "structured outputs off (`maxSchemaBytes` 0)" in off.reasons
    # auto never exceeds the body that carries it.
    assert _door(maxRequestBytes=4096).max_schema_bytes == 4096


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (
            {"maxSequencesPerRequest": 4},
            "`maxSequencesPerRequest` 4 is more than the 3 sequences one client may have in "
            "flight; use at most 3, or raise `clientConcurrentRequests`",
        ),
        (
            {"maxSchemaBytes": 400_000},
            "`maxSchemaBytes` 400000 is more than the 327680-byte request body that must carry "
            "it; use at most 327680, or raise `maxRequestBytes`",
        ),
        (
            {"clientConnections": 7000},
            "`clientConnections` 7000 would let two clients hold every one of the 12856 "
            "connections the gatekeeper's 440 MiB holds; use at most 6428, or auto",
        ),
        (
            {"clientConnections": 3},
            "`clientConnections` 3 leaves no spare beside the 3 request(s) a client may have in "
            "flight; use at least 4, or auto",
        ),
        (
            {"clientTokensInFlight": 5000},
            "`clientTokensInFlight` 5000 cannot hold one 8192-token request beside the other 2 "
            "request(s) a client may have in flight (10,240 tokens by the tiers); use at least "
            "10240, lower `clientConcurrentRequests`, or auto",
        ),
        (
            {"clientTokensInFlight": 20000},
            "`clientTokensInFlight` 20000 leaves less than one 8192-token request of the 25,968 "
            "tokens the KV cache holds for the other clients; use at most 17776, or auto",
        ),
    ],
)
def test_limits_the_stack_sets_out_of_bounds_are_refused(keys: dict, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        _door(**keys)
    assert str(error.value) == message


def test_a_client_s_tokens_in_flight_are_half_the_kv_cache_in_tiers_nginx_counts() -> None:
    # dev: 8,192 tokens x 10.69 requests, 10 in flight per client.
    door = _door(concurrency=10.69)
    kv = int(10.69 * 8192)
    assert door.client_tokens == kv // 2 == 43_786
    assert door.token_tiers == ((1024, 10), (2048, 5), (4096, 3))
    # A request above tier j's threshold holds at most the next one (the context for the
    # last), so the worst case is each tier's limit times its step, within the budget.
    steps = (1024, 1024, 2048, 4096)
    limits = (door.client_concurrent_requests, *(n for _, n in door.token_tiers))
    assert (
        door.client_tokens_bound == sum(n * d for n, d in zip(limits, steps, strict=True)) == 43_008
    )
    assert door.client_tokens_bound <= door.client_tokens
    # One client at its limit leaves the others more than five full-length requests.
    assert (kv - door.client_tokens_bound) / 8192 > 5
    (reason,) = [r for r in door.reasons if "`clientTokensInFlight`" in r]
    assert "43,786 KV-cache tokens in flight" in reason
    assert "10 over 1,024, 5 over 2,048, 3 over 4,096 tokens, so at most 43,008" in reason
    assert "leaves 44,564 tokens (5.44 full-length requests) to the others" in reason


def test_tokens_in_flight_the_stack_sets_are_tiered_within_them() -> None:
    door = _door(clientTokensInFlight=17000)
    assert door.client_tokens == 17000
    assert door.token_tiers == ((1024, 3), (2048, 3), (4096, 1))
    assert door.client_tokens_bound == 16384
    # With the KV cache for about one request, a client still gets one full-length request.
    small = _door(concurrency=1.2)
    assert (small.client_tokens, small.token_tiers) == (8192, ((1024, 1), (2048, 1), (4096, 1)))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_plan_holds_nginx_connections_for_the_probes_beyond_every_public_one(
    stack: str,
) -> None:
    cfg = load_stack(stack)
    limits = plan(cfg, stack).front_door
    assert limits.connection_capacity > 0
    assert limits.probe_connections == frontdoor.PROBE_CONNECTIONS
    public = frontdoor.NGINX_CONNECTIONS_PER_CLIENT * limits.connection_capacity
    assert limits.worker_connections - public >= 2 * limits.probe_connections
    # A client's own cap leaves room for more than one address beside it.
    assert limits.client_connections * 2 <= limits.connection_capacity


def test_the_plan_says_how_many_addresses_fill_dev_s_door_past_a_thousand() -> None:
    limits = plan(load_stack("dev"), "dev").front_door
    line = next(r for r in limits.reasons if r.startswith("keyed requests in progress"))
    # Sized from memory, not from addresses: nginx has no total body deadline, so the plan says
    # how many tricklers fill each pool, and for how long.
    assert (limits.keyed_requests, limits.keyed_large) == (323, 10 + 39)
    assert (
        "nginx has no total body deadline (only 5 s between reads), so 27 keyed addresses "
        "trickling small bodies at their cap of 12, or 20 trickling large ones at their 2 beside "
        "10 large bodies at vLLM, refuse a keyed newcomer with a body of that size for as long "
        "as they trickle"
    ) in line
    assert "(measured on nginx 1.22.1, njs 0.7.9; modelled the same on the pod's" in line
    # The keyless crowd that fills the pool: 1,055 addresses in the pod (nginx 1.30, 32 header
    # lines at most), past the 1,000; 689 on nginx 1.22, which counts no lines.
    pool = next(r for r in limits.reasons if "public connections in all" in r)
    assert limits.connection_capacity // limits.client_connections == 1_055
    assert "so 1,055 addresses at their cap of 12" in pool and "short of" not in pool
    assert "on nginx 1.22, which counts no lines, 689 sending 31,300-byte heads" in pool
    assert "not bounded" not in " ".join(limits.reasons)


@pytest.mark.parametrize(("stack", "door"), [("dev", False), ("prod", True)])
def test_the_doors_rollout_doubles_the_requests_at_vllm_for_its_drain(
    stack: str, door: bool
) -> None:
    limits = plan(load_stack(stack), stack).front_door
    line = next(r for r in limits.reasons if r.startswith("at most "))
    rollout = (
        f"during a rollout of the door (one replica, maxSurge 1) the old door drains its "
        f"requests for up to the {limits.reply_timeout_seconds} s reply timeout while the new one "
        f"admits its own, so up to {2 * limits.all_requests} reach vLLM for that long"
    )
    assert (rollout in line) == door
    assert not door or f"waits behind up to {2 * limits.all_requests - 1} prompts" in line
