"""vLLM's key check on every route (`frontDoor: vllm-key`), driven as ASGI around a fake app,
then inside real vLLM 0.31's middleware stack (its own ordering of `--middleware`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.manifests import spec
from components.manifests.programs.key_check import KEY_MIN_CHARS, UNAUTHORIZED, KeyCheck

KEY = "sk-test-key-" + "0" * 20
REPO = Path(__file__).resolve().parents[2]
#: A Python with real vLLM 0.31: the rehearsal's environment (`make rehearse`), or another's.
VLLM_PYTHON = Path(os.environ.get("GEMMA_VLLM_PYTHON", REPO / ".rehearsal/venv/bin/python"))


def _ask(path: str, key: str = "", method: str = "GET", kind: str = "http") -> list:
    """What the client is sent for one request, or the path the app behind was asked."""
    sent: list[Any] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        sent.append(scope["path"])

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"authorization", f"Bearer {key}".encode())] if key else []
    scope = {"type": kind, "method": method, "path": path, "root_path": "", "headers": headers}
    os.environ["VLLM_API_KEY"] = KEY
    try:
        # A loop of its own: `asyncio.run` leaves the thread with none, which the mocks need.
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
            runner.run(KeyCheck(app)(scope, None, send))
    finally:
        del os.environ["VLLM_API_KEY"]
    return sent


@pytest.mark.parametrize("path", ["/invocations", "/tokenize", "/version", "/v1/models", "/x"])
def test_every_route_but_the_probes_asks_for_the_key(path: str) -> None:
    start, body = _ask(path, method="POST")
    assert (start["status"], json.loads(body["body"])) == (401, {"error": "Unauthorized"})
    assert _ask(path, key="sk-wrong") == [start, body]
    assert _ask(path, key=KEY) == [path]
    # OPTIONS passes, as in vLLM's own check, so CORS answers preflights.
    assert _ask(path, method="OPTIONS") == [path]


def test_the_probes_paths_answer_without_the_key_and_a_websocket_is_refused() -> None:
    assert _ask("/health") + _ask("/metrics") == ["/health", "/metrics"]
    assert _ask("/health/")[0]["status"] == 401
    # A websocket needs the key on every path: on /metrics vLLM's Prometheus app would assert.
    for path in ("/v1/realtime", "/metrics", "/health"):
        start, _ = _ask(path, kind="websocket")
        assert (start["type"], start["status"]) == ("websocket.http.response.start", 401)
    assert _ask("/metrics", key=KEY, kind="websocket") == ["/metrics"]


@pytest.mark.parametrize("key", ["", "x" * (KEY_MIN_CHARS - 1)])
def test_a_short_key_stops_vllm_at_start(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # An empty key would let a bare `Bearer` in; vLLM turns its own check off for one.
    monkeypatch.setenv("VLLM_API_KEY", key)
    with pytest.raises(RuntimeError, match=f"VLLM_API_KEY holds {len(key)} characters, fewer"):
        KeyCheck(lambda *_: None)
    assert KEY_MIN_CHARS == spec.KEY_MIN_CHARS


#: Real vLLM 0.31's `init_entrypoints_middleware` (CORS, its own key check, then `--middleware`)
#: around a starlette app with a route of each kind; prints each answer's status.
_REAL = """
import argparse, os
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from vllm.entrypoints.serve.middleware.register import init_entrypoints_middleware

ok = lambda request: PlainTextResponse("ok")
paths = ("/invocations", "/tokenize", "/health", "/metrics", "/v1/models")
app = Starlette(routes=[Route(p, ok, methods=["GET", "POST"]) for p in paths])
args = argparse.Namespace(
    allowed_origins=["*"], allow_credentials=False, allowed_methods=["*"], allowed_headers=["*"],
    api_key=None, enable_request_id_headers=False, middleware=["key_check.KeyCheck"])
init_entrypoints_middleware(args, app, ())
client = TestClient(app)
key = {"Authorization": "Bearer " + os.environ["VLLM_API_KEY"]}
for path in paths:
    bare, keyed = client.post(path), client.post(path, headers=key)
    print(path, bare.status_code, bare.text, keyed.status_code)
preflight = client.options("/invocations", headers={
    "Origin": "https://a.example", "Access-Control-Request-Method": "POST"})
print("OPTIONS", preflight.status_code)
"""


@pytest.mark.skipif(
    not VLLM_PYTHON.exists(), reason=f"no {VLLM_PYTHON}: `make rehearse`, or set GEMMA_VLLM_PYTHON"
)
def test_real_vllm_runs_it_before_its_own_check() -> None:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO / "components" / "manifests" / "programs"),
        "VLLM_API_KEY": KEY,
    }
    run = subprocess.run(
        [str(VLLM_PYTHON), "-c", _REAL], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    unauthorized = UNAUTHORIZED.decode()
    assert run.stdout.splitlines() == [
        f"/invocations 401 {unauthorized} 200",
        f"/tokenize 401 {unauthorized} 200",
        "/health 200 ok 200",
        "/metrics 200 ok 200",
        f"/v1/models 401 {unauthorized} 200",
        "OPTIONS 200",
    ]
