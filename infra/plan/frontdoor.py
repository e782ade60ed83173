"""The front door's limits: what the gatekeeper in each leader pod lets through to vLLM.

Pure: the planner (`infra.plan.sizing`) calls `plan_front_door` with the figures it derived, so
every limit follows the plan (the context, the concurrency the KV cache holds, the decode rate)
unless the stack sets it. The gatekeeper's own CPU and memory are a co-tenant of the model node
(`catalog.COTENANTS`), counted before the model pod is sized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.manifests.gatekeeper import PROBE_TIMEOUT_S
from components.manifests.gatekeeper_answers import BUSY_RETRY_SECONDS
from components.manifests.gatekeeper_conf import (
    KEEPALIVE_IDLE_S,
    KEEPALIVE_INTERVAL_S,
    LARGE_BODY_BURST,
    LARGE_BODY_BYTES,
    MAX_HEADERS,
    UPSTREAM_KEEPALIVE_SECONDS,
    VLLM_KEEPALIVE_SECONDS,
    GatekeeperLimits,
)
from components.manifests.spec import EndpointLimits
from infra.plan import catalog
from infra.plan.config import ConfigError, StackConfig
from infra.plan.doorcost import (
    BODY_BYTES_PER_TOKEN,
    BODY_OVERHEAD_BYTES,
    GATEKEEPER_BASE_MIB,
    HELD_SHARE,
    KERNEL_CONNECTION_BYTES,
    KEYED_LARGE_FIXED_BYTES,
    KEYED_SMALL_BYTES,
    KEYLESS_CONNECTION_BYTES,
    KEYLESS_IDLE_BYTES,
    KEYLESS_WORST_122_BYTES,
    PARSE_NS_PER_BYTE,
    PARSE_PEAK_PER_BODY_BYTE,
    PARSE_SHARE,
    SLOT_BYTES,
    all_requests,
    hop_bytes,
    large_request_bytes,
    request_body,
)
from infra.plan.vllm_key import REPLY_TIMEOUT_MARGIN, plan_endpoint

#: Requests per minute per client for each request the KV cache holds at once: one a second
#: per slot, more than a CPU replica serves, so only a runaway client meets the limit.
REQUESTS_PER_MINUTE_PER_SLOT = 60
#: The burst a client may send at once beyond the steady rate, per concurrent slot.
BURST_PER_SLOT = 2
#: A client must send its request headers within this (slow-header attacks hold a connection,
#: and a crowd of addresses reconnecting at their caps holds each for this long).
HEADER_TIMEOUT_SECONDS = 5
#: `clientConnections: auto`: a connection per request a client may have in flight and this
#: many spare (a keep-alive waiting for reuse, a page's own GET). Probes no longer count: they
#: have their own listener (`components/manifests/gatekeeper.conf.tmpl`, `probe_listen`).
CONNECTIONS_SPARE = 2
#: The gatekeeper's memory for keyed requests being read beside those at vLLM, half for small
#: bodies, half for large: nginx has no total body deadline (`client_body_timeout` is re-armed on
#: every read, nginx 1.22.1 src/http/ngx_http_request_body.c), so tricklers hold a pool as long as
#: they trickle (an eighth: the rehearsal's twelve keyed addresses at their 17 connections and a
#: victim fit the small pool). Keyless addresses at their caps the public pool is aimed to outlast.
KEYED_SHARE, AIMED_ADDRESSES = 0.125, 1_000
#: nginx connections per client connection: the client's socket and the Unix socket pair between
#: the stream and HTTP sides (two); a request at vLLM also holds a connection there, at most
#: `all_requests` of them.
NGINX_CONNECTIONS_PER_CLIENT = 3
#: One client at its limits may take this share of the gatekeeper's CPU in body parsing, so two
#: clients at theirs still leave the probes' answers unqueued.
CLIENT_CPU_SHARE = 0.5
#: Connections the gatekeeper's probe listener holds at once, all callers together: the kubelet's
#: probes of the pod's containers (one call each per period, each connection closed: kubernetes
#: v1.35 pkg/probe/http/http.go sets `DisableKeepAlives`) and the group's workers' liveness
#: calls, a handful at a time; far fewer than this.
PROBE_CONNECTIONS = 32
#: nginx connections held back for the probe listener: two per probe connection (the probe's
#: and vLLM's, for /health).
PROBE_RESERVE = 2 * PROBE_CONNECTIONS
#: nginx connections no client holds: a slot per listening socket (five at most, the door's wake
#: socket included; nginx 1.30 src/event/ngx_event.c `ngx_event_process_init`), the master's
#: channel (src/os/unix/ngx_channel.c), metrics scrapes (two each) and KEDA's wake calls (three
#: each), a few at a time.
FIXED_CONNECTIONS = 24
#: Grammar compile speed of the costliest schema shape tried that the gatekeeper admits, against a
#: vocabulary of Gemma 4's 262,144 tokens (the project's own, byte-fallback shaped, not Gemma's:
#: probe `schema_compile.py` at 7a6c0b0), in vLLM 0.31's xgrammar path: 225 then 447 optional
#: string properties, 5,992 bytes in 0.536 s and 11,981 bytes in 1.216 s (CPU seconds, median
#: of 3 first compiles; measured 2026-12-06 on a shared 2-core AMD EPYC at load 13-21, so the
#: figure errs slow; Graviton's cores are not measured): 9,852 bytes/s, the rate at the larger
#: size, the lower. The other shapes admitted cost less at 6 KB: required properties 0.22 s,
#: recursive `$ref` 0.12 s, anyOf fan-out 0.12 s, arrays nested 24 deep side by side 0.05 s, a
#: long enum 0.02 s. Objects nested 96 deep (0.44 s) and arrays 239 deep (1.07 s) cost more, but
#: the gatekeeper refuses a body nested past 30 levels (`gatekeeper_conf.MAX_JSON_DEPTH`).
SCHEMA_COMPILE_BYTES_PER_S = math.floor(11_981 / 1.216)
#: Counted repetitions are what the bytes do not bound: xgrammar unrolls them, so their cost
#: follows the number, not its digits. A string's `maxLength` costs ~0.1 s per unit against this
#: vocabulary (`{"type":"string","maxLength":N}`, 32 bytes: N=10 0.66 s, 50 4.75 s, 100 10.6 s);
#: `minLength` 50 2.87 s; a pattern's counted range ~0.01 s (`^[a-z0-9]{1,N}$`: 10 0.09 s,
#: 50 0.49 s, 100 0.94 s; `{1,3000}` fails inside xgrammar). Same probe, machine and date; an
#: array's `minItems`/`maxItems` stays in milliseconds. Against the tiny model's 512 tokens
#: `maxLength` 100 takes 0.02 s: the vocabulary's size is the cost, so the rehearsal never saw
#: it.
SCHEMA_LENGTH_UNIT_S = 0.1
SCHEMA_PATTERN_UNIT_S = 0.01
#: `maxSchemaBytes: auto` compiles within this: the others queue behind one compile at a time.
SCHEMA_COMPILE_SECONDS = 1
#: The counts the gatekeeper admits in grammar input, each alone and all together (a min and max
#: pair as its larger, nested regex counts multiplied) within the same compile budget:
#: `maxLength`, `minLength`, `maxItems`, `minItems`, `maxProperties`, `minProperties` at the
#: string's per-unit cost (items and properties measured cheaper with integer items; an item's
#: own rule is repeated by the count, so they are held to the costlier rate), a regex's `{n}`,
#: `{n,}` or `{n,m}` at the pattern's. Modelled from the per-unit figures above.
SCHEMA_MAX_COUNT = round(SCHEMA_COMPILE_SECONDS / SCHEMA_LENGTH_UNIT_S)
SCHEMA_MAX_PATTERN_COUNT = round(SCHEMA_COMPILE_SECONDS / SCHEMA_PATTERN_UNIT_S)
#: `clientTokensInFlight: auto`: one client address may hold this share of the KV cache's tokens,
#: so one client at its limit leaves the rest to the others.
CLIENT_KV_SHARE = 0.5
#: A request's tokens are counted in tiers: above each of these shares of the context (1/8, 1/4,
#: 1/2 of `maxModelLen`) a client may have fewer requests in flight. nginx counts requests in
#: flight per key (`limit_conn`), not a sum of weights, so the sum is bounded by the tiers: a
#: request above tier j's threshold is counted in tiers 1..j, and one at or below tier j+1's
#: holds at most that threshold (`_token_tiers`).
TOKEN_TIER_DIVISORS = (8, 4, 2)
#: Streamed bytes per generated token, the large end: an SSE chat chunk is ~200 bytes plus the
#: model name and the token's text, which JSON escaping can make six times longer.
REPLY_BYTES_PER_TOKEN = 512
#: Each log-probability a token carries (token text, value and bytes), the large end.
REPLY_BYTES_PER_LOGPROB = 160
#: The role chunk, the usage chunk, [DONE] and headers.
REPLY_OVERHEAD_BYTES = 16 * 1024


def plan_front_door(
    cfg: StackConfig,
    served_model: str,
    max_model_len: int,
    max_concurrency: float,
    decode_tokens_per_s: float,
    first_byte_s: int,
) -> GatekeeperLimits:
    """The gatekeeper's limits for a plan of `max_model_len` tokens at `max_concurrency`, serving
    `served_model`, around what every front door has (`vllm_key.plan_endpoint`): its one
    timeout is the reply timeout."""
    endpoint = plan_endpoint(cfg, max_model_len, decode_tokens_per_s, first_byte_s)
    slots = max(1, math.floor(max_concurrency))
    body, most = request_body(cfg, max_model_len)
    sequences = (
        slots if cfg.client_concurrent_requests == "auto" else cfg.client_concurrent_requests
    )
    per_minute = (
        REQUESTS_PER_MINUTE_PER_SLOT * slots
        if cfg.client_requests_per_minute == "auto"
        else cfg.client_requests_per_minute
    )
    cap, timeout, tls = endpoint.max_reply_tokens, endpoint.reply_timeout_seconds, endpoint.tls
    work = _work(cfg, body, sequences, endpoint)
    # An elastic stack's door fronts every group that may run; a leader's gatekeeper, its own.
    everyone = all_requests(slots * (cfg.max_groups or 1), body)
    wires = _connections(cfg, body, work.requests_in_flight, everyone)
    parsing = _parsing(
        per_minute // work.max_sequences, BURST_PER_SLOT * work.requests_in_flight, body
    )
    budget = _token_tiers(cfg, max_model_len, int(max_concurrency * max_model_len), work)
    listener = (
        "HTTPS on 443 (ACM certificate; TLS ends at the load balancer)"
        if tls
        else "plain HTTP on 80"
    )
    reasons = (
        f"listener {listener}; only POST /v1/chat/completions and POST /v1/completions reach "
        "vLLM, GET /v1/models is answered by the gatekeeper (the served name only) and GET "
        "/health from a one-second cache (vLLM sees ~1 call/s however many arrive); every other "
        "path is 404, and every request but /health needs the API key (failures are rate-limited "
        "per client too)",
        f"request body at most {body:,} bytes ({_origin(cfg.max_request_bytes)}"
        f": {BODY_BYTES_PER_TOKEN} bytes per token of a {max_model_len}-token prompt plus "
        f"{BODY_OVERHEAD_BYTES // 1024} KiB, and never over {most:,}: njs may hold "
        f"{PARSE_PEAK_PER_BODY_BYTE}x a body while it parses it, within {PARSE_SHARE:g} of the "
        "gatekeeper's memory); larger bodies get 413 before vLLM parses them",
        f"per client address {per_minute} requests/min (burst {BURST_PER_SLOT * sequences}) "
        f"and {sequences} sequences in flight ({_origin(cfg.client_concurrent_requests)}"
        f": the {max_concurrency:.2f} full-length requests the KV cache holds at once), so "
        f"{work.requests_in_flight} request(s) of up to {work.max_sequences} sequence(s); "
        "above that 429 with Retry-After",
        f"replies stop after {cap} tokens ({_origin(cfg.max_reply_tokens)}; vLLM's "
        "generation-config max_new_tokens, which caps every request, and so one without "
        "max_tokens)",
        f"a reply not finished within {timeout} s is cut: 504 before its first byte, a final "
        f"error event in a stream (a first token within {first_byte_s} s, then {cap} tokens at "
        f"~{decode_tokens_per_s:.1f} tokens/s x{REPLY_TIMEOUT_MARGIN:g}); request headers "
        f"whole within {HEADER_TIMEOUT_SECONDS} s; streams pass through unbuffered",
        (
            f"a chat page at {'https' if tls else 'http'}://<endpoint>/ (`chatPage`): the "
            "gatekeeper serves its three files (/, /app.js, /app.css) itself, under a "
            "same-origin-only Content-Security-Policy; the page loads without the key and sends "
            f"the key typed into it with each call, replies up to {cap} tokens"
            if cfg.chat_page
            else "no chat page (`chatPage: false`): / is 404 like any path outside the API"
        ),
        *wires.reasons,
        *parsing.reasons,
        _all_requests_reason(
            everyone, slots, cfg.max_groups or 1, max_model_len, first_byte_s, work, timeout
        )
        + (_door_rollout(everyone, first_byte_s, timeout) if cfg.elastic else ""),
        *work.reasons,
        *budget.reasons,
    )
    return GatekeeperLimits(
        **vars(endpoint),
        max_request_bytes=body,
        client_requests_per_minute=max(1, per_minute // work.max_sequences),
        client_burst=BURST_PER_SLOT * work.requests_in_flight,
        client_concurrent_requests=work.requests_in_flight,
        all_requests=everyone,
        large_bodies_per_minute=parsing.large_per_minute,
        client_connections=wires.per_client,
        connection_capacity=wires.capacity,
        keyed_requests=wires.keyed[0],
        keyed_large=wires.keyed[1],
        worker_connections=wires.worker_connections,
        probe_connections=PROBE_CONNECTIONS,
        max_sequences=work.max_sequences,
        max_schema_bytes=work.max_schema_bytes,
        max_schema_counts=(SCHEMA_MAX_COUNT, SCHEMA_MAX_PATTERN_COUNT),
        schema_concurrency=SCHEMA_CONCURRENCY,
        max_reply_bytes=work.max_reply_bytes,
        header_timeout_seconds=HEADER_TIMEOUT_SECONDS,
        reasons=reasons,
        chat_page=cfg.chat_page,
        client_tokens=budget.tokens,
        client_tokens_bound=budget.bound,
        token_tiers=budget.tiers,
        max_model_len=max_model_len,
        served_model=served_model,
    )


#: Requests with grammar input one client address may have in flight. The gatekeeper cannot see
#: when vLLM's compile ends (the first byte comes after the compile and the prefill, and nginx
#: counts a request in flight until it ends), so the slot is held for the whole reply; per client,
#: so one client's structured replies never hold another's (vLLM 0.31 compiles grammars one after
#: another, FACTS: eight at once queued to 54 s, so clients' compiles still queue in vLLM).
SCHEMA_CONCURRENCY = 1


def _origin(value: object) -> str:
    return "auto" if value == "auto" else "as the stack sets"


@dataclass(frozen=True)
class _Work:
    """What one request may cost: sequences, reply bytes, grammar input."""

    max_sequences: int
    requests_in_flight: int
    max_schema_bytes: int
    max_reply_bytes: int
    reasons: tuple[str, ...]


def _work(cfg: StackConfig, body: int, sequences: int, endpoint: EndpointLimits) -> _Work:
    """Sequences per request, log-probabilities, schema bytes and the reply size they give."""
    per_request = 1 if cfg.max_sequences_per_request == "auto" else cfg.max_sequences_per_request
    if per_request > sequences:
        raise ConfigError(
            "maxSequencesPerRequest",
            f"{per_request} is more than the {sequences} sequences one client may have in flight",
            f"use at most {sequences}, or raise `clientConcurrentRequests`",
        )
    logprobs, cap = endpoint.max_logprobs, endpoint.max_reply_tokens
    compile_bytes = math.floor(SCHEMA_COMPILE_BYTES_PER_S * SCHEMA_COMPILE_SECONDS)
    schema = min(compile_bytes, body) if cfg.max_schema_bytes == "auto" else cfg.max_schema_bytes
    if schema > body:
        raise ConfigError(
            "maxSchemaBytes",
            f"{schema} is more than the {body}-byte request body that must carry it",
            f"use at most {body}, or raise `maxRequestBytes`",
        )
    per_token = REPLY_BYTES_PER_TOKEN + (
        REPLY_BYTES_PER_LOGPROB * (1 + logprobs) if logprobs else 0
    )
    reply = per_request * cap * per_token + REPLY_OVERHEAD_BYTES
    schema_text = (
        "structured outputs off (`maxSchemaBytes` 0)"
        if schema == 0
        else f"schemas, tools and other grammar input at most {schema:,} bytes "
        f"({_origin(cfg.max_schema_bytes)}: a schema this size compiles within "
        f"~{schema / SCHEMA_COMPILE_BYTES_PER_S:.1f} s at the {SCHEMA_COMPILE_BYTES_PER_S:,.0f} "
        "bytes/s of the costliest shape tried, many optional properties, against a 262,144-token "
        "vocabulary; the bytes do not bound counted repetitions: a string's `maxLength` costs "
        f"~{SCHEMA_LENGTH_UNIT_S} s per unit of its count, a pattern's `{{n,m}}` "
        f"~{SCHEMA_PATTERN_UNIT_S} s, so `maxLength`, `minLength`, `maxItems`, `minItems`, "
        f"`maxProperties` and `minProperties` above {SCHEMA_MAX_COUNT} and a pattern's count above "
        f"{SCHEMA_MAX_PATTERN_COUNT}, or all of them together above one compile, get 400 naming "
        "the field) and "
        f"{SCHEMA_CONCURRENCY} such request in flight per client address, held until its reply "
        "ends (nginx cannot see the compile end), so one client's structured replies never "
        "refuse another's; vLLM compiles them one at a time, so a compile may wait for one of "
        "each other client's"
    )
    reasons = (
        f"at most {per_request} sequence(s) per request ({_origin(cfg.max_sequences_per_request)}"
        "): `n`, `best_of` and lists of prompts above it get 400 naming the field, so the "
        "limits above count sequences",
        f"log-probabilities up to {logprobs} ({_origin(cfg.max_logprobs)}; also vLLM's "
        "--max-logprobs) and no `echo`: a reply at most "
        f"{reply:,} bytes ({per_request} x {cap} tokens x {per_token} bytes + "
        f"{REPLY_OVERHEAD_BYTES // 1024} KiB), cut there",
        schema_text,
    )
    return _Work(per_request, max(1, sequences // per_request), schema, reply, reasons)


@dataclass(frozen=True)
class _Wires:
    """Connections: per client, and what the gatekeeper's memory holds."""

    per_client: int
    capacity: int
    worker_connections: int
    keyed: tuple[int, int]
    reasons: tuple[str, ...]


def _connections(cfg: StackConfig, body: int, in_flight: int, all_requests: int) -> _Wires:
    """Per-client connections, the pools of keyed requests in progress and the public pool, from
    the gatekeeper's memory: what the requests at vLLM and the keyed requests hold come first,
    and the rest is connections that have shown no key, at what the worst of them costs."""
    in_flight = min(in_flight, all_requests)  # beyond vLLM's all-client cap: refused at once
    auto = cfg.client_connections == "auto"
    per_client = in_flight + CONNECTIONS_SPARE if auto else cfg.client_connections
    if per_client < in_flight + 1:
        raise ConfigError(
            "clientConnections",
            f"{per_client} leaves no spare beside the {in_flight} request(s) a client may have "
            "in flight",
            f"use at least {in_flight + 1}, or auto",
        )
    memory = catalog.GATEKEEPER_MEMORY_MIB * 2**20
    share = memory * KEYED_SHARE / 2
    small_bytes = KEYED_SMALL_BYTES + LARGE_BODY_BYTES + hop_bytes()  # held twice when judged
    large = all_requests + math.floor(share / large_request_bytes(body))
    small = math.floor(share / small_bytes)
    parse = math.ceil(body * PARSE_PEAK_PER_BODY_BYTE)
    reserve = all_requests + PROBE_RESERVE + FIXED_CONNECTIONS
    keyed = small * small_bytes + large * large_request_bytes(body)
    fixed = GATEKEEPER_BASE_MIB * 2**20 + parse + keyed + reserve * SLOT_BYTES
    slots = KERNEL_CONNECTION_BYTES + NGINX_CONNECTIONS_PER_CLIENT * SLOT_BYTES
    connection, worst = KEYLESS_CONNECTION_BYTES + slots, KEYLESS_WORST_122_BYTES + slots
    capacity = max(0, free := memory - fixed) // connection
    if per_client * 2 > capacity:
        raise ConfigError(
            "clientConnections",
            f"{per_client} would let two clients hold every one of the {capacity} connections "
            f"the gatekeeper's {catalog.GATEKEEPER_MEMORY_MIB} MiB holds",
            f"use at most {max(in_flight + 1, capacity // 2)}, or auto",
        )
    worker = capacity * NGINX_CONNECTIONS_PER_CLIENT + reserve + 4 * (small + large)
    idle = KEYLESS_IDLE_BYTES + slots
    reasons = (
        f"per client address {per_client} connections ({_origin(cfg.client_connections)}: "
        f"one per request in flight + {CONNECTIONS_SPARE}), counted when a connection opens, "
        "before a byte is read; more are closed at once, logged",
        f"{capacity:,} public connections in all, closed at once beyond (logged): the "
        f"gatekeeper's {catalog.GATEKEEPER_MEMORY_MIB} MiB less {GATEKEEPER_BASE_MIB} MiB for "
        f"nginx, {parse / 2**20:.1f} MiB for the one body njs parses at a time (its VM, up to "
        f"{PARSE_PEAK_PER_BODY_BYTE}x the body, measured; gone with the check's request, before "
        f"vLLM) and {keyed / 2**20:.1f} MiB for the keyed requests in progress (the "
        f"{all_requests} at vLLM among them), over {connection:,} bytes a connection that has "
        "shown no key (nginx 1.30 "
        f"{KEYLESS_CONNECTION_BYTES:,} for a head held at its {MAX_HEADERS} lines, measured on "
        f"1.30.4, the kernel {KERNEL_CONNECTION_BYTES:,}, "
        f"{NGINX_CONNECTIONS_PER_CLIENT} slots of {SLOT_BYTES}); so "
        f"{capacity // per_client:,} addresses at their cap of {per_client}, each connection "
        "holding a head, fill it and refuse a keyed client's new connection"
        + (", short of the 1,000 aimed at" if capacity // per_client < AIMED_ADDRESSES else "")
        + f" ({free // idle // per_client:,} whose connections send nothing; on "
        f"nginx 1.22, which counts no lines, {free // worst // per_client:,} sending "
        f"{KEYLESS_WORST_122_BYTES:,}-byte heads of `a:` lines, measured); one nginx worker "
        f"with {worker:,} connections ({NGINX_CONNECTIONS_PER_CLIENT} per public "
        f"connection, 4 per keyed request in progress, one per request at vLLM, "
        f"{PROBE_RESERVE} for the probe listener's {PROBE_CONNECTIONS} and {FIXED_CONNECTIONS} "
        f"for listeners, scrapes and wake calls) and {worker + 64:,} files",
        f"keyed requests in progress (body read, checked or at vLLM) at most {small:,} with a "
        f"body under {LARGE_BODY_BYTES:,} bytes and {large} with a larger (or chunked), counted "
        f"before a byte of the body, then 503 at once: each holds up to {KEYED_SMALL_BYTES:,} "
        f"or {KEYED_LARGE_FIXED_BYTES:,} + its {body:,}-byte buffer (measured on nginx 1.22.1, njs "
        f"0.7.9; modelled the same on the pod's 1.30.5, njs 1.0.1), and its body again while the "
        f"check server judges it (modelled), {KEYED_SHARE:g} of the memory "
        f"for the two beside the {all_requests} at vLLM; nginx has no total body deadline (only "
        f"{HEADER_TIMEOUT_SECONDS} s between reads), so {math.ceil(small / per_client)} keyed "
        f"addresses trickling small bodies at their cap of {per_client}, or "
        f"{math.ceil((large - all_requests) / (LARGE_BODY_BURST + 1))} trickling large ones at "
        f"their {LARGE_BODY_BURST + 1} beside {all_requests} large bodies at vLLM, refuse a keyed "
        "newcomer with a body of that size for as long as they trickle",
    )
    return _Wires(per_client, capacity, worker, (small, large), reasons)


@dataclass(frozen=True)
class _Parsing:
    """The large-body rate per client and what one client at its limits costs the CPU."""

    large_per_minute: int
    reasons: tuple[str, ...]


def _parsing(per_minute: int, burst: int, body: int) -> _Parsing:
    """Large bodies a client may send a minute: what one client at its request rate costs in
    parsing stays within `CLIENT_CPU_SHARE` of the gatekeeper's CPU (`catalog`), every small
    body at the most a small one costs, the rest of the share in large ones at the largest."""
    small_ms = (LARGE_BODY_BYTES - 1) * PARSE_NS_PER_BYTE / 1e6
    large_ms = max(LARGE_BODY_BYTES, body) * PARSE_NS_PER_BYTE / 1e6
    millicpu = catalog.GATEKEEPER_MILLICPU
    share_ms = CLIENT_CPU_SHARE * millicpu  # CPU ms a second
    per_s = per_minute / 60
    large = max(1, math.floor(60 * (share_ms - per_s * small_ms) / (large_ms - small_ms)))
    large_s = min(per_s, large / 60)
    steady = large_s * large_ms + (per_s - large_s) * small_ms
    # nginx admits `burst` requests beyond the rate at once, so one more than each burst.
    burst_ms = (LARGE_BODY_BURST + 1) * large_ms + (burst - LARGE_BODY_BURST) * small_ms
    reasons = (
        f"bodies of {LARGE_BODY_BYTES:,} bytes or more (or chunked) at most {large} a minute "
        f"per client address ({LARGE_BODY_BURST + 1} at once), above that 429: parsing costs njs "
        f"up to {PARSE_NS_PER_BYTE:.0f} ns a byte (measured), so one client at its limits takes "
        f"{steady:.0f} ms of CPU a second, at most {CLIENT_CPU_SHARE:g} of the gatekeeper's "
        f"{catalog.GATEKEEPER_MILLICPU}m (its CPU request = limit), and its burst "
        f"{burst_ms:.0f} ms, which that quota spends in {burst_ms / millicpu:.2f} s: the probe "
        f"listener's /health waits at most that behind it, within the probes' {PROBE_TIMEOUT_S} "
        f"s; idle upstream connections close after {UPSTREAM_KEEPALIVE_SECONDS} s, before vLLM's "
        f"own {VLLM_KEEPALIVE_SECONDS} s",
    )
    return _Parsing(large, reasons)


def _all_requests_reason(
    everyone: int,
    slots: int,
    groups: int,
    max_model_len: int,
    first_byte_s: int,
    work: _Work,
    timeout: int,
) -> str:
    """What every client together may have at vLLM, and what it leaves a newcomer (modelled)."""
    per = work.requests_in_flight
    wait = everyone * first_byte_s
    cut = f", past the {timeout} s reply timeout (cut, 504)" if wait > timeout else ""
    kv = slots * groups
    held = (
        "the full-length requests the KV cache holds at once, so nothing waits in vLLM for "
        "KV-cache room and its first-come order only orders prefill"
        if everyone == kv == slots
        else f"{slots} full-length requests a group's KV cache holds x the {groups} groups that "
        "may run, so beyond the running groups' room requests wait in vLLM, first come first "
        "served, which is what the queue trigger scales on"
        if everyone == kv
        else f"what {HELD_SHARE:g} of the gatekeeper's memory holds at the largest body each, "
        f"of the {kv} full-length requests the KV cache holds"
    )
    return (
        f"at most {everyone} request(s) at vLLM from all clients together: {held}; beyond that "
        f"503 with Retry-After {BUSY_RETRY_SECONDS} at once; with {math.ceil(everyone / per)} "
        f"client(s) at their {per} in flight a newcomer is refused so; admitted, its first token "
        f"waits behind at most {everyone - 1} other prompt(s), up to "
        f"{(everyone - 1) * max_model_len:,} tokens of prefill: a full-length prompt behind "
        f"full-length ones within {everyone} x the first-byte bound, {wait:,} s (modelled){cut}"
    )


def _door_rollout(everyone: int, first_byte_s: int, timeout: int) -> str:
    """The door's rollout: the Deployment controller counts no terminating pod (kubernetes v1.35
    pkg/controller/deployment/rolling.go sums ReplicaSets' replicas, which leave them out;
    `podReplacementPolicy` is alpha, gate off), so the new door admits its cap while the old
    drains. vLLM 0.31 fails none of the excess (v1/core/sched/scheduler.py `schedule`: a waiting
    request without KV room stays waiting; a running one is preempted, newest first)."""
    wait = (2 * everyone - 1) * first_byte_s
    return (
        f"; during a rollout of the door (one replica, maxSurge 1) the old door drains its "
        f"requests for up to the {timeout} s reply timeout while the new one admits its own, so "
        f"up to {2 * everyone} reach vLLM for that long; the excess waits in vLLM's queue for "
        "KV-cache room (or a running request is preempted and recomputed), none fails; a "
        f"newcomer then waits behind up to {2 * everyone - 1} prompts, {wait:,} s by the "
        "first-byte bound (modelled)" + (f", cut at {timeout} s (504)" if wait > timeout else "")
    )


@dataclass(frozen=True)
class _Budget:
    """The KV-cache tokens one client may hold, as tiers nginx can count."""

    tokens: int
    bound: int
    tiers: tuple[tuple[int, int], ...]
    reasons: tuple[str, ...]


def _token_tiers(cfg: StackConfig, max_model_len: int, kv_tokens: int, work: _Work) -> _Budget:
    """Per-client tiers whose worst case stays within the client's token budget.

    A request the gatekeeper estimates above tier j's threshold t_j (and at most t_{j+1}, the
    context for the last) is counted in tiers 0..j, tier 0 counting every request. It holds at
    most t_{j+1} tokens, which is the sum of the steps t_1, t_2 - t_1, ..., so what a client holds
    is at most the sum over tiers of (its limit x its step). Each tier gets one request (so one
    full-length request fits), the rest of the budget is shared equally between the tiers above 0,
    and what is left goes to the highest tier it pays for; a tier never admits more than the one
    below it.
    """
    sequences = work.requests_in_flight
    # (A context of a few tokens has fewer distinct tiers.)
    thresholds = sorted({max_model_len // d for d in TOKEN_TIER_DIVISORS} - {0})
    steps = [thresholds[0]] + [
        b - a for a, b in zip(thresholds, [*thresholds[1:], max_model_len], strict=True)
    ]
    least = sequences * steps[0] + sum(steps[1:])
    # At least one full-length request must remain for the other clients.
    most = kv_tokens - max_model_len
    if cfg.client_tokens_in_flight == "auto":
        budget = max(least, math.floor(kv_tokens * CLIENT_KV_SHARE))
    else:
        budget = cfg.client_tokens_in_flight
        if budget < least:
            raise ConfigError(
                "clientTokensInFlight",
                f"{budget} cannot hold one {max_model_len}-token request beside the other "
                f"{sequences - 1} request(s) a client may have in flight ({least:,} tokens by "
                "the tiers)",
                f"use at least {least}, lower `clientConcurrentRequests`, or auto",
            )
        if budget > most:
            raise ConfigError(
                "clientTokensInFlight",
                f"{budget} leaves less than one {max_model_len}-token request of the "
                f"{kv_tokens:,} tokens the KV cache holds for the other clients",
                f"use at most {max(most, least)}, or auto",
            )
    limits = [sequences] + [1] * len(thresholds)
    share = (budget - least) // max(1, len(thresholds))
    for j in range(1, len(steps)):
        limits[j] = min(limits[j - 1], 1 + share // steps[j])
    left = budget - sum(n * d for n, d in zip(limits, steps, strict=True))
    for j in range(len(steps) - 1, 0, -1):
        more = min(limits[j - 1] - limits[j], left // steps[j])
        limits[j] += more
        left -= more * steps[j]
    bound = sum(n * d for n, d in zip(limits, steps, strict=True))
    tiers = tuple(zip(thresholds, limits[1:], strict=True))
    shown = ", ".join(f"{n} over {t:,}" for t, n in tiers)
    origin = (
        f"auto: {CLIENT_KV_SHARE:g} of the {kv_tokens:,} tokens the KV cache holds"
        if cfg.client_tokens_in_flight == "auto"
        else f"as the stack sets, of the {kv_tokens:,} tokens the KV cache holds"
    )
    reasons = (
        f"per client address at most {budget:,} KV-cache tokens in flight "
        f"(`clientTokensInFlight`, {origin}): a request counts as its body's bytes (every "
        "prompt token takes at least one byte of the body, so the count errs high) plus the "
        f"longest reply it may ask for, at most the {max_model_len:,}-token context; of its "
        f"{sequences} request(s) in flight at most {shown} tokens, so at most {bound:,} tokens "
        f"in all; one client at its limit leaves {kv_tokens - bound:,} tokens "
        f"({(kv_tokens - bound) / max_model_len:.2f} full-length requests) to the others, whose "
        f"requests wait behind at most {bound:,} tokens of its prefill; above it 429",
    )
    return _Budget(budget, bound, tiers, reasons)


def idle_cut(door: GatekeeperLimits, wait: int) -> str:
    """Whether a connection waiting `wait` s for its first byte outlives the load balancer's idle
    timeout: the gatekeeper's TCP keepalives (`KEEPALIVE_IDLE_S`), which the load balancer counts
    and, on a TLS listener, answers on the client's side (`catalog.NLB_IDLE_TIMEOUT_S`)."""
    keepalives = (
        f"the gatekeeper's TCP keepalives start after {KEEPALIVE_IDLE_S} s without a byte and "
        f"repeat every {KEEPALIVE_INTERVAL_S} s, within the load balancer's "
        f"{catalog.NLB_IDLE_TIMEOUT_S} s idle timeout, which they restart"
    )
    if not door.tls:
        return f"none: {keepalives}, on the one TCP flow of a request (first byte within {wait} s)"
    return (
        f"none: {keepalives}; the TLS listener, which ends TLS and holds the client's connection "
        "itself, then sends its own keepalives to the client every 20 s (Network Load Balancers "
        f'guide, "Connection idle timeout"); first byte within {wait} s'
    )
