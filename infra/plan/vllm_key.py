"""What every front door has (`plan_endpoint`: the listener, vLLM's own caps, the reply timeout).
With `frontDoor: vllm-key` vLLM checks the key itself, on every route but the probes'
(`components.manifests.programs.key_check`); what that gives up against the gatekeeper, the plan
prints (`infra.adapters.cli`)."""

from __future__ import annotations

import math

from components.manifests.spec import EndpointLimits
from infra.plan.config import ConfigError, StackConfig

#: `maxReplyTokens: auto` is this share of the context, and never more than the cap: a request
#: that forgets `max_tokens` would otherwise hold a slot for the whole context, at CPU decode
#: rates for many minutes.
REPLY_CAP_SHARE = 4
REPLY_CAP_TOKENS = 1024
#: Margin on the longest reply's decode before the gatekeeper gives up on vLLM.
REPLY_TIMEOUT_MARGIN = 1.25
REPLY_TIMEOUT_FLOOR_SECONDS = 120


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
