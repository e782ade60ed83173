"""The benchmark's command line and where it points: flags, their rules, and the target.

This module owns what `python -m tools.bench` accepts and how it finds the server to measure:

- `parse_args` turns the flags into a validated `BenchArgs`, raising `UsageError` with one line
  that names the flag, the rule and the fix (the CLI prints it and exits 2);
- `resolve_target` picks the base URL and API key: flags first, then the environment, then
  `pulumi stack output` of the selected stack.

Everything here is plain functions; the Pulumi call is injected so the tests run without it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import urlsplit

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

PULUMI_TIMEOUT_S = 60.0

PROG = "python -m tools.bench"


class UsageError(ValueError):
    """Bad command-line input or unresolvable target; the CLI prints its one line and exits 2."""


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
    stack: str = "dev"
    """Stack whose plan's predictions are printed beside the measurements."""


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
        "--stack",
        default="dev",
        metavar="NAME",
        help="stack whose plan is printed beside the measurements (default dev)",
    )
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
        stack=ns.stack,
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
    return resolve_endpoint(args.endpoint, args.api_key, env, which, run)


def resolve_endpoint(
    endpoint: str | None,
    api_key: str | None,
    env: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
    run: Runner = subprocess.run,
) -> tuple[str, str | None]:
    """`resolve_target` for any command with an endpoint flag and a key flag (or none)."""
    key = api_key or env.get(API_KEY_ENV) or None
    if endpoint is not None:
        return endpoint, key
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
