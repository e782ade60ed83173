"""The liveness check (`components/manifests/programs/liveness.py`, `components.manifests.probes`)
against a stand-in leader: what makes it pass and fail on the leader and on a worker. The checks
are called in this process (the program imported, its arguments the pods' own); the check
process the kubelet asks over HTTP is run as a process, as the pod runs it."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import logging.config
import math
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from components import watch
from components.manifests import ProbeSpec, drain, probe_command, probes, programs
from components.manifests.probes import (
    engine_logging_config,
    leader_startup_probe,
    liveness_probe,
    startup_probe,
)
from components.manifests.programs import liveness as program
from infra.plan import liveness
from tests import builders
from tests.fakes.vllm_leader import fake_leader
from tools.rehearse.group.ranks import free_port
from tools.rehearse.measure.metrics_capture import parse_exposition

PROBES = ProbeSpec(stall_s=30, period_s=5, failures=3, timeout_s=8, request_s=5, idle_check_s=0)
#: As planned: an idle pipeline proven at most once a minute.
RARE = ProbeSpec(stall_s=30, period_s=5, failures=3, timeout_s=8, request_s=5, idle_check_s=60)
#: A 3 s stall bound and a 1 s proof deadline, for the waits behind a running step.
QUICK = ProbeSpec(stall_s=3, period_s=2, failures=3, timeout_s=4, request_s=1, idle_check_s=0)


def _run(command: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """One check with the command's arguments (`liveness.py check ...`), as `main` runs it."""
    assert command[1:3] == [f"{programs.MOUNT}/liveness.py", "check"]
    opts = dict(arg.split("=", 1) for arg in command[3:])
    with mock.patch.dict(os.environ, env or {}):
        ok, line = program.check(opts)
    return (0 if ok else 1), line


def _leader(port: int, state: Path, spec: ProbeSpec = PROBES) -> list[str]:
    return probe_command(spec, "leader", port, "m", host="127.0.0.1", state_file=str(state))


def _seen(state: Path) -> dict[str, Any]:
    return json.loads(state.read_text())


def _remember(state: Path, **changes: Any) -> None:
    """The check's state file as if `changes` had been written by an earlier run."""
    state.write_text(json.dumps({**_seen(state), **changes}))


def test_an_idle_leader_must_generate_one_token_and_answer_health(tmp_path: Path) -> None:
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
        # Health must be 200.
        leader.health = 503
        code, out = _run(_leader(port, tmp_path / "s.json"))
        assert (code, out) == (1, f"FAIL: http://127.0.0.1:{port}/health answered 503")
        # Whatever else goes wrong fails the check with its reason, not an empty answer.
        with mock.patch.object(program.Check, "run", side_effect=ValueError("unreadable")):
            assert _run(_leader(port, tmp_path / "s.json")) == (1, "FAIL: ValueError('unreadable')")


def test_an_idle_leader_proves_its_pipeline_once_per_idle_check(tmp_path: Path) -> None:
    """The probe runs every period, but an idle leader generates a token at most every
    `idle_check_s`: the runs between pass on the last proof, so the metrics see ~1,440 probe
    requests a day, not one per period."""
    state = tmp_path / "s.json"
    with fake_leader() as (port, leader):
        command = _leader(port, state, RARE)
        results = [_run(command) for _ in range(4)]
        assert [code for code, _ in results] == [0, 0, 0, 0]
        assert len(leader.completions) == 1
        assert results[1][1].startswith("ok: idle; tokens came out of the last stage")
        # The proof is a minute old: the next run asks again, and a failure is not a proof, so
        # every run after it asks until one succeeds.
        _remember(state, proven=time.time() - RARE.idle_check_s - 1)
        leader.completion = 500
        assert [_run(command)[0] for _ in range(2)] == [1, 1]
        assert len(leader.completions) == 3
        leader.completion = 200
        assert [_run(command)[0] for _ in range(2)] == [0, 0]
        assert len(leader.completions) == 4


def test_tokens_a_client_gets_prove_an_idle_pipeline_too(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    with fake_leader() as (port, leader):
        command = _leader(port, state, RARE)
        leader.generated = 10.0
        _run(command)  # the first run records the counters and proves by asking
        before = len(leader.completions)
        _remember(state, proven=0.0)
        leader.generated = 25.0  # a client's reply came out since
        code, out = _run(command)
        assert code == 0 and out.startswith("ok: idle; tokens came out of the last stage")
        assert len(leader.completions) == before


def test_a_busy_leader_gets_no_request_passes_while_tokens_move_and_fails_past_the_bound(
    tmp_path: Path,
) -> None:
    state = tmp_path / "s.json"
    with fake_leader() as (port, leader):
        leader.running, leader.waiting, leader.generated = 4, 9, 100.0
        assert _run(_leader(port, state))[0] == 0
        leader.generated = 140.0
        assert _run(_leader(port, state))[0] == 0
        assert leader.completions == []
        # The same progress, first seen longer ago than the stall bound: it fails.
        _remember(state, since=time.time() - PROBES.stall_s - 1)
        code, out = _run(_leader(port, state))
        assert code == 1
        assert out.startswith("FAIL: 13 requests in the engine and no progress for ")
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


def test_the_probes_ask_the_check_process_every_period_and_wait_through_a_cold_start() -> None:
    live = {"httpGet": {"path": "/live", "port": probes.LIVENESS_PORT}}
    assert startup_probe(PROBES, 1805) == {
        **live,
        "periodSeconds": 10,
        "failureThreshold": 180,
        "timeoutSeconds": PROBES.timeout_s,
    }
    assert startup_probe(PROBES, 5)["failureThreshold"] == 1
    assert startup_probe(PROBES, 19)["failureThreshold"] == 1
    assert startup_probe(PROBES, 20)["failureThreshold"] == 2
    assert liveness_probe(PROBES) == {
        **live,
        "periodSeconds": PROBES.period_s,
        "failureThreshold": PROBES.failures,
        "timeoutSeconds": PROBES.timeout_s,
    }
    # Every HTTP call inside a run ends before the kubelet would stop the run.
    assert PROBES.request_s < PROBES.timeout_s


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode().strip()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode().strip()


@contextlib.contextmanager
def _serving(tmp_path: Path, port: int, first: str) -> Iterator[tuple[int, tuple[int, str]]]:
    """`liveness.py serve` for the leader on `port`, as `engine.sh` starts it in the pod (its
    log in `container.log`): the port it listens on and its first answer to a GET of `first`."""
    listen = free_port()
    checks = probes.check_args(
        PROBES, "leader", port, "m", host="127.0.0.1", state_file=str(tmp_path / "s.json")
    )
    argv = ["python3", f"{programs.MOUNT}/liveness.py", "serve", f"listen={listen}", *checks]
    with (tmp_path / "container.log").open("w") as stderr:
        server = subprocess.Popen(
            programs.local(argv, sys.executable),
            env={**os.environ, "VLLM_API_KEY": "k"},
            stderr=stderr,
        )
    try:
        base = f"http://127.0.0.1:{listen}"
        for _ in range(100):
            try:
                answer = _get(f"{base}{first}")
                break
            except OSError:
                time.sleep(0.05)
        yield listen, answer
    finally:
        server.kill()
        server.wait()


def test_the_check_process_runs_one_check_per_http_get(tmp_path: Path) -> None:
    """Each GET runs a check with the pods' arguments, 200 when it passes and 503 with its line
    when it fails."""
    with fake_leader() as (port, leader):
        with _serving(tmp_path, port, "/live") as (listen, (status, text)):
            base = f"http://127.0.0.1:{listen}"
            assert (status, text.split(";")[0]) == (200, "ok: idle")
            assert leader.keys == ["Bearer k"]
            leader.completion = 500
            status, text = _get(f"{base}/live")
            assert status == 503
            assert text.startswith("FAIL: idle; a one-token generation answered 500")
            assert _get(f"{base}/other")[0] == 404
            assert len(leader.completions) == 2
            # The kubelet's event says only "statuscode: 503": the why is on the container's
            # log, the failing line and the pass after it, nothing for a passing check.
            leader.completion = 200
            assert _get(f"{base}/live")[0] == 200
            assert _get(f"{base}/live")[0] == 200
        lines = (tmp_path / "container.log").read_text().splitlines()
        assert [line.split(":")[0:2] for line in lines] == [
            ["gemma-graviton", " /live FAIL"],
            ["gemma-graviton", " /live pass"],
        ], lines
        assert "a one-token generation answered 500" in lines[0]


def _post_from(source: str, port: int, path: str) -> int:
    """The status of an empty POST to loopback `port` from the address `source`."""
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=10, source_address=(source, 0)
    )
    try:
        connection.request("POST", path, body=b"")
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_leader_behind_a_door_leaves_its_service_when_its_prestop_starts(
    tmp_path: Path,
) -> None:
    """The door shape's readiness (`/ready`) is vLLM's /health until the engine's preStop POSTs
    /drain from inside the pod; then 503 with vLLM still healthy, so kube-proxy sends even a
    last leader no new connection. No other address can drain a leader."""
    with fake_leader() as (port, leader), _serving(tmp_path, port, "/ready") as (listen, first):
        assert first == (200, "vLLM's /health: 200")
        base = f"http://127.0.0.1:{listen}"
        # The kubelet fails readiness at the first failed probe: the check process waits
        # for three of vLLM's failures in a row, so one slow /health does not flap it.
        leader.health = 503
        answers = [_get(f"{base}/ready") for _ in range(program.READY_FAILURES)]
        assert answers == [(200, "vLLM's /health: 503")] * (program.READY_FAILURES - 1) + [
            (503, "vLLM's /health: 503")
        ]
        leader.health = 200
        # The kubelet and the other pods reach this port: from them /drain is no route.
        assert _post_from("127.0.0.2", listen, "/drain") == 404
        assert _post_from("127.0.0.1", listen, "/other") == 404
        assert _get(f"{base}/ready")[0] == 200
        # The hook fails readiness first, while it still serves through the window.
        spec = builders.drain_spec(accept_s=3, reply_s=60, settle_s=0)
        hook = drain.engine_pre_stop(spec, "leader", port, 1, free_port(), ready_port=listen)
        running = subprocess.Popen(
            programs.local(hook, sys.executable), stdout=subprocess.PIPE, text=True
        )
        try:
            assert running.stdout is not None
            line = running.stdout.readline()
            assert "readiness fails from now on" in line, line
            assert _get(f"{base}/ready") == (503, "draining: the pod is stopping")
            assert running.poll() is None  # still in the window
            assert running.wait(timeout=60) == 0
        finally:
            running.kill()
        assert _get(f"{base}/health")[0] == 404  # the check process has no other route


# --------------------------------------------------------------------------------------------
# The leader's startup phase: the linear path, and the node's own step


#: A plan's start-up measurement: 64-token requests, within 2 s each, stall bound from 1 s to 30 s.
MEASURED = ProbeSpec(
    stall_s=30,
    period_s=2,
    failures=3,
    timeout_s=8,
    request_s=5,
    idle_check_s=60,
    calibrate_tokens=64,
    calibrate_runs=3,
    calibrate_s=2,
    growth=1.2,
    margin=1.5,
    floor_s=1,
    path="onednn",
    vocab_size=5000,
)


def _startup(
    port: int, tmp_path: Path, spec: ProbeSpec = MEASURED, stop_pid: int | None = None
) -> list[str]:
    return probe_command(
        spec,
        "leader",
        port,
        "m",
        host="127.0.0.1",
        state_file=str(tmp_path / "s.json"),
        phase="startup",
        warnings_log=str(tmp_path / "warnings.log"),
        announce=str(tmp_path / "container.log"),
        stop_pid=stop_pid,
        self_metrics=str(tmp_path / "self.prom"),
    )


def _gauges(tmp_path: Path) -> dict[str, float]:
    """The record file as Prometheus reads it (the rehearsal's exposition parser): each family's
    type and its one unlabelled sample."""
    text = (tmp_path / "self.prom").read_text()
    families = parse_exposition(text)
    assert {f.type for f in families.values()} == {"gauge"}, text
    assert not list(tmp_path.glob("*.new")), "a half-written record was left"
    return {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if not line.startswith("#")
    }


def test_the_leader_measures_its_step_and_takes_its_stall_bound_from_it(tmp_path: Path) -> None:
    with fake_leader() as (port, leader):
        leader.seconds_per_token = 0.1 / MEASURED.calibrate_tokens  # a 0.1 s step
        code, out = _run(_startup(port, tmp_path))
        assert code == 0, out
        seen = _seen(tmp_path / "s.json")
        # The slowest run after the warm-up, times growth and margin, within the bounds: the
        # planner's own arithmetic (`infra.plan.liveness.measured_stall_seconds`).
        assert seen["step_s"] == max(seen["runs_s"][1:])
        assert 0.1 <= seen["step_s"] < 1.0
        expected = liveness.measured_stall_seconds(
            seen["step_s"], MEASURED.growth, MEASURED.stall_s, MEASURED.margin
        )
        assert expected == liveness.MIN_STALL_S  # the planner's floor: a 0.1 s step is below it
        floor_free = min(
            MEASURED.stall_s,
            max(MEASURED.floor_s, math.ceil(seen["step_s"] * MEASURED.growth * MEASURED.margin)),
        )
        assert seen["stall_s"] == floor_free
        # Three requests of 64 token ids each, below the vocabulary, no two alike (no prefix
        # cache hit), one output token.
        prompts = [c["prompt"] for c in leader.completions]
        assert len(prompts) == 3 and all(len(p) == 64 for p in prompts)
        assert all(0 <= t < MEASURED.vocab_size for p in prompts for t in p)
        assert len({p[0] for p in prompts}) == 3
        assert {c["max_tokens"] for c in leader.completions} == {1}
        # The warm-up alone samples, so vLLM builds its sampler for a lone sampled request
        # before any client; the measured runs are greedy.
        assert [c["temperature"] for c in leader.completions] == [1, 0, 0]
        line = (tmp_path / "container.log").read_text()
        assert line.startswith("gemma-graviton: measured step ") and line.count("\n") == 1
        assert f"liveness stall bound {seen['stall_s']} s" in line
        # The record the gatekeeper serves to the collector: the same step and bound, no
        # fallback.
        assert _gauges(tmp_path) == {
            watch.MEASURED_STEP: seen["step_s"],
            watch.STALL_BOUND: seen["stall_s"],
            watch.PREFILL_FALLBACK: 0.0,
        }
        # Measured once: a second startup run (the kubelet may run it again) sends nothing.
        assert _run(_startup(port, tmp_path))[0] == 0
        assert len(leader.completions) == 3


def test_a_small_vocabulary_gets_token_ids_inside_it(tmp_path: Path) -> None:
    # The rehearsal's tiny model has 512 tokens: vLLM 0.31 refuses an id beyond them with 400
    # ("Token id 1000 is out of vocabulary", `v1/engine/input_processor.py`).
    small = dataclasses.replace(MEASURED, vocab_size=512)
    with fake_leader() as (port, leader):
        assert _run(_startup(port, tmp_path, small))[0] == 0
        prompts = [c["prompt"] for c in leader.completions]
    assert all(128 <= t < 512 for p in prompts for t in p)
    assert len({p[0] for p in prompts}) == 3


def test_a_slower_node_measures_a_longer_step_and_a_longer_stall_bound(tmp_path: Path) -> None:
    bounds = {}
    for seconds in (0.05, 1.5):
        run_dir = tmp_path / str(seconds)
        run_dir.mkdir()
        with fake_leader() as (port, leader):
            leader.seconds_per_token = seconds / MEASURED.calibrate_tokens
            assert _run(_startup(port, run_dir))[0] == 0
        bounds[seconds] = _seen(run_dir / "s.json")
    assert bounds[1.5]["step_s"] > bounds[0.05]["step_s"]
    assert bounds[1.5]["stall_s"] > bounds[0.05]["stall_s"]


def test_a_node_slower_than_the_slow_end_never_starts(tmp_path: Path) -> None:
    with fake_leader() as (port, leader):
        leader.seconds_per_token = 3.0 / MEASURED.calibrate_tokens  # beyond calibrate_s (2 s)
        code, out = _run(_startup(port, tmp_path))
        assert code == 1
        assert out.startswith("FAIL: measuring the step: a 64-token prompt answered None after")
        assert not (tmp_path / "s.json").exists()  # nothing measured, nothing kept


def test_a_leader_whose_vllm_fell_back_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "warnings.log").write_text(
        "(EngineCore pid=7) WARNING 12-03 10:00:00 [utils.py:580] Failed to create oneDNN "
        "linear, fallback to torch linear. Exception: unsupported\n"
    )
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with fake_leader() as (port, leader):
            code, out = _run(_startup(port, tmp_path, stop_pid=engine.pid))
            assert code == 1
            assert out.startswith("FAIL: vLLM fell back to torch's linear")
            assert "set prefillPath=fallback" in out and "\n" not in out
            assert leader.completions == []
            # Final: the engine is stopped at once, so the kubelet restarts the container now,
            # and the line is said once however often the kubelet asks again.
            assert engine.wait(timeout=10) == -signal.SIGTERM
            # Recorded: fell back, nothing measured.
            assert _gauges(tmp_path) == {watch.PREFILL_FALLBACK: 1.0}
            assert _run(_startup(port, tmp_path))[0] == 1
            assert (tmp_path / "container.log").read_text().count("\n") == 1
            # A plan that assumes the fallback starts on it.
            (tmp_path / "s.json").unlink()
            fallback = dataclasses.replace(MEASURED, path="fallback")
            assert _run(_startup(port, tmp_path, fallback))[0] == 0
            # On a plan that assumes it, the fallback is said beside the measurement.
            recorded = _gauges(tmp_path)
            assert recorded[watch.PREFILL_FALLBACK] == 1.0
            assert recorded[watch.STALL_BOUND] == _seen(tmp_path / "s.json")["stall_s"]
    finally:
        engine.kill()


def test_a_node_whose_step_would_outlast_the_engines_timeout_is_refused(tmp_path: Path) -> None:
    """0.3 s x 1.2 x 1.5 x 2 in flight = 1.08 s, beyond a 1 s engine step timeout: the engine
    would kill this node's healthy long prompts, so it never starts. (A loaded machine measures
    a longer step: the refusal only grows surer; the one-in-flight case keeps 0.46 s of room.)"""
    tight = dataclasses.replace(MEASURED, stall_s=1, in_flight=2)
    with fake_leader() as (port, leader):
        leader.seconds_per_token = 0.3 / tight.calibrate_tokens
        code, out = _run(_startup(port, tmp_path, tight))
        assert code == 1
        assert out.startswith("FAIL: this node's step is ")
        assert "beyond the engine's 1 s step timeout" in out
        assert "step_s" not in _seen(tmp_path / "s.json")
        # The record says the step that refused the node, and no stall bound (none was taken).
        refused = _gauges(tmp_path)
        assert set(refused) == {watch.MEASURED_STEP, watch.PREFILL_FALLBACK}
        assert refused[watch.MEASURED_STEP] * 1.2 * 1.5 * 2 > 1
        # With one batch in flight the same node fits (0.54 s).
        (tmp_path / "s.json").unlink()
        assert _run(_startup(port, tmp_path, dataclasses.replace(tight, in_flight=1)))[0] == 0


def test_liveness_uses_the_measured_bound_not_the_ceiling(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    with fake_leader() as (port, leader):
        leader.running = 1
        command = _leader(port, state)
        assert _run(command)[0] == 0
        # Quiet for 13 s: within the 30 s ceiling, past a measured 12 s bound.
        _remember(state, since=time.time() - 13)
        assert _run(command)[0] == 0
        _remember(state, since=time.time() - 13, stall_s=12)
        code, out = _run(command)
        assert code == 1 and out.endswith("(bound 12 s)")


def test_the_leader_startup_probe_has_room_for_the_measurement() -> None:
    command = probe_command(MEASURED, "leader", 8000, "m", phase="startup")
    probe = leader_startup_probe(MEASURED, 1800)
    assert probe["httpGet"] == {"path": "/startup", "port": probes.LIVENESS_PORT}
    assert probe["timeoutSeconds"] == (
        MEASURED.timeout_s + 3 * MEASURED.calibrate_s + probes.STARTUP_SLACK_S
    )
    assert probe["failureThreshold"] * probe["periodSeconds"] == 1800
    assert "phase=startup" in command and "path=onednn" in command
    # Liveness runs never measure.
    assert "phase=startup" not in probe_command(MEASURED, "leader", 8000, "m")


def test_a_build_without_onednn_is_caught_by_its_dispatch_line_alone(tmp_path: Path) -> None:
    """vLLM 0.31 logs no warning when its build has no oneDNN ops (`_supports_onednn` false):
    only the dispatch module's debug line, which the logging config writes to the same file."""
    (tmp_path / "warnings.log").write_text(
        "(EngineCore pid=7) DEBUG 12-03 10:00:00 [utils.py:589] " + program.FALLBACK_DISPATCH + "\n"
    )
    with fake_leader() as (port, leader):
        code, out = _run(_startup(port, tmp_path))
        assert code == 1 and out.startswith("FAIL: vLLM fell back to torch's linear")
        assert leader.completions == []
    # The oneDNN line is no fallback: that leader measures and starts.
    (tmp_path / "s.json").unlink(missing_ok=True)
    (tmp_path / "warnings.log").write_text(
        "(EngineCore pid=7) DEBUG 12-03 10:00:00 [utils.py:576] CPU unquantized GEMM dispatch: "
        "using oneDNN onednn_mm\n"
    )
    with fake_leader() as (port, _leader):
        assert _run(_startup(port, tmp_path))[0] == 0


def test_the_dispatch_lines_reach_the_warnings_file_and_not_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the stdlib's dictConfig, as vLLM applies the file: the dispatch module's debug
    line lands in the warnings file; other modules' debug lines nowhere, their info on stdout."""
    log = tmp_path / "w.log"
    config = engine_logging_config(str(log))
    plain = {"vllm": {"format": "%(levelname)s %(message)s"}}
    logging.config.dictConfig({**config, "formatters": plain})
    try:
        logging.getLogger(probes.DISPATCH_LOGGER).debug(program.FALLBACK_DISPATCH)
        logging.getLogger("vllm.engine").debug("not this")
        logging.getLogger("vllm.engine").info("an info line")
        for handler in logging.getLogger(probes.DISPATCH_LOGGER).handlers:
            handler.flush()
        assert log.read_text() == f"DEBUG {program.FALLBACK_DISPATCH}\n"
        assert "not this" not in capsys.readouterr().out
    finally:
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})
    # vLLM's stdout handler is kept; the warnings file is added.
    handlers = config["loggers"]["vllm"]["handlers"]
    assert [config["handlers"][h]["class"] for h in handlers] == [
        "logging.StreamHandler",
        "logging.FileHandler",
    ]
    assert config["handlers"]["warnings"]["level"] == "WARNING"
    assert config["handlers"]["warnings"]["filename"] == str(log)


def test_an_idle_proof_behind_a_running_step_fails_only_past_the_stall_bound_or_a_busy_engine(
    tmp_path: Path,
) -> None:
    """vLLM's running count moves when a step ends: a request in its first step looks idle, and
    the idle proof waits behind that step. No answer in time is a slow step until it has lasted
    the stall bound; an HTTP error still fails at once."""
    state = tmp_path / "s.json"
    with fake_leader() as (port, leader):
        command = _leader(port, state, QUICK)
        leader.delay_s = 1.5  # beyond the proof's 1 s deadline
        code, out = _run(command)
        assert code == 0 and "a step may be running" in out
        _remember(state, idle_waiting_since=time.time() - 4)
        code, out = _run(command)
        assert code == 1 and "beyond the 3 s stall bound" in out
        # Answered again: the wait is over.
        leader.delay_s = 0.0
        assert _run(command)[0] == 0
        assert "idle_waiting_since" not in _seen(state)
        # An idle wait that a busy engine then interrupted starts afresh the next time the
        # engine is idle: a stale start would fail the probe at once.
        _remember(state, idle_waiting_since=time.time() - 60)
        leader.running = 1
        assert _run(command)[0] == 0
        assert "idle_waiting_since" not in _seen(state)


@pytest.mark.parametrize(
    ("step", "growth", "margin", "floor", "ceiling"),
    [
        (0.1, 1.2, 1.5, 10, 30),
        (7.0, 2.0, 1.5, 10, 60),
        (30.0, 1.0, 1.5, 10, 40),
        (6.6, 1, 1.5, 1, 9),
    ],
)
def test_the_checks_stall_bound_is_the_planners_arithmetic(
    step: float, growth: float, margin: float, floor: int, ceiling: int
) -> None:
    assert program.stall_bound(step, growth, margin, floor, ceiling) == (
        liveness.measured_stall_seconds(step, growth, ceiling, margin, floor)
    )


def test_the_check_sums_the_engines_counts_over_labels_and_orders_its_progress() -> None:
    text = "\n".join(
        [
            "# HELP vllm:num_requests_running Requests running.",
            'vllm:num_requests_running{engine="0"} 2.0',
            'vllm:num_requests_running{engine="1"} 1.0',
            'vllm:num_requests_waiting{engine="0"} 4.0',
            'vllm:prompt_tokens_total{engine="0"} 100.0',
            'vllm:generation_tokens_total{engine="0"} 7.0',
            'vllm:generation_tokens_total{engine="1"} 3.0',
            "vllm:kv_cache_usage_perc 0.25",
            'vllm:num_requests_running_other{engine="0"} 9.0',
        ]
    )
    assert program.read_metrics(text) == (7.0, [10.0, 0.25, 100.0])
    assert program.read_metrics("") == (0.0, [])


def test_the_programs_own_lines_and_gauges_are_the_ones_the_monitoring_reads() -> None:
    assert program.FALLBACK_LINE == "Failed to create oneDNN linear"
    assert (
        list(program.GAUGES)
        == [
            watch.MEASURED_STEP,
            watch.STALL_BOUND,
            watch.PREFILL_FALLBACK,
        ]
        == [
            "gemma_measured_step_seconds",
            "gemma_liveness_stall_bound_seconds",
            "gemma_prefill_fallback",
        ]
    )


def test_a_check_ends_within_its_probes_timeout(tmp_path: Path) -> None:
    """As an exec probe's run was stopped at `timeoutSeconds`: a served check that outlived it
    would hold the next period's check behind one the kubelet already counted as failed."""
    quick = ProbeSpec(stall_s=30, period_s=2, failures=3, timeout_s=3, request_s=5, idle_check_s=0)
    with fake_leader() as (port, leader):
        leader.delay_s = 12.0
        command = _leader(port, tmp_path / "s.json", quick)
        assert "timeout-s=2" in command
        code, out = _run(command)
    # The proof's own deadline (5 s) gave way to the probe's (2 s, which the check reports):
    # the check ended without the 12 s reply, which a longer wait would have read as a token.
    assert (code, out.split(";")[0]) == (0, "ok: idle")
    assert "no token after 2." in out
