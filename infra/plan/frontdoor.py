"""The front door's limits: what the gatekeeper in each leader pod lets through to vLLM.

Pure: the planner (`infra.plan.sizing`) calls `plan_front_door` with the figures it derived, so
every limit follows the plan (the context, the concurrency the KV cache holds, the decode rate)
unless the stack sets it. The gatekeeper's own CPU and memory are a co-tenant of the model node
(`catalog.COTENANTS`), counted before the model pod is sized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.manifests.gatekeeper_conf import GatekeeperLimits
from infra.plan import catalog
from infra.plan.config import ConfigError, StackConfig

#: JSON bytes per prompt token that `maxRequestBytes: auto` allows. A token is ~4 characters of
#: English, but JSON escapes (`\\u00e9` is 6 bytes), chat framing and token-id prompts
#: (`[123456, ...]`, 8 bytes an id) can take more; 32 leaves room for all of them.
BODY_BYTES_PER_TOKEN = 32
#: Request framing beyond the prompt: model name, sampling fields, message roles.
BODY_OVERHEAD_BYTES = 64 * 1024
#: `maxReplyTokens: auto` is this share of the context, and never more than the cap: a request
#: that forgets `max_tokens` would otherwise hold a slot for the whole context, at CPU decode
#: rates for many minutes.
REPLY_CAP_SHARE = 4
REPLY_CAP_TOKENS = 1024
#: Requests per minute per client for each request the KV cache holds at once: one a second
#: per slot, more than a CPU replica serves, so only a runaway client meets the limit.
REQUESTS_PER_MINUTE_PER_SLOT = 60
#: The burst a client may send at once beyond the steady rate, per concurrent slot.
BURST_PER_SLOT = 2
#: Margin on the longest reply's decode before the gatekeeper gives up on vLLM.
REPLY_TIMEOUT_MARGIN = 1.25
REPLY_TIMEOUT_FLOOR_SECONDS = 120
#: A client must send its request headers within this (slow-header attacks hold a connection).
HEADER_TIMEOUT_SECONDS = 10
#: `clientConnections: auto`: a connection per request a client may have in flight and this
#: many spare (a keep-alive waiting for reuse, a page's own GET). Probes no longer count: they
#: have their own listener (`components.manifests.gatekeeper_conf._probe_server`).
CONNECTIONS_SPARE = 2
#: The gatekeeper's memory (`catalog.GATEKEEPER_MEMORY_MIB`) less what nginx, its zones, njs and
#: the health cache hold before any client (modelled: nginx and njs at start take a few MiB).
GATEKEEPER_BASE_MIB = 16
#: Memory one client connection may pin beyond its request body: header buffers (1 KiB + 4 x 8
#: KiB), the stream proxy's two 16 KiB buffers, the upstream buffer and the request's njs VM
#: (modelled, the large end of each).
CONNECTION_OVERHEAD_BYTES = 128 * 1024
#: nginx connections per client connection: the client's socket and the Unix socket pair between
#: the stream and HTTP sides (two), and the request's connection to vLLM.
NGINX_CONNECTIONS_PER_CLIENT = 4
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
#: `infra.rehearse.measure.schema_compile`), in vLLM 0.31's xgrammar path: 225 then 447 optional
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
    `served_model`.

    `first_byte_s` is the liveness plan's bound on a first token (`infra.plan.liveness`): the
    longest prompt's prefill plus the stall bound. A non-streamed reply's first byte comes with
    its last token, so the gatekeeper's one timeout is that bound plus the longest reply's decode.
    """
    slots = max(1, math.floor(max_concurrency))
    body = (
        max_model_len * BODY_BYTES_PER_TOKEN + BODY_OVERHEAD_BYTES
        if cfg.max_request_bytes == "auto"
        else cfg.max_request_bytes
    )
    sequences = (
        slots if cfg.client_concurrent_requests == "auto" else cfg.client_concurrent_requests
    )
    per_minute = (
        REQUESTS_PER_MINUTE_PER_SLOT * slots
        if cfg.client_requests_per_minute == "auto"
        else cfg.client_requests_per_minute
    )
    cap = (
        min(REPLY_CAP_TOKENS, max(1, max_model_len // REPLY_CAP_SHARE))
        if cfg.max_reply_tokens == "auto"
        else cfg.max_reply_tokens
    )
    decode_s = math.ceil(cap / decode_tokens_per_s * REPLY_TIMEOUT_MARGIN)
    timeout = max(REPLY_TIMEOUT_FLOOR_SECONDS, first_byte_s + decode_s)
    tls = cfg.tls_certificate_arn is not None

    if cap >= max_model_len:
        raise ConfigError(
            "maxReplyTokens",
            f"{cap} leaves no room for a prompt in the {max_model_len}-token context",
            f"use at most {max_model_len - 1}, or auto",
        )
    work = _work(cfg, body, sequences, cap)
    wires = _connections(cfg, body, work.requests_in_flight)
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
        f"{BODY_OVERHEAD_BYTES // 1024} KiB); larger bodies get 413 before vLLM parses them",
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
        *work.reasons,
        *budget.reasons,
    )
    return GatekeeperLimits(
        tls=tls,
        listener_port=443 if tls else 80,
        max_request_bytes=body,
        client_requests_per_minute=max(1, per_minute // work.max_sequences),
        client_burst=BURST_PER_SLOT * work.requests_in_flight,
        client_concurrent_requests=work.requests_in_flight,
        client_connections=wires.per_client,
        connection_capacity=wires.capacity,
        worker_connections=wires.worker_connections,
        probe_connections=PROBE_CONNECTIONS,
        max_sequences=work.max_sequences,
        max_logprobs=work.max_logprobs,
        max_schema_bytes=work.max_schema_bytes,
        schema_concurrency=SCHEMA_CONCURRENCY,
        max_reply_bytes=work.max_reply_bytes,
        max_reply_tokens=cap,
        reply_timeout_seconds=timeout,
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
    max_logprobs: int
    max_schema_bytes: int
    max_reply_bytes: int
    reasons: tuple[str, ...]


def _work(cfg: StackConfig, body: int, sequences: int, cap: int) -> _Work:
    """Sequences per request, log-probabilities, schema bytes and the reply size they give."""
    per_request = 1 if cfg.max_sequences_per_request == "auto" else cfg.max_sequences_per_request
    if per_request > sequences:
        raise ConfigError(
            "maxSequencesPerRequest",
            f"{per_request} is more than the {sequences} sequences one client may have in flight",
            f"use at most {sequences}, or raise `clientConcurrentRequests`",
        )
    logprobs = 0 if cfg.max_logprobs == "auto" else cfg.max_logprobs
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
        f"~{SCHEMA_PATTERN_UNIT_S} s) and "
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
    return _Work(per_request, max(1, sequences // per_request), logprobs, schema, reply, reasons)


@dataclass(frozen=True)
class _Wires:
    """Connections: per client, and what the gatekeeper's memory holds."""

    per_client: int
    capacity: int
    worker_connections: int
    reasons: tuple[str, ...]


def _connections(cfg: StackConfig, body: int, in_flight: int) -> _Wires:
    """Per-client connections and nginx's worker connections, from the gatekeeper's memory."""
    free = (catalog.GATEKEEPER_MEMORY_MIB - GATEKEEPER_BASE_MIB) * 1024 * 1024
    per_connection = body + CONNECTION_OVERHEAD_BYTES
    capacity = free // per_connection
    # auto: the base and a share per request in flight, but never more than half of what the
    # memory holds (two clients cannot take it all), nor fewer than its requests and a spare.
    wanted = in_flight + CONNECTIONS_SPARE
    auto = min(wanted, max(in_flight + 1, capacity // 2))
    per_client = auto if cfg.client_connections == "auto" else cfg.client_connections
    if cfg.client_connections != "auto" and per_client * 2 > capacity:
        raise ConfigError(
            "clientConnections",
            f"{per_client} would let two clients hold every one of the {capacity} connections "
            f"the gatekeeper's {catalog.GATEKEEPER_MEMORY_MIB} MiB holds",
            f"use at most {max(in_flight + 1, capacity // 2)}, or auto",
        )
    if per_client < in_flight + 1:
        raise ConfigError(
            "clientConnections",
            f"{per_client} leaves no spare beside the {in_flight} request(s) a client may have "
            "in flight",
            f"use at least {in_flight + 1}, or auto",
        )
    worker = capacity * NGINX_CONNECTIONS_PER_CLIENT + PROBE_RESERVE + FIXED_CONNECTIONS
    reasons = (
        f"per client address {per_client} connections ({_origin(cfg.client_connections)}: "
        f"one per request in flight + {CONNECTIONS_SPARE}, at most half of all), counted when "
        "a connection opens, before a byte is read; more are closed at once; "
        f"{capacity // per_client} addresses at that cap fill the public listener, which "
        "never takes the probes' connections",
        f"{capacity} client connections in all: the gatekeeper's "
        f"{catalog.GATEKEEPER_MEMORY_MIB} MiB less {GATEKEEPER_BASE_MIB} MiB for nginx, over "
        f"{per_connection // 1024} KiB each (a whole body in memory + "
        f"{CONNECTION_OVERHEAD_BYTES // 1024} KiB of buffers); one nginx worker (its "
        f"{catalog.GATEKEEPER_MILLICPU}m of CPU is under a core) with {worker} connections "
        f"({NGINX_CONNECTIONS_PER_CLIENT} per client connection, {PROBE_RESERVE} held "
        f"for the probe listener's {PROBE_CONNECTIONS} and {FIXED_CONNECTIONS} for listeners, "
        f"scrapes and wake calls) and {worker + 64} files",
    )
    return _Wires(per_client, capacity, worker, reasons)


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
