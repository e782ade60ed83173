"""The front door, rehearsed: the gatekeeper's own nginx.conf, run by a real nginx in front of the
real vLLM leader, and the checks that it lets through only what it should.

The config is `components.manifests.gatekeeper.nginx_conf` with the plan's limits, as the pod
mounts it; only the listen address, vLLM's port and the scratch paths differ (loopback ports and a
directory under the run's logs) and the module files, which Debian ships apart (`.ci/run`
installs `nginx-light`, `libnginx-mod-stream` and `libnginx-mod-http-js`); the pod runs the
official image pinned in `gatekeeper.IMAGE`, which has both built in or beside it.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.manifests import gatekeeper, spec
from components.manifests.asleep import Asleep
from components.manifests.gatekeeper import GatekeeperLimits
from components.manifests.gatekeeper_conf import MAX_HEADERS
from tools.rehearse.checks import Check
from tools.rehearse.group.ranks import free_port
from tools.rehearse.group.workspace import RehearsalError

INSTALL_HINT = (
    "apt-get install -y nginx-light libnginx-mod-stream libnginx-mod-http-js (Debian, Ubuntu)"
)
#: FastAPI serves these without listing them in its own schema (vllm 0.31 builds the app with
#: FastAPI's defaults); /openapi.json gives every other route the running app registered.
UNLISTED_ROUTES = (
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
)
#: Tokens of the streamed check: enough chunks to see them arrive one by one.
STREAM_TOKENS = 48


def find_nginx() -> str:
    """The nginx binary, or a RehearsalError naming the command that installs it."""
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )
    if found is None:
        raise RehearsalError(
            "nginx is not installed; the rehearsal runs the gatekeeper's config with it: "
            + INSTALL_HINT
        )
    return found


def rehearsal_key() -> str:
    """A fresh API key of the shape the gatekeeper accepts (hex, twice its minimum length in
    characters): a shorter one would leave every keyed request refused with 401."""
    return secrets.token_hex(spec.KEY_MIN_CHARS)


def nginx_modules(nginx: str) -> tuple[str, ...]:
    """The module files this nginx must load for the gatekeeper: njs always (a dynamic module in
    every build), stream when it was built as a module (Debian); a RehearsalError names the
    packages when one is missing."""
    built = subprocess.run([nginx, "-V"], capture_output=True, text=True, check=False).stderr
    match = re.search(r"--modules-path=(\S+)", built)
    directory = Path(match.group(1) if match else "/usr/lib/nginx/modules")
    wanted = ["ngx_http_js_module.so"]
    if "--with-stream=dynamic" in built:
        wanted.insert(0, "ngx_stream_module.so")
    elif "--with-stream" not in built:
        raise RehearsalError(f"{nginx} was built without the stream module; " + INSTALL_HINT)
    paths = tuple(str(directory / name) for name in wanted)
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise RehearsalError(f"nginx modules missing ({', '.join(missing)}): " + INSTALL_HINT)
    return paths


def max_headers(nginx: str) -> int | None:
    """`gatekeeper_conf.MAX_HEADERS` for an nginx that knows `max_headers` (1.29.8 on, the pod's
    1.30), None for an older one (Debian 12's 1.22), which would refuse the directive."""
    shown = subprocess.run([nginx, "-v"], capture_output=True, text=True, check=False).stderr
    version = tuple(int(n) for n in re.findall(r"nginx/(\d+)\.(\d+)\.(\d+)", shown)[0])
    return MAX_HEADERS if version >= (1, 29, 8) else None


def nginx_ready() -> bool:
    """nginx and the modules the gatekeeper loads are installed (the tests that run it skip
    otherwise)."""
    try:
        nginx_modules(find_nginx())
    except RehearsalError:
        return False
    return True


@dataclass(frozen=True)
class Gate:
    """A running gatekeeper: its URL and the access log that says what reached vLLM."""

    base_url: str
    access_log: Path
    #: The internal listener that passes vLLM's `/metrics` only.
    metrics_url: str = ""
    #: nginx's process group (the master's pid).
    pgid: int = 0
    #: The probe listener (/health and /ready for the kubelet and the workers).
    probe_url: str = ""

    def log_entries(self) -> list[dict[str, Any]]:
        try:
            lines = self.access_log.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        return [json.loads(line) for line in lines if line.startswith("{")]


@contextmanager
def running_gate(
    nginx: str,
    limits: GatekeeperLimits,
    api_key: str,
    port: int,
    vllm_port: int,
    work_dir: Path,
    progress: Callable[[str], None] = lambda _line: None,
    page_files: Mapping[str, str] | None = None,
    engine_key: str | None = None,
    asleep: Asleep | None = None,
    probe_port: int | None = None,
    self_metrics: Path | None = None,
) -> Iterator[Gate]:
    """nginx with the gatekeeper's config on 127.0.0.1:`port` (its metrics listener on a free
    port, its probe listener on `probe_port` or a free one), stopped by group on exit. With
    `page_files` (`components.manifests.chat.files`, as the ConfigMap holds them) it serves the
    chat page; with `asleep` it is the door of an elastic stack (`components.manifests.asleep`);
    with `self_metrics` its metrics listener serves that file as a leader's serves the engine's
    record."""
    key_dir, run_dir = work_dir / "key", work_dir / "run"
    for directory in (key_dir, run_dir):
        directory.mkdir(parents=True, exist_ok=True)
    # Started as root, nginx reads files as `nobody`, which may not traverse `work_dir`'s
    # parents (pytest's are 0700): the page sits in a world-readable directory of its own.
    page_dir = Path(tempfile.mkdtemp(prefix="gatekeeper-page-"))
    page_dir.chmod(0o755)
    for name, text in (page_files or {}).items():
        (page_dir / name).write_text(text, encoding="utf-8")
    write_keys(key_dir, gatekeeper.key_file_text(api_key))
    # The rehearsal's vLLM checks the client key itself: the same key is the engine key.
    (key_dir / gatekeeper.ENGINE_FILE).write_text(
        gatekeeper.engine_map_entry(engine_key or api_key)
    )
    access_log = run_dir / "access.log"
    # Never a port the gate is given: a free port is free only until someone binds it, so a
    # listener of ours on the "dead" upstream's number would answer for it (and loop).
    taken = {port, vllm_port}
    metrics_port = _free_port_but(taken)
    probe_port = probe_port or _free_port_but(taken | {metrics_port})
    files = gatekeeper.config_files(
        limits,
        listen=f"127.0.0.1:{port}",
        upstream_port=vllm_port,
        key_dir=str(key_dir),
        config_dir=str(work_dir),
        run_dir=str(run_dir),
        access_log=str(access_log),
        metrics_listen=f"127.0.0.1:{metrics_port}",
        probe_listen=f"127.0.0.1:{probe_port}",
        modules=nginx_modules(nginx),
        user="root" if os.geteuid() == 0 else None,
        page_root=str(page_dir) if page_files is not None else None,
        asleep=asleep,
        self_metrics=None if self_metrics is None else str(self_metrics),
        max_headers=max_headers(nginx),
    )
    for name, text in files.items():
        (work_dir / name).write_text(text)
    conf = work_dir / gatekeeper.CONFIG_FILE
    argv = [nginx, "-e", "stderr", "-c", str(conf)]
    log = open(work_dir / "nginx.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    # Reaped as soon as it exits, as a container's first process is: the drain's preStop waits
    # with `kill -0` for nginx to be gone, which a zombie would never be.
    threading.Thread(target=process.wait, daemon=True).start()
    try:
        _wait_listening(port, process, work_dir / "nginx.log")
        progress(f"gatekeeper: nginx on 127.0.0.1:{port} in front of vLLM on {vllm_port}")
        yield Gate(
            f"http://127.0.0.1:{port}",
            access_log,
            f"http://127.0.0.1:{metrics_port}",
            process.pid,
            f"http://127.0.0.1:{probe_port}",
        )
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()
        shutil.rmtree(page_dir, ignore_errors=True)


def _free_port_but(taken: set[int]) -> int:
    """A free loopback port not in `taken`."""
    while (candidate := free_port()) in taken:
        pass
    return candidate


def write_keys(key_dir: Path, text: str) -> None:
    """Replace the gatekeeper's key file at once, as the kubelet swaps a Secret volume's files:
    a request never reads half a file."""
    staged = key_dir / f".{gatekeeper.KEY_FILE}.new"
    staged.write_text(text, encoding="utf-8")
    staged.chmod(0o644)
    os.replace(staged, key_dir / gatekeeper.KEY_FILE)


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RehearsalError(f"nginx exited at start: {log.read_text(errors='replace')}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RehearsalError(f"nginx did not listen on {port} within 10 s")


# --------------------------------------------------------------------------------------------
# Requests


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes
    #: From the request's start to the reply's last byte.
    seconds: float = 0.0


def request(
    base_url: str,
    method: str,
    path: str,
    body: bytes | None = None,
    api_key: str | None = None,
    timeout: float = 60,
    source: str = "127.0.0.1",
    extra: Mapping[str, str] | None = None,
) -> Reply:
    """One request from `source`, with the key if given and `extra` headers; the whole reply."""
    host, port = base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(
        host, int(port), timeout=timeout, source_address=(source, 0)
    )
    headers = {"Content-Type": "application/json", **(extra or {})}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    began = time.monotonic()
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        read = response.read()
        return Reply(response.status, dict(response.getheaders()), read, time.monotonic() - began)
    finally:
        connection.close()


def registered_routes(vllm_url: str) -> list[tuple[str, str]]:
    """Every (method, path) the running vLLM app serves, read from its own /openapi.json on
    loopback (no key needed there), plus FastAPI's unlisted documentation routes."""
    reply = request(vllm_url, "GET", "/openapi.json")
    if reply.status != 200:
        raise RehearsalError(f"vLLM's /openapi.json answered {reply.status}")
    paths = json.loads(reply.body)["paths"]
    routes = [
        (method.upper(), path.replace("{", "").replace("}", ""))
        for path, methods in sorted(paths.items())
        for method in methods
    ]
    return routes + [r for r in UNLISTED_ROUTES if r not in routes]


def chat_body(model: str, **extra: Any) -> bytes:
    return json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}
    ).encode()


# --------------------------------------------------------------------------------------------
# Checks


#: The routes check's own loopback address: its dozens of refusals use up that address's
#: allowance of failures (the gatekeeper rate-limits wrong keys and paths per client), which
#: the later checks from 127.0.0.1 must still have.
ROUTES_SOURCE = "127.0.0.4"


def routes_check(gate: Gate, vllm_url: str) -> Check:
    """Every route vLLM registers, without the key, through the gatekeeper: only /health 2xx
    (a refusal is 404, or 429 once the failures from one address pass their rate)."""
    routes = registered_routes(vllm_url)
    statuses: Counter[int] = Counter()
    answered = []
    for method, path in routes:
        body = b"{}" if method in ("POST", "PUT", "PATCH") else None
        status = request(gate.base_url, method, path, body, source=ROUTES_SOURCE).status
        statuses[status] += 1
        if 200 <= status < 300:
            answered.append(f"{method} {path}")
    shown = ", ".join(f"{count}x {status}" for status, count in sorted(statuses.items()))
    return Check(
        "routes without key",
        f"{len(routes)} routes from vLLM's app: none 2xx but GET /health",
        f"{shown}; 2xx: {', '.join(answered) or 'none'}",
        answered == ["GET /health"],
    )


def stream_events(
    base_url: str, api_key: str, body: bytes, timeout: float = 120
) -> tuple[int, list[tuple[float, bytes]]]:
    """A chat stream: its status and each `data:` event with its arrival time."""
    host, port = base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"}
    began = time.monotonic()
    connection.request("POST", "/v1/chat/completions", body=body, headers=headers)
    response = connection.getresponse()
    events = []
    while line := response.readline():
        if line.startswith(b"data: "):
            events.append((time.monotonic() - began, line.strip()))
    connection.close()
    return response.status, events


def streaming_check(gate: Gate, api_key: str, model: str) -> Check:
    """A streamed reply through nginx arrives chunk by chunk, not all at the end."""
    body = chat_body(model, max_tokens=STREAM_TOKENS, stream=True, ignore_eos=True)
    status, events = stream_events(gate.base_url, api_key, body)
    arrivals = [seconds for seconds, event in events if event != b"data: [DONE]"]
    if status != 200 or len(arrivals) < 2:
        return Check("streamed via gatekeeper", "200, chunks", f"{status}", False)
    return _incremental_check(arrivals)


#: Chunks closer than this arrived in one read: a proxy that buffers delivers them together.
BURST_SECONDS = 0.002


def _incremental_check(arrivals: list[float]) -> Check:
    """Chunk by chunk means most chunks arrive on their own, apart from the one before. Judged
    on the gaps between chunks, not on the wait for the first one, which is prefill and queueing
    (long on a loaded machine) and says nothing about buffering."""
    separate = 1 + sum(b - a > BURST_SECONDS for a, b in itertools.pairwise(arrivals))
    return Check(
        "streamed via gatekeeper",
        "200; most chunks arrive on their own, not in bursts",
        f"200, {separate} of {len(arrivals)} chunks apart, first at {arrivals[0]:.2f} s, "
        f"last at {arrivals[-1]:.2f} s",
        separate >= len(arrivals) / 2,
    )


def default_cap_check(gate: Gate, api_key: str, model: str, cap: int) -> Check:
    """A request without max_tokens stops at the planned cap (vLLM's generation config)."""
    reply = request(
        gate.base_url, "POST", "/v1/chat/completions", chat_body(model, ignore_eos=True), api_key
    )
    # The cap, not the context: without it this reply would run to max_model_len.
    try:
        data = json.loads(reply.body)
        tokens = data["usage"]["completion_tokens"]
        reason = data["choices"][0]["finish_reason"]
    except (ValueError, KeyError, IndexError, TypeError):
        return Check("no max_tokens", f"stops at {cap}", f"{reply.status}", False)
    return Check(
        "no max_tokens",
        f'"length" at {cap} tokens',
        f"{json.dumps(reason)} at {tokens} tokens",
        reply.status == 200 and tokens == cap and reason == "length",
    )
