"""The rehearsal's gatekeeper: it names the install command when nginx is missing, and runs the
pod's own config (against a stub upstream here; against real vLLM in `make rehearse`)."""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest

from components.manifests import gatekeeper_conf
from components.manifests.gatekeeper_answers import ERRORS
from tests import builders, door_harness
from tests.fakes.openai_stub import StubConfig
from tests.rehearse.support import until
from tools.rehearse.front_door import door_checks, gatekeeper_run
from tools.rehearse.group.ranks import free_port
from tools.rehearse.group.workspace import RehearsalError, poll

KEY = "k" * 32
#: 4,096-byte bodies, 600 requests a minute with a burst of 2, one at a time per client.
LIMITS = builders.gatekeeper_limits()


def test_missing_nginx_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gatekeeper_run.shutil, "which", lambda _name: None)
    monkeypatch.setattr(gatekeeper_run.Path, "exists", lambda _self: False)
    with pytest.raises(RehearsalError, match="apt-get install -y nginx-light"):
        gatekeeper_run.find_nginx()


@door_harness.needs_nginx
def test_gatekeeper_in_front_of_a_stub(tmp_path: Path) -> None:
    with door_harness.stub_door(LIMITS, KEY, StubConfig(api_key=KEY, model="m"), tmp_path) as door:
        # A body one byte over the limit: 413, and its access log line names no upstream.
        over = b" " * (LIMITS.max_request_bytes + 1)
        reply = gatekeeper_run.request(door.base_url, "POST", "/v1/chat/completions", over, KEY)
        # nginx logs the request once it has discarded the body, a moment after answering.
        logged = poll(lambda: [e for e in door.log_entries() if e.get("status") == 413], bool, 5)
        assert reply.status == 413 and logged and logged[-1].get("upstream", "") == ""
        assert gatekeeper_run.request(door.base_url, "GET", "/metrics").status == 404
        assert gatekeeper_run.request(door.base_url, "POST", "/invocations", b"{}").status == 404
        assert (
            gatekeeper_run.request(door.base_url, "GET", "/v1/chat/completions", None, KEY).status
            == 404
        )
        assert gatekeeper_run.request(door.base_url, "GET", "/v1/models", None, KEY).status == 200
        # More at once than the burst allows: some 429 with Retry-After, none 5xx (connections
        # above the client's cap are closed unanswered).
        count = 2 * (LIMITS.client_burst + LIMITS.client_concurrent_requests) + 10

        def one(_index: int) -> gatekeeper_run.Reply | None:
            try:
                return gatekeeper_run.request(door.base_url, "GET", "/v1/models", None, KEY)
            except (OSError, http.client.HTTPException):
                return None

        with ThreadPoolExecutor(count) as pool:
            replies = [r for r in pool.map(one, range(count)) if r is not None]
        limited = [r for r in replies if r.status == 429]
        assert limited and all("Retry-After" in r.headers for r in limited)
        assert all(r.status < 500 for r in replies)


def test_a_stream_is_judged_on_the_gaps_between_chunks_not_on_the_first_one() -> None:
    # A loaded machine: the first chunk after 2.16 s, then one chunk every 20 ms.
    steady = [2.16 + 0.02 * i for i in range(41)]
    assert gatekeeper_run._incremental_check(steady).ok
    # A buffering proxy: the same chunks, delivered in two reads.
    buffered = [2.9 + 0.0001 * i for i in range(20)] + [3.0 + 0.0001 * i for i in range(21)]
    check = gatekeeper_run._incremental_check(buffered)
    assert not check.ok
    assert check.observed.startswith("200, 2 of 41 chunks apart")


@door_harness.needs_nginx
def test_a_broken_or_silent_group_gets_an_openai_error_not_an_open_socket(tmp_path: Path) -> None:
    body = b'{"model": "m", "prompt": "x", "max_tokens": 1}'
    # An upstream that accepts the connection and never answers: nothing reaches the client
    # within the reply timeout.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        upstream = listener.getsockname()[1]
        silent = replace(LIMITS, reply_timeout_seconds=1)
        with door_harness.door(silent, KEY, upstream, tmp_path / "silent") as door:
            reply = gatekeeper_run.request(door.base_url, "POST", "/v1/completions", body, KEY)
    assert reply.status == 504
    assert json.loads(reply.body)["error"]["type"] == "timeout_error"
    # Nothing listens: the group is gone or restarting.
    with door_harness.door(LIMITS, KEY, free_port(), tmp_path / "gone") as door:
        reply = gatekeeper_run.request(door.base_url, "POST", "/v1/completions", body, KEY)
        health = gatekeeper_run.request(door.base_url, "GET", "/health")
    assert reply.status == health.status == 503
    assert (
        json.loads(reply.body)["error"]
        == json.loads(health.body)["error"]
        == {
            "message": "The model is restarting or unavailable; retry later",
            "type": "service_unavailable_error",
            "code": 503,
        }
    )
    assert reply.headers["Retry-After"] == "5"


class _Recorder(door_harness.Upstream):
    """An upstream that records each request's path and headers and answers a small JSON."""

    seen: ClassVar[list[tuple[str, dict[str, str]]]] = []

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Recorder.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        self.answer(200, b'{"id": "chatcmpl-1", "choices": []}')

    do_GET = _answer
    do_POST = _answer


#: Headers vLLM acts on (`vllm_headers`) and X-Forwarded-For, forged.
FORGED = {
    "X-Request-Id": "forged-request-id-4242",
    "X-Forwarded-For": "203.0.113.99",
    "endpoint-load-metrics-format": "JSON",
    "X-Vllm-Priority": "-100",
    "X-Session-ID": "forged-session-4242",
    "X-data-parallel-rank": "7",
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}


@door_harness.needs_nginx
def test_the_gatekeeper_bounds_what_one_request_may_cost(tmp_path: Path) -> None:
    limits = replace(
        LIMITS, max_request_bytes=65536, max_schema_bytes=2000, served_model="m", client_burst=100
    )
    _Recorder.seen = []
    with door_harness.door_before(_Recorder, limits, KEY, tmp_path) as running:
        port = door_harness.port_of(running)
        door = door_checks.Door("127.0.0.1", port, KEY, "m")
        # Bodies that multiply or amplify: 400 naming the field, vLLM never asked.
        for path, field, body in door_checks._multipliers("m"):
            answer = door_checks.ask(door, "POST", path, body)
            assert (answer.status, door_checks.param(answer.body)) == (400, field), body
        for extra, field in (
            ({"echo": True}, "echo"),
            ({"logprobs": 1}, "logprobs"),
            ({"prompt_logprobs": 0}, "prompt_logprobs"),
            ({"logprobs": False, "logprob_token_ids": list(range(1, 129))}, "logprob_token_ids"),
            ({"response_format": {"type": "json_schema", "x": "y" * 3000}}, "response_format"),
        ):
            body = {"model": "m", "prompt": "hi", **extra}
            answer = door_checks.ask(door, "POST", "/v1/completions", body)
            assert (answer.status, door_checks.param(answer.body)) == (400, field), extra
        # The 3 KB echo/logprobs/n request that returned 30 MB (issue 21): refused in under 1 KB.
        amplifier = {
            "model": "m",
            "prompt": "word " * 600,
            "echo": True,
            "logprobs": 20,
            "prompt_logprobs": 20,
            "n": 8,
            "max_tokens": 40,
        }
        answer = door_checks.ask(door, "POST", "/v1/completions", amplifier)
        assert answer.status == 400 and len(answer.body) < 1024, answer.body
        assert _Recorder.seen == []
        # An ordinary request passes, with only the reviewed headers and nginx's address.
        forged = door_checks.ask(
            door,
            "POST",
            "/v1/chat/completions",
            door_checks.chat(door, 2),
            headers=FORGED,
        )
        assert forged.status == 200
        path, headers = _Recorder.seen[-1]
        assert path == "/v1/chat/completions"
        assert headers["x-forwarded-for"] == door_checks.CLIENT
        assert not {h.lower() for h in FORGED} - {"x-forwarded-for"} & set(headers)
        # A small schema is served.
        small = door_checks.chat(door, 2, response_format={"type": "json_object"})
        assert door_checks.ask(door, "POST", "/v1/chat/completions", small).status == 200
        # /v1/models from the gatekeeper; /health from its one-second cache.
        models = door_checks.ask(door, "GET", "/v1/models")
        assert json.loads(models.body)["data"][0]["id"] == "m"
        before = len(_Recorder.seen)
        # (A burst's worth: past it, /health is rate-limited per client like any open route.)
        for _ in range(gatekeeper_conf.OPEN_BURST):
            assert door_checks.ask(door, "GET", "/health", keyed=False).status == 200
        assert len(_Recorder.seen) - before <= 3
        assert all(p == "/health" for p, _ in _Recorder.seen[before:])
        # 2,000 calls from another address in four keep-alive connections: at most the first,
        # the open routes' burst and their rate over the flood (plus a second of clock slack)
        # answered 200, the rest 429, never a 5xx; about one a second reaches vLLM.
        before = len(_Recorder.seen)
        began = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            statuses = sum(pool.map(_health_calls, [port] * 4), Counter[int]())
        took = time.monotonic() - began
        served = (
            1 + gatekeeper_conf.OPEN_BURST + math.ceil(gatekeeper_conf.OPEN_PER_SECOND * (took + 1))
        )
        assert 0 < statuses[200] <= served and statuses[429] == 2000 - statuses[200], statuses
        assert len(_Recorder.seen) - before <= int(took) + 2


def _health_calls(port: int) -> Counter[int]:
    """500 GETs of /health from 127.0.0.3 on one keep-alive connection (another when nginx
    closes it): their statuses, 0 for no answer."""
    statuses: Counter[int] = Counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, 10, ("127.0.0.3", 0))
    for _ in range(500):
        try:
            connection.request("GET", "/health")
            response = connection.getresponse()
            response.read()
            statuses[response.status] += 1
        except (OSError, http.client.HTTPException):
            statuses[0] += 1
            connection.close()
    connection.close()
    return statuses


recorder_door = door_harness.module_door(_Recorder, LIMITS, KEY)
HEAD = b"Host: x\r\nConnection: close\r\n"
KEYED = HEAD + f"Authorization: Bearer {KEY}\r\n".encode()


def _raw(door: gatekeeper_run.Gate, data: bytes, source: str) -> tuple[int, dict[str, object]]:
    """`data` sent as it is from `source`: the status and the error nginx writes."""
    with door_harness.connect(door, source) as sock:
        sock.sendall(data)
        reply = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while b"}\n" not in reply and (chunk := sock.recv(65536)):
                reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)["error"]


#: Every status a client can provoke, sent raw: nginx's own while it reads a request and the
#: gatekeeper's refusals (408 is never written: nginx closes the connection; 503 and 504, the test
#: above; 429, the next one).
@door_harness.needs_nginx
@pytest.mark.parametrize(
    ("status", "sent"),
    [
        (400, b"GARBAGE\r\n\r\n"),
        (
            400,
            b"POST /v1/chat/completions HTTP/1.1\r\n" + KEYED + b"Content-Length: 5\r\n\r\nnope!",
        ),
        (400, b"GET /health HTTP/1.1\r\n" + HEAD + b"Content-Length: 3\r\n\r\nabc"),
        (401, b"POST /v1/chat/completions HTTP/1.1\r\n" + HEAD + b"Content-Length: 2\r\n\r\n{}"),
        (401, b"GET /v1/models HTTP/1.1\r\n" + HEAD + b"\r\n"),
        (404, b"GET /nope HTTP/1.1\r\n" + HEAD + b"\r\n"),
        (405, b"TRACE / HTTP/1.1\r\n" + HEAD + b"\r\n"),
        (413, b"POST /v1/completions HTTP/1.1\r\n" + KEYED + b"Content-Length: 99999999\r\n\r\n"),
        (414, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + HEAD + b"\r\n"),
        (431, b"GET /health HTTP/1.1\r\n" + HEAD + b"X-Big: " + b"b" * 9000 + b"\r\n\r\n"),
        (501, b"POST /v1/completions HTTP/1.1\r\n" + HEAD + b"Transfer-Encoding: gzip\r\n\r\n"),
        (505, b"GET /health HTTP/2.0\r\n" + HEAD + b"\r\n"),
    ],
)
def test_every_error_a_client_can_provoke_is_openai_json_and_vllm_is_never_asked(
    recorder_door: gatekeeper_run.Gate, status: int, sent: bytes
) -> None:
    before = len(_Recorder.seen)
    answered, error = _raw(recorder_door, sent, "127.0.0.2")
    assert (answered, error["code"], error["type"]) == (status, status, ERRORS[status][0])
    assert error["message"]
    assert len(_Recorder.seen) == before


@door_harness.needs_nginx
def test_wrong_keys_past_the_failure_burst_get_a_json_429(
    recorder_door: gatekeeper_run.Gate,
) -> None:
    wrong, burst = b"GET /v1/models HTTP/1.1\r\n" + HEAD + b"\r\n", gatekeeper_conf.FAILURE_BURST
    answers = [_raw(recorder_door, wrong, "127.0.0.5") for _ in range(burst + 5)]
    assert [status for status, _ in answers[: burst + 1]] == [401] * (burst + 1)
    # (The rate, 30 a minute, refills one every two seconds.)
    refused = (429, {"message": ERRORS[429][1], "type": ERRORS[429][0], "code": 429})
    assert refused in answers[burst + 1 :]


def test_the_rehearsal_key_is_one_the_gatekeeper_accepts() -> None:
    from components.manifests import gatekeeper as gatekeeper_module

    assert '"key"' in gatekeeper_module.key_file_text(gatekeeper_run.rehearsal_key())


class _Holding(door_harness.Upstream):
    """An upstream that holds every request until `release` is set, so the test knows what is
    in flight."""

    release: ClassVar[threading.Event] = threading.Event()
    arrived: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Holding.arrived.append(self.path)
        _Holding.release.wait(30)
        with contextlib.suppress(OSError):  # the client may be gone: the abort being tested
            self.answer(200, b'{"id": "cmpl-1", "choices": []}')


def _send_raw(door: door_checks.Door, body: dict[str, object], source: str) -> socket.socket:
    data = json.dumps(body).encode()
    sock = socket.create_connection((door.host, door.port), 5, (source, 0))
    sock.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {door.api_key}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return sock


def _admitted(door: door_checks.Door, body: dict[str, object], source: str) -> bool:
    """Whether a request reaches the upstream (held there) rather than being refused."""
    count = len(_Holding.arrived)
    sock = _send_raw(door, body, source)
    sock.settimeout(1)
    try:
        refused = sock.recv(64).startswith(b"HTTP/1.1 429")
    except TimeoutError:
        refused = False
    sock.close()
    return not refused and until(lambda: len(_Holding.arrived) > count, 2)


@door_harness.needs_nginx
def test_a_client_s_token_tiers_and_grammar_slot_are_its_own_and_released_on_abort(
    tmp_path: Path,
) -> None:
    # Real nginx and njs (Debian 12's nginx 1.22, njs 0.7.9): the tiers' limit_conn counts are
    # released when a request ends, aborted included (ngx_http_limit_conn_module.c, the pool
    # cleanup `ngx_http_limit_conn_cleanup`).
    limits = replace(
        LIMITS,
        max_request_bytes=65536,
        client_concurrent_requests=4,
        client_burst=100,
        max_schema_bytes=2000,
        served_model="m",
        token_tiers=((100, 3), (200, 2), (400, 1)),
        max_model_len=800,
        max_reply_tokens=10,
    )
    _Holding.release = threading.Event()
    _Holding.arrived = []
    long = {"model": "m", "prompt": "x " * 300, "max_tokens": 10}
    short = {"model": "m", "prompt": "hi", "max_tokens": 2}
    structured = {**short, "response_format": {"type": "json_object"}}
    held: list[threading.Thread] = []

    def hold(body: dict[str, object], source: str) -> None:
        count = len(_Holding.arrived)
        thread = threading.Thread(
            target=door_checks.ask,
            args=(door, "POST", "/v1/completions", body),
            kwargs={"source": source},
        )
        thread.start()
        held.append(thread)
        assert until(lambda: len(_Holding.arrived) > count)

    try:
        with door_harness.door_before(_Holding, limits, KEY, tmp_path) as running:
            port = door_harness.port_of(running)
            door = door_checks.Door("127.0.0.1", port, KEY, "m")
            a, b = door_checks.ATTACKER, door_checks.CLIENT

            def status(body: dict[str, object], source: str) -> int:
                return door_checks.ask(
                    door, "POST", "/v1/completions", body, source=source, timeout=5
                ).status

            # A's one request above 400 tokens fills its last tier: a second is refused, a short
            # one still goes, and B's long one is B's own.
            hold(long, a)
            assert status(long, a) == 429
            hold(short, a)
            hold(long, b)
            # A's structured request holds A's grammar slot only.
            hold(structured, a)
            assert status(structured, a) == 429
            hold(structured, b)
            _Holding.release.set()
            for thread in held:
                thread.join(10)
            _Holding.release.clear()
            # An aborted request gives its tiers back while vLLM still works on it: A's next long
            # request reaches vLLM once nginx has seen the first one's client go.
            before = len(_Holding.arrived)
            aborted = _send_raw(door, long, a)
            assert until(lambda: len(_Holding.arrived) > before)
            aborted.close()
            assert until(lambda: _admitted(door, long, a), 10)
            _Holding.release.set()
    finally:
        _Holding.release.set()


def test_a_free_port_is_never_one_already_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rehearsal's gatekeeper never listens on a port it was given for something else."""
    ports = iter([5001, 5002, 5001, 5003])
    monkeypatch.setattr(gatekeeper_run, "free_port", lambda: next(ports))
    # The first two candidates are the gate's own and its "dead" upstream's: skipped.
    assert gatekeeper_run._free_port_but({5001, 5002}) == 5003


@door_harness.needs_nginx
def test_a_whole_json_reply_after_a_slow_upload_is_passed_not_cut_for_time(tmp_path: Path) -> None:
    # The reply timeout counts from the request's first byte, the upload included: a one-piece
    # reply that came whole is passed, never dropped under its Content-Length.
    body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": 1}).encode()
    _Recorder.seen = []
    limits = replace(LIMITS, reply_timeout_seconds=1, served_model="m")
    head = (
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {KEY}\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with (
        door_harness.door_before(_Recorder, limits, KEY, tmp_path) as running,
        door_harness.connect(running) as client,
    ):
        client.sendall(head.encode() + body[:10])
        time.sleep(1.5)
        client.sendall(body[10:])
        reply = b"".join(iter(lambda: client.recv(65536), b""))
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert json.loads(payload) == {"id": "chatcmpl-1", "choices": []}
