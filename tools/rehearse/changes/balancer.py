"""A stand-in for the NLB in the drain rehearsal: TCP connections spread over targets, a health
check per target, and a target that turns unhealthy gets no new connection while its open ones
go on (the Service's target group with connection termination off, `access.target_group_attributes`,
set by `components.balancer`).

What the real one checks is kube-proxy's health-check node port, which answers 503 from the
moment the leader's pod is terminating (its endpoint is no longer ready): `terminating` stands
for that answer, and `threshold` failing checks `interval_s` apart mark the target unhealthy, as
the NLB does. A modelled stand-in; the gatekeepers, vLLM and the preStop hooks behind it are real.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field


@dataclass
class Target:
    """One backend: a gatekeeper's port, and what the health check sees of it."""

    name: str
    port: int
    terminating: bool = False
    failures: int = 0
    healthy: bool = True
    #: When the check marked it unhealthy (monotonic), if it did.
    unhealthy_at: float | None = None


@dataclass
class Balancer:
    """Listens on 127.0.0.1:`port`; `connections` records (monotonic time, target name) of every
    connection in the order it was accepted."""

    targets: list[Target]
    interval_s: float
    threshold: int
    port: int = 0
    connections: list[tuple[float, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _listener: socket.socket | None = None
    #: Round robin; the first connection goes to the first target.
    _next: int = -1

    def __enter__(self) -> Balancer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.settimeout(0.2)
        self._listener, self.port = listener, listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        threading.Thread(target=self._check, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()

    def _check(self) -> None:
        while not self._stop.wait(self.interval_s):
            for target in self.targets:
                target.failures = target.failures + 1 if target.terminating else 0
                if target.healthy and target.failures >= self.threshold:
                    target.healthy, target.unhealthy_at = False, time.monotonic()

    def _pick(self) -> Target:
        healthy = [t for t in self.targets if t.healthy] or self.targets  # fail open, as NLB
        self._next += 1
        return healthy[self._next % len(healthy)]

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            target = self._pick()
            self.connections.append((time.monotonic(), target.name))
            try:
                upstream = socket.create_connection(("127.0.0.1", target.port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy one direction until it closes, then half-close the other side."""
    with suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    with suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
