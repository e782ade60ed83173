"""A local OpenAI-compatible streaming server for the benchmark tests. Test infrastructure only.

`StubServer` owns a stdlib `ThreadingHTTPServer` on 127.0.0.1 and an ephemeral port, served from a
daemon thread, so `infra.bench` can be tested end to end through the real `openai` client without
a model or a network. It imitates the parts of vLLM's OpenAI server the benchmark depends on:

- `GET /v1/models` lists one model;
- `POST /v1/chat/completions` with `"stream": true` answers with server-sent events: a role chunk,
  one chunk per token, `finish_reason` on the last token's chunk, a usage chunk (empty `choices`)
  when `stream_options.include_usage` is set, then `data: [DONE]`;
- every `/v1` route demands `Authorization: Bearer <api_key>` and answers 401 otherwise, as
  `vllm serve --api-key` does.

Tokens are paced: the first is sent `ttft_s` after the request is read, and token i (0-based) at
`ttft_s + i * seconds_per_token`, scheduled against absolute deadlines so sleep overshoot does not
accumulate. On a busy machine the real intervals still stretch, so tests that check measured
values replay `reply_instants` through a scripted clock instead of timing the stub.

Knobs for the failure modes the benchmark must surface:

- `cut_off_at`: stop after that many tokens with `finish_reason: "length"` even though more were
  asked for (a context or server-side limit, the "cut off" case);
- `stop_at`: stop after that many tokens with `finish_reason: "stop"` (a server that ignores
  `min_tokens` / `ignore_eos`, the "short" case);
- `send_usage=False`: never send the usage chunk, so the client must count content chunks;
- `together`: hold every stream's first token until that many requests are in flight at once, so
  a test can tell requests sent together from requests sent one after another without timing
  them (`peak_in_flight` records the most seen at once).

`reply_instants` is the timeline a correct client records for one reply, for tests that replace
the client's clock with a scripted one instead of measuring the stub's real delays.

Every request body the stub accepts is kept in `requests` so tests can assert what was sent.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
    send_usage: bool = True
    """Whether to honor `stream_options.include_usage` with a final usage chunk."""
    together: int = 1
    """Requests that must be in flight before any stream sends its first token (a barrier)."""
    together_timeout_s: float = 10.0
    """How long a stream waits at that barrier before giving up and streaming anyway."""


@dataclass
class StubServer:
    """A running stub; use as a context manager so the port and thread are always released."""

    config: StubConfig = field(default_factory=StubConfig)
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Parsed bodies of accepted chat-completion requests, in arrival order."""
    peak_in_flight: int = 0
    """The most chat-completion streams that were open at the same time."""
    together_broken: bool = False
    """Whether a stream gave up waiting for `config.together` streams to be open."""
    _in_flight: int = field(default=0, repr=False)
    _together: threading.Barrier | None = field(default=None, repr=False)
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
        if self.config.together > 1:
            self._together = threading.Barrier(
                self.config.together, timeout=self.config.together_timeout_s
            )
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

    def open_stream(self) -> None:
        """Count a stream as open, then wait until `config.together` streams are."""
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        if self._together is not None:
            try:
                self._together.wait()
            except threading.BrokenBarrierError:
                # Stream anyway so the client finishes; the test reads the flag.
                self.together_broken = True

    def close_stream(self) -> None:
        """Count a stream as closed."""
        with self._lock:
            self._in_flight -= 1

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def reply_instants(tokens: int, ttft_s: float, seconds_per_token: float) -> list[float]:
    """The clock readings of a client timing one streamed reply of `tokens` tokens with usage.

    In call order: the request sent (0), the role chunk (at once, no content), each token at
    `ttft_s + i * seconds_per_token`, the usage chunk and the stream's end (both at the last
    token). A client that times correctly measures exactly `ttft_s` and `1 / seconds_per_token`.
    """
    last = ttft_s + (tokens - 1) * seconds_per_token
    token_times = [ttft_s + i * seconds_per_token for i in range(tokens)]
    return [0.0, 0.0, *token_times, last, last]


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
        if not self._authorized():
            return
        if self.path.rstrip("/") != "/v1/models":
            self._send_json(404, {"error": {"message": f"no route {self.path}", "code": 404}})
            return
        model = {"id": self.stub.config.model, "object": "model", "created": 0, "owned_by": "stub"}
        self._send_json(200, {"object": "list", "data": [model]})

    def do_POST(self) -> None:
        """Serve streamed `/v1/chat/completions`."""
        if not self._authorized():
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, {"error": {"message": f"no route {self.path}", "code": 404}})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "body is not JSON", "code": 400}})
            return
        if not body.get("stream"):
            self._send_json(400, {"error": {"message": "the stub only streams", "code": 400}})
            return
        self.stub.record(body)
        self.stub.open_stream()
        try:
            self._stream(body, time.perf_counter())
        finally:
            self.stub.close_stream()

    def _authorized(self) -> bool:
        expected = f"Bearer {self.stub.config.api_key}"
        if self.headers.get("Authorization") == expected:
            return True
        self._send_json(
            401,
            {
                "error": {
                    "message": "Unauthorized",
                    "type": "invalid_request_error",
                    "code": 401,
                }
            },
        )
        return False

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, body: dict[str, Any], received: float) -> None:
        cfg = self.stub.config
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        limit = int(limit) if limit else cfg.default_max_tokens
        count, finish = limit, "length"
        if cfg.stop_at is not None and cfg.stop_at < count:
            count, finish = cfg.stop_at, "stop"
        if cfg.cut_off_at is not None and cfg.cut_off_at < count:
            count, finish = cfg.cut_off_at, "length"
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        send_usage = include_usage and cfg.send_usage
        model = body.get("model", cfg.model)

        # Connection: close with no Content-Length delimits the event stream, which keeps the
        # stub free of chunked-encoding code.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
            payload: dict[str, Any] = {
                "id": "chatcmpl-stub",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            if send_usage:
                payload["usage"] = None
            return payload

        try:
            self._event(chunk({"role": "assistant", "content": ""}, None))
            for index in range(count):
                deadline = received + cfg.ttft_s + index * cfg.seconds_per_token
                delay = deadline - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                last = index == count - 1
                self._event(chunk({"content": token_text(index)}, finish if last else None))
            if count == 0:
                self._event(chunk({"content": ""}, finish))
            if send_usage:
                prompt_tokens = sum(len(str(m.get("content", ""))) for m in body["messages"])
                usage = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": count,
                    "total_tokens": prompt_tokens + count,
                }
                self._event(
                    {
                        "id": "chatcmpl-stub",
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                )
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            # The client hung up (a timeout in a test); nothing left to serve.
            return

    def _event(self, payload: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
