"""The rehearsal's pure parts and its process handling, without vLLM.

- the command lines: the rehearsal's argv is the LeaderWorkerSet's, with only the rank wiring and
  the memory figures swapped;
- the tiny model keeps the stack profile's layer pattern and ratios, on every rank;
- the planner's prediction against vLLM's own log lines (the real fixtures in tests/fixtures/vllm);
- a rank that exits early fails the wait at once with vLLM's quoted error, and no process is left
  (stand-in processes play the ranks: a Python one-liner printing a fixture log, a stand-in
  `vllm` argument parser, a headless rank that never exits and a child that ignores SIGTERM).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.manifests import engine_args
from infra import bench
from infra.plan.catalog import MODELS, ModelProfile
from infra.plan.config import ConfigError, StackConfig, load_config
from infra.plan.kv_cache import group_kv, stage_layers
from infra.plan.sizing import Plan, plan
from infra.plan.stackfile import load_stack, stack_names, stack_values
from infra.plan.wiring import server_spec
from infra.rehearse import cli as rehearse
from infra.rehearse import memory_guard
from infra.rehearse.cli import (
    MEMORY_FLAGS,
    WIRING_FLAGS,
    Check,
    RankFailure,
    RankGroup,
    RankLaunch,
    kv_budget_check,
    kv_checks,
    quote_failure,
    rehearsal_argv,
    render_verdict,
    tiny_model_config,
    tiny_profile,
    tiny_stack_values,
    verdict_ok,
)
from infra.rehearse.tiny_model import FULL, SLIDING, tiny_text_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"
TWELVE_B = MODELS["google/gemma-4-12B-it"]
#: Size of the default tiny model's safetensors file, as built for the fixtures.
TINY_CHECKPOINT_BYTES = 2_860_264


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def tiny_plan_for(stack: str) -> tuple[Plan, Plan, StackConfig, StackConfig]:
    """The real plan and the tiny plan of a stack, as the rehearsal makes them (no build)."""
    cfg = load_stack(stack)
    real = plan(cfg, stack)
    config = tiny_model_config(cfg.profile(), real.stages)
    values = stack_values(stack, {})
    tiny_cfg = load_config(
        tiny_stack_values(values, tiny_profile(config, TINY_CHECKPOINT_BYTES), real.stages)
    )
    return real, plan(tiny_cfg, "rehearsal"), cfg, tiny_cfg


def flags(argv: list[str]) -> dict[str, str]:
    """`vllm serve` argv as {flag: value}; the positional model is "<model>"."""
    assert argv[0] == "serve"
    parsed = {"<model>": argv[1]}
    for arg in argv[2:]:
        key, _, value = arg.partition("=")
        assert key not in parsed, f"{key} given twice in {argv}"
        parsed[key] = value
    return parsed


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
    allowed = {"<model>", "--served-model-name", *WIRING_FLAGS, *MEMORY_FLAGS}
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
    leader, worker = rehearse.rank_env(0, "k", base), rehearse.rank_env(1, "k", base)
    assert leader["VLLM_CPU_OMP_THREADS_BIND"] != worker["VLLM_CPU_OMP_THREADS_BIND"]
    for env in (leader, worker):
        assert env["VLLM_HOST_IP"] == "127.0.0.1"
        assert env["HF_HUB_OFFLINE"] == "1"
        assert env["PATH"] == "/usr/bin"
        assert "VLLM_CPU_KVCACHE_SPACE" not in env
    assert leader["VLLM_API_KEY"] == "k"
    assert "VLLM_API_KEY" not in worker


# --------------------------------------------------------------------------------------------
# The tiny model


def per_rank_kinds(config: dict, stages: int) -> list[tuple[int, int]]:
    kinds = config["layer_types"]
    return [
        (sum(kinds[i] == SLIDING for i in layers), sum(kinds[i] == FULL for i in layers))
        for layers in stage_layers(config["num_hidden_layers"], stages)
    ]


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_tiny_model_keeps_the_12b_pattern_and_ratios_on_every_rank(stages: int) -> None:
    config = tiny_model_config(TWELVE_B, stages)
    period = TWELVE_B.sliding_per_full + 1
    assert config["num_hidden_layers"] == stages * period
    assert per_rank_kinds(config, stages) == [(TWELVE_B.sliding_per_full, 1)] * stages
    # 8 : 1 KV heads and 256 : 512 head dims, as the 12B.
    assert config["num_key_value_heads"] * TWELVE_B.full_kv_heads == (
        config["num_global_key_value_heads"] * TWELVE_B.sliding_kv_heads
    )
    assert config["head_dim"] * TWELVE_B.full_head_dim == (
        config["global_head_dim"] * TWELVE_B.sliding_head_dim
    )
    assert config["sliding_window"] < rehearse.REHEARSAL_MAX_MODEL_LEN


def test_tiny_model_for_the_dev_split_is_the_model_the_fixtures_were_logged_with() -> None:
    assert tiny_model_config(TWELVE_B, 2) == tiny_text_config()


def test_tiny_model_reduces_another_profiles_ratios() -> None:
    other = dataclasses.replace(
        TWELVE_B,
        sliding_per_full=3,
        sliding_kv_heads=4,
        full_kv_heads=2,
        sliding_head_dim=128,
        full_head_dim=384,
    )
    config = tiny_model_config(other, 2)
    assert (config["num_key_value_heads"], config["num_global_key_value_heads"]) == (2, 1)
    assert (config["head_dim"], config["global_head_dim"]) == (32, 96)
    assert per_rank_kinds(config, 2) == [(3, 1), (3, 1)]


def test_tiny_model_needs_sliding_layers() -> None:
    flat = dataclasses.replace(TWELVE_B, sliding_per_full=0)
    with pytest.raises(ConfigError) as error:
        tiny_model_config(flat, 2)
    assert str(error.value) == (
        "`modelProfile.slidingPerFull` is 0, and the rehearsal's Gemma 4 builder needs at least "
        "one sliding layer per full layer; rehearse a model with a sliding:full pattern, or skip "
        "the rehearsal"
    )


def test_tiny_profile_gives_the_planner_the_same_kv_layout_as_the_12b() -> None:
    config = tiny_model_config(TWELVE_B, 2)
    profile = load_config(
        tiny_stack_values(stack_values("dev", {}), tiny_profile(config, TINY_CHECKPOINT_BYTES), 2)
    ).profile()
    assert isinstance(profile, ModelProfile)
    assert profile.name == rehearse.TINY_MODEL_NAME
    assert profile.checkpoint_bytes == TINY_CHECKPOINT_BYTES
    tiny_kv, real_kv = group_kv(profile, 2), group_kv(TWELVE_B, 2)
    assert len(tiny_kv.groups) == len(real_kv.groups) == 6
    assert [g.kind for g in tiny_kv.groups] == [g.kind for g in real_kv.groups]
    # A full layer's block holds 4x the tokens of a sliding one, as for the 12B.
    assert [g.block_tokens for g in tiny_kv.groups] == [g.block_tokens for g in real_kv.groups]


def test_model_cache_key_follows_the_config() -> None:
    config = tiny_model_config(TWELVE_B, 2)
    assert rehearse.model_cache_key(config) == rehearse.model_cache_key(dict(config))
    assert rehearse.model_cache_key(config) != rehearse.model_cache_key(
        tiny_model_config(TWELVE_B, 3)
    )
    assert rehearse.model_cache_key(config, seed=1) != rehearse.model_cache_key(config)


# --------------------------------------------------------------------------------------------
# Prediction against vLLM's log


@pytest.fixture(scope="module")
def tiny_plan() -> Plan:
    return tiny_plan_for("dev")[1]


def test_the_planner_predicts_what_vllm_logged(tiny_plan: Plan) -> None:
    checks = kv_checks(tiny_plan, fixture("pp2-tiny-rank0.log"))
    assert [(c.name, c.ok) for c in checks] == [
        ("KV cache tokens", True),
        ("max concurrency", True),
    ]
    assert checks[0].observed == "30,840 (vLLM; 0.0% off)"
    assert checks[1].observed == "15.06x at 2,048 (vLLM)"


def test_tokens_may_differ_by_one_percent_concurrency_not_at_all(tiny_plan: Plan) -> None:
    log = fixture("pp2-tiny-rank0.log")
    near = dataclasses.replace(tiny_plan, kv_cache_tokens=int(30_840 * 1.009))
    far = dataclasses.replace(tiny_plan, kv_cache_tokens=int(30_840 * 1.02))
    assert kv_checks(near, log)[0].ok is True
    assert kv_checks(far, log)[0].ok is False
    off = dataclasses.replace(tiny_plan, max_concurrency=15.07)
    assert kv_checks(off, log)[1].ok is False
    longer = dataclasses.replace(tiny_plan, max_model_len=4096)
    assert kv_checks(longer, log)[1].ok is False


def test_another_layouts_log_is_a_mismatch(tiny_plan: Plan) -> None:
    checks = kv_checks(tiny_plan, fixture("pp2-12b-layout-rank0.log"))
    assert [c.ok for c in checks] == [False, False]
    assert checks[0].observed.startswith("2,186 (vLLM")
    assert checks[1].observed == "1.07x at 2,048 (vLLM)"


def test_a_log_without_the_lines_fails(tiny_plan: Plan) -> None:
    checks = kv_checks(tiny_plan, fixture("argparse-invalid-choice.log"))
    assert [(c.observed, c.ok) for c in checks] == [
        ("no line in the log", False),
        ("no line in the log", False),
    ]


def test_every_rank_must_accept_the_kv_budget(tiny_plan: Plan) -> None:
    both = [fixture("pp2-tiny-rank0.log"), fixture("pp2-tiny-rank1-headless.log")]
    accepted = kv_budget_check(tiny_plan, both)
    assert accepted.ok is True
    assert accepted.observed == "rank 0: 0.06/10.34, rank 1: 0.06/11.09 GiB"
    refused = kv_budget_check(tiny_plan, [fixture("refused-memory-guard-rank0.log"), both[1]])
    assert refused.ok is False
    auto = kv_budget_check(tiny_plan, [fixture("pp2-tiny-auto-utilization-rank0.log"), both[1]])
    assert auto.ok is False


def _record(tokens: int, finish: str) -> bench.RequestRecord:
    record = bench.RequestRecord(concurrency=1, round=1, stream=1, requested=32)
    record.started, record.first_token_at, record.last_token_at, record.ended = 0, 0.1, 1.1, 1.2
    record.usage_tokens, record.finish_reason = tokens, finish
    return record


def test_bench_check_fails_on_a_cut_off_reply() -> None:
    args = bench.parse_args(["--endpoint", "http://x/v1", "--tokens", "32", "--concurrency", "1"])
    good = bench.RoundResult(1, 1, (_record(32, "length"),))
    cut = bench.RoundResult(1, 2, (_record(10, "length"),))
    passed = rehearse.bench_check(bench.build_report("e", "m", args, [(1, [good])]))
    assert passed.ok is True
    assert passed.observed.startswith("31.0 tok/s decode median, 1/1 ok, 0 cut off")
    failed = rehearse.bench_check(bench.build_report("e", "m", args, [(1, [good, cut])]))
    assert failed.ok is False
    assert "1 cut off or short" in failed.observed


def test_verdict_passes_only_when_every_check_passed() -> None:
    ok = [Check("a", "1", "1", True), Check("b", "2", "2", True)]
    assert verdict_ok(ok)
    assert render_verdict(ok).splitlines()[-1] == "verdict: PASS"
    failed = [
        Check("a", "1", "1", True),
        Check("/health", "200", "rank 0 exited", False, note="rank 0 log: ValueError: no"),
        Check("c", "3", "not reached", None),
    ]
    assert not verdict_ok(failed)
    text = render_verdict(failed)
    assert "/health: rank 0 log: ValueError: no" in text
    assert text.splitlines()[-1] == "verdict: FAIL (/health; 1 checks not reached)"


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


def python_rank(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def assert_group_gone(pgid: int, seconds: float = 5.0) -> None:
    """`killpg(pgid, 0)` finds nobody (an orphan's zombie gets a moment to be reaped)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"process group {pgid} is still there: {rehearse.group_members(pgid)}")
        time.sleep(0.1)


def wait_for_text(path: Path, text: str, seconds: float = 60.0) -> None:
    """Wait until `path` contains `text` (a rank's first log line), failing after `seconds`."""
    deadline = time.monotonic() + seconds
    while not (path.is_file() and text in path.read_text(encoding="utf-8")):
        if time.monotonic() > deadline:
            pytest.fail(f"{path} did not show {text!r} within {seconds:.0f} s")
        time.sleep(0.05)


@pytest.fixture
def no_health() -> Iterator[str]:
    """A /health URL where nothing listens."""
    yield f"http://127.0.0.1:{rehearse.free_port()}/health"


HEADLESS_FOREVER = """
    import signal, subprocess, sys, time
    # Like vLLM's workers: a child in the same process group, deaf to SIGTERM.
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    print("rank 1 in world size 2 is assigned as DP rank 0, PP rank 1", flush=True)
    print(f"child {child.pid}", flush=True)
    time.sleep(600)
"""


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


STAND_IN_VLLM = """
import argparse, sys, time
# Parses --dtype as vLLM does (last one wins, a closed set of choices) and ignores the rest.
parser = argparse.ArgumentParser(prog="vllm serve")
parser.add_argument("command")
parser.add_argument("model")
parser.add_argument("--dtype", choices=["auto", "bfloat16", "float", "float16", "float32", "half"])
parser.parse_known_args()
time.sleep(600)
"""


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


SERVING_LEADER = """
import http.server, sys
print("rank 0 in world size 2 is assigned as DP rank 0, PP rank 0", flush=True)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def test_a_group_that_forms_and_serves_is_ready_and_then_stopped(tmp_path: Path) -> None:
    port = rehearse.free_port()
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


# --------------------------------------------------------------------------------------------
# CLI


def test_bad_input_exits_2_with_the_one_line_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert rehearse.main(["--stack", "nope"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: `--stack` 'nope' has no file stacks/Pulumi.nope.yaml; use one of: "
        + ", ".join(stack_names())
    ]
    assert rehearse.main(["--set", "kvCacheBytes=99999999999"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: `kvCacheBytes` 99999999999 (93.13 GiB) is more than")


def test_timeout_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert rehearse.main(["--timeout", "0"]) == 2
    assert capsys.readouterr().err == (
        "error: `--timeout` must be positive (got 0); pass seconds such as 600\n"
    )


# --------------------------------------------------------------------------------------------
# The memory-guard rehearsal's pure parts


def test_memory_guard_is_skipped_without_root(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(memory_guard.os, "geteuid", lambda: 1000)
    assert memory_guard.find_hierarchy() == (
        None,
        "not root (id -u is 1000): memory cgroups and bind mounts need root",
    )
    assert memory_guard.main([]) == 0
    assert capsys.readouterr().out == (
        "skipped: not root (id -u is 1000): memory cgroups and bind mounts need root\n"
    )


def guard_profile(weights_bytes: int) -> dict:
    return tiny_profile(tiny_model_config(TWELVE_B, 1), weights_bytes)


def test_the_planner_refuses_without_prefetch_and_accepts_with_it() -> None:
    values = stack_values("dev", {})
    profile = guard_profile(memory_guard.DEFAULT_TARGET_BYTES)
    kv = int(memory_guard.DEFAULT_KV_GIB * 2**30)
    limit = memory_guard.planner_pod_gib(values, profile, kv)
    assert limit == 12.75
    assert memory_guard.predict(values, profile, limit - 0.25, kv, prefetch=True).accepts
    assert not memory_guard.predict(values, profile, limit - 0.5, kv, prefetch=True).accepts
    engine_reads = memory_guard.predict(values, profile, limit, kv, prefetch=False)
    prefetched = memory_guard.predict(values, profile, limit, kv, prefetch=True)
    assert (engine_reads.accepts, engine_reads.guard_gib) == (False, 0.58)
    assert engine_reads.reason.startswith("`kvCacheBytes` 1610612736 (1.50 GiB) is more than")
    assert prefetched.accepts is True
    assert prefetched.guard_gib * 2**30 >= kv
    # The pod is sized for its weights either way: only the page cache decides.
    assert prefetched.guard_gib - engine_reads.guard_gib < 4.8e9 / 2**30


def test_the_engine_joins_its_cgroup_before_reading_and_binds_it_where_vllm_looks() -> None:
    hierarchy = memory_guard.MemoryHierarchy(
        1,
        Path("/sys/fs/cgroup/memory"),
        Path("/sys/fs/cgroup/memory"),
        "memory.limit_in_bytes",
        "memory.usage_in_bytes",
        "total_cache",
    )
    engine = memory_guard.Cgroup(hierarchy, Path("/sys/fs/cgroup/memory/g/engine"))
    weights = [Path("/m/model.safetensors")]
    argv = ["/venv/bin/vllm", "serve", "/m"]
    reads = memory_guard.wrapped_engine(hierarchy, engine, weights, True, argv)
    assert reads[:4] == ["unshare", "--mount", "--propagation", "private"]
    assert reads[-3:] == argv
    script = reads[6]
    assert script.index("cgroup.procs") < script.index("cat /m/model.safetensors")
    assert script.index("cat /m/model.safetensors") < script.index(
        "mount --bind /sys/fs/cgroup/memory/g/engine /sys/fs/cgroup/memory"
    )
    assert script.endswith('exec "$@"')
    skips = memory_guard.wrapped_engine(hierarchy, engine, weights, False, argv)
    assert "cat " not in skips[6]


def test_the_guard_engine_uses_the_lws_builder_for_one_rank() -> None:
    argv = flags(memory_guard.engine_argv(Path("/m"), 1 << 30, 8000, 29000))
    assert argv["<model>"] == "/m"
    assert argv["--pipeline-parallel-size"] == "1"
    assert argv["--nnodes"] == "1"
    assert argv["--kv-cache-memory-bytes"] == str(1 << 30)
    assert argv["--max-num-batched-tokens"] == "2048"
    assert "--headless" not in argv


def test_the_guard_report_puts_prediction_and_result_side_by_side() -> None:
    predictions = {
        "engine reads": memory_guard.Prediction(False, 0.58, False, "`kvCacheBytes` ..."),
        "prefetched": memory_guard.Prediction(True, 2.04, True, ""),
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


def test_bench_arguments_survive_a_key_that_looks_like_a_flag() -> None:
    args = rehearse.bench_args("http://127.0.0.1:9/v1", "-abc")
    assert (args.api_key, args.endpoint) == ("-abc", "http://127.0.0.1:9/v1")
    assert (args.runs, args.tokens, args.concurrency) == (2, 32, (1,))
