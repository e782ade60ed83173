"""The probes' own listener: the kubelet and the group's workers never share the public
listener's connections, in the generated config, in every rendered pod, and in real nginx with
the public side full."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components.manifests import gatekeeper, gatekeeper_conf
from components.manifests.gatekeeper import nginx_conf
from components.manifests.pod_world import pods
from infra.adapters import render
from infra.plan import catalog
from tests import builders, door_harness

VARIANTS = [("dev", {}), ("prod", {}), ("dev", {"weights": "int8"}), ("prod", {"weights": "int8"})]

LIMITS = replace(
    door_harness.SMALL_LIMITS,
    client_connections=2,
    connection_capacity=4,
    worker_connections=4 * 4 + 2 * 8,
    probe_connections=8,
)


def _probe_server(conf: str) -> str:
    return conf.split("    # The probes' own listener")[1]


def test_the_probe_listener_is_plain_http_with_its_own_cap_and_no_client_limit() -> None:
    conf = nginx_conf(LIMITS, probe_listen="8081")
    stream = conf[conf.index("stream {") : conf.index("http {")]
    probes = _probe_server(conf)
    # Not through the stream layer, where the public connections are counted.
    assert "8081" not in stream
    assert "listen 8081;" in probes
    assert "limit_conn gatekeeper_probes 8;" in probes
    assert "limit_conn_zone $server_port zone=gatekeeper_probes:1m;" in conf
    # Nothing a public client's rate can exhaust: no per-address limit on the probes.
    assert "limit_req" not in probes
    assert "location = /ready {" in probes and "location = /health {" in probes
    assert "proxy_pass http://vllm/health;" in probes
    assert "-f /tmp/draining" in probes
    # Every public connection is counted in all, so the probes' share of nginx stays free.
    assert "limit_conn_zone $server_port zone=gatekeeper_public:1m;" in stream
    assert "limit_conn gatekeeper_public 4;" in stream


def test_the_door_s_probe_listener_has_ready_only() -> None:
    (door_map,) = [
        o
        for o in render.all_objects(builders.elastic_server_spec())
        if o["kind"] == "ConfigMap" and "gatekeeper" in o["metadata"]["name"]
    ]
    probes = _probe_server(door_map["data"][gatekeeper.CONFIG_FILE])
    assert "location = /ready {" in probes
    assert "location = /health {" not in probes


def _probe_targets(container: dict[str, Any]) -> list[object]:
    """Every port a container's probes reach: httpGet and tcpSocket ports, and the `port=`
    argument of the project's liveness command (`components.manifests.probes`)."""
    ports: list[object] = []
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = container.get(kind) or {}
        for action in ("httpGet", "tcpSocket"):
            if action in probe:
                ports.append(probe[action]["port"])
        for arg in (probe.get("exec") or {}).get("command", []):
            if arg.startswith("port="):
                ports.append(int(arg.removeprefix("port=")))
    return ports


@pytest.mark.parametrize(("stack", "sets"), VARIANTS)
def test_no_probe_goes_through_the_public_listener_and_only_the_group_reaches_the_probe_port(
    stack: str, sets: dict[str, Any]
) -> None:
    objects = builders.rendered(stack, sets)
    public = {gatekeeper.PORT, gatekeeper.PORT_NAME}
    for pod in pods(objects):
        for container in pod.spec["containers"]:
            for port in _probe_targets(container):
                assert port not in public, f"{pod.where}/{container['name']} probes {port}"
    # No Service targets the probe port, and no policy opens it beyond the group's own pods.
    probe = {gatekeeper.PROBE_PORT, gatekeeper.PROBE_PORT_NAME}
    for obj in objects:
        if obj["kind"] == "Service":
            for port in obj["spec"]["ports"]:
                assert port.get("targetPort", port["port"]) not in probe
        if obj["kind"] == "NetworkPolicy":
            for rule in obj["spec"].get("ingress", []):
                if "from" in rule and all("podSelector" in p for p in rule["from"]):
                    continue
                opened = {p["port"] for p in rule.get("ports", [])}
                # A rule with no ports opens every port to its peers.
                assert opened and not opened & probe, obj["metadata"]["name"]


# --------------------------------------------------------------------------------------------
# Real nginx: the public side full, the probes answered


class _Health(door_harness.Upstream):
    """A stand-in for vLLM's /health on loopback (the listener, not the engine, is tested)."""

    def do_GET(self) -> None:
        status, body = (200, b"") if self.path == "/health" else (404, b"no")
        self.answer(status, body, None)


@pytest.fixture
def engine() -> Iterator[int]:
    with door_harness.upstream(_Health) as port:
        yield port


def _hold(port: int, source: str) -> socket.socket:
    """A connection that sends half a request line and waits, as a header trickler does."""
    sock = socket.create_connection(("127.0.0.1", port), 5, (source, 0))
    sock.sendall(b"GET /health HT")
    return sock


@door_harness.needs_nginx
def test_probes_pass_while_every_public_connection_is_held(tmp_path: Path, engine: int) -> None:
    limits = replace(LIMITS, header_timeout_seconds=30)
    with door_harness.door(limits, "k" * 40, engine, tmp_path) as running:
        public_port = door_harness.port_of(running)
        held = [_hold(public_port, f"127.0.0.{n}") for n in (11, 11, 12, 12)]
        try:
            time.sleep(0.3)
            # The public side is full: a third address is closed before it sends a byte.
            with socket.create_connection(("127.0.0.1", public_port), 3, ("127.0.0.13", 0)) as s:
                assert s.recv(1) == b""
            for path in ("/ready", "/health"):
                for _ in range(5):
                    with urllib.request.urlopen(running.probe_url + path, timeout=5) as reply:
                        assert reply.status == 200
        finally:
            for sock in held:
                sock.close()


@door_harness.needs_nginx
@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to read socket timers")
def test_real_nginx_keeps_a_quiet_public_connection_alive_below_the_idle_timeout(
    tmp_path: Path, engine: int
) -> None:
    """A client waiting for a long prompt's first token sends and receives nothing: the
    gatekeeper's side of its connection carries TCP keepalives, the first after
    `KEEPALIVE_IDLE_S`, well within the load balancer's 350 s (`catalog.NLB_IDLE_TIMEOUT_S`).
    Read from the kernel: `ss -o` shows the accepted socket's keepalive timer."""
    with door_harness.door(LIMITS, "k" * 40, engine, tmp_path) as running:
        public_port = door_harness.port_of(running)
        held = _hold(public_port, "127.0.0.21")
        try:
            time.sleep(0.3)
            out = subprocess.run(
                ["ss", "-tnoH", "state", "established", f"( sport = :{public_port} )"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        finally:
            held.close()
    timers = re.findall(r"timer:\(keepalive,(?:(\d+)min)?(\d+)(?:\.\d+)?sec", out)
    assert timers, out
    seconds = [60 * int(m or 0) + int(s) for m, s in timers]
    assert all(s <= gatekeeper_conf.KEEPALIVE_IDLE_S for s in seconds), out
    assert gatekeeper_conf.KEEPALIVE_IDLE_S + gatekeeper_conf.KEEPALIVE_INTERVAL_S < (
        catalog.NLB_IDLE_TIMEOUT_S
    )


@pytest.mark.parametrize(("stack", "sets"), VARIANTS)
def test_every_public_listener_of_every_stack_keeps_quiet_connections_alive(
    stack: str, sets: dict[str, Any]
) -> None:
    """No stream is silent to the load balancer for its idle timeout, however long its first
    token takes: every public (stream) listener the stack renders carries keepalives whose first
    comes, and whose next follow, well within it."""
    confs = [
        obj["data"][gatekeeper.CONFIG_FILE]
        for obj in builders.rendered(stack, sets)
        if obj["kind"] == "ConfigMap"
        and gatekeeper.CONFIG_FILE in obj.get("data", {})
        # The public side is the gatekeeper's stream layer; the queue floor's nginx serves
        # KEDA inside the cluster only.
        and "stream {" in obj["data"][gatekeeper.CONFIG_FILE]
    ]
    assert confs
    for conf in confs:
        stream = conf[conf.index("stream {") :]
        public = re.findall(r"^\s*listen (\S+)(.*);$", stream.split("\nhttp {")[0], re.M)
        assert public, stream[:400]
        for address, options in public:
            if "proxy_protocol" in options:
                continue  # the internal hop, on loopback
            found = re.search(r"so_keepalive=(\d+)s:(\d+)s:(\d+)", options)
            assert found, f"{stack} {sets}: listen {address}{options}"
            idle, interval, _count = (int(g) for g in found.groups())
            assert idle + interval < catalog.NLB_IDLE_TIMEOUT_S
