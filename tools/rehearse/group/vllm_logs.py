"""Parsers for the lines vLLM 0.31 (CPU backend) prints about its KV cache and its failures.

A rehearsal or a deployment check reads vLLM's own numbers rather than guessing them: how many
KV tokens the engine planned, the concurrency it reports, the memory it accepted or refused, and
the message a failed start died with. Each parser takes the whole log text and returns a frozen
dataclass for the first matching line, or None when the log has no such line.

The texts come from vLLM's source:
- `vllm/v1/core/kv_cache_utils.py` `update_kv_cache_capacity`:
  "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx", with
  both counts comma-grouped (`f"{n:,}"`);
- `vllm/v1/worker/cpu_worker.py` `determine_available_memory`: "Explicitly set (k/t) GiB for KV
  cache on node N." / "Auto set (k/t) GiB ...";
- `vllm/v1/core/kv_cache_utils.py` `_check_enough_kv_cache_memory`: "To serve at least one
  request with the model's max seq len (L), (x GiB KV cache is needed, which is larger than the
  available KV cache memory (y GiB). Based on the available memory, the estimated maximum model
  length is M."

GiB figures are vLLM's `format_gib`, `round(bytes / 2**30, 2)`, so they carry at most two decimals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = r"\d+(?:\.\d+)?"
_COUNT = r"\d{1,3}(?:,\d{3})*|\d+"

_KV_CACHE_SIZE = re.compile(rf"\b(?P<device>[A-Z]+) KV cache size: (?P<tokens>{_COUNT}) tokens")
_MAX_CONCURRENCY = re.compile(
    rf"Maximum concurrency for (?P<max_model_len>{_COUNT}) tokens per request: "
    rf"(?P<concurrency>{_NUMBER})x"
)
_KV_CACHE_SET = re.compile(
    rf"(?P<mode>Explicitly|Auto) set \((?P<kv_gib>{_NUMBER})/(?P<total_gib>{_NUMBER})\) GiB "
    rf"for KV cache on node (?P<node>\d+)"
)
_MAX_SEQ_LEN = re.compile(
    r"To serve at least one request with the model's max seq len \((?P<max_model_len>\d+)\), "
    rf"\((?P<needed_gib>{_NUMBER}) GiB KV cache is needed, which is larger than the available "
    rf"KV cache memory \((?P<available_gib>{_NUMBER}) GiB\)\."
    r"(?: Based on the available memory, the estimated maximum model length is "
    r"(?P<estimated>\d+)\.)?"
)
# vLLM's log prefix: "(EngineCore pid=1) ERROR 11-29 15:08:07 [core.py:1433] ".
_LOG_PREFIX = (
    r"(?:\([^()]*\)\s+)?"
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d{2}-\d{2}\s+[\d:.]+\s+\[[^\]]*\]\s+)?"
)
_EXCEPTION_LINE = re.compile(
    rf"^{_LOG_PREFIX}(?P<kind>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): "
    r"(?P<message>.*\S)"
)
_ARGPARSE_LINE = re.compile(r"^(?P<prog>[\w.-]+(?: [\w.-]+)*): error: (?P<message>.*\S)")


@dataclass(frozen=True)
class KvCacheSize:
    """The engine's planned KV capacity: "CPU KV cache size: 30,840 tokens"."""

    device: str
    """Device label vLLM prints ("CPU", "GPU", ...)."""
    tokens: int
    """int(max concurrency x max model length), as vLLM computes it."""


@dataclass(frozen=True)
class MaxConcurrency:
    """The reported concurrency: "Maximum concurrency for 2,048 tokens per request: 15.06x"."""

    max_model_len: int
    """The max model length the concurrency is quoted for."""
    concurrency: float
    """Blocks available / blocks one max-length request needs, printed with two decimals."""


@dataclass(frozen=True)
class KvCacheAllocation:
    """A worker's accepted KV budget: "Explicitly set (0.37/11.09) GiB for KV cache on node 0"."""

    explicit: bool
    """True for --kv-cache-memory-bytes / VLLM_CPU_KVCACHE_SPACE, False for the auto size."""
    kv_gib: float
    """KV cache memory granted, GiB (two decimals)."""
    total_gib: float
    """Memory total of the node as vLLM sees it (cgroup limit when lower), GiB."""
    node: int
    """NUMA node of the worker's first allowed CPU."""


@dataclass(frozen=True)
class MaxSeqLenRefusal:
    """The engine refused max_model_len: one max-length request does not fit the KV budget."""

    max_model_len: int
    """The max model length that was asked for."""
    needed_gib: float
    """KV memory one request of that length needs on the limiting rank, GiB."""
    available_gib: float
    """KV memory available on that rank less one block (the null block), GiB."""
    estimated_max_model_len: int | None
    """vLLM's binary-searched longest length that fits; None when not even one token fits."""


@dataclass(frozen=True)
class FatalError:
    """The first exception or argument error a failed start printed."""

    kind: str
    """Exception class name as printed ("ValueError", "RuntimeError"), or "argparse"."""
    message: str
    """The message after "Kind: " (or after "error: " for argparse)."""
    line_number: int
    """1-based line number in the log text."""


def parse_kv_cache_size(text: str) -> KvCacheSize | None:
    """Return the first "<DEVICE> KV cache size: N tokens" in `text`, or None."""
    match = _KV_CACHE_SIZE.search(text)
    if match is None:
        return None
    return KvCacheSize(device=match["device"], tokens=_count(match["tokens"]))


def parse_max_concurrency(text: str) -> MaxConcurrency | None:
    """Return the first "Maximum concurrency for L tokens per request: Xx" in `text`, or None."""
    match = _MAX_CONCURRENCY.search(text)
    if match is None:
        return None
    return MaxConcurrency(
        max_model_len=_count(match["max_model_len"]), concurrency=float(match["concurrency"])
    )


def parse_kv_cache_allocation(text: str) -> KvCacheAllocation | None:
    """Return the first "Explicitly set" / "Auto set (k/t) GiB for KV cache" line, or None."""
    match = _KV_CACHE_SET.search(text)
    if match is None:
        return None
    return KvCacheAllocation(
        explicit=match["mode"] == "Explicitly",
        kv_gib=float(match["kv_gib"]),
        total_gib=float(match["total_gib"]),
        node=int(match["node"]),
    )


def parse_max_seq_len_refusal(text: str) -> MaxSeqLenRefusal | None:
    """Return the first "To serve at least one request with the model's max seq len" refusal."""
    match = _MAX_SEQ_LEN.search(text)
    if match is None:
        return None
    estimated = match["estimated"]
    return MaxSeqLenRefusal(
        max_model_len=int(match["max_model_len"]),
        needed_gib=float(match["needed_gib"]),
        available_gib=float(match["available_gib"]),
        estimated_max_model_len=int(estimated) if estimated is not None else None,
    )


def first_fatal_error(text: str) -> FatalError | None:
    """Return the first exception line ("ValueError: ...") or argparse "prog: error: ..." line.

    In a failed multi-process start the root cause comes first: a worker's ValueError precedes
    the engine's "RuntimeError: Worker failed with error ..." and the API server's
    "RuntimeError: Engine core initialization failed". vLLM's log prefix ("(EngineCore pid=1)
    ERROR 11-29 15:08:07 [core.py:1433] ") is allowed before the exception name; warnings whose
    text merely contains the word "error" do not count.
    """
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXCEPTION_LINE.match(line)
        if match is not None:
            return FatalError(kind=match["kind"], message=match["message"], line_number=number)
        match = _ARGPARSE_LINE.match(line)
        if match is not None:
            return FatalError(kind="argparse", message=match["message"], line_number=number)
    return None


def _count(text: str) -> int:
    return int(text.replace(",", ""))
