"""What `frontDoor: vllm-key` keeps and gives up against the gatekeeper: vLLM checks the key
itself, on every route but the probes' (`components.manifests.programs.key_check`). The plan
prints it."""

from __future__ import annotations

from components.manifests.gatekeeper_conf import GatekeeperLimits
from components.manifests.programs.key_check import OPEN_PATHS
from infra.plan import catalog

#: What a stack without the gatekeeper goes without. vLLM 0.31 reads one key from VLLM_API_KEY
#: (serve/middleware/register.py) and checks it under /v1, /v2, /inference and /cohere only
#: (serve/middleware/authenticate.py `GUARDED_PREFIX`), read 2026-12-06; `key_check.py` asks for
#: it everywhere else.
GIVES_UP = (
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
    "dashboard's front-door answer counts and 5xx alarm read the gatekeeper's log and stay empty",
)


def rows(door: GatekeeperLimits) -> list[tuple[str, str]]:
    """The door rows that still hold without the gatekeeper, after the listener's."""
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
