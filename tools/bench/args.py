"""Where a benchmark command points, and its flags' shared rules.

`python -m tools.bench.capacity` and `python -m tools.bench.quality` find the server to measure
the same way: `resolve_endpoint` takes the base URL and API key from the flags first, then the
environment, then `pulumi stack output` of the selected stack. `normalize_base_url` and
`parse_whole` check a flag and raise `UsageError` with one line that names the flag, the rule
and the fix (the commands print it and exit 2).

Everything here is plain functions; the Pulumi call is injected so the tests run without it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

API_KEY_ENV = "GEMMA_GRAVITON_API_KEY"
"""Environment variable read for the API key when `--api-key` is not given."""

PULUMI_TIMEOUT_S = 60.0


class UsageError(ValueError):
    """Bad command-line input or unresolvable target; the command prints its one line, exits 2."""


def parse_whole(flag: str, text: str, minimum: int, example: str) -> int:
    """A whole number of at least `minimum`, or a `UsageError` naming the flag, rule and fix."""
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise UsageError(
            f"`{flag}` must be a whole number of at least {minimum}, got {text!r}; "
            f"pass e.g. {flag} {example}"
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


def resolve_endpoint(
    endpoint: str | None,
    api_key: str | None,
    env: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
    run: Runner = subprocess.run,
) -> tuple[str, str | None]:
    """The base URL and API key to use: flags first, then the environment, then Pulumi outputs.

    Pulumi is only consulted when `--endpoint` is omitted, because the endpoint and key of one
    stack belong together; a key from the environment still wins over the stack's.
    """
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
