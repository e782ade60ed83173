"""The vLLM log parsers against log excerpts captured from real vLLM 0.31.0 CPU runs.

Every fixture in tests/fixtures/vllm is an excerpt of a real two-rank pipeline-parallel start on
127.0.0.1 (ranks bound to cores 0 and 1), made with the rehearsal virtualenv:
- pp2-tiny-*: the default tiny Gemma 4 text model, 64 MiB of KV, max model len 2,048,
  max_num_batched_tokens 256 (rank 0 and the headless rank 1);
- pp2-12b-layout-rank0: a 48-layer tiny model with the 12B's attention layout, 400,000,000 bytes
  of KV at 2,048 tokens: vLLM prints the field report's 2,186 tokens and 1.07x;
- pp2-tiny-auto-utilization-rank0: no explicit KV size, --gpu-memory-utilization 0.3;
- refused-max-seq-len-rank0: the 12B layout asked for 4,096 tokens in 0.37 GiB of KV;
- refused-memory-guard-rank0: 16 GiB of KV asked for on an 11 GiB node;
- refused-startup-utilization-rank0: no explicit KV size, default utilization 0.92;
- argparse-invalid-choice: `vllm serve MODEL --dtype bf16`.
"""

from __future__ import annotations

import pytest

from tests.rehearse.support import FIXTURES, fixture
from tools.rehearse.group.vllm_logs import (
    FatalError,
    KvCacheAllocation,
    KvCacheSize,
    MaxConcurrency,
    MaxSeqLenRefusal,
    first_fatal_error,
    parse_kv_cache_allocation,
    parse_kv_cache_size,
    parse_max_concurrency,
    parse_max_seq_len_refusal,
)

ACCEPTED = (
    "pp2-tiny-rank0.log",
    "pp2-tiny-rank1-headless.log",
    "pp2-12b-layout-rank0.log",
    "pp2-tiny-auto-utilization-rank0.log",
)
REFUSED = (
    "refused-max-seq-len-rank0.log",
    "refused-memory-guard-rank0.log",
    "refused-startup-utilization-rank0.log",
    "argparse-invalid-choice.log",
)


def test_every_fixture_is_listed() -> None:
    assert sorted(path.name for path in FIXTURES.glob("*.log")) == sorted(ACCEPTED + REFUSED)


@pytest.mark.parametrize(
    ("name", "tokens", "concurrency"),
    [
        ("pp2-tiny-rank0.log", 30_840, 15.06),
        ("pp2-12b-layout-rank0.log", 2_186, 1.07),
        ("pp2-tiny-auto-utilization-rank0.log", 1_315_056, 642.12),
    ],
)
def test_kv_cache_size_and_max_concurrency(name: str, tokens: int, concurrency: float) -> None:
    text = fixture(name)
    assert parse_kv_cache_size(text) == KvCacheSize(device="CPU", tokens=tokens)
    assert parse_max_concurrency(text) == MaxConcurrency(2_048, concurrency)
    # vLLM prints int(concurrency x max_model_len); the printed concurrency is rounded.
    assert abs(tokens - concurrency * 2_048) <= 0.005 * 2_048


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("pp2-tiny-rank0.log", KvCacheAllocation(True, 0.06, 10.34, 0)),
        ("pp2-tiny-rank1-headless.log", KvCacheAllocation(True, 0.06, 11.09, 0)),
        ("pp2-12b-layout-rank0.log", KvCacheAllocation(True, 0.37, 11.09, 0)),
        ("refused-max-seq-len-rank0.log", KvCacheAllocation(True, 0.37, 11.09, 0)),
        ("pp2-tiny-auto-utilization-rank0.log", KvCacheAllocation(False, 2.67, 11.09, 0)),
    ],
)
def test_kv_cache_allocation(name: str, expected: KvCacheAllocation) -> None:
    assert parse_kv_cache_allocation(fixture(name)) == expected


def test_max_seq_len_refusal_with_and_without_estimate() -> None:
    assert parse_max_seq_len_refusal(fixture("refused-max-seq-len-rank0.log")) == MaxSeqLenRefusal(
        max_model_len=4_096, needed_gib=0.68, available_gib=0.37, estimated_max_model_len=2_048
    )
    # vLLM drops the estimate sentence when not even one token fits.
    text = (
        "ValueError: To serve at least one request with the model's max seq len (2048), "
        "(0.01 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(0.0 GiB). Try increasing `gpu_memory_utilization`"
    )
    refusal = parse_max_seq_len_refusal(text)
    assert refusal is not None
    assert refusal.estimated_max_model_len is None


@pytest.mark.parametrize(
    ("name", "kind", "starts"),
    [
        ("refused-max-seq-len-rank0.log", "ValueError", "To serve at least one request"),
        ("refused-memory-guard-rank0.log", "ValueError", "Available memory on node 0 (8.61/"),
        ("refused-startup-utilization-rank0.log", "ValueError", "Available memory on node 0"),
        ("argparse-invalid-choice.log", "argparse", "argument --dtype: invalid choice: 'bf16'"),
    ],
)
def test_first_fatal_error_is_the_root_cause(name: str, kind: str, starts: str) -> None:
    text = fixture(name)
    error = first_fatal_error(text)
    assert error is not None
    assert error.kind == kind
    assert error.message.startswith(starts)
    # The root cause precedes the engine's "Engine core initialization failed" summary.
    summary = text.find("Engine core initialization failed")
    offset = sum(len(line) + 1 for line in text.splitlines()[: error.line_number - 1])
    assert summary == -1 or offset < summary


def test_first_fatal_error_strips_the_log_prefix() -> None:
    error = first_fatal_error(fixture("refused-memory-guard-rank0.log"))
    assert error == FatalError(
        kind="ValueError",
        message=(
            "Available memory on node 0 (8.61/11.09 GiB) on kv cache allocation is less than "
            "requested memory for kv (16.0 GiB). Decrease --kv-cache-memory-bytes, "
            "VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes."
        ),
        line_number=24,
    )


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_starts_have_no_refusal_and_no_fatal_error(name: str) -> None:
    # These logs carry warnings that mention "error" and "OSError" mid-line; they do not count.
    text = fixture(name)
    assert parse_max_seq_len_refusal(text) is None
    assert first_fatal_error(text) is None


@pytest.mark.parametrize("name", REFUSED)
def test_refused_starts_report_no_capacity(name: str) -> None:
    text = fixture(name)
    assert parse_kv_cache_size(text) is None
    assert parse_max_concurrency(text) is None
