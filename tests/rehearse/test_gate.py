"""The rehearsal's gatekeeper: it names the install command when nginx is missing, and runs the
pod's own config (against a stub upstream here; against real vLLM in `make rehearse`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.manifests.gatekeeper import GatekeeperLimits
from infra.rehearse import gate
from infra.rehearse.ranks import free_port
from infra.rehearse.workspace import RehearsalError
from tests.fakes.openai_stub import StubConfig, StubServer

LIMITS = GatekeeperLimits(
    max_request_bytes=4096,
    client_requests_per_minute=600,
    client_burst=2,
    client_concurrent_requests=1,
    reply_timeout_seconds=30,
)


def test_missing_nginx_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate.shutil, "which", lambda _name: None)
    monkeypatch.setattr(gate.Path, "exists", lambda _self: False)
    with pytest.raises(RehearsalError, match="apt-get install -y nginx-light"):
        gate.find_nginx()


@pytest.mark.skipif(
    not Path("/usr/sbin/nginx").exists() and gate.shutil.which("nginx") is None,
    reason="nginx is not installed (apt-get install -y nginx-light)",
)
def test_gatekeeper_in_front_of_a_stub(tmp_path: Path) -> None:
    key = "k" * 32
    with StubServer(StubConfig(api_key=key, model="m")) as stub:
        port = int(stub.root_url.rsplit(":", 1)[1])
        with gate.running_gate(
            gate.find_nginx(), LIMITS, key, free_port(), port, tmp_path, lambda _l: None
        ) as door:
            assert gate.unauthorized_check(door, "m").ok
            assert gate.oversize_check(door, key, LIMITS).ok
            assert gate.request(door.base_url, "GET", "/metrics").status == 404
            assert gate.request(door.base_url, "POST", "/invocations", b"{}").status == 404
            assert (
                gate.request(door.base_url, "GET", "/v1/chat/completions", None, key).status == 404
            )
            assert gate.request(door.base_url, "GET", "/v1/models", None, key).status == 200
            assert gate.burst_check(door, key, LIMITS).ok


def test_a_stream_is_judged_on_the_gaps_between_chunks_not_on_the_first_one() -> None:
    # A loaded machine: the first chunk after 2.16 s, then one chunk every 20 ms.
    steady = [2.16 + 0.02 * i for i in range(41)]
    assert gate._incremental_check(steady).ok
    # A buffering proxy: the same chunks, delivered in two reads.
    buffered = [2.9 + 0.0001 * i for i in range(20)] + [3.0 + 0.0001 * i for i in range(21)]
    check = gate._incremental_check(buffered)
    assert not check.ok
    assert check.observed.startswith("200, 2 of 41 chunks apart")
