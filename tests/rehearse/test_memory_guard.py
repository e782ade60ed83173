"""The memory-guard experiment's pure parts (`tools.rehearse.guard`): the skip without root, the
guard engine's argv, that it joins its cgroup, reads, binds and then execs, the planner's
prediction with and without the weight prefetch, and the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.plan.stackfile import stack_values
from tests.rehearse.support import TWELVE_B, flags
from tools.rehearse.group.tiny_plan import tiny_model_config, tiny_profile
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


def test_the_engine_joins_its_cgroup_before_reading_and_binds_it_where_vllm_looks() -> None:
    hierarchy = cgroups.MemoryHierarchy(
        1,
        Path("/sys/fs/cgroup/memory"),
        Path("/sys/fs/cgroup/memory"),
        "memory.limit_in_bytes",
        "memory.usage_in_bytes",
        "total_cache",
    )
    engine = cgroups.Cgroup(hierarchy, Path("/sys/fs/cgroup/memory/g/engine"))
    weights = [Path("/m/model.safetensors")]
    argv = ["/venv/bin/vllm", "serve", "/m"]
    reads = cgroups.wrapped_engine(hierarchy, engine, weights, True, argv)
    assert reads[:4] == ["unshare", "--mount", "--propagation", "private"]
    assert reads[-3:] == argv
    script = reads[6]
    assert script.index("cgroup.procs") < script.index("cat /m/model.safetensors")
    assert script.index("cat /m/model.safetensors") < script.index(
        "mount --bind /sys/fs/cgroup/memory/g/engine /sys/fs/cgroup/memory"
    )
    assert script.endswith('exec "$@"')
    skips = cgroups.wrapped_engine(hierarchy, engine, weights, False, argv)
    assert "cat " not in skips[6]


def guard_profile(weights_bytes: int) -> dict:
    return tiny_profile(tiny_model_config(TWELVE_B, 1), weights_bytes)


def test_the_planner_refuses_without_prefetch_and_accepts_with_it() -> None:
    values = stack_values("dev", {})
    profile = guard_profile(memory_guard.DEFAULT_TARGET_BYTES)
    kv = int(memory_guard.DEFAULT_KV_GIB * 2**30)
    limit = guard_prediction.planner_pod_gib(values, profile, kv)
    assert limit == 12.75
    assert guard_prediction.predict(values, profile, limit - 0.25, kv, prefetch=True).accepts
    assert not guard_prediction.predict(values, profile, limit - 0.5, kv, prefetch=True).accepts
    engine_reads = guard_prediction.predict(values, profile, limit, kv, prefetch=False)
    prefetched = guard_prediction.predict(values, profile, limit, kv, prefetch=True)
    assert (engine_reads.accepts, engine_reads.guard_gib) == (False, 0.58)
    assert engine_reads.reason.startswith("`kvCacheBytes` 1610612736 (1.50 GiB) is more than")
    assert prefetched.accepts is True
    assert prefetched.guard_gib * 2**30 >= kv
    # The pod is sized for its weights either way: only the page cache decides.
    assert prefetched.guard_gib - engine_reads.guard_gib < 4.8e9 / 2**30
