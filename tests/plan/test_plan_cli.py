"""`python -m infra.plan` as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from infra.plan import peer as infra_peer
from tests.plan.test_verdict_and_advice import _json, _out

REPO = Path(__file__).resolve().parents[2]
JSON_KEYS = {
    "stack", "instance_type", "nodes", "stages", "replicas", "node_allocatable_gib",
    "pod_memory_gib", "pod_cpu", "weights_gib_per_stage", "overhead_gib_per_pod",
    "guard_available_gib", "weight_prefetch", "kv_cache_bytes", "max_num_batched_tokens",
    "max_model_len", "kv_cache_tokens", "max_concurrency", "decode_tokens_per_s", "node_disk_gib",
}  # fmt: skip


def test_every_stack_plans_with_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    """What bigger nodes change is test_sizing's `test_bigger_nodes_change_stages_and_context`."""
    assert _json(capsys)["stack"] == "dev"  # the default
    for path in sorted((REPO / "stacks").glob("Pulumi.*.yaml")):
        stack = path.name.split(".")[1]
        data = _json(capsys, "--stack", stack)
        assert data["stack"] == stack and set(data) >= JSON_KEYS
        assert len(data["weights_gib_per_stage"]) == data["stages"]


def test_module_entry_exits_2_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "infra.plan", "--set", "replicas=0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("argv", "peer"),
    [
        ((), "llama.cpp bf16"),
        (("--set", "weights=int8"), "llama.cpp Q8_0"),
        (("--set", "weights=int4"), None),
    ],
    ids=["bf16", "int8", "int4-unmeasured"],
)
def test_the_plan_derives_llama_cpp_s_one_stream_rate_from_the_peer_probe(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], peer: str | None
) -> None:
    """The plan's one-stream rate over the measured per-layer ratio (`infra.plan.peer`), labelled
    as carried from x86; no row where the probe measured nothing."""
    lines = _out(capsys, *argv).splitlines()
    (decode,) = [line for line in lines if line.startswith("decode, 1 stream ")]
    rate = float(decode.split()[3])
    rows = [line for line in lines if line.startswith("llama.cpp ")]
    if peer is None:
        assert rows == []
        return
    weights = "int8" if argv else "bf16"
    (row,) = rows
    expected = f"~{rate / infra_peer.RATIOS[weights][0]:.1f}"
    assert row.split(None, 1)[1].startswith(expected)  # the row's two decimals, to one
    assert f" tokens/s for one stream with {peer} on this node type" in row
    assert "carried from x86, unmeasured on Graviton" in row
    # Inside physics: what it reads a token at that rate is within the chip's achievable stream.
    found = re.search(r"reading (\d+) GB/s of the chip's achievable (\d+)", row)
    reads, chip = map(float, found.groups())
    assert reads <= chip
    assert infra_peer.describe("google/gemma-4-26B-A4B-it", weights, rate, 24e9, chip) is None


def test_the_peer_rate_is_held_to_what_the_chip_can_stream() -> None:
    """A ratio that would put llama.cpp past the chip's achievable bandwidth is held to it."""
    row = infra_peer.describe("google/gemma-4-12B-it", "bf16", 10.0, 24e9, 240.0)
    assert row is not None and row.startswith("~10.00 tokens/s")  # 10 / 0.68 would read 353 GB/s
    assert "reading 240 GB/s of the chip's achievable 240" in row
    assert "0.68 of vLLM's and held to the chip's" in row
    unheld = infra_peer.describe("google/gemma-4-12B-it", "bf16", 4.0, 24e9, 240.0)
    assert unheld is not None and unheld.startswith(f"~{4.0 / 0.68:.2f} tokens/s")
    assert "held to" not in unheld
