"""vLLM's SSE keep-alive comments through the real gatekeeper (nginx with the generated config
and njs): they reach the client as they are sent, and a reply that runs past its timeout is cut
at the next one with the final error event.

The engine is a stand-in that answers as vLLM 0.31 does with `--sse-keep-alive-interval`
(vllm/entrypoints/serve/utils/sse_keep_alive.py): the stream's headers at once, then
`: keep-alive` comments while it has no token, then its tokens.
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from infra.plan.frontdoor import SSE_KEEP_ALIVE_BYTES
from infra.rehearse.front_door import gatekeeper_run as gate
from infra.rehearse.front_door.gatekeeper_run import INSTALL_HINT, nginx_ready
from infra.rehearse.group.ranks import free_port
from tests import builders

KEY = "k" * 40
COMMENT = b": keep-alive\n\n"
#: The stand-in's quiet interval and comments before its first token.
INTERVAL_S, QUIET = 0.4, 5
LIMITS = builders.gatekeeper_limits(
    max_request_bytes=4096,
    client_requests_per_minute=600,
    client_burst=20,
    client_concurrent_requests=2,
    client_connections=4,
    connection_capacity=8,
    worker_connections=4 * 8 + 2 * 8,
    probe_connections=8,
    reply_timeout_seconds=5,
    max_reply_bytes=64 * 1024,
    max_model_len=2048,
    served_model="model",
)


class _Quiet(http.server.BaseHTTPRequestHandler):
    """POST: headers, `QUIET` comments `INTERVAL_S` apart, then (unless `tokens` is 0) tokens."""

    tokens = 2

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.end_headers()
        self.wfile.flush()
        try:
            for _ in range(QUIET if self.tokens else 20):
                time.sleep(INTERVAL_S)
                self.wfile.write(COMMENT)
                self.wfile.flush()
            for index in range(self.tokens):
                chunk = {"choices": [{"index": 0, "text": f"t{index}", "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


class _Stuck(_Quiet):
    tokens = 0


def _engine(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.protocol_version = "HTTP/1.0"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()


def _stream(port: int) -> list[tuple[float, bytes]]:
    """POST a streamed completion through the gatekeeper; each line with when it came."""
    body = json.dumps({"model": "model", "prompt": "hi", "stream": True, "max_tokens": 2})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    start = time.monotonic()
    connection.request("POST", "/v1/completions", body=body, headers=headers)
    response = connection.getresponse()
    assert response.status == 200
    lines = []
    while line := response.readline():  # http.client undoes the chunked framing
        if line.strip():
            lines.append((time.monotonic() - start, line.strip()))
    connection.close()
    return lines


@pytest.mark.skipif(not nginx_ready(), reason=INSTALL_HINT)
def test_comments_reach_the_client_as_they_come_and_tokens_follow(tmp_path: Path) -> None:
    for engine in _engine(_Quiet):
        with gate.running_gate(
            gate.find_nginx(), LIMITS, KEY, free_port(), engine, tmp_path, lambda _line: None
        ) as running:
            port = int(running.base_url.rsplit(":", 1)[1])
            lines = _stream(port)
    comments = [at for at, line in lines if line == COMMENT.strip()]
    assert len(comments) == QUIET, lines
    # Unbuffered: each arrived about when it was sent, not all at the end.
    assert comments[0] < 2 * INTERVAL_S + 0.5 and comments[-1] >= (QUIET - 1) * INTERVAL_S
    data = [line for _, line in lines if line.startswith(b"data: ")]
    assert data[-1] == b"data: [DONE]" and len(data) == 3
    assert len(COMMENT) == SSE_KEEP_ALIVE_BYTES


@pytest.mark.skipif(not nginx_ready(), reason=INSTALL_HINT)
def test_a_reply_of_comments_only_is_cut_at_the_next_one_after_its_timeout(
    tmp_path: Path,
) -> None:
    """The gatekeeper's cut runs on each chunk; with the comments flowing it comes within an
    interval of the deadline, as an error event the client can read."""
    limits = replace(LIMITS, reply_timeout_seconds=1.5)
    for engine in _engine(_Stuck):
        with gate.running_gate(
            gate.find_nginx(), limits, KEY, free_port(), engine, tmp_path, lambda _line: None
        ) as running:
            port = int(running.base_url.rsplit(":", 1)[1])
            lines = _stream(port)
    last_at, _ = lines[-1]
    events = [json.loads(line[6:]) for _, line in lines if line.startswith(b"data: {")]
    assert events and events[-1]["error"]["type"] == "timeout_error", lines
    assert lines[-1][1] == b"data: [DONE]"
    assert 1.5 <= last_at <= 1.5 + INTERVAL_S + 1.0, lines
