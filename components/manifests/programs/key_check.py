"""The API key on every route of vLLM where it listens on the pod network (`frontDoor: vllm-key`,
docs/front-door.md#vllm-key, and an elastic stack's groups, whose door sends the engine key):
`vllm serve --middleware key_check.KeyCheck`, from a ConfigMap on the leader's PYTHONPATH.

vLLM 0.31 checks the key under /v1, /v2, /inference and /cohere only (serve/middleware/
authenticate.py, read 2026-12-06; POST /invocations serves inference without it) and adds
`--middleware` last, so this runs first (register.py). Off `OPEN_PATHS` it asks for
`Authorization: Bearer <VLLM_API_KEY>`, compared as vLLM compares it, or answers vLLM's 401;
OPTIONS passes, as in vLLM. A key shorter than the stack's shortest (`components.manifests.spec`
`KEY_MIN_CHARS`) stops vLLM at start rather than serve: vLLM drops an empty key and checks nothing
(serve/middleware/register.py), and a bare `Bearer` would match it here. Standard library only: it
runs in the vLLM image's Python.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from typing import Any

#: What asks without the key, over plain HTTP only: the kubelet's readiness probe (/health), and
#: /metrics, which the in-pod liveness probe and preStop and the metrics collector read (counts,
#: no inference).
OPEN_PATHS = ("/health", "/metrics")
#: The shortest key the stack makes or accepts (`spec.KEY_MIN_CHARS`).
KEY_MIN_CHARS = 32
#: vLLM's 401 body (starlette's JSONResponse of {"error": "Unauthorized"}).
UNAUTHORIZED = b'{"error":"Unauthorized"}'


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()


class KeyCheck:
    """Pure ASGI: lifespan and OPTIONS pass; a websocket needs the key, http off `OPEN_PATHS`."""

    def __init__(self, app: Any) -> None:
        self.app = app
        key = os.environ["VLLM_API_KEY"]  # none: vLLM does not start
        if len(key) < KEY_MIN_CHARS:
            raise RuntimeError(
                f"VLLM_API_KEY holds {len(key)} characters, fewer than {KEY_MIN_CHARS}: put the "
                "stack's key in the Secret (api-key with vllm-key, engine-key behind a door; "
                "docs/front-door.md#vllm-key)"
            )
        self.key = _digest(key)

    def _carries_key(self, scope: dict[str, Any]) -> bool:
        # The first Authorization header, as starlette's Headers.get reads it.
        value = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        scheme, _, token = value.decode("latin-1").partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(_digest(token), self.key)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("method") != "OPTIONS":
            path = scope["path"].removeprefix(scope.get("root_path", ""))
            is_open = scope["type"] == "http" and path in OPEN_PATHS
            if not is_open and not self._carries_key(scope):
                # A websocket is refused with an HTTP answer too (the ASGI denial response).
                prefix = "websocket." if scope["type"] == "websocket" else ""
                length = str(len(UNAUTHORIZED)).encode()
                headers = [(b"content-type", b"application/json"), (b"content-length", length)]
                start = {"type": prefix + "http.response.start", "status": 401, "headers": headers}
                await send(start)
                await send({"type": prefix + "http.response.body", "body": UNAUTHORIZED})
                return
        await self.app(scope, receive, send)
