"""The routes without a key and the refusal of a key: a per-client rate on every open route,
cache headers on the static files, a wrong key answered and closed before its body is read, and
the request checks of the body (steering fields, the Bearer scheme's case; nesting depth is
`test_gatekeeper_carriage`'s).

Real nginx (Debian's nginx-light with njs 0.7.9) runs the generated config in front of the
OpenAI stub. nginx reads a request body only when a handler asks for it (ngx_http_core_module
docs, `client_body_timeout`; njs reads it for `js_content` via `r.requestText`), and the key is
checked in the rewrite phase (`if ($gatekeeper_key_ok ...)`), before any content handler.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from pathlib import Path

import pytest

from components.manifests import chat, gatekeeper_conf
from components.manifests.gatekeeper import nginx_conf
from tests import door_harness
from tests.door_harness import block
from tests.fakes.openai_stub import StubConfig
from tools.rehearse.front_door import gatekeeper_run as gate

LIMITS = door_harness.SMALL_LIMITS
PAGE = chat.ChatPage(model="org/model", max_reply_tokens=256, max_model_len=2048)
KEY = "k" * 32


@pytest.mark.parametrize("path", ["/health", "/ready", *chat.ROUTES])
def test_every_open_route_is_rate_limited_per_client_address_and_files_are_cached(
    path: str,
) -> None:
    conf = nginx_conf(LIMITS, page_root="/etc/gatekeeper")
    assert "limit_req_zone $binary_remote_addr zone=gatekeeper_open:1m rate=20r/s;" in conf
    location = block(conf, f"location = {path} {{")
    assert "limit_req zone=gatekeeper_open burst=40 nodelay;" in location
    if path in chat.ROUTES:  # the static files carry cache headers
        assert 'add_header Cache-Control "public, max-age=300";' in location
        assert "etag on;" in location


@door_harness.needs_nginx
def test_real_nginx_bounds_open_routes_and_refuses_keys_before_bodies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gatekeeper_conf, "FAILURE_BURST", 100)
    with door_harness.stub_door(
        LIMITS, KEY, StubConfig(api_key=KEY, model="m"), tmp_path, page_files=chat.files(PAGE)
    ) as door:
        # The Bearer scheme in any case (RFC 9110 section 11.1).
        for scheme in ("bearer", "BEARER", "Bearer"):
            with door_harness.connect(door) as conn:
                conn.sendall(
                    f"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: {scheme} {KEY}\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                assert conn.recv(64).startswith(b"HTTP/1.1 200"), scheme
        # Fields that steer vLLM's scheduling or identity are refused, naming the field.
        chat_body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        for field, value in (("request_id", "x"), ("priority", -10), ("cache_salt", "s")):
            body = json.dumps({**chat_body, field: value}).encode()
            reply = gate.request(door.base_url, "POST", "/v1/chat/completions", body, KEY)
            assert reply.status == 400, field
            assert json.loads(reply.body)["error"]["param"] == field
        # A wrong key with a body still to come: answered from the headers, then closed.
        with door_harness.connect(door) as conn:
            conn.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Authorization: Bearer wrong-key-wrong-key-wrong-key-00\r\n"
                b"Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{"
            )
            # Answered with 3,999 bytes of the body still to come: from the headers.
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += conn.recv(4096)
            assert answer.startswith(b"HTTP/1.1 401")
            assert b"\r\nConnection: close\r\n" in answer
            # The body trickles on; nginx closes within the socket's 5 s (a reset is a close too;
            # a timeout fails), not after the body.
            with contextlib.suppress(ConnectionError):
                conn.sendall(b"a")
                while chunk := conn.recv(4096):
                    answer += chunk
        # 1,000 GETs of / from one address: the per-client rate answers 429 to all but the burst
        # and what the rate refills while they are sent (a loaded machine sends them slower).
        start = time.monotonic()
        statuses = [gate.request(door.base_url, "GET", "/").status for _ in range(1000)]
        admitted = (
            1
            + gatekeeper_conf.OPEN_BURST
            + gatekeeper_conf.OPEN_PER_SECOND * math.ceil(time.monotonic() - start)
        )
        assert admitted < 500, f"1,000 requests took too long to test the rate: {admitted}"
        assert statuses.count(429) >= 1000 - admitted and statuses[0] == 200
        assert set(statuses) <= {200, 429}
        assert gate.request(door.base_url, "GET", "/ready").status in (200, 429)
