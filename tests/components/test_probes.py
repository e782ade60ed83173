"""The liveness probe program, run as the kubelet runs it, against a stand-in leader
(`components.manifests.probes`): what makes it pass and fail on the leader and on a worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from components.manifests import ProbeSpec, probe_command
from components.manifests.probes import liveness_probe, startup_probe
from tests.fakes.vllm_leader import fake_leader

PROBES = ProbeSpec(stall_s=30, period_s=5, failures=3, timeout_s=8, request_s=5, idle_check_s=0)
#: As planned: an idle pipeline proven at most once a minute.
RARE = ProbeSpec(stall_s=30, period_s=5, failures=3, timeout_s=8, request_s=5, idle_check_s=60)


def _run(command: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    # The pod's `python3` is this interpreter here.
    argv = [sys.executable, *command[1:]]
    done = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False
    )
    return done.returncode, done.stdout.strip()


def _leader(port: int, state: Path) -> list[str]:
    return probe_command(PROBES, "leader", port, "m", host="127.0.0.1", state_file=str(state))


def test_an_idle_leader_must_generate_one_token(tmp_path: Path) -> None:
    with fake_leader() as (port, leader):
        code, out = _run(_leader(port, tmp_path / "s.json"), {"VLLM_API_KEY": "k"})
        assert (code, out.split(";")[0]) == (0, "ok: idle")
        assert leader.completions == [
            {"model": "m", "prompt": "ping", "max_tokens": 1, "temperature": 0}
        ]
        assert leader.keys == ["Bearer k"]
        leader.completion = 500
        code, out = _run(_leader(port, tmp_path / "s.json"))
        assert code == 1
        assert out.startswith("FAIL: idle; a one-token generation answered 500")


def test_an_idle_leader_proves_its_pipeline_once_per_idle_check(tmp_path: Path) -> None:
    """The probe runs every period, but an idle leader generates a token at most every
    `idle_check_s`: the runs between pass on the last proof, so the metrics see ~1,440 probe
    requests a day, not one per period."""
    state = tmp_path / "s.json"
    command = probe_command(RARE, "leader", 0, "m", host="127.0.0.1", state_file=str(state))
    with fake_leader() as (port, leader):
        command = [a.replace("port=0", f"port={port}") for a in command]
        results = [_run(command) for _ in range(4)]
        assert [code for code, _ in results] == [0, 0, 0, 0]
        assert len(leader.completions) == 1
        assert results[1][1].startswith("ok: idle; tokens came out of the last stage")
        # The proof is a minute old: the next run asks again, and a failure is not a proof, so
        # every run after it asks until one succeeds.
        seen = json.loads(state.read_text())
        state.write_text(json.dumps({**seen, "proven": time.time() - RARE.idle_check_s - 1}))
        leader.completion = 500
        assert [_run(command)[0] for _ in range(2)] == [1, 1]
        assert len(leader.completions) == 3
        leader.completion = 200
        assert [_run(command)[0] for _ in range(2)] == [0, 0]
        assert len(leader.completions) == 4


def test_tokens_a_client_gets_prove_an_idle_pipeline_too(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    command = probe_command(RARE, "leader", 0, "m", host="127.0.0.1", state_file=str(state))
    with fake_leader() as (port, leader):
        command = [a.replace("port=0", f"port={port}") for a in command]
        leader.generated = 10.0
        _run(command)  # the first run records the counters and proves by asking
        before = len(leader.completions)
        state.write_text(json.dumps({**json.loads(state.read_text()), "proven": 0.0}))
        leader.generated = 25.0  # a client's reply came out since
        code, out = _run(command)
        assert code == 0 and out.startswith("ok: idle; tokens came out of the last stage")
        assert len(leader.completions) == before


def test_health_must_be_200(tmp_path: Path) -> None:
    with fake_leader() as (port, leader):
        leader.health = 503
        code, out = _run(_leader(port, tmp_path / "s.json"))
        assert (code, out) == (1, f"FAIL: http://127.0.0.1:{port}/health answered 503")


def test_a_busy_leader_gets_no_request_and_passes_while_tokens_move(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    with fake_leader() as (port, leader):
        leader.running, leader.waiting, leader.generated = 4, 9, 100.0
        assert _run(_leader(port, state))[0] == 0
        leader.generated = 140.0
        assert _run(_leader(port, state))[0] == 0
        assert leader.completions == []


def test_a_busy_leader_without_progress_past_the_stall_bound_fails(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    with fake_leader() as (port, leader):
        leader.running = 2
        assert _run(_leader(port, state))[0] == 0
        seen = json.loads(state.read_text())
        # The same progress, first seen longer ago than the stall bound.
        state.write_text(json.dumps({**seen, "since": time.time() - PROBES.stall_s - 1}))
        code, out = _run(_leader(port, state))
        assert code == 1
        assert out.startswith("FAIL: 2 requests in the engine and no progress for ")
        assert leader.completions == []


def test_a_worker_fails_when_its_leader_stops_answering() -> None:
    command = probe_command(PROBES, "worker", 0, "m")
    with fake_leader() as (port, _leader_state):
        worker = probe_command(PROBES, "worker", port, "m")
        code, out = _run(worker, {"LWS_LEADER_ADDRESS": "127.0.0.1"})
        assert (code, out) == (0, f"ok: leader http://127.0.0.1:{port}/health 200")
    code, out = _run(worker, {"LWS_LEADER_ADDRESS": "127.0.0.1"})
    assert code == 1
    assert out.startswith(f"FAIL: http://127.0.0.1:{port}/health: ")
    assert "host-env=LWS_LEADER_ADDRESS" in command


def test_the_startup_probe_waits_whole_periods_and_runs_as_long_as_liveness() -> None:
    command = probe_command(PROBES, "worker", 8080, "m")
    assert startup_probe(command, PROBES, 1805) == {
        "exec": {"command": command},
        "periodSeconds": 10,
        "failureThreshold": 180,
        "timeoutSeconds": PROBES.timeout_s,
    }
    assert startup_probe(command, PROBES, 5)["failureThreshold"] == 1
    assert startup_probe(command, PROBES, 19)["failureThreshold"] == 1
    assert startup_probe(command, PROBES, 20)["failureThreshold"] == 2
    assert liveness_probe(command, PROBES) == {
        "exec": {"command": command},
        "periodSeconds": PROBES.period_s,
        "failureThreshold": PROBES.failures,
        "timeoutSeconds": PROBES.timeout_s,
    }
    # Every HTTP call inside a run ends before the kubelet would stop the run.
    assert PROBES.request_s < PROBES.timeout_s
