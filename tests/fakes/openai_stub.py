"""A local OpenAI-compatible streaming server for the tests. Test infrastructure only.

`StubServer` owns a stdlib `ThreadingHTTPServer` on 127.0.0.1 and an ephemeral port, served from a
daemon thread, so a client (the rehearsal's endpoint checks, the quality command's model lookup,
the gatekeeper in front of it) is tested end to end without a model or a network. It imitates the
parts of vLLM's OpenAI server they depend on,
each reply built from what real vLLM 0.31 answered (`tests.fakes.vllm_replies`, recorded by
`python -m tests.fakes.record_vllm`), with only ids, model, content, finish reason and token
counts set by the stub:

- `GET /v1/models` lists one model;
- `POST /v1/chat/completions` with `"stream": true` answers with server-sent events framed as
  vLLM frames them: a role chunk, one chunk per token, `finish_reason` (and `stop_reason`) on the
  last token's chunk, a usage chunk (empty `choices`) when `stream_options.include_usage` is set,
  then `data: [DONE]`; without `"stream"` it answers the whole reply at once, as vLLM does;
- every `/v1` route demands `Authorization: Bearer <api_key>` and answers vLLM's 401 otherwise,
  as `vllm serve --api-key` does.

The event stream is delimited by `Connection: close` rather than vLLM's chunked encoding, which
keeps the stub free of chunked-encoding code; the events' bytes are vLLM's.

Tokens are paced: token i (0-based) is sent `ttft_s + i * seconds_per_token` after the request
is read, scheduled against absolute deadlines so sleep overshoot does not accumulate.
`StubConfig.cut_off_at` and `stop_at` play the failure modes a client must surface: a reply cut
off by a context or server-side limit, and a server that ignores `min_tokens` / `ignore_eos`.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes import vllm_replies
from tests.fakes.vllm_replies import put

__all__ = ["StubConfig", "StubServer"]

STUB_MODEL = "google/gemma-4-12B-it"
"""The model id the stub lists and serves by default, matching the deployment."""

STUB_API_KEY = "test-key"
"""The bearer key the stub accepts by default."""


@dataclass(frozen=True)
class StubConfig:
    """How the stub behaves; one instance per server, fixed for its lifetime."""

    api_key: str = STUB_API_KEY
    """The only bearer token accepted; anything else gets HTTP 401."""
    model: str = STUB_MODEL
    """The single model id listed by `/v1/models`."""
    seconds_per_token: float = 0.02
    """Gap between consecutive tokens; the decode rate is its inverse."""
    ttft_s: float = 0.05
    """Delay between reading the request and sending the first token."""
    default_max_tokens: int = 16
    """Reply length when the request names neither `max_tokens` nor `max_completion_tokens`."""
    cut_off_at: int | None = None
    """If set and smaller than the request's limit, end there with finish_reason "length"."""
    stop_at: int | None = None
    """If set and smaller than the request's limit, end there with finish_reason "stop"."""


@dataclass
class StubServer:
    """A running stub; use as a context manager so the port and thread are always released."""

    config: StubConfig = field(default_factory=StubConfig)
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Parsed bodies of accepted chat-completion requests, in arrival order."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _httpd: ThreadingHTTPServer | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL of the running stub, ending in `/v1`."""
        if self._httpd is None:
            raise RuntimeError("StubServer is not running; use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def root_url(self) -> str:
        """The stub's URL without `/v1`, to test that the client appends it."""
        return self.base_url.removesuffix("/v1")

    def start(self) -> StubServer:
        """Bind 127.0.0.1 on an ephemeral port and serve from a daemon thread."""
        handler = type("_BoundHandler", (_Handler,), {"stub": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A short poll keeps `stop()` (which waits for the serve loop to notice) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-stub",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def record(self, body: dict[str, Any]) -> None:
        """Keep an accepted request body (called from handler threads)."""
        with self._lock:
            self.requests.append(body)

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def token_text(index: int) -> str:
    """The content of token `index`: a known word, so tests can check what arrived."""
    return f"tok{index} "


class _Handler(BaseHTTPRequestHandler):
    """Serves one HTTP request against the owning `StubServer` (set on a per-server subclass)."""

    stub: StubServer
    # Each token is a small write; without this, Nagle's algorithm can hold one back and distort
    # the very timings the tests check.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        """Serve `/v1/models`."""
        if not self._routed("/v1/models"):
            return
        listing = vllm_replies.reply("models")["body"]
        model = listing["data"][0]
        put(model, "id", self.stub.config.model)
        put(model, "root", self.stub.config.model)
        listing["data"] = [model]
        self._send_json(200, listing)

    def do_POST(self) -> None:
        """Serve `/v1/chat/completions`, streamed or not."""
        if not self._routed("/v1/chat/completions"):
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "body is not JSON", "code": 400}})
            return
        self.stub.record(body)
        if not body.get("stream"):
            self._send_json(200, self._whole(body))
            return
        self._stream(body, time.perf_counter())

    def _routed(self, route: str) -> bool:
        """Whether the request has the key and is for `route`; if not, refuse it as vLLM does."""
        if self.headers.get("Authorization") != f"Bearer {self.stub.config.api_key}":
            refused = vllm_replies.reply("unauthorized")
            self._send_json(refused["status"], refused["body"])
            return False
        if self.path.rstrip("/") != route:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "code": 404}})
            return False
        return True

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", vllm_replies.reply("chat")["headers"]["content-type"])
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _length(self, body: dict[str, Any]) -> tuple[int, str]:
        """How many tokens the reply has and why it ends there."""
        cfg = self.stub.config
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        limit = int(limit) if limit else cfg.default_max_tokens
        count, finish = limit, "length"
        if cfg.stop_at is not None and cfg.stop_at < count:
            count, finish = cfg.stop_at, "stop"
        if cfg.cut_off_at is not None and cfg.cut_off_at < count:
            count, finish = cfg.cut_off_at, "length"
        return count, finish

    def _usage(self, template: dict[str, Any], body: dict[str, Any], count: int) -> dict[str, Any]:
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in body["messages"])
        usage = dict(template)
        put(usage, "prompt_tokens", prompt_tokens)
        put(usage, "completion_tokens", count)
        put(usage, "total_tokens", prompt_tokens + count)
        return usage

    def _whole(self, body: dict[str, Any]) -> dict[str, Any]:
        """A reply not streamed: vLLM's recorded one with the stub's tokens."""
        count, finish = self._length(body)
        reply = vllm_replies.reply("chat")["body"]
        put(reply, "id", "chatcmpl-stub")
        put(reply, "created", int(time.time()))
        put(reply, "model", body.get("model", self.stub.config.model))
        (choice,) = reply["choices"]
        put(choice["message"], "content", "".join(token_text(i) for i in range(count)))
        put(choice, "finish_reason", finish)
        put(reply, "usage", self._usage(reply["usage"], body, count))
        return reply

    def _stream(self, body: dict[str, Any], received: float) -> None:
        cfg = self.stub.config
        count, finish = self._length(body)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        model = body.get("model", cfg.model)
        templates = vllm_replies.stream_templates()

        self.send_response(200)
        streamed = vllm_replies.reply("chat_streamed")["headers"]
        self.send_header("Content-Type", streamed["content-type"])
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(kind: str, content: str | None = None) -> dict[str, Any]:
            payload = copy.deepcopy(templates[kind])
            put(payload, "id", "chatcmpl-stub")
            put(payload, "created", int(time.time()))
            put(payload, "model", model)
            if content is not None:
                put(payload["choices"][0]["delta"], "content", content)
            if kind == "finish":
                put(payload["choices"][0], "finish_reason", finish)
            return payload

        try:
            self._event(chunk("role"))
            for index in range(count):
                deadline = received + cfg.ttft_s + index * cfg.seconds_per_token
                delay = deadline - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                last = index == count - 1
                self._event(chunk("finish" if last else "token", token_text(index)))
            if count == 0:
                self._event(chunk("finish", ""))
            if include_usage:
                usage = chunk("usage")
                put(usage, "usage", self._usage(usage["usage"], body, count))
                self._event(usage)
            self.wfile.write(vllm_replies.encode(vllm_replies.DONE))
        except (BrokenPipeError, ConnectionResetError):
            # The client hung up (a timeout in a test); nothing left to serve.
            return

    def _event(self, payload: dict[str, Any]) -> None:
        self.wfile.write(vllm_replies.encode(payload))
