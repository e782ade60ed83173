"""The own-step rows' pieces without vLLM or root (`tools.rehearse.measure.own_step`): the state
file read, the bounds, the commands, the cgroup path and the checks. The real group runs in
`make rehearse-faults`."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

from components.manifests import ProbeSpec
from tools.rehearse.measure import own_step
from tools.rehearse.measure.own_step import SlowedRun, StepMeasure

PROBES = ProbeSpec(
    stall_s=10, period_s=5, failures=3, timeout_s=8, growth=2.415, margin=1.5, floor_s=1
)


def _measure(step: float, stall: int) -> StepMeasure:
    return StepMeasure(
        True, f"ok: step {step:.2f} s measured", step, stall, (step, step, step), "measured step"
    )


def test_a_measure_reads_the_state_file_and_the_announced_line(tmp_path: Path) -> None:
    state, announce = tmp_path / "s.json", tmp_path / "a.log"
    state.write_text(json.dumps({"step_s": 0.42, "stall_s": 2, "runs_s": [0.9, 0.4, 0.42]}))
    announce.write_text("gemma-graviton: measured step 0.42 s\n")
    measure = StepMeasure.read(True, "ok: step 0.42 s", state, announce)
    assert (measure.step_s, measure.stall_s, measure.runs_s) == (0.42, 2, (0.9, 0.4, 0.42))
    assert measure.announced == "gemma-graviton: measured step 0.42 s"
    assert measure.measured
    missing = StepMeasure.read(False, "FAIL: 400", tmp_path / "none.json", tmp_path / "none")
    assert not missing.measured and missing.step_s is None and missing.announced == ""


def test_the_stall_bound_takes_the_spec_floor_and_the_detection_bound_adds_the_probe() -> None:
    # 0.05 s x 2.415 x 1.5 = 0.18 s: the floor; 0.5 s gives 1.81 s, rounded up to 2.
    assert own_step.expected_stall(0.05, PROBES) == 1
    assert own_step.expected_stall(0.5, PROBES) == 2
    assert own_step.expected_stall(5.0, PROBES) == PROBES.stall_s
    assert own_step.detection_bound(2, PROBES) == 2 + 3 * 5 + 8
    assert own_step.bound_text(2, PROBES) == "25 s (stall 2 + 3 x 5 + 8)"


def test_a_command_in_a_cgroup_writes_its_own_pid_then_execs(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"
    argv = own_step.in_cgroup(["sh", "-c", "echo $$"], procs)
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    # The same process: exec keeps the pid that joined the group.
    assert procs.read_text().strip() == done.stdout.strip()


def test_a_long_prompt_stays_inside_the_vocabulary_and_differs_by_seed() -> None:
    prompt = own_step.long_prompt(2008, 512, seed=7)
    assert len(prompt) == 2008 and all(128 <= t < 512 for t in prompt)
    assert prompt[:16] != own_step.long_prompt(2008, 512, seed=8)[:16]
    assert all(1000 <= t < 262_144 for t in own_step.long_prompt(64, 262_144))


def test_the_cpu_group_of_a_process_is_read_from_its_cgroup_file() -> None:
    text = "9:name=systemd:/\n4:memory:/pod/abc\n2:cpu,cpuacct:/kubepods/pod1\n0::/\n"
    assert own_step.cgroup_of(text) == "/kubepods/pod1"
    assert own_step.cgroup_of(text, "memory") == "/pod/abc"
    assert own_step.cgroup_of("0::/user.slice\n") is None


def test_no_cpu_controller_is_a_reason_not_a_pass(tmp_path: Path) -> None:
    reason = own_step.cpu_unavailable(tmp_path)
    assert reason is not None
    run = SlowedRun("cgroup cpu quota, 25% of one core per rank", problem=reason)
    (check,) = own_step.slowed_checks(_measure(0.05, 1), run, PROBES, 40)
    assert check.ok is False and check.observed == reason


def test_the_start_check_needs_every_group_measured_by_the_planners_arithmetic(
    tmp_path: Path,
) -> None:
    warnings = tmp_path / "vllm-warnings.log"
    warnings.write_text(
        "(APIServer pid=1) WARNING 12-03 10:41:53 [vllm.py:747] x\n"
        "(Worker_PP0 pid=5) DEBUG 12-03 14:35:31 [utils.py:576] CPU unquantized GEMM dispatch: "
        "using oneDNN onednn_mm\n"
    )
    log = "(APIServer pid=1) INFO 12-03 10:41:53 [api_server.py:1] Starting vLLM\n"
    good = [_measure(0.05, 1), _measure(0.5, 2)]
    step, logging = own_step.start_checks(good, PROBES, log, warnings)
    assert step.ok and logging.ok
    assert step.observed == "2 of 2 groups; group 1: step 0.05 s, stall bound 1 s"
    # A stall bound the arithmetic does not give, a failed run, or no group at all fails.
    assert not own_step.start_checks([_measure(0.5, 1)], PROBES, log, warnings)[0].ok
    failed = StepMeasure(False, "FAIL: measuring the step: answered 400")
    (step, _) = own_step.start_checks([good[0], failed], PROBES, log, warnings)
    assert not step.ok and step.note == "FAIL: measuring the step: answered 400"
    assert not own_step.start_checks([], PROBES, log, warnings)[0].ok
    assert logging.observed.endswith(
        "2 lines: CPU unquantized GEMM dispatch: using oneDNN onednn_mm"
    )
    # vLLM silent on stdout, no warnings file, or no dispatch line in it (the probe's evidence).
    assert not own_step.start_checks(good, PROBES, "", warnings)[1].ok
    assert not own_step.start_checks(good, PROBES, log, tmp_path / "none.log")[1].ok
    warnings.write_text("(APIServer pid=1) WARNING 12-03 10:41:53 [vllm.py:747] x\n")
    assert not own_step.start_checks(good, PROBES, log, warnings)[1].ok


def _slowed(**changes: object) -> SlowedRun:
    run = SlowedRun(
        "cgroup cpu quota, 25% of one core per rank",
        measure=_measure(0.6, 3),
        prompt_tokens=2008,
        status=200,
        outcome="complete",
        reply_tokens=40,
        seconds=12.0,
        probe_runs=8,
        throttled=[(40, 3.2), (12, 0.8)],
    )
    return dataclasses.replace(run, **changes)  # type: ignore[arg-type]


def test_the_slowed_checks_need_growth_and_a_completed_prompt_with_no_failed_probe() -> None:
    start = _measure(0.05, 1)
    grows, prompt = own_step.slowed_checks(start, _slowed(), PROBES, 40)
    assert grows.ok and prompt.ok
    assert grows.observed == "0.6 s / 3 s"
    # A step that grew while its stall bound stayed at the floor does not pass.
    assert not own_step.slowed_checks(start, _slowed(measure=_measure(0.1, 1)), PROBES, 40)[0].ok
    assert not own_step.slowed_checks(start, _slowed(status=504), PROBES, 40)[1].ok
    assert not own_step.slowed_checks(start, _slowed(reply_tokens=12), PROBES, 40)[1].ok
    failing = _slowed(probe_failures=["leader: FAIL: no progress"])
    assert not own_step.slowed_checks(start, failing, PROBES, 40)[1].ok
    assert not own_step.slowed_checks(start, _slowed(problem="pid 9 not moved"), PROBES, 40)[1].ok


def test_the_step_table_has_a_row_per_group_and_the_cpu_row() -> None:
    table = own_step.render_step_table([_measure(0.05, 1)], _slowed(), PROBES).splitlines()
    assert table[0].startswith("own step")
    cells = [cell.strip() for cell in table[1].split(" | ")]
    assert cells[:4] == [
        "step measured at start, group 1",
        "0.050 s",
        "0.050, 0.050, 0.050 s",
        "1 s",
    ]
    assert "floor 1 s (rehearsal), ceiling 10 s (plan)" in table[1]
    assert table[2].startswith("CPU slowed (cgroup cpu quota, 25% of one core per rank)")
    assert "2008-token prompt: complete (200), 40 tokens in 12.0 s" in table[2]
    assert "liveness 8 runs, 0 failed" in table[2]
    assert "throttled rank 0: 40 periods, 3.2 s" in table[2]
    tried = _slowed(tried=["25% of one core: 0.30 s, stall 1 s"])
    row = own_step.render_step_table([], tried, PROBES).splitlines()[1]
    assert row.endswith("; tried first 25% of one core: 0.30 s, stall 1 s")


def test_the_quota_is_named_as_a_share_of_one_core_and_tightened_on_every_rank(
    tmp_path: Path,
) -> None:
    quota = own_step.CpuQuota(tmp_path, "g")
    assert quota.share == "50% of one core"
    quota.create(2)
    for rank in (0, 1):
        assert (quota.group(rank) / "cpu.cfs_period_us").read_text() == "100000"
        assert (quota.group(rank) / "cpu.cfs_quota_us").read_text() == "50000"
    quota.set(12_500)
    assert quota.share == "12.5% of one core"
    assert {(quota.group(r) / "cpu.cfs_quota_us").read_text() for r in (0, 1)} == {"12500"}
    # Each quota tried is tighter than the one before.
    assert list(own_step.CPU_QUOTAS_US) == sorted(own_step.CPU_QUOTAS_US, reverse=True)
    assert own_step.tried_text("25% of one core", _measure(0.3, 1)) == (
        "25% of one core: 0.30 s, stall 1 s"
    )
    refused = StepMeasure(False, "FAIL: this node's step is 1.9 s")
    assert own_step.tried_text("12.5% of one core", refused) == (
        "12.5% of one core: FAIL: this node's step is 1.9 s"
    )
