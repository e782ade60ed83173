"""Real nginx with the gatekeeper's config in front of a stand-in for vLLM, for the tests of the
front door: the stand-in on a loopback port (`upstream`, from a request handler of the test's own),
the door in front of it (`door`), both at once (`door_before`, `module_door` as a test module's
fixture, or `stub_door` before the recorded-reply stub), the generated text's blocks (`block`),
and nginx on a config of the test's own (`nginx_running`). nginx is the rehearsal's run of it
(`tools.rehearse.front_door.gatekeeper_run`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from components.manifests.gatekeeper_conf import GatekeeperLimits
from tests import builders
from tests.fakes.openai_stub import StubConfig, StubServer
from tools.rehearse.front_door import gatekeeper_run as gate
from tools.rehearse.group.ranks import free_port

needs_nginx = pytest.mark.skipif(not gate.nginx_ready(), reason=gate.INSTALL_HINT)
#: A door for a few requests at a time: small bodies, a rate and burst no test reaches by accident.
SMALL_LIMITS = builders.gatekeeper_limits(
    max_request_bytes=4096,
    client_requests_per_minute=600,
    client_burst=50,
    client_concurrent_requests=2,
)
#: A door with a plan's figures, for the tests of the generated text.
PLAN_LIMITS = builders.gatekeeper_limits(
    max_request_bytes=327_680,
    client_requests_per_minute=180,
    client_burst=6,
    client_concurrent_requests=3,
    reply_timeout_seconds=2366,
    max_reply_tokens=1024,
)


class Upstream(BaseHTTPRequestHandler):
    """A quiet handler with one way to answer; a test's stand-in for vLLM subclasses it."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def answer(
        self, status: int, body: bytes, content_type: str | None = "application/json"
    ) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def upstream(handler: type[BaseHTTPRequestHandler], port: int = 0) -> Iterator[int]:
    """`handler` served on loopback `port` (0: a free one) from a thread, stopped on exit; the
    port."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def door(
    limits: GatekeeperLimits, key: str, upstream_port: int, work: Path, **options: Any
) -> Iterator[gate.Gate]:
    """nginx with the gatekeeper's config for `limits` on a free port, in front of
    `upstream_port`; `options` go to `running_gate` (page files, engine key, ...)."""
    with gate.running_gate(
        gate.find_nginx(), limits, key, free_port(), upstream_port, work, lambda _l: None, **options
    ) as running:
        yield running


@contextmanager
def door_before(
    handler: type[BaseHTTPRequestHandler],
    limits: GatekeeperLimits,
    key: str,
    work: Path,
    **options: Any,
) -> Iterator[gate.Gate]:
    """`door` in front of `upstream(handler)`."""
    with upstream(handler) as port, door(limits, key, port, work, **options) as running:
        yield running


def module_door(
    handler: type[BaseHTTPRequestHandler], limits: GatekeeperLimits, key: str
) -> Callable[..., Iterator[gate.Gate]]:
    """A module-scoped fixture: `door_before(handler, ...)` shared by the module's tests."""

    @pytest.fixture(scope="module")
    def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[gate.Gate]:
        with door_before(handler, limits, key, tmp_path_factory.mktemp("door")) as running:
            yield running

    return shared


@contextmanager
def nginx_running(conf: Path, port: int) -> Iterator[None]:
    """nginx on a config of the test's own until it listens on `port`, stopped by group on exit
    (its output in `conf`'s folder, `nginx.log`)."""
    log = conf.parent / "nginx.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [gate.find_nginx(), "-e", "stderr", "-c", str(conf)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        gate._wait_listening(port, process, log)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


def port_of(running: gate.Gate) -> int:
    return int(running.base_url.rsplit(":", 1)[1])


def connect(running: gate.Gate, source: str = "127.0.0.1") -> socket.socket:
    """A raw connection to the door's public listener from loopback address `source`."""
    return socket.create_connection(("127.0.0.1", port_of(running)), 5, (source, 0))


def block(conf: str, opening: str) -> str:
    """The text of one `location ... {` (or other 8-space indented) block, to its closing brace."""
    start = conf.index(opening)
    return conf[start : conf.index("\n        }", start)]


@contextmanager
def stub_door(
    limits: GatekeeperLimits, key: str, config: StubConfig, work: Path, **options: Any
) -> Iterator[gate.Gate]:
    """`door` in front of the recorded-reply stub of vLLM's OpenAI server
    (`tests.fakes.openai_stub`)."""
    with StubServer(config) as stub:
        port = int(stub.root_url.rsplit(":", 1)[1])
        with door(limits, key, port, work, **options) as running:
            yield running
