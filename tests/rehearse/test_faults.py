"""The fault rehearsal's pieces without vLLM (`tools.rehearse.measure.faults`): the kubelet's probe
loop, the bounded client, the table, the verdict and the liveness check's CPU cost row
(`probe_cost`). The real group runs in `make rehearse-faults`."""

from __future__ import annotations

import sys
from pathlib import Path

from components.manifests import probe_command, programs
from infra.adapters.render import rendered_objects
from infra.adapters.wiring import server_spec
from tests.fakes.vllm_leader import fake_leader
from tests.rehearse.support import tiny_plan_for, until
from tools.rehearse.measure import faults, probe_cost
from tools.rehearse.measure.faults import ClientResult, FaultRow, FloodResult, Prober, run_client


def test_the_rehearsal_runs_the_pods_probe_program() -> None:
    """The rehearsal's checks are the pods' own: the same file, with the same keys."""
    real, tiny, cfg, tiny_cfg = tiny_plan_for("dev")
    (lws,) = [o for o in rendered_objects(cfg, real) if o["kind"] == "LeaderWorkerSet"]
    template = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leader", "worker"):
        pod = template[f"{role}Template"]["spec"]["containers"][0]["command"]
        spec = server_spec(tiny_cfg, tiny)
        local = probe_command(spec.probes, role, 41000, tiny.model)  # type: ignore[arg-type]
        assert local[:3] == ["python3", f"{programs.MOUNT}/liveness.py", "check"]
        assert programs.local(local, sys.executable)[1] == str(programs.DIR / "liveness.py")
        keys = lambda argv: [a.split("=")[0] for a in argv]  # noqa: E731
        # The pod's check also takes its startup phase's keys (its `/startup`), never a phase.
        assert keys(local[3:]) == keys(pod[4:-1])[: len(local) - 3]


def test_a_prober_fails_only_after_the_threshold_in_a_row() -> None:
    failing = ["python3", "-c", "import sys; print('FAIL: no'); sys.exit(1)"]
    prober = Prober("leader", failing, {}, period_s=0.05, failures=3, timeout_s=5).start()
    try:
        assert until(lambda: prober.failed_at is not None, 30)
    finally:
        prober.stop()
    assert len(prober.runs) >= 3
    assert prober.failed_runs()[0] == "FAIL: no"
    # The pod's `python3` runs as this interpreter.
    assert prober.argv[0] == sys.executable
    passing = Prober("worker", ["python3", "-c", "pass"], {}, 0.05, 3, 5).start()
    try:
        assert until(lambda: len(passing.runs) >= 4, 30)
    finally:
        passing.stop()
    assert passing.failed_at is None


def test_a_client_records_status_and_outcome() -> None:
    with fake_leader() as (port, leader):
        ok = ClientResult("a")
        run_client(ok, f"http://127.0.0.1:{port}/v1/completions", "k", {"m": 1}, 5, lambda: 0.0)
        assert (ok.status, ok.outcome) == (200, "complete")
        leader.completion = 503
        refused = ClientResult("b")
        run_client(refused, f"http://127.0.0.1:{port}/v1/completions", "k", {}, 5, lambda: 0.0)
        assert (refused.status, refused.outcome) == (503, "HTTP 503")
    gone = ClientResult("c")
    run_client(gone, f"http://127.0.0.1:{port}/v1/completions", "k", {}, 5, lambda: 0.0)
    assert gone.status is None and gone.outcome.startswith("connection: ")
    assert gone.ended_s is not None


def _row(**changes: object) -> FaultRow:
    streams = [ClientResult(f"stream {i}", "error event 500", 200, 10.2) for i in (1, 2)]
    late = ClientResult("new request", "HTTP 500", 500, 10.1)
    row = FaultRow(
        "worker SIGSTOP", 21.0, "liveness", 21.0, "leader", [*streams, late], 70.0, [], 30.0
    )
    for key, value in changes.items():
        setattr(row, key, value)
    return row


def test_a_fault_passes_only_if_noticed_bounded_recovered_and_clean() -> None:
    assert _row().ok
    assert not _row(detected_s=None).ok
    assert not _row(detected_s=61.0).ok
    assert not _row(serves_again_s=None).ok
    assert not _row(leftovers=[123]).ok
    late = ClientResult("new request", "no byte for 30 s", None, 45.0)
    assert not _row(clients=[late]).ok


def test_a_fault_is_held_to_its_measured_bound_and_a_frozen_rank_to_its_liveness() -> None:
    bounded = _row(detect_bound_s=24, detect_bound_text="24 s (stall 1 + 3 x 5 + 8)")
    assert bounded.ok
    assert not _row(detect_bound_s=20).ok  # detected at 21 s
    # A frozen rank: an exit here (the engine's step bound) does not count, the probe must.
    frozen = _row(
        detect_bound_s=24,
        detect_bound_text="24 s (stall 1 + 3 x 5 + 8)",
        liveness_must_catch=True,
        detected_s=10.6,
        detected_by="rank exit",
        liveness_s=14.9,
    )
    assert frozen.ok
    assert not _row(detect_bound_s=24, liveness_must_catch=True, liveness_s=30.0).ok
    assert not _row(detect_bound_s=24, liveness_must_catch=True, liveness_s=None).ok
    (check,) = faults.fault_checks([frozen], None)
    assert check.expected == "< 60 s, liveness within 24 s (stall 1 + 3 x 5 + 8)"
    assert check.observed == "10.6 s (rank exit); liveness 14.9 s"


def test_the_flood_fails_on_a_probe_failure_or_an_unplanned_5xx() -> None:
    fine = [ClientResult("f", "complete", 200, 1.0), ClientResult("g", "HTTP 429", 429, 0.1)]
    flood = FloodResult(32, 30, {"200": 1, "429": 1}, 6, 6, 0.2, [], fine, 30)
    assert flood.ok
    assert not FloodResult(32, 30, {}, 6, 6, 0.2, ["leader: FAIL: x"], fine, 30).ok
    broken = [*fine, ClientResult("h", "HTTP 500", 500, 1.0)]
    assert not FloodResult(32, 30, {}, 6, 6, 0.2, [], broken, 30).ok


def test_the_table_has_a_row_per_fault_and_the_flood() -> None:
    done = [ClientResult("flood 1", "complete", 200, 1.5)]
    flood = FloodResult(32, 30, {"200": 900}, 6, 5, 0.4, [], done, 30)
    table = faults.render_table([_row()], flood).splitlines()
    assert table[0].split(" | ")[0].strip() == "fault"
    assert table[1].startswith("worker SIGSTOP")
    assert "21.0 s (liveness)" in table[1]
    assert "leader at 21.0 s" in table[1]
    assert "2 streams: error event 500 at 10.2 s; new request: HTTP 500 at 10.1 s" in table[1]
    assert table[2].startswith("flood 32 at once")
    assert "6 runs (5 busy), 0 failed, slowest 0.4 s" in table[2]
    assert "200 x900" in table[2]


def test_a_served_check_costs_less_cpu_than_a_spawned_python(tmp_path: Path) -> None:
    """Run directly against the stand-in leader: both ways run the same check, and the served
    one costs less CPU."""
    with fake_leader() as (port, leader):
        row = probe_cost.row(port, "m", "k", tmp_path)
        # One proof each way, then only /health and /metrics: the idle check runs hourly here.
        assert len(leader.completions) == 2
        assert leader.keys == ["Bearer k", "Bearer k"]
    print(row.note)
    assert row.ok, row.note
    spawned, served = (float(part.split(" ms")[0]) for part in row.observed.split(", "))
    assert 0 < served < spawned
    assert (tmp_path / "spawned.json").exists() and (tmp_path / "served.json").exists()
