"""The memory-guard experiment's pure parts: the skip without root, the guard engine's argv and
the report (`tools.rehearse.guard.memory_guard`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rehearse.support import flags
from tools.rehearse.guard import cgroups, guard_prediction, memory_guard


def test_memory_guard_is_skipped_without_root(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cgroups.os, "geteuid", lambda: 1000)
    assert cgroups.find_hierarchy() == (
        None,
        "not root (id -u is 1000): memory cgroups and bind mounts need root",
    )
    assert memory_guard.main([]) == 0
    assert capsys.readouterr().out == (
        "skipped: not root (id -u is 1000): memory cgroups and bind mounts need root\n"
    )


def test_the_guard_engine_uses_the_lws_builder_for_one_rank() -> None:
    argv = flags(memory_guard.engine_argv(Path("/m"), 1 << 30, 8000, 29000))
    assert argv["<model>"] == "/m"
    assert argv["--pipeline-parallel-size"] == "1"
    # One rank is a single-node engine: no group wiring (`components.manifests.engine`).
    assert "--nnodes" not in argv and "--master-addr" not in argv
    assert argv["--kv-cache-memory-bytes"] == str(1 << 30)
    assert argv["--max-num-batched-tokens"] == "2048"
    assert "--headless" not in argv


def test_the_guard_report_puts_prediction_and_result_side_by_side() -> None:
    predictions = {
        "engine reads": guard_prediction.Prediction(False, 0.58, False, "`kvCacheBytes` ..."),
        "prefetched": guard_prediction.Prediction(True, 2.04, True, ""),
    }
    outcomes = {
        "engine reads": memory_guard.Outcome(
            "engine reads",
            False,
            "ValueError: Available memory ...",
            12 << 30,
            6 << 30,
            13 << 30,
            None,
            80.0,
        ),
        "prefetched": memory_guard.Outcome(
            "prefetched",
            True,
            "Explicitly set (1.5/13.0) GiB",
            7 << 30,
            1 << 30,
            13 << 30,
            4_800_000_000,
            60.0,
        ),
    }
    text = memory_guard.render(predictions, outcomes, int(1.5 * 2**30))  # type: ignore[arg-type]
    rows = text.splitlines()
    assert "refuse 1.50 GiB KV" in rows[1] and "refused" in rows[1] and rows[1].endswith("yes")
    assert "accept 1.50 GiB KV" in rows[2] and "accepted" in rows[2] and rows[2].endswith("yes")
    assert "weights read in the engine's cgroup: vLLM: ValueError: Available memory" in text
