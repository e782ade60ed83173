"""The ranks' command lines and environment, and their process groups
(`tools.rehearse.group.ranks`).

- the rehearsal's argv is the LeaderWorkerSet's, with only the rank wiring and the memory figures
  swapped;
- a rank that exits early fails the wait at once with vLLM's quoted error, and no process is left
  (stand-in processes from `tests.fakes.rank_processes` play the ranks).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.manifests import engine_args
from infra.adapters.wiring import server_spec
from infra.plan.stackfile import stack_names
from tests.fakes.rank_processes import (
    HEADLESS_FOREVER,
    SERVING_LEADER,
    STAND_IN_VLLM,
    python_rank,
)
from tests.rehearse.support import FIXTURES, fixture, flags, tiny_plan_for, until
from tools.rehearse.group import ranks
from tools.rehearse.group.ranks import (
    MEMORY_FLAGS,
    WIRING_FLAGS,
    RankFailure,
    RankGroup,
    RankLaunch,
    quote_failure,
    rehearsal_argv,
)

# --------------------------------------------------------------------------------------------
# Command lines


@pytest.mark.parametrize("stack", stack_names())
@pytest.mark.parametrize(("rank", "role"), [(0, "leader"), (1, "worker")])
def test_rehearsal_argv_is_the_lws_argv_but_wiring_and_memory(
    stack: str, rank: int, role: str
) -> None:
    real, tiny, cfg, tiny_cfg = tiny_plan_for(stack)
    lws = flags(engine_args(server_spec(cfg, real).engine(), role))  # type: ignore[arg-type]
    local = flags(
        rehearsal_argv(
            server_spec(tiny_cfg, tiny).engine(),
            "/tmp/tiny-model",
            rank,
            master_port=41000,
            port=42000,
        )
    )
    assert set(local) == set(lws)
    differing = {key for key in lws if lws[key] != local[key]}
    # The served name follows the model: the rehearsal serves the tiny one under its own name.
    # `vllm-key`'s drain is the longest reply, which each plan sets from its own model.
    allowed = {
        "<model>", "--served-model-name", "--shutdown-timeout", *WIRING_FLAGS, *MEMORY_FLAGS
    }  # fmt: skip
    assert differing <= allowed, differing - allowed
    assert {"<model>", "--nnodes", "--node-rank", "--master-addr", "--master-port"} <= differing
    assert local["<model>"] == "/tmp/tiny-model"
    assert local["--nnodes"] == str(real.stages)
    assert local["--node-rank"] == str(rank)
    assert local["--master-addr"] == "127.0.0.1"
    assert local["--master-port"] == "41000"
    assert ("--headless" in local) == (role == "worker")
    if role == "leader":
        assert local["--port"] == "42000"
    assert local["--kv-cache-memory-bytes"] == str(tiny.kv_cache_bytes)
    assert local["--max-model-len"] == str(tiny.max_model_len)
    assert local["--max-num-batched-tokens"] == str(tiny.max_num_batched_tokens)


def test_extra_args_are_appended_verbatim_to_every_rank() -> None:
    real, tiny, _, tiny_cfg = tiny_plan_for("dev")
    engine = server_spec(tiny_cfg, tiny).engine()
    for rank in range(real.stages):
        plain = rehearsal_argv(engine, "/m", rank, 1, 2)
        broken = rehearsal_argv(engine, "/m", rank, 1, 2, ["--dtype=float77", "--x"])
        assert broken == [*plain, "--dtype=float77", "--x"]


def test_rank_env_binds_one_core_per_rank_and_keys_only_the_leader() -> None:
    base = {"PATH": "/usr/bin", "VLLM_CPU_KVCACHE_SPACE": "40", "VLLM_API_KEY": "ambient"}
    leader, worker = ranks.rank_env(0, "k", base), ranks.rank_env(1, "k", base)
    assert leader["VLLM_CPU_OMP_THREADS_BIND"] != worker["VLLM_CPU_OMP_THREADS_BIND"]
    for env in (leader, worker):
        assert env["VLLM_HOST_IP"] == "127.0.0.1"
        assert env["HF_HUB_OFFLINE"] == "1"
        assert env["PATH"] == "/usr/bin"
        assert "VLLM_CPU_KVCACHE_SPACE" not in env
    assert leader["VLLM_API_KEY"] == "k"
    assert "VLLM_API_KEY" not in worker


# --------------------------------------------------------------------------------------------
# Processes: early exit, quoting and clean-up


def test_quote_failure_quotes_vllms_first_fatal_line() -> None:
    assert quote_failure(fixture("argparse-invalid-choice.log")) == (
        "vllm serve: error: argument --dtype: invalid choice: 'bf16' (choose from 'auto', "
        "'bfloat16', 'float', 'float16', 'float32', 'half')"
    )
    assert quote_failure(fixture("refused-memory-guard-rank0.log")).startswith(
        "ValueError: Available memory on node 0 (8.61/11.09 GiB) on kv cache allocation is less "
        "than requested memory for kv (16.0 GiB)."
    )
    assert quote_failure("a\nlast words\n\n") == "last words"


def assert_group_gone(pgid: int, seconds: float = 5.0) -> None:
    """`killpg(pgid, 0)` finds nobody (an orphan's zombie gets a moment to be reaped)."""

    def gone() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    assert until(gone, seconds), f"process group {pgid} is still there: {ranks.group_members(pgid)}"


def wait_for_text(path: Path, text: str, seconds: float = 60.0) -> None:
    """Wait until `path` contains `text` (a rank's first log line), failing after `seconds`."""
    assert until(lambda: path.is_file() and text in path.read_text(encoding="utf-8"), seconds), (
        f"{path} did not show {text!r} within {seconds:.0f} s"
    )


@pytest.fixture
def no_health() -> Iterator[str]:
    """A /health URL where nothing listens."""
    yield f"http://127.0.0.1:{ranks.free_port()}/health"


def test_a_rank_that_exits_fails_at_once_with_vllms_error_and_nothing_is_left(
    tmp_path: Path, no_health: str
) -> None:
    log = FIXTURES / "refused-memory-guard-rank0.log"
    leader = python_rank(
        f"""
        import sys
        sys.stdout.write(open({str(log)!r}, encoding="utf-8").read())
        sys.exit(1)
        """
    )
    launches = [
        RankLaunch(0, leader, dict(os.environ)),
        RankLaunch(1, python_rank(HEADLESS_FOREVER), dict(os.environ)),
    ]
    group = RankGroup(launches, tmp_path, grace_s=1.0)
    with group, pytest.raises(RankFailure) as failure:
        group.wait_ready(no_health, timeout_s=120, progress=lambda _line: None)
    # The exit, not the timeout, ended the wait: a timeout says "no 200 from /health within".
    assert failure.value.summary.startswith("rank 0 exited with code 1 after ")
    assert failure.value.quote.startswith(
        "rank 0 log: ValueError: Available memory on node 0 (8.61/11.09 GiB) on kv cache "
        "allocation is less than requested memory for kv (16.0 GiB)."
    )
    assert group.leftovers == []
    for process in group.processes:
        assert_group_gone(process.pgid)
    # The SIGTERM-deaf child of the headless rank went with its group.
    child = int((tmp_path / "rank1.log").read_text().split("child ")[1].split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)
    assert (tmp_path / "rank0.log").read_text() == log.read_text()


def test_a_broken_flag_fails_with_the_quoted_parser_error_not_a_timeout(
    tmp_path: Path, no_health: str
) -> None:
    real, tiny, _, tiny_cfg = tiny_plan_for("dev")
    stand_in = tmp_path / "vllm.py"
    stand_in.write_text(STAND_IN_VLLM, encoding="utf-8")
    engine = server_spec(tiny_cfg, tiny).engine()
    launches = [
        RankLaunch(
            rank,
            [
                sys.executable,
                str(stand_in),
                *rehearsal_argv(engine, "/m", rank, 1, 2, ["--dtype=float77"]),
            ],
            dict(os.environ),
        )
        for rank in range(real.stages)
    ]
    group = RankGroup(launches, tmp_path / "logs", grace_s=1.0)
    with group, pytest.raises(RankFailure) as failure:
        group.wait_ready(no_health, timeout_s=120, progress=lambda _line: None)
    assert failure.value.summary.startswith("rank ")
    assert "exited with code 2" in failure.value.summary
    assert failure.value.quote.endswith(
        "vllm serve: error: argument --dtype: invalid choice: 'float77' (choose from 'auto', "
        "'bfloat16', 'float', 'float16', 'float32', 'half')"
    )
    assert group.leftovers == []


def test_silence_until_the_timeout_is_reported_as_such(tmp_path: Path, no_health: str) -> None:
    sleeper = python_rank("print('loading', flush=True)\nimport time\ntime.sleep(600)")
    group = RankGroup([RankLaunch(0, sleeper, dict(os.environ))], tmp_path, grace_s=1.0)
    with group, pytest.raises(RankFailure) as failure:
        # The quote below needs the line in the log; a slow start must not race the 1 s timeout.
        wait_for_text(tmp_path / "rank0.log", "loading")
        group.wait_ready(no_health, timeout_s=1, progress=lambda _line: None)
    assert failure.value.summary == (
        "no 200 from /health within 1 s while every rank kept running (group not formed)"
    )
    assert failure.value.quote == "rank 0 log: loading"
    assert group.leftovers == []


def test_a_group_that_forms_and_serves_is_ready_and_then_stopped(tmp_path: Path) -> None:
    port = ranks.free_port()
    launches = [
        RankLaunch(0, [sys.executable, "-c", SERVING_LEADER, str(port)], dict(os.environ)),
        RankLaunch(1, python_rank(HEADLESS_FOREVER), dict(os.environ)),
    ]
    lines: list[str] = []
    group = RankGroup(launches, tmp_path, grace_s=1.0, progress=lines.append)
    with group:
        ready = group.wait_ready(f"http://127.0.0.1:{port}/health", 60, lines.append)
        assert ready.group_formed_s is not None
        assert ready.healthy_s >= ready.group_formed_s
    assert group.leftovers == []
    assert lines[-1].startswith("stopped 2 process group(s) in ")
    for process in group.processes:
        assert_group_gone(process.pgid)
        assert process.popen.returncode is not None


def test_a_free_port_lies_below_the_ephemeral_range_so_no_connection_takes_it() -> None:
    # An outgoing connection's local port comes from the kernel's range; a port a test keeps
    # free to bind later (a dead upstream, then its relay) must not.
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {ranks.free_port() for _ in range(20)}
    assert all(1024 <= port < low for port in ports), sorted(ports)
