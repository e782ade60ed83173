"""A stand-in vLLM leader for the liveness probe's tests: `/health`, `/metrics` and a one-token
`/v1/completions`, each answering what the test sets. Test infrastructure only."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class LeaderState:
    health: int = 200
    running: int = 0
    waiting: int = 0
    generated: float = 0.0
    completion: int = 200
    completions: list[dict] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)

    def metrics(self) -> str:
        return (
            "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            f'vllm:num_requests_running{{engine="0",model_name="m"}} {self.running}.0\n'
            f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {self.waiting}.0\n'
            f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {self.generated}\n'
            f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} 7.0\n'
            f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.0\n'
        )


@contextmanager
def fake_leader() -> Iterator[tuple[int, LeaderState]]:
    """A leader on a free loopback port; yields (port, its state)."""
    state = LeaderState()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _reply(self, status: int, body: bytes = b"") -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._reply(state.health)
            elif self.path == "/metrics":
                self._reply(200, state.metrics().encode())
            else:
                self._reply(404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            state.completions.append(json.loads(self.rfile.read(length)))
            state.keys.append(self.headers.get("Authorization"))
            body = {"choices": [{"text": "x", "finish_reason": "length"}]}
            self._reply(state.completion, json.dumps(body).encode())

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1]), state
    finally:
        server.shutdown()
        server.server_close()
