"""The front door's limits: what the gatekeeper in each leader pod lets through to vLLM.

Pure: the planner (`infra.plan.sizing`) calls `plan_front_door` with the figures it derived, so
every limit follows the plan (the context, the concurrency the KV cache holds, the decode rate)
unless the stack sets it. The gatekeeper's own CPU and memory are a co-tenant of the model node
(`catalog.COTENANTS`), counted before the model pod is sized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass(frozen=True)
class FrontDoorPlan:
    """What the gatekeeper enforces, and what the load balancer listens on."""

    #: HTTPS on 443 terminated by the load balancer (an ACM certificate), else HTTP on 80.
    tls: bool
    listener_port: int
    max_request_bytes: int
    client_requests_per_minute: int
    client_burst: int
    client_concurrent_requests: int
    #: The longest reply of any request, and so of one that sets no `max_tokens`.
    max_reply_tokens: int
    #: How long the gatekeeper waits for vLLM's answer (nginx `proxy_read_timeout`, so also the
    #: longest gap in a stream): the first-byte bound plus the longest reply's decode.
    reply_timeout_seconds: int
    header_timeout_seconds: int
    reasons: tuple[str, ...]
    #: The gatekeeper serves the chat page at the endpoint's root (`chatPage`).
    chat_page: bool = True


def plan_front_door(
    cfg: StackConfig,
    max_model_len: int,
    max_concurrency: float,
    decode_tokens_per_s: float,
    first_byte_s: int,
) -> FrontDoorPlan:
    """The gatekeeper's limits for a plan of `max_model_len` tokens at `max_concurrency`.

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
    concurrent = (
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

    def origin(value: object) -> str:
        return "auto" if value == "auto" else "as the stack sets"

    listener = (
        "HTTPS on 443 (ACM certificate; TLS ends at the load balancer)"
        if tls
        else "plain HTTP on 80"
    )

    reasons = (
        f"listener {listener}; only POST /v1/chat/completions, POST /v1/completions, "
        "GET /v1/models and GET /health reach vLLM, every other path is 404 at the gatekeeper, "
        "and every request but /health needs the API key",
        f"request body at most {body:,} bytes ({origin(cfg.max_request_bytes)}"
        f": {BODY_BYTES_PER_TOKEN} bytes per token of a {max_model_len}-token prompt plus "
        f"{BODY_OVERHEAD_BYTES // 1024} KiB); larger bodies get 413 before vLLM parses them",
        f"per client address {per_minute} requests/min (burst {BURST_PER_SLOT * concurrent}) "
        f"and {concurrent} in flight ({origin(cfg.client_concurrent_requests)}"
        f": the {max_concurrency:.2f} full-length requests the KV cache holds at once); "
        "above that 429 with Retry-After",
        f"replies stop after {cap} tokens ({origin(cfg.max_reply_tokens)}; vLLM's "
        "generation-config max_new_tokens, which caps every request, and so one without "
        "max_tokens)",
        f"a reply not finished within {timeout} s gets 504 (a first token within {first_byte_s} s, "
        f"then {cap} tokens at ~{decode_tokens_per_s:.1f} tokens/s x{REPLY_TIMEOUT_MARGIN:g}), "
        "a stream silent that long is closed; request headers within "
        f"{HEADER_TIMEOUT_SECONDS} s; streams pass through unbuffered",
        (
            f"a chat page at {'https' if tls else 'http'}://<endpoint>/ (`chatPage`): the "
            "gatekeeper serves its three files (/, /app.js, /app.css) itself, under a "
            "same-origin-only Content-Security-Policy; the page loads without the key and sends "
            f"the key typed into it with each call, replies up to {cap} tokens"
            if cfg.chat_page
            else "no chat page (`chatPage: false`): / is 404 like any path outside the API"
        ),
    )
    return FrontDoorPlan(
        tls=tls,
        listener_port=443 if tls else 80,
        max_request_bytes=body,
        client_requests_per_minute=per_minute,
        client_burst=BURST_PER_SLOT * concurrent,
        client_concurrent_requests=concurrent,
        max_reply_tokens=cap,
        reply_timeout_seconds=timeout,
        header_timeout_seconds=HEADER_TIMEOUT_SECONDS,
        reasons=reasons,
        chat_page=cfg.chat_page,
    )
