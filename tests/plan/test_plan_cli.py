"""`python -m infra.plan` as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.plan.test_verdict_and_advice import _json

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
