"""The streaming client: one fixed-length reply, measured and judged, and rounds of them at once.

This module owns what happens on the wire and what a reply is worth:

- every reply is asked for a fixed length (`max_tokens`, plus vLLM's `min_tokens` and `ignore_eos`
  so the model cannot stop early), and its real length is read from the server's `usage` (falling
  back to counting content chunks, and saying so);
- `RequestRecord` keeps the raw instants of one stream (sent, first and last content, closed) and
  derives time to first token, decode tokens/s, ms/token and total time from them;
- `classify_reply` judges a reply against the requested length, so a reply that is cut off or short
  is a `Verdict` the report shows loudly, never averaged away silently;
- `run_round` sends a round's requests at once, one thread each.

Instants come from an injectable clock (`time.perf_counter` by default), so the rate arithmetic is
tested on known timestamps rather than on how busy the test machine is.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import openai

from tools.bench.args import API_KEY_ENV, BenchArgs

Clock = Callable[[], float]
"""Seconds from an arbitrary origin; only differences between its readings are used."""

NO_KEY_PLACEHOLDER = "EMPTY"
"""Sent when no key is known, so the client never falls back to an unrelated OPENAI_API_KEY."""

CONTENT_FIELDS = ("content", "reasoning_content", "reasoning")
"""Delta fields that carry generated text; vLLM streams a reasoning model's thinking separately."""

TOKEN_SOURCE_USAGE = "usage"
TOKEN_SOURCE_CHUNKS = "chunks"

STATUS_OK = "ok"
STATUS_CUT_OFF = "cut_off"
STATUS_SHORT = "short"
STATUS_LONG = "long"
STATUS_UNFINISHED = "unfinished"
STATUS_UNEXPECTED_FINISH = "unexpected_finish"
STATUS_FAILED = "failed"


class BenchError(RuntimeError):
    """The server cannot be used at all (key rejected, unreachable); the CLI exits 1."""


@dataclass(frozen=True)
class Verdict:
    """Whether a reply is the fixed-length reply that was asked for, and what to say about it."""

    status: str
    """One of the STATUS_* constants."""
    ok: bool
    """True only for a reply of exactly the requested length with a normal finish."""
    note: str
    """One sentence for the report; loud (upper-case lead) for anything not ok."""


def classify_reply(
    requested: int,
    tokens: int,
    finish_reason: str | None,
    token_source: str = TOKEN_SOURCE_USAGE,
    error: str | None = None,
) -> Verdict:
    """Judge one reply against the requested length.

    `finish_reason: "length"` at exactly the requested count is what a fixed-length benchmark
    expects; the same reason earlier means the server cut the reply off, which is the failure the
    field report's chat page hid.
    """
    if error is not None:
        return Verdict(STATUS_FAILED, False, f"FAILED: {error}")
    if tokens < requested:
        return _too_few(requested, tokens, finish_reason, _counted_note(token_source))
    if tokens > requested:
        return Verdict(
            STATUS_LONG,
            False,
            f"LONG: {tokens} tokens where {requested} were requested"
            f"{_counted_note(token_source)}; the server ignored max_tokens",
        )
    return _at_length(requested, tokens, finish_reason)


def _counted_note(token_source: str) -> str:
    """The caveat added to a length verdict whose count came from chunks, not the server."""
    if token_source != TOKEN_SOURCE_CHUNKS:
        return ""
    return (
        " (counted from content chunks because the server sent no usage; a chunk can carry "
        "more than one token)"
    )


def _too_few(requested: int, tokens: int, finish_reason: str | None, counted: str) -> Verdict:
    """A reply shorter than asked: cut off by a limit ("length") or let stop early (the rest)."""
    if finish_reason == "length":
        return Verdict(
            STATUS_CUT_OFF,
            False,
            f'CUT OFF: finish_reason "length" after {tokens} of {requested} requested '
            f"tokens{counted}; the server stopped the reply early (context or max-tokens "
            "limit)",
        )
    return Verdict(
        STATUS_SHORT,
        False,
        f"SHORT: {tokens} of {requested} requested tokens, finish_reason "
        f"{json.dumps(finish_reason)}{counted}; the server did not hold the reply to "
        "min_tokens/ignore_eos",
    )


def _at_length(requested: int, tokens: int, finish_reason: str | None) -> Verdict:
    """A reply of exactly the requested length, judged by how it finished."""
    if finish_reason == "length":
        return Verdict(
            STATUS_OK,
            True,
            f'finish_reason "length" at the requested {requested} tokens: the expected end of a '
            "fixed-length run",
        )
    if finish_reason == "stop":
        return Verdict(STATUS_OK, True, f'finish_reason "stop" at exactly {requested} tokens')
    if finish_reason is None:
        return Verdict(
            STATUS_UNFINISHED,
            False,
            f"NO FINISH: the stream ended after {tokens} tokens without a finish_reason; the "
            "connection may have dropped",
        )
    return Verdict(
        STATUS_UNEXPECTED_FINISH,
        False,
        f"ODD FINISH: finish_reason {json.dumps(finish_reason)} at {tokens} tokens",
    )


@dataclass
class RequestRecord:
    """Raw timings and counts of one streamed reply; derived metrics are properties."""

    concurrency: int
    round: int
    stream: int
    requested: int
    started: float = 0.0
    """Clock reading just before the request was sent."""
    first_token_at: float | None = None
    """Arrival of the first chunk carrying content."""
    last_token_at: float | None = None
    """Arrival of the last chunk carrying content."""
    ended: float = 0.0
    """Clock reading when the stream closed or failed."""
    content_chunks: int = 0
    usage_tokens: int | None = None
    """`usage.completion_tokens` from the final chunk, when the server sent it."""
    finish_reason: str | None = None
    error: str | None = None
    error_status: int | None = None
    """HTTP status of a failed request, when there was one."""
    _verdict: Verdict | None = field(default=None, repr=False)

    @property
    def token_source(self) -> str:
        """Where `completion_tokens` came from: the server's usage, or counted chunks."""
        return TOKEN_SOURCE_USAGE if self.usage_tokens is not None else TOKEN_SOURCE_CHUNKS

    @property
    def completion_tokens(self) -> int:
        """Tokens in the reply, from usage when available."""
        return self.usage_tokens if self.usage_tokens is not None else self.content_chunks

    @property
    def ttft_s(self) -> float | None:
        """Seconds from sending the request to the first content."""
        return None if self.first_token_at is None else self.first_token_at - self.started

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Tokens after the first over the time after the first."""
        if self.first_token_at is None or self.last_token_at is None:
            return None
        elapsed = self.last_token_at - self.first_token_at
        if self.completion_tokens < 2 or elapsed <= 0:
            return None
        return (self.completion_tokens - 1) / elapsed

    @property
    def ms_per_token(self) -> float | None:
        """Inter-token latency while decoding, the report's "241 ms/token"."""
        rate = self.decode_tokens_per_s
        return None if rate is None else 1000.0 / rate

    @property
    def total_s(self) -> float:
        """Seconds from sending the request to the end of the stream."""
        return self.ended - self.started

    @property
    def verdict(self) -> Verdict:
        """The classification of this reply against the requested length."""
        if self._verdict is None:
            self._verdict = classify_reply(
                self.requested,
                self.completion_tokens,
                self.finish_reason,
                self.token_source,
                self.error,
            )
        return self._verdict

    def to_json(self) -> dict[str, Any]:
        """The per-request record in the `--json` output."""
        verdict = self.verdict
        return {
            "concurrency": self.concurrency,
            "round": self.round,
            "stream": self.stream,
            "status": verdict.status,
            "ok": verdict.ok,
            "note": verdict.note,
            "requested_tokens": self.requested,
            "completion_tokens": self.completion_tokens,
            "token_source": self.token_source,
            "finish_reason": self.finish_reason,
            "ttft_s": self.ttft_s,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "ms_per_token": self.ms_per_token,
            "total_s": self.total_s,
            "error": self.error,
        }


def _has_content(delta: Any) -> bool:
    if delta is None:
        return False
    return any(getattr(delta, name, None) for name in CONTENT_FIELDS)


def consume_stream(
    chunks: Iterable[Any], record: RequestRecord, clock: Clock = time.perf_counter
) -> None:
    """Read a chat-completion chunk stream into `record`: content timing, finish and usage."""
    for chunk in chunks:
        now = clock()
        for choice in getattr(chunk, "choices", None) or []:
            if _has_content(getattr(choice, "delta", None)):
                if record.first_token_at is None:
                    record.first_token_at = now
                record.last_token_at = now
                record.content_chunks += 1
            if getattr(choice, "finish_reason", None):
                record.finish_reason = choice.finish_reason
        usage = getattr(chunk, "usage", None)
        if usage is not None and getattr(usage, "completion_tokens", None) is not None:
            record.usage_tokens = int(usage.completion_tokens)


def _error_text(exc: BaseException) -> str:
    # The client's connection errors say only "Connection error."; the cause says why.
    text = " ".join(str(exc).split()) or type(exc).__name__
    cause = exc.__cause__
    if cause is not None and str(cause).strip():
        text = f"{text.rstrip('.')}: {' '.join(str(cause).split())}"
    return text


def _describe_error(exc: Exception) -> tuple[str, int | None]:
    status = getattr(exc, "status_code", None)
    text = _error_text(exc)
    if isinstance(exc, openai.APITimeoutError):
        return "timed out waiting for the server (raise --timeout if it is just slow)", None
    if isinstance(exc, openai.APIConnectionError):
        return f"connection failed: {text}", None
    return f"{type(exc).__name__}: {text}", status


def run_request(
    client: openai.OpenAI,
    model: str,
    prompt: str,
    record: RequestRecord,
    start_together: threading.Barrier | None = None,
    clock: Clock = time.perf_counter,
) -> RequestRecord:
    """Send one streamed fixed-length chat completion and fill `record` with what came back."""
    if start_together is not None:
        start_together.wait()
    record.started = clock()
    try:
        stream = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=record.requested,
            stream=True,
            stream_options={"include_usage": True},
            # vLLM sampling extensions: without them the model may end early with "stop" and
            # the run would time replies of different lengths.
            extra_body={"min_tokens": record.requested, "ignore_eos": True},
        )
        consume_stream(stream, record, clock)
    except (openai.OpenAIError, ValueError, OSError) as exc:
        record.error, record.error_status = _describe_error(exc)
    record.ended = clock()
    return record


@dataclass(frozen=True)
class RoundResult:
    """The replies of one round, sent at once."""

    concurrency: int
    round: int
    records: tuple[RequestRecord, ...]

    @property
    def wall_s(self) -> float:
        """From the first request sent to the last stream closed."""
        return max(r.ended for r in self.records) - min(r.started for r in self.records)

    @property
    def completion_tokens(self) -> int:
        """All tokens the round produced, counted the same way as each reply."""
        return sum(r.completion_tokens for r in self.records)

    @property
    def aggregate_tokens_per_s(self) -> float | None:
        """Total completion tokens over the round's wall time."""
        wall = self.wall_s
        return self.completion_tokens / wall if wall > 0 else None


def run_round(
    client: openai.OpenAI,
    model: str,
    args: BenchArgs,
    concurrency: int,
    round_index: int,
    clock: Clock = time.perf_counter,
) -> RoundResult:
    """Send `concurrency` streamed requests at once (one thread each) and wait for all."""
    barrier = threading.Barrier(concurrency)
    records = [
        RequestRecord(
            concurrency=concurrency, round=round_index, stream=i + 1, requested=args.tokens
        )
        for i in range(concurrency)
    ]
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench") as pool:
        futures = [
            pool.submit(run_request, client, model, args.prompt, record, barrier, clock)
            for record in records
        ]
        done = tuple(f.result() for f in futures)
    return RoundResult(concurrency=concurrency, round=round_index, records=done)


def auth_message(endpoint: str, key: str | None) -> str:
    """The one line for a 401: no key given, or the wrong one."""
    if key is None:
        return (
            f"the server at {endpoint} requires an API key (HTTP 401) and none was given; pass "
            f"--api-key KEY or set {API_KEY_ENV} (`pulumi stack output --show-secrets apiKey`)"
        )
    return (
        f"the server at {endpoint} rejected the API key (HTTP 401); pass the deployment's key "
        f"with --api-key or {API_KEY_ENV} (`pulumi stack output --show-secrets apiKey`)"
    )


def discover_model(client: openai.OpenAI, endpoint: str, key: str | None) -> str:
    """The first model the server lists; vLLM serves exactly one."""
    try:
        models = [m.id for m in client.models.list()]
    except openai.AuthenticationError as exc:
        raise BenchError(auth_message(endpoint, key)) from exc
    except openai.APIStatusError as exc:
        raise BenchError(
            f"{endpoint}/models answered HTTP {exc.status_code}; check that --endpoint is the "
            "OpenAI base URL, or pass --model NAME"
        ) from exc
    except openai.APIConnectionError as exc:
        raise BenchError(
            f"could not reach {endpoint} ({_error_text(exc)}); check --endpoint and "
            "that the load balancer is ready"
        ) from exc
    if not models:
        raise BenchError(f"{endpoint}/models lists no models; pass --model NAME")
    return models[0]
