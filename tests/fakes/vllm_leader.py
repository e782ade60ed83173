"""A stand-in vLLM leader for the liveness probe's tests: `/health`, `/metrics` and a one-token
`/v1/completions`, each answering what the test sets. The metric lines carry the families, types
and labels real vLLM 0.31 exported (metrics-v0.31.json) and the completion is vLLM's recorded
reply (replies-v0.31.json), through `tests.fakes.vllm_replies`. Test infrastructure only."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.fakes import vllm_replies
from tests.fakes.vllm_replies import put

#: The label values of the fake's samples (the label names are the recording's).
LABELS = {"engine": "0", "model_name": "m"}


@dataclass
class LeaderState:
    health: int = 200
    running: int = 0
    waiting: int = 0
    generated: float = 0.0
    completion: int = 200
    #: Seconds a completion takes per prompt token given as token ids (a step's cost).
    seconds_per_token: float = 0.0
    #: Seconds every completion waits before its answer (a step running ahead of it).
    delay_s: float = 0.0
    completions: list[dict] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)

    def metrics(self) -> str:
        return vllm_replies.exposition(
            {
                "vllm:num_requests_running": self.running,
                "vllm:num_requests_waiting": self.waiting,
                "vllm:generation_tokens_total": self.generated,
                "vllm:prompt_tokens_total": 7,
                "vllm:kv_cache_usage_perc": 0,
            },
            LABELS,
        )


def completion_reply(model: str) -> dict:
    """vLLM's recorded one-token completion, of `model`, its token "x"."""
    reply = vllm_replies.reply("completion")["body"]
    put(reply, "model", model)
    (choice,) = reply["choices"]
    put(choice, "text", "x")
    put(choice, "finish_reason", "length")
    return reply


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
            request = json.loads(self.rfile.read(length))
            state.completions.append(request)
            state.keys.append(self.headers.get("Authorization"))
            if isinstance(request.get("prompt"), list):
                time.sleep(state.seconds_per_token * len(request["prompt"]))
            time.sleep(state.delay_s)
            body = completion_reply(request.get("model", LABELS["model_name"]))
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
