"""Change without an outage, in the objects: the rollout strategy, the preStop hooks, the grace,
the readiness that fails on drain, the disruption budget and the load balancer's side. One test
per rule; the hooks' scripts and the readiness run for real where they can."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from components import manifests
from components.manifests import drain, gatekeeper, programs
from components.manifests.access import target_group_attributes
from components.manifests.gatekeeper_conf import UPSTREAM_KEEPALIVE_SECONDS, UPSTREAM_LIFETIME_S
from infra.adapters import render
from infra.plan import catalog
from infra.plan.rollout import ENDPOINT_PROPAGATION_S, plan_drain
from policies.rules import TARGET_GROUP_ATTRIBUTES_ANNOTATION
from tests import builders, door_harness
from tests.components.test_manifest_fields import SPEC
from tests.fakes import k8s_schemas
from tests.fakes.openai_stub import StubConfig
from tools.rehearse.front_door import gatekeeper_run as gate
from tools.rehearse.group.ranks import free_port

DRAIN = builders.drain_spec(accept_s=35, reply_s=2930, settle_s=5)


def _containers(spec: manifests.ServerSpec, role: str) -> dict[str, dict[str, Any]]:
    template = manifests.leader_worker_set(spec)["spec"]["leaderWorkerTemplate"][f"{role}Template"]
    return {c["name"]: c for c in template["spec"]["containers"]}


def _hook(argv: list[str], env: dict[str, str] | None = None) -> tuple[str, str, int]:
    """An engine preStop run to its end: its output, its last line and that line's own clock
    (`[drain N s]`, seconds since the stop)."""
    done = subprocess.run(
        programs.local(argv, sys.executable),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    return done.stdout, last, int(last.split("[drain ")[1].split(" s]")[0])


def test_a_surge_rollout_starts_new_groups_before_any_old_one_stops() -> None:
    surging = manifests.leader_worker_set(replace(SPEC, rollout_surge=1))
    assert surging["spec"]["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0},
    }
    assert k8s_schemas.lws_errors(surging) == []
    # Without room to surge, one group at a time (LWS refuses 0 and 0).
    fixed = manifests.leader_worker_set(replace(SPEC, rollout_surge=0))["spec"]["rolloutStrategy"]
    assert fixed["rollingUpdateConfiguration"] == {"maxSurge": 0, "maxUnavailable": 1}
    # The surge groups' ranks have claims of their own, Pulumi's like the others.
    claims = manifests.rank_pods(replace(SPEC, rollout_surge=1))
    assert claims[-SPEC.stages :] == ["gemma-vllm-2", "gemma-vllm-2-1", "gemma-vllm-2-2"]


def test_every_serving_container_drains_before_it_is_stopped() -> None:
    spec = replace(SPEC, drain=DRAIN)
    leader, worker = _containers(spec, "leader"), _containers(spec, "worker")
    hook = leader["gatekeeper"]["lifecycle"]["preStop"]["exec"]["command"]
    assert hook == gatekeeper.pre_stop(DRAIN, gatekeeper.RUN_DIR)
    script = hook[2]
    # Accept for the LB's window, then fail readiness, then quit gracefully, then wait.
    assert script.index("sleep 35") < script.index("touch /tmp/draining")
    assert script.index("touch /tmp/draining") < script.index("kill -QUIT")
    assert script.rstrip().endswith("done")
    engine = leader["vllm"]["lifecycle"]["preStop"]["exec"]["command"]
    end = DRAIN.grace_s - drain.STOP_MARGIN_S - drain.POLL_ROUND_S  # the last round fits
    assert engine[:2] == ["python3", "/opt/gemma-graviton/drain.py"]
    assert engine[2:] == [
        "role=leader", "accept-s=35", "reply-s=2930", "settle-s=5", f"end-s={end}",
        f"engine-port={SPEC.port}", f"door-port={gatekeeper.PORT}",
    ]  # fmt: skip
    rank = worker["vllm"]["lifecycle"]["preStop"]["exec"]["command"]
    assert rank[2:] == [
        "role=worker", "accept-s=35", "reply-s=2930", "settle-s=5", f"end-s={end}",
        "leader-env=LWS_LEADER_ADDRESS", f"leader-port={SPEC.master_port}",
    ]  # fmt: skip


def test_the_gatekeeper_is_ready_until_the_drain_marker_and_one_failure_takes_it_out() -> None:
    probe = _containers(SPEC, "leader")["gatekeeper"]["readinessProbe"]
    # On the probe listener (its own container's port, by name), never the public one.
    assert probe["httpGet"] == {"path": "/ready", "port": gatekeeper.PROBE_PORT_NAME}
    assert probe["failureThreshold"] == 1
    marker = f"{gatekeeper.RUN_DIR}/{gatekeeper.MARKER_NAME}"
    assert f"if (-f {marker}) {{ return 503; }}" in gatekeeper.nginx_conf(SPEC.limits)


@door_harness.needs_nginx
def test_real_nginx_answers_ready_then_503_once_the_marker_exists(tmp_path: Path) -> None:
    with door_harness.stub_door(
        SPEC.limits, "k" * 32, StubConfig(api_key="k" * 32, model="m"), tmp_path
    ) as door:
        assert gate.request(door.base_url, "GET", "/ready").status == 200
        (tmp_path / "run" / gatekeeper.MARKER_NAME).touch()
        reply = gate.request(door.base_url, "GET", "/ready")
        assert reply.status == 503
        assert json.loads(reply.body)["error"]["code"] == 503
        assert gate.request(door.base_url, "POST", "/ready", b"{}").status == 404


def test_two_or_more_groups_get_a_budget_that_keeps_one_serving() -> None:
    assert manifests.pod_disruption_budget(replace(SPEC, replicas=1)) is None
    kinds = [o["kind"] for o in render.all_objects(replace(SPEC, replicas=1))]
    assert "PodDisruptionBudget" not in kinds
    budget = manifests.pod_disruption_budget(replace(SPEC, replicas=2))
    assert budget is not None
    assert budget["spec"] == {
        "maxUnavailable": 1,
        # Every rank of every group carries the LeaderWorkerSet's name label.
        "selector": {"matchLabels": {manifests.LWS_NAME_LABEL: SPEC.lws_name}},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    assert k8s_schemas.core_errors(budget, catalog.DEFAULT_KUBERNETES_VERSION) == []
    kinds = [o["kind"] for o in render.all_objects(replace(SPEC, replicas=2))]
    assert kinds.index("PodDisruptionBudget") > kinds.index("LeaderWorkerSet")


def test_the_load_balancer_keeps_a_draining_node_s_streams() -> None:
    annotations = manifests.service(replace(SPEC, drain=DRAIN))["metadata"]["annotations"]
    # Set on the target groups by `components.balancer`: the cloud provider refuses them in the
    # annotation (policies/rules.py, the refused-annotations rule).
    assert TARGET_GROUP_ATTRIBUTES_ANNOTATION not in annotations
    assert target_group_attributes(DRAIN) == {
        "deregistration_delay.timeout_seconds": str(DRAIN.deregistration_delay_s),
        "target_health_state.unhealthy.connection_termination.enabled": "false",
        "target_health_state.unhealthy.draining_interval_seconds": str(DRAIN.unhealthy_draining_s),
    }
    prefix = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-"
    assert annotations[prefix + "interval"] == str(DRAIN.health_check_interval_s)
    assert annotations[prefix + "unhealthy-threshold"] == str(DRAIN.health_check_threshold)


class _Metrics(door_harness.Upstream):
    """vLLM's /metrics: busy for `busy_calls` answers (or failing, with `failing`), then idle."""

    calls: ClassVar[list[int]] = []
    busy_calls: ClassVar[int] = 3
    failing: ClassVar[bool] = False

    def do_GET(self) -> None:
        self.calls.append(1)
        if self.failing and len(self.calls) <= self.busy_calls:
            self.send_error(503)
            return
        running = 1 if len(self.calls) <= self.busy_calls else 0
        body = f'vllm:num_requests_running{{engine="0"}} {running}.0\n'.encode()
        self.answer(200, body, content_type=None)


@pytest.mark.parametrize("failing", [False, True], ids=["busy", "metrics-failing"])
def test_the_leader_s_engine_stops_only_after_its_requests_are_done(failing: bool) -> None:
    # A listening engine whose /metrics fails (an API server too busy to answer) is not gone:
    # stopping it then would cut its streams.
    _Metrics.calls, _Metrics.failing = [], failing
    spec = builders.drain_spec(accept_s=0, reply_s=60, settle_s=1)
    with door_harness.upstream(_Metrics) as port:
        # No gatekeeper listens on the door port (the door shape): straight to the engine.
        output, _, _ = _hook(drain.engine_pre_stop(spec, "leader", port, 1, free_port()))
    assert "no request in the engine for 1 s" in output
    # It kept asking past the busy answers: it did not stop while requests ran.
    assert len(_Metrics.calls) > _Metrics.busy_calls + 1


def _held_port() -> socket.socket:
    """A port that keeps accepting (a hung gatekeeper, or a leader's engine that never stops)."""
    held = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.accept()[0].close()

    threading.Thread(target=accept, daemon=True).start()
    return held


def test_a_worker_waits_while_its_leader_s_engine_holds_the_group_s_port() -> None:
    leader = _held_port()
    port = leader.getsockname()[1]
    spec = builders.drain_spec(accept_s=0, reply_s=60, settle_s=0)
    argv = drain.engine_pre_stop(spec, "worker", 1, port, 1, leader_env="LEADER")
    hook = subprocess.Popen(
        programs.local(argv, sys.executable),
        env={"LEADER": "127.0.0.1", "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        text=True,
    )
    # Still waiting while the port is held (a second of polls at least).
    with pytest.raises(subprocess.TimeoutExpired):
        hook.wait(timeout=2)
    leader.shutdown(socket.SHUT_RDWR)
    leader.close()
    output, _ = hook.communicate(timeout=30)
    assert hook.returncode == 0
    assert "leader's engine gone" in output


class _Busy(door_harness.Upstream):
    """A listening engine that always holds a request; with `slow`, its /metrics answers after
    the hook's deadline for it (a round of polling at its longest)."""

    calls: ClassVar[list[int]] = []
    slow: ClassVar[bool] = False

    def do_GET(self) -> None:
        self.calls.append(1)
        if self.slow:
            time.sleep(6)
        self.answer(200, b'vllm:num_requests_running{engine="0"} 1.0\n', content_type=None)


@pytest.mark.parametrize(
    ("role", "door", "last"),
    [
        ("leader", "hung", "requests still in the engine at the bound"),
        ("leader", "gone", "requests still in the engine at the bound"),
        ("worker", "hung", "leader's engine still up at the bound"),
        # A lookup of the leader's name that fails is not a leader gone: the worker waits on.
        ("worker", "unresolvable", "leader's engine still up at the bound"),
    ],
    ids=["hung-gatekeeper", "busy-engine", "worker", "worker-without-dns"],
)
def test_an_engine_hook_returns_by_the_hooks_end_when_nothing_ends(
    role: str, door: str, last: str
) -> None:
    # A gatekeeper that never stops accepting, or an engine that never goes idle and answers
    # /metrics only at the deadline, or a leader's engine that never lets go of its port: the
    # hook still returns by the hooks' end, so the grace holds vLLM's stop after it.
    spec = builders.drain_spec(accept_s=0, reply_s=60, settle_s=1, grace_s=32)
    _Busy.calls, _Busy.slow = [], door == "gone"
    held = _held_port()
    port = held.getsockname()[1]
    with held, door_harness.upstream(_Busy) as engine:
        if role == "leader":
            door_port = port if door == "hung" else free_port()
            argv = drain.engine_pre_stop(spec, "leader", engine, 1, door_port)
        else:
            argv = drain.engine_pre_stop(spec, "worker", 1, port, 1, leader_env="LEADER")
        assert f"end-s={32 - drain.STOP_MARGIN_S - drain.POLL_ROUND_S}" in argv
        leader = "no-such-leader.invalid" if door == "unresolvable" else "127.0.0.1"
        output, line, seconds = _hook(argv, {"LEADER": leader, "PATH": "/usr/bin:/bin"})
    assert line.endswith(last), output
    # The hook's own clock at its last line, a slow round of polling included: by the hooks' end.
    assert seconds <= drain.hooks_end(spec), output
    assert bool(_Busy.calls) == (door == "gone")  # a closed door: the engine was asked


def test_the_gatekeeper_hook_returns_by_the_hooks_end_when_nginx_does_not_quit(
    tmp_path: Path,
) -> None:
    # An nginx that ignores the graceful quit: the hook stops waiting at the hooks' end.
    ignores = (
        "import signal, time\nsignal.signal(signal.SIGQUIT, signal.SIG_IGN)\n"
        "print('ready', flush=True)\ntime.sleep(120)"
    )
    stuck = subprocess.Popen([sys.executable, "-c", ignores], stdout=subprocess.PIPE)
    assert stuck.stdout is not None and stuck.stdout.readline()  # the quit is ignored from here
    try:
        (tmp_path / "nginx.pid").write_text(str(stuck.pid))
        # Seconds of waiting: the hooks' end less the accept window and the readiness period.
        pod = gatekeeper.pre_stop(DRAIN, "/tmp")[-1]
        assert (
            pod.startswith(f"sleep {DRAIN.accept_s}; ") and f"sleep {drain.READY_PERIOD_S}; " in pod
        )
        waited = drain.hooks_end(DRAIN) - DRAIN.accept_s - drain.READY_PERIOD_S
        assert f'[ "$n" -lt {waited} ]' in pod
        spec = builders.drain_spec(accept_s=0, reply_s=60, settle_s=0, grace_s=17)
        hook = gatekeeper.pre_stop(spec, str(tmp_path), ready_period_s=0)
        subprocess.run(hook, timeout=30, check=True)
        assert stuck.poll() is None and (tmp_path / gatekeeper.MARKER_NAME).exists()
    finally:
        stuck.kill()
        stuck.wait()


def test_the_grace_holds_the_longest_drain_and_vllm_s_stop() -> None:
    spec = plan_drain(2930)
    # A door's pooled connections leave a stopping leader within the window it keeps serving:
    # its readiness failed (one period), the endpoint change, a connection's longest reuse,
    # then its idle time in the pool; so even a last leader takes no new request after it.
    pooled = (
        drain.READY_PERIOD_S
        + ENDPOINT_PROPAGATION_S
        + UPSTREAM_LIFETIME_S
        + UPSTREAM_KEEPALIVE_SECONDS
    )
    assert spec.accept_s >= pooled
    # The LB's window, nginx's readiness period, a reply accepted at its last moment, the idle
    # check, one round of polling, then vLLM's stop.
    assert spec.grace_s == 35 + drain.READY_PERIOD_S + 2930 + 5 + 8 + 15
    assert drain.hooks_end(spec) == spec.grace_s - drain.STOP_MARGIN_S


class _BusyUntil(door_harness.Upstream):
    """An engine that holds a request until `until` (a monotonic time), then none."""

    until: ClassVar[float] = 0.0

    def do_GET(self) -> None:
        running = 1 if time.monotonic() < self.until else 0
        body = f'vllm:num_requests_running{{engine="0"}} {running}.0\n'.encode()
        self.answer(200, body, content_type=None)


def test_a_reply_accepted_as_the_gatekeeper_closes_is_waited_for() -> None:
    # The gatekeeper accepts until 3 s after the stop (its window and readiness period); a reply
    # it took then runs on for most of the reply timeout. The leader's hook waits from the close
    # for that reply and the idle check, not from the stop.
    spec = builders.drain_spec(accept_s=2, reply_s=8, settle_s=1)
    held = _held_port()
    door_port = held.getsockname()[1]
    with door_harness.upstream(_BusyUntil) as engine:
        argv = drain.engine_pre_stop(spec, "leader", engine, 1, door_port)
        started = time.monotonic()
        _BusyUntil.until = started + 3 + 6
        hook = subprocess.Popen(
            programs.local(argv, sys.executable), stdout=subprocess.PIPE, text=True
        )
        time.sleep(3)
        held.close()  # the gatekeeper stops listening
        output, _ = hook.communicate(timeout=60)
    assert hook.returncode == 0
    assert output.strip().splitlines()[-1].endswith("no request in the engine for 1 s"), output


def test_a_leader_behind_a_door_serves_through_the_window_before_its_idle_check() -> None:
    # No gatekeeper in the pod (an elastic stack's door): the door's pooled connections still
    # reach the leader until they move off within the window, so an idle engine is not yet done.
    spec = builders.drain_spec(accept_s=3, reply_s=8, settle_s=1)
    _BusyUntil.until = 0.0
    with door_harness.upstream(_BusyUntil) as engine:
        output, line, seconds = _hook(drain.engine_pre_stop(spec, "leader", engine, 1, free_port()))
    assert line.endswith("no request in the engine for 1 s"), output
    # From the stop: the window, then the idle check (a second of polling either way).
    assert 3 + 1 <= seconds <= 3 + 1 + 2, output
    assert "no gatekeeper in the pod" in output
