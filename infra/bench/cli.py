"""Streamed decode benchmark of the deployed model, measured the way the field report did it.

The field report timed streamed replies of exactly 100 tokens through the load balancer (4.0
tokens/s, 241 ms/token) and was separately bitten by a client that ignored `finish_reason:
"length"` and so hid replies that had been cut off. This module owns both lessons:

- every reply is asked for a fixed length (`max_tokens`, plus vLLM's `min_tokens` and
  `ignore_eos` so the model cannot stop early), and its real length is read from the server's
  `usage` (falling back to counting content chunks, and saying so);
- every reply is classified against the requested length, and a reply that is cut off or short is
  reported loudly in the table, the JSON and the exit code, never averaged away silently.

Per stream it measures time to first token (TTFT), decode tokens/s (tokens after the first over
the time after the first), ms/token and total time. Per concurrency level it reports the aggregate
tokens/s of each round (all completion tokens over the round's wall time) and the median and
spread (min..max) of every metric.

Usage:
    python -m infra.bench --endpoint http://<load-balancer>/v1 --api-key KEY
    python -m infra.bench            # endpoint and key from `pulumi stack output`

Exit codes: 0 all replies complete, 1 a request failed or a reply was cut off or short (or the
server could not be used), 2 bad arguments.

The argument rules, the statistics and the reply classification are plain functions with no I/O so
the tests exercise them directly.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import urlsplit

import openai

API_KEY_ENV = "GEMMA_GRAVITON_API_KEY"
"""Environment variable read for the API key when `--api-key` is not given."""

DEFAULT_PROMPT = (
    "Write a long, detailed story about a lighthouse keeper who finds a message in a bottle. "
    "Keep writing until you are told to stop."
)
"""A prompt that invites a long reply; `min_tokens`/`ignore_eos` enforce the length anyway."""

DEFAULT_RUNS = 3
DEFAULT_TOKENS = 100
DEFAULT_CONCURRENCY = (1, 2, 4)
DEFAULT_TIMEOUT_S = 120.0
"""Seconds to wait for a connection and for each streamed chunk (not the whole reply)."""

NO_KEY_PLACEHOLDER = "EMPTY"
"""Sent when no key is known, so the client never falls back to an unrelated OPENAI_API_KEY."""

PULUMI_TIMEOUT_S = 60.0

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

STATUS_LABELS = {
    STATUS_OK: "ok",
    STATUS_CUT_OFF: "CUT OFF",
    STATUS_SHORT: "SHORT",
    STATUS_LONG: "LONG",
    STATUS_UNFINISHED: "NO FINISH",
    STATUS_UNEXPECTED_FINISH: "ODD FINISH",
    STATUS_FAILED: "FAILED",
}
"""How each status appears in the table; every non-ok label is upper case on purpose."""

PROG = "python -m infra.bench"


class UsageError(ValueError):
    """Bad command-line input or unresolvable target; the CLI prints its one line and exits 2."""


class BenchError(RuntimeError):
    """The server cannot be used at all (key rejected, unreachable); the CLI exits 1."""


# --------------------------------------------------------------------------------------------
# Arguments


@dataclass(frozen=True)
class BenchArgs:
    """Validated command-line arguments; the endpoint may still be unresolved (None)."""

    endpoint: str | None
    """OpenAI base URL ending in `/v1`, or None to ask `pulumi stack output endpoint`."""
    api_key: str | None
    """Bearer key from `--api-key`, or None to look further (env, then Pulumi)."""
    model: str | None
    """Model id, or None to use the first model the server lists."""
    runs: int
    """Rounds per concurrency level."""
    tokens: int
    """Completion tokens requested per reply; at least 2 so a decode rate exists."""
    concurrency: tuple[int, ...]
    """Concurrency levels, in the order they run."""
    prompt: str
    """User message sent with every request."""
    json_output: bool
    """Print one JSON object on stdout instead of the tables."""
    timeout: float
    """Seconds to wait for a connection and for each streamed chunk."""


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors become one-line `UsageError`s instead of usage dumps."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}; run `{PROG} --help` for the flags")


def build_parser() -> argparse.ArgumentParser:
    """The CLI's flags; values stay strings here so `parse_args` owns every rule and message."""
    parser = _Parser(
        prog=PROG,
        description=(
            "Benchmark streamed chat completions of fixed length against the deployed endpoint."
        ),
        allow_abbrev=False,
    )
    parser.add_argument(
        "--endpoint",
        metavar="URL",
        help="OpenAI base URL, with or without the trailing /v1 "
        "(default: `pulumi stack output endpoint`)",
    )
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"bearer key (default: ${API_KEY_ENV}, else "
        "`pulumi stack output --show-secrets apiKey` when --endpoint is omitted)",
    )
    parser.add_argument(
        "--model", metavar="NAME", help="model id (default: the first model in /v1/models)"
    )
    parser.add_argument(
        "--runs",
        default=str(DEFAULT_RUNS),
        metavar="N",
        help=f"rounds per level (default {DEFAULT_RUNS})",
    )
    parser.add_argument(
        "--tokens",
        default=str(DEFAULT_TOKENS),
        metavar="N",
        help=f"completion tokens per reply (default {DEFAULT_TOKENS})",
    )
    parser.add_argument(
        "--concurrency",
        metavar="N[,N...]",
        default=",".join(str(c) for c in DEFAULT_CONCURRENCY),
        help="comma-separated concurrent streams per round (default 1,2,4)",
    )
    parser.add_argument(
        "--prompt", default=DEFAULT_PROMPT, metavar="TEXT", help="user message to send"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument(
        "--timeout",
        default=str(DEFAULT_TIMEOUT_S),
        metavar="S",
        help=f"seconds to wait for a connection and for each chunk (default {DEFAULT_TIMEOUT_S:g})",
    )
    return parser


def parse_whole(flag: str, text: str, minimum: int, example: str, why: str = "") -> int:
    """A whole number of at least `minimum`, or a `UsageError` naming the flag, rule and fix."""
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        reason = f" ({why})" if why else ""
        raise UsageError(
            f"`{flag}` must be a whole number of at least {minimum}{reason}, got {text!r}; "
            f"pass e.g. {flag} {example}"
        )
    return value


def parse_concurrency(text: str) -> tuple[int, ...]:
    """Comma-separated concurrency levels, each at least 1, in the given order."""
    levels: list[int] = []
    for item in text.split(","):
        try:
            level = int(item.strip())
        except ValueError:
            level = 0
        if level < 1:
            raise UsageError(
                "`--concurrency` must be a comma-separated list of whole numbers of at least 1, "
                f"got {text!r}; pass e.g. --concurrency 1,2,4"
            )
        levels.append(level)
    return tuple(levels)


def parse_timeout(text: str) -> float:
    """A positive number of seconds."""
    try:
        value = float(text.strip())
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise UsageError(
            f"`--timeout` must be a number of seconds greater than 0, got {text!r}; "
            "pass e.g. --timeout 120"
        )
    return value


def normalize_base_url(url: str, source: str = "--endpoint") -> str:
    """The OpenAI base URL ending in `/v1`, accepting the URL with or without that suffix.

    A path prefix in front of `/v1` (an ingress route) is kept; a URL that already points at a
    route below `/v1` is refused rather than silently mangled.
    """
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(
            f"`{source}` must be an http(s) URL such as http://<load-balancer>/v1, got {url!r}; "
            "pass the `endpoint` stack output"
        )
    path = parts.path.rstrip("/")
    if "/v1/" in f"{path}/" and not path.endswith("/v1"):
        raise UsageError(
            f"`{source}` must be the OpenAI base URL ending in /v1, not a route below it, "
            f"got {url!r}; pass e.g. {parts.scheme}://{parts.netloc}/v1"
        )
    if not path.endswith("/v1"):
        path = f"{path}/v1"
    return f"{parts.scheme}://{parts.netloc}{path}"


def parse_args(argv: Sequence[str]) -> BenchArgs:
    """Parse and validate the command line; raises `UsageError` with a one-line message."""
    ns = build_parser().parse_args(list(argv))
    endpoint = normalize_base_url(ns.endpoint) if ns.endpoint is not None else None
    if ns.model is not None and not ns.model.strip():
        raise UsageError(
            "`--model` must not be empty; pass a model id, or leave the flag out to use the "
            "server's first model"
        )
    if not ns.prompt.strip():
        raise UsageError(
            "`--prompt` must not be empty; pass the text to send, or leave the flag out for the "
            "default prompt"
        )
    if ns.api_key is not None and not ns.api_key.strip():
        raise UsageError(
            f"`--api-key` must not be empty; pass the deployment's key, or leave the flag out to "
            f"use ${API_KEY_ENV}"
        )
    return BenchArgs(
        endpoint=endpoint,
        api_key=ns.api_key.strip() if ns.api_key is not None else None,
        model=ns.model.strip() if ns.model is not None else None,
        runs=parse_whole("--runs", ns.runs, 1, str(DEFAULT_RUNS)),
        tokens=parse_whole(
            "--tokens",
            ns.tokens,
            2,
            str(DEFAULT_TOKENS),
            why="the decode rate needs tokens after the first",
        ),
        concurrency=parse_concurrency(ns.concurrency),
        prompt=ns.prompt,
        json_output=ns.json,
        timeout=parse_timeout(ns.timeout),
    )


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def _pulumi_output(args: list[str], run: Runner, fix: str) -> str:
    """One `pulumi stack output` value, or a `UsageError` saying which command failed and why."""
    command = ["pulumi", "stack", "output", *args]
    shown = " ".join(command)
    try:
        done = run(command, capture_output=True, text=True, timeout=PULUMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"`{shown}` could not run ({exc}); {fix}") from exc
    value = (done.stdout or "").strip()
    if done.returncode != 0 or not value:
        detail = next((ln.strip() for ln in (done.stderr or "").splitlines() if ln.strip()), "")
        reason = detail or ("empty output" if done.returncode == 0 else f"exit {done.returncode}")
        raise UsageError(f"`{shown}` failed ({reason}); {fix}")
    return value


def resolve_target(
    args: BenchArgs,
    env: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
    run: Runner = subprocess.run,
) -> tuple[str, str | None]:
    """The base URL and API key to use: flags first, then the environment, then Pulumi outputs.

    Pulumi is only consulted when `--endpoint` is omitted, because the endpoint and key of one
    stack belong together; a key from the environment still wins over the stack's.
    """
    key = args.api_key or env.get(API_KEY_ENV) or None
    if args.endpoint is not None:
        return args.endpoint, key
    if which("pulumi") is None:
        raise UsageError(
            "`--endpoint` is required when no `pulumi` executable is on PATH; pass --endpoint "
            f"http://<load-balancer>/v1 and --api-key KEY (or set {API_KEY_ENV})"
        )
    endpoint = _pulumi_output(
        ["endpoint"],
        run,
        "pass --endpoint http://<load-balancer>/v1, or run from the project with a stack selected",
    )
    endpoint = normalize_base_url(endpoint, source="pulumi stack output endpoint")
    if key is None:
        key = _pulumi_output(
            ["--show-secrets", "apiKey"], run, f"pass --api-key KEY or set {API_KEY_ENV}"
        )
    return endpoint, key


# --------------------------------------------------------------------------------------------
# Statistics


def median(values: Sequence[float]) -> float:
    """The median; the mean of the two middle values for an even count."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2


def spread(values: Sequence[float]) -> tuple[float, float]:
    """The (min, max) range of the values."""
    if not values:
        raise ValueError("spread of no values")
    return float(min(values)), float(max(values))


@dataclass(frozen=True)
class Summary:
    """Median and spread of one metric over a set of samples."""

    median: float
    min: float
    max: float
    n: int

    def to_json(self) -> dict[str, float | int]:
        """The JSON form: median, min, max and the sample count."""
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}

    def format(self, digits: int) -> str:
        """`median (min..max)` with `digits` decimals."""
        return f"{self.median:.{digits}f} ({self.min:.{digits}f}..{self.max:.{digits}f})"


def summarize(values: Iterable[float | None]) -> Summary | None:
    """Median and spread of the values that exist; None when there are none."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    low, high = spread(present)
    return Summary(median=median(present), min=low, max=high, n=len(present))


# --------------------------------------------------------------------------------------------
# Reply classification


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
    counted = (
        " (counted from content chunks because the server sent no usage; a chunk can carry "
        "more than one token)"
        if token_source == TOKEN_SOURCE_CHUNKS
        else ""
    )
    if error is not None:
        return Verdict(STATUS_FAILED, False, f"FAILED: {error}")
    if tokens < requested:
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
    if tokens > requested:
        return Verdict(
            STATUS_LONG,
            False,
            f"LONG: {tokens} tokens where {requested} were requested{counted}; the server "
            "ignored max_tokens",
        )
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


# --------------------------------------------------------------------------------------------
# Measuring one stream


@dataclass
class RequestRecord:
    """Raw timings and counts of one streamed reply; derived metrics are properties."""

    concurrency: int
    round: int
    stream: int
    requested: int
    started: float = 0.0
    """perf_counter() just before the request was sent."""
    first_token_at: float | None = None
    """Arrival of the first chunk carrying content."""
    last_token_at: float | None = None
    """Arrival of the last chunk carrying content."""
    ended: float = 0.0
    """perf_counter() when the stream closed or failed."""
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
    chunks: Iterable[Any], record: RequestRecord, clock: Callable[[], float] = time.perf_counter
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
) -> RequestRecord:
    """Send one streamed fixed-length chat completion and fill `record` with what came back."""
    if start_together is not None:
        start_together.wait()
    record.started = time.perf_counter()
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
        consume_stream(stream, record)
    except (openai.OpenAIError, ValueError, OSError) as exc:
        record.error, record.error_status = _describe_error(exc)
    record.ended = time.perf_counter()
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
    client: openai.OpenAI, model: str, args: BenchArgs, concurrency: int, round_index: int
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
            pool.submit(run_request, client, model, args.prompt, record, barrier)
            for record in records
        ]
        done = tuple(f.result() for f in futures)
    return RoundResult(concurrency=concurrency, round=round_index, records=done)


# --------------------------------------------------------------------------------------------
# Aggregation and reporting


def level_stats(concurrency: int, rounds: Sequence[RoundResult]) -> dict[str, Any]:
    """Per-level JSON: median and spread of each metric, and loud counts of bad replies."""
    records = [r for rnd in rounds for r in rnd.records]
    measured = [r for r in records if r.error is None]
    statuses = Counter(r.verdict.status for r in records)

    def stat(values: Iterable[float | None]) -> dict[str, float | int] | None:
        summary = summarize(values)
        return None if summary is None else summary.to_json()

    return {
        "concurrency": concurrency,
        "rounds": len(rounds),
        "requests": len(records),
        "ok": statuses[STATUS_OK],
        "failed": statuses[STATUS_FAILED],
        "cut_off": statuses[STATUS_CUT_OFF],
        "short": sum(
            n for s, n in statuses.items() if s not in (STATUS_OK, STATUS_FAILED, STATUS_CUT_OFF)
        ),
        "statuses": dict(sorted(statuses.items())),
        "finish_reasons": dict(sorted(Counter(str(r.finish_reason) for r in measured).items())),
        "token_sources": sorted({r.token_source for r in measured}),
        "round_wall_s": [rnd.wall_s for rnd in rounds],
        "round_completion_tokens": [rnd.completion_tokens for rnd in rounds],
        "aggregate_tokens_per_s": stat(rnd.aggregate_tokens_per_s for rnd in rounds),
        "decode_tokens_per_s": stat(r.decode_tokens_per_s for r in measured),
        "ms_per_token": stat(r.ms_per_token for r in measured),
        "ttft_s": stat(r.ttft_s for r in measured),
        "total_s": stat(r.total_s for r in measured),
    }


def build_report(
    endpoint: str, model: str, args: BenchArgs, levels: Sequence[tuple[int, Sequence[RoundResult]]]
) -> dict[str, Any]:
    """The one JSON object `--json` prints; the table is rendered from it too."""
    records = [r for _, rounds in levels for rnd in rounds for r in rnd.records]
    problems = [
        {
            "concurrency": r.concurrency,
            "round": r.round,
            "stream": r.stream,
            "status": r.verdict.status,
            "note": r.verdict.note,
        }
        for r in records
        if not r.verdict.ok
    ]
    return {
        "endpoint": endpoint,
        "model": model,
        "requested_tokens": args.tokens,
        "runs": args.runs,
        "concurrency": list(args.concurrency),
        "prompt": args.prompt,
        "ok": not problems,
        "failed": sum(r.verdict.status == STATUS_FAILED for r in records),
        "cut_off_or_short": sum(
            not r.verdict.ok and r.verdict.status != STATUS_FAILED for r in records
        ),
        "problems": problems,
        "levels": [level_stats(c, rounds) for c, rounds in levels],
        "requests": [r.to_json() for r in records],
    }


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _fmt_summary(stat: Mapping[str, float] | None, digits: int) -> str:
    if stat is None:
        return "-"
    return Summary(stat["median"], stat["min"], stat["max"], int(stat["n"])).format(digits)


def render_table(report: Mapping[str, Any]) -> str:
    """Human-readable report: per-request rows, per-level medians and spreads, then problems."""
    requested = report["requested_tokens"]
    lines = [
        f"model {report['model']} at {report['endpoint']}",
        f"{requested} tokens per reply, {report['runs']} rounds per level, "
        f"concurrency {','.join(str(c) for c in report['concurrency'])}",
        "",
        "Per request",
        f"{'conc':>4} {'round':>5} {'stream':>6} {'tokens':>9} {'counted':>7} "
        f"{'finish':<17} {'TTFT s':>7} {'tok/s':>7} {'ms/tok':>7} {'total s':>8}  status",
    ]
    for r in report["requests"]:
        finish = str(r["finish_reason"])
        if r["ok"] and r["finish_reason"] == "length":
            finish = "length (expected)"
        elif r["status"] == STATUS_CUT_OFF:
            finish = "length (EARLY)"
        lines.append(
            f"{r['concurrency']:>4} {r['round']:>5} {r['stream']:>6} "
            f"{r['completion_tokens']:>4}/{requested:<4} {r['token_source']:>7} {finish:<17} "
            f"{_fmt(r['ttft_s'], 3):>7} {_fmt(r['decode_tokens_per_s'], 2):>7} "
            f"{_fmt(r['ms_per_token'], 1):>7} {_fmt(r['total_s'], 2):>8}  "
            f"{STATUS_LABELS[r['status']]}"
        )
    lines += [
        "",
        "Per level: median (min..max); aggregate is all tokens of a round over its wall time",
        f"{'conc':>4} {'replies':<22} {'aggregate tok/s':<22} {'decode tok/s/stream':<22} "
        f"{'ms/token':<22} {'TTFT s':<22} {'total s':<22}",
    ]
    for lvl in report["levels"]:
        replies = f"{lvl['ok']}/{lvl['requests']} ok"
        if lvl["failed"]:
            replies += f", {lvl['failed']} FAILED"
        if lvl["cut_off"]:
            replies += f", {lvl['cut_off']} CUT OFF"
        if lvl["short"]:
            replies += f", {lvl['short']} SHORT"
        lines.append(
            f"{lvl['concurrency']:>4} {replies:<22} "
            f"{_fmt_summary(lvl['aggregate_tokens_per_s'], 2):<22} "
            f"{_fmt_summary(lvl['decode_tokens_per_s'], 2):<22} "
            f"{_fmt_summary(lvl['ms_per_token'], 1):<22} "
            f"{_fmt_summary(lvl['ttft_s'], 3):<22} "
            f"{_fmt_summary(lvl['total_s'], 2):<22}"
        )
    sources = sorted({s for lvl in report["levels"] for s in lvl["token_sources"]})
    if sources == [TOKEN_SOURCE_USAGE]:
        lines.append("tokens counted from the server's usage")
    elif sources:
        lines.append(
            "tokens counted from: "
            + ", ".join(
                "server usage" if s == TOKEN_SOURCE_USAGE else "content chunks (no usage sent)"
                for s in sources
            )
        )
    lines.append("")
    if report["problems"]:
        lines.append(
            f"!!! replies CUT OFF or SHORT: {report['cut_off_or_short']}, "
            f"requests FAILED: {report['failed']}"
        )
        for p in report["problems"]:
            lines.append(
                f"!!! conc {p['concurrency']} round {p['round']} stream {p['stream']}: {p['note']}"
            )
    else:
        lines.append(
            f'all replies were exactly {requested} tokens; finish_reason "length" there is the '
            "expected end of a fixed-length run"
        )
    return "\n".join(line.rstrip() for line in lines)


def _progress(result: RoundResult, runs: int) -> str:
    records = result.records
    ok = sum(r.verdict.ok for r in records)
    bad = Counter(STATUS_LABELS[r.verdict.status] for r in records if not r.verdict.ok)
    rate = result.aggregate_tokens_per_s
    line = (
        f"[concurrency {result.concurrency}, round {result.round}/{runs}] "
        f"{ok}/{len(records)} ok, {result.completion_tokens} tokens in {result.wall_s:.2f} s"
        f" = {_fmt(rate, 2)} tok/s aggregate"
    )
    if bad:
        line += "; " + ", ".join(f"{n} {label}" for label, n in sorted(bad.items()))
    return line


def _auth_message(endpoint: str, key: str | None) -> str:
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
        raise BenchError(_auth_message(endpoint, key)) from exc
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


def run_bench(
    args: BenchArgs, endpoint: str, key: str | None, log: Callable[[str], None]
) -> dict[str, Any]:
    """Run every level and round and return the report; raises `BenchError` on a rejected key."""
    client = openai.OpenAI(
        base_url=endpoint,
        api_key=key or NO_KEY_PLACEHOLDER,
        # A retried request would be timed as one slow reply.
        max_retries=0,
        timeout=args.timeout,
    )
    try:
        model = args.model or discover_model(client, endpoint, key)
        log(
            f"bench: {model} at {endpoint}, {args.tokens} tokens per reply, {args.runs} rounds "
            f"at concurrency {','.join(str(c) for c in args.concurrency)}"
        )
        levels: list[tuple[int, list[RoundResult]]] = []
        for concurrency in args.concurrency:
            rounds: list[RoundResult] = []
            for round_index in range(1, args.runs + 1):
                result = run_round(client, model, args, concurrency, round_index)
                if any(r.error_status == 401 for r in result.records):
                    raise BenchError(_auth_message(endpoint, key))
                log(_progress(result, args.runs))
                rounds.append(result)
            levels.append((concurrency, rounds))
    finally:
        client.close()
    return build_report(endpoint, model, args, levels)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: 0 all replies complete, 1 failures or cut-off/short replies, 2 bad input."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        endpoint, key = resolve_target(args, os.environ)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        report = run_bench(args, endpoint, key, log)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; no report", file=sys.stderr)
        return 130

    if args.json_output:
        print(json.dumps(report, indent=2))
    else:
        print(render_table(report))
    return 0 if report["ok"] else 1
