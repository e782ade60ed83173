"""The guard engine joins its cgroup, reads, binds, then execs (`tools.rehearse.guard.cgroups`)."""

from __future__ import annotations

from pathlib import Path

from tools.rehearse.guard import cgroups


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
