"""What every front door has (`plan_endpoint`: the listener, vLLM's own caps, the reply timeout),
and what `frontDoor: vllm-key` gives up against the gatekeeper: vLLM checks the key itself, on
every route but the probes' (`components.manifests.programs.key_check`). The plan prints it."""

from __future__ import annotations

import math

from components.manifests.spec import EndpointLimits
from infra.plan import catalog
from infra.plan.config import ConfigError, StackConfig

#: `maxReplyTokens: auto` is this share of the context, and never more than the cap: a request
#: that forgets `max_tokens` would otherwise hold a slot for the whole context, at CPU decode
#: rates for many minutes.
REPLY_CAP_SHARE = 4
REPLY_CAP_TOKENS = 1024
#: Margin on the longest reply's decode before the gatekeeper gives up on vLLM.
REPLY_TIMEOUT_MARGIN = 1.25
REPLY_TIMEOUT_FLOOR_SECONDS = 120


def gives_up() -> tuple[str, ...]:
    """What a stack without the gatekeeper goes without, for the plan's text. vLLM 0.31 reads one
    key from VLLM_API_KEY (serve/middleware/register.py) and checks it under /v1, /v2, /inference
    and /cohere only (serve/middleware/authenticate.py `GUARDED_PREFIX`), read 2026-12-06;
    `key_check.py` asks for it everywhere else."""
    from components.manifests.programs.key_check import OPEN_PATHS  # the plan's text only

    return (
        "no per-client limits: request rate, requests, KV-cache tokens and connections in flight "
        "and body size are not bounded per client address, so one client can hold every slot",
        "no refusals before vLLM: request fields (`n`, schema size and counts, `priority`, "
        "`request_id`, ...) and headers reach vLLM as sent, and no cap on requests at vLLM (503)",
        f"routes without the key: {' and '.join(OPEN_PATHS)} only (the probes, the preStop and the "
        "metrics collector read them; counts, no inference) answer every client in `allowedCidrs`",
        "one key: vLLM reads VLLM_API_KEY when it starts, so a new key restarts the group and a "
        "rotation has no overlap (`apiKeyOverlapUntil` refused)",
        "no reply timeout and no TCP keepalives at the door: a first token slower than the load "
        f"balancer's {catalog.NLB_IDLE_TIMEOUT_S} s idle timeout is cut; no chat page; the "
        "dashboard's front-door answer counts and 5xx alarm read the gatekeeper's log and stay "
        "empty",
    )


def plan_endpoint(
    cfg: StackConfig, max_model_len: int, decode_tokens_per_s: float, first_byte_s: int
) -> EndpointLimits:
    """The listener and vLLM's own caps. A non-streamed reply's first byte comes with its last
    token: the reply timeout is the first-byte bound (`infra.plan.liveness`) plus its decode."""
    cap = (
        min(REPLY_CAP_TOKENS, max(1, max_model_len // REPLY_CAP_SHARE))
        if cfg.max_reply_tokens == "auto"
        else cfg.max_reply_tokens
    )
    if cap >= max_model_len:
        raise ConfigError(
            "maxReplyTokens",
            f"{cap} leaves no room for a prompt in the {max_model_len}-token context",
            f"use at most {max_model_len - 1}, or auto",
        )
    decode_s = math.ceil(cap / decode_tokens_per_s * REPLY_TIMEOUT_MARGIN)
    tls = cfg.tls_certificate_arn is not None
    return EndpointLimits(
        tls=tls,
        listener_port=443 if tls else 80,
        max_logprobs=0 if cfg.max_logprobs == "auto" else cfg.max_logprobs,
        max_reply_tokens=cap,
        reply_timeout_seconds=max(REPLY_TIMEOUT_FLOOR_SECONDS, first_byte_s + decode_s),
    )


def rows(door: EndpointLimits) -> list[tuple[str, str]]:
    """The door rows that still hold without the gatekeeper, after the listener's."""
    from components.manifests.programs.key_check import OPEN_PATHS  # the plan's text only

    return [
        (
            "front door",
            "vLLM checks the key itself on every route but "
            f"{', '.join(OPEN_PATHS)} (`frontDoor: vllm-key`, VLLM_API_KEY from the key's "
            "Secret); no gatekeeper",
        ),
        ("per request", f"logprobs up to {door.max_logprobs} (`maxLogprobs`, vLLM's own)"),
        ("max reply", f"{door.max_reply_tokens} tokens (`maxReplyTokens`, vLLM's own)"),
    ]
