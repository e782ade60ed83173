"""A crowd at the door and a full model, on real nginx and njs (Debian 12's nginx 1.22, njs 0.7.9)
and in the generated text: the public pool refuses at its size and logs each refusal, large bodies
have their own rate per client, every client together has at most `all_requests` at vLLM (then a
503 with Retry-After), and nginx drops an idle upstream connection before vLLM would.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import openai
import pytest

from components import watch
from components.manifests import gatekeeper_answers, spec
from components.manifests.asleep import Asleep
from components.manifests.gatekeeper_answers import (
    BUSY_MESSAGE,
    BUSY_RETRY_SECONDS,
    KEYED_BUSY_MESSAGE,
)
from components.manifests.gatekeeper_conf import (
    LARGE_BODY_BYTES,
    UPSTREAM_KEEPALIVE_SECONDS,
    UPSTREAM_LIFETIME_S,
    VLLM_KEEPALIVE_SECONDS,
    nginx_conf,
)
from infra.plan import doorcost
from tests import builders, door_harness
from tests.components.test_watch import _filter_matches, _record
from tests.door_harness import block as _block
from tools.rehearse.front_door import gatekeeper_run as gate
from tools.rehearse.front_door import leak_checks
from tools.rehearse.group.ranks import free_port

KEY = "k" * 32
LIMITS = builders.gatekeeper_limits(
    max_request_bytes=65536,
    client_requests_per_minute=6000,
    client_burst=200,
    client_concurrent_requests=8,
    client_connections=10,
    all_requests=2,
    large_bodies_per_minute=1,
)
CHAT = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
LARGE = json.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "a" * LARGE_BODY_BYTES}]}
).encode()

real_nginx = door_harness.needs_nginx


class _Upstream(door_harness.Upstream):
    """vLLM: answers at once, or after `hold` seconds for a body that says so; records the
    client port of every request (a new port is a new connection)."""

    protocol_version = "HTTP/1.1"
    ports: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        _Upstream.ports.append(self.client_address[1])
        time.sleep(json.loads(raw).get("hold", 0))
        self.answer(200, b'{"id": "chatcmpl-1", "choices": []}')


door = door_harness.module_door(_Upstream, LIMITS, KEY)


def _post(door: gate.Gate, body: bytes, source: str = "127.0.0.1") -> gate.Reply:
    return gate.request(door.base_url, "POST", "/v1/chat/completions", body, KEY, source=source)


def test_every_client_together_is_capped_at_vllm_by_the_api_upstream() -> None:
    conf = nginx_conf(replace(LIMITS, all_requests=7))
    upstream = _block(conf.replace("\n    }", "\n        }"), "upstream vllm_api {")
    assert "server 127.0.0.1:8000 max_conns=7;" in upstream
    # In shared memory (one worker: the counts it would keep alone).
    for name in ("vllm_api", "gatekeeper_keyed", "gatekeeper_keyed_large"):
        assert f"upstream {name} {{\n        zone {name} 64k;" in conf
    # Every API location goes there; /health and /metrics keep the uncapped upstream.
    assert conf.count("proxy_pass http://vllm_api;") == 4  # chat, completions, each +schema
    assert "proxy_pass http://vllm/health;" in conf and "proxy_pass http://vllm/metrics;" in conf
    unreachable = _block(conf, "location @vllm_unreachable {")
    # The pools of keyed requests in progress answer their own message, the API upstream its.
    assert 'if ($upstream_addr ~ "^gatekeeper_keyed") { return 597; }' in unreachable
    assert 'if ($upstream_addr ~ "(^| )vllm_api$") { return 598; }' in unreachable
    busy = _block(conf, f"location = {gatekeeper_answers.BUSY_PAGE} {{")
    assert f"add_header Retry-After {BUSY_RETRY_SECONDS} always;" in busy


def test_idle_upstream_connections_close_before_vllm_closes_them() -> None:
    conf = nginx_conf(LIMITS)
    pools = re.findall(r"keepalive_timeout (\d+)s;\n        keepalive_time (\d+)s;\n    \}", conf)
    assert pools == [(str(UPSTREAM_KEEPALIVE_SECONDS), str(UPSTREAM_LIFETIME_S))] * 2
    assert UPSTREAM_KEEPALIVE_SECONDS < VLLM_KEEPALIVE_SECONDS == 5


def test_large_bodies_count_against_their_own_rate_per_client() -> None:
    conf = nginx_conf(replace(LIMITS, large_bodies_per_minute=157))
    assert "zone=gatekeeper_large:1m\n                   rate=157r/m;" in conf
    assert '"~^[0-9]{5,}:" $binary_remote_addr;' in conf and '"~:." $binary_remote_addr;' in conf
    for route in ("location = /v1/chat/completions", "location = /v1/completions"):
        assert "limit_req zone=gatekeeper_large burst=1 nodelay;" in _block(conf, route)


@real_nginx
def test_a_full_model_answers_503_at_once_with_retry_after(door: gate.Gate) -> None:
    held = CHAT[:-1] + b', "hold": 6}'
    threads = [threading.Thread(target=_post, args=(door, held)) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(2)
    reply = _post(door, CHAT)
    # At once: answered while both held requests still run, not after one of them ends.
    assert all(thread.is_alive() for thread in threads)
    assert reply.status == 503
    assert reply.headers["Retry-After"] == str(BUSY_RETRY_SECONDS)
    assert json.loads(reply.body)["error"]["message"] == BUSY_MESSAGE
    for thread in threads:
        thread.join()
    # Room again once they end; the log names the upstream, the route and the method.
    assert _post(door, CHAT).status == 200
    busy = [e for e in door.log_entries() if e["status"] == 503]
    assert [(e["method"], e["uri"], e["upstream"]) for e in busy] == [
        ("POST", "/v1/chat/completions", "vllm_api")
    ]
    # Load shedding, not a fault: the 5xx alarm's filter leaves the busy line out, and counts the
    # same line answered by the restart's 503 page (at a door's too, whose lines say `asleep`).
    assert busy[0]["page"] == gatekeeper_answers.BUSY_PAGE
    fault = {**busy[0], "page": "/.gatekeeper/e503"}
    for elastic in (False, True):
        pattern = watch.answer_filter_pattern("5xx", elastic)
        lines = [json.dumps({**e, "asleep": 0} if elastic else e) for e in (busy[0], fault)]
        counted = [_filter_matches(pattern, _record(line, "gatekeeper")) for line in lines]
        assert counted == [False, True]


@real_nginx
def test_large_bodies_beyond_their_rate_are_refused_and_small_ones_pass(door: gate.Gate) -> None:
    source = "127.0.0.3"
    assert [_post(door, LARGE, source).status for _ in range(3)] == [200, 200, 429]
    assert _post(door, CHAT, source).status == 200
    # Another address has its own.
    assert _post(door, LARGE, "127.0.0.4").status == 200


@real_nginx
def test_nginx_drops_an_idle_upstream_connection_before_vllm_would(door: gate.Gate) -> None:
    _Upstream.ports.clear()
    assert _post(door, CHAT).status == 200
    assert _post(door, CHAT).status == 200
    time.sleep(UPSTREAM_KEEPALIVE_SECONDS + 0.5)
    assert _post(door, CHAT).status == 200
    first, again, later = _Upstream.ports
    # Reused while fresh; a new connection once nginx's keep-alive (4 s) ran out.
    assert again == first and later != first


@real_nginx
def test_a_full_pool_refuses_a_connection_at_once_and_logs_it(tmp_path: Path) -> None:
    limits = replace(LIMITS, client_connections=2, connection_capacity=4)
    with door_harness.door(limits, KEY, free_port(), tmp_path) as running:
        held = [door_harness.connect(running, f"127.0.0.{n}") for n in (5, 5, 6, 6)]
        time.sleep(0.3)
        late = door_harness.connect(running, "127.0.0.7")
        # Closed with no byte sent: before a request exists, so by the pool (the log says which).
        assert late.recv(1) == b""
        for sock in [*held, late]:
            sock.close()
        time.sleep(0.3)
        log = (tmp_path / "nginx.log").read_text()
    assert re.search(r'\[warn\].*limiting connections by zone "gatekeeper_public"', log), log


#: A keyed POST: a browser's from the chat page has ~1.1 KiB of header, 14 lines of 67 bytes here.
POST = b"POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer %s\r\n"
POST += b"Content-Length: %d\r\n%s\r\n"


def _head(lines: bytes) -> bytes:
    return POST % (KEY.encode(), len(CHAT), b"Host: x\r\nConnection: close\r\n" + lines) + CHAT


@real_nginx
@pytest.mark.parametrize(
    ("sent", "status"),
    [
        (_head(b"X-Long: %s\r\n" % (b"a" * 1100)), 431),
        (_head(b"X: %s\r\n" % (b"a" * 600) * 3), 431),
        (_head(b"X-A: %s\r\n" % (b"v" * 60) * 14), 200),
        # A request line past the large buffer.
        (b"GET /v1/models?%s HTTP/1.1\r\nHost: x\r\n\r\n" % (b"a" * 1100), 414),
    ],
)
def test_a_head_past_its_buffers_is_refused_with_json(
    door: gate.Gate, sent: bytes, status: int
) -> None:
    top, body = _exchange(door, sent)
    assert top.startswith(b"HTTP/1.1 %d " % status), top
    assert status == 200 or json.loads(body)["error"]["code"] == status


def _exchange(door: gate.Gate, sent: bytes) -> tuple[bytes, bytes]:
    """`sent` on a connection of its own, the reply's head and body once nginx closes it."""
    with door_harness.connect(door, "127.0.0.8") as sock:
        sock.sendall(sent)
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    top, _, body = reply.partition(b"\r\n\r\n")
    return top, body


@real_nginx
def test_a_header_not_sent_within_its_deadline_loses_the_connection(tmp_path: Path) -> None:
    limits = replace(LIMITS, header_timeout_seconds=3)
    with (
        door_harness.door(limits, KEY, free_port(), tmp_path) as running,
        door_harness.connect(running) as sock,
    ):
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        time.sleep(1)
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):  # still open a second in: not closed on sight
            sock.recv(1)
        sock.settimeout(LIMITS.header_timeout_seconds - 1)  # before the default's deadline
        assert sock.recv(1) == b""  # closed with no reply, by the 3 s deadline


#: Keyed requests in progress, counted before their bodies (`GatekeeperLimits.keyed_requests`).
KEYED = replace(
    LIMITS,
    keyed_requests=40,
    keyed_large=6,
    client_concurrent_requests=1,
    large_bodies_per_minute=6000,
    client_burst=400,
)


keyed_door = door_harness.module_door(_Upstream, KEYED, KEY)


def _trickle(door: gate.Gate, source: str, declared: int, sent: bytes) -> socket.socket:
    """A keyed POST declaring `declared` bytes of body that sends `sent` and holds."""
    sock = door_harness.connect(door, source)
    sock.sendall(POST % (KEY.encode(), declared, b"Host: x\r\n") + sent)
    return sock


def _answer(sock: socket.socket) -> tuple[bytes, dict]:
    sock.settimeout(KEYED.header_timeout_seconds - 2)  # an answer before any body deadline
    reply = b""
    while b"}\n" not in reply and (chunk := sock.recv(4096)):
        reply += chunk
    top, _, body = reply.partition(b"\r\n\r\n")
    return top, json.loads(body)


def _private_bytes(door: gate.Gate) -> float:
    pid = Path(f"/proc/{door.pgid}/task/{door.pgid}/children").read_text().split()[0]
    return leak_checks.uss_mib(Path(f"/proc/{pid}/smaps_rollup").read_text()) * 2**20


@real_nginx
def test_keyed_tricklers_beyond_the_pool_are_refused_at_once_within_the_plans_memory(
    keyed_door: gate.Gate,
) -> None:
    body = b'{"model":"m","messages":[{"role":"user","content":"' + b"a" * 9_800
    for _ in range(2):  # the worker's first requests allocate what every later one reuses
        held = [_trickle(keyed_door, f"127.0.1.{1 + i // 8}", 9_999, body) for i in range(8)]
        time.sleep(0.3)
        for sock in held:
            sock.close()
    before = _private_bytes(keyed_door)
    held = [_trickle(keyed_door, f"127.0.1.{1 + i // 8}", 9_999, body) for i in range(40)]
    try:
        time.sleep(0.5)
        grown = _private_bytes(keyed_door) - before
        # Each holds its VM, the hop and 9,800 bytes of body: within the plan's figure for one.
        assert grown <= 40 * doorcost.KEYED_SMALL_BYTES, grown / 40
        # Answered while their bodies are 23 of 9,999 bytes: refused without waiting for them.
        late = [_trickle(keyed_door, f"127.0.2.{i}", 9_999, body[:23]) for i in range(1, 21)]
        answers = [_answer(sock) for sock in late]
        assert _private_bytes(keyed_door) - before <= 40 * doorcost.KEYED_SMALL_BYTES
    finally:
        for sock in held:
            sock.close()
    for top, error in answers:
        assert top.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 5" in top
        assert error["error"]["message"] == KEYED_BUSY_MESSAGE
    refused = [e for e in keyed_door.log_entries() if e["client"].startswith("127.0.2.")]
    assert {(e["status"], e["method"], e["uri"], e["upstream"]) for e in refused} == {
        (503, "POST", "/v1/chat/completions", "gatekeeper_keyed")
    }
    assert len(refused) == 20


@real_nginx
def test_requests_at_vllm_hold_their_bodies_not_their_parsed_copies(tmp_path: Path) -> None:
    # Arrays nested to njs's depth bound parse to ~100x their bytes; the check server's request,
    # and the VM that holds them, end before vLLM, so six waiting there hold their bodies, and
    # the heap what one parse left (malloc keeps it for the next), not one parse each.
    nested = ",".join(["[" * 28 + "]" * 28] * 1_000)
    body = ('{"model":"m","hold":1.5,"messages":[],"x":[' + nested + "]}").encode()
    limits = replace(KEYED, all_requests=6, keyed_large=6)

    def held(door: gate.Gate, sent: bytes, net: int) -> tuple[float, list[int]]:
        before = _private_bytes(door)
        with ThreadPoolExecutor(6) as pool:
            asked = [pool.submit(_post, door, sent, f"127.0.{net}.{i}") for i in range(1, 7)]
            time.sleep(1)  # all six at vLLM, which holds each 1.5 s
            grown = _private_bytes(door) - before
            return grown, [a.result().status for a in asked]

    text = body[: body.index(b'"x":')] + b'"x":"' + b"a" * len(nested) + b'"}'
    with door_harness.door_before(_Upstream, limits, KEY, tmp_path) as door:
        held(door, text, 8)  # the worker's first requests allocate what later ones reuse
        grown, statuses = held(door, body, 9)
    assert statuses == [200] * 6
    each, parse = doorcost.KEYED_LARGE_FIXED_BYTES + 2 * len(body), 106 * len(body)
    assert grown <= 6 * each + 1.5 * parse, grown  # a VM kept per request: 6 x 6 MB


@real_nginx
def test_a_third_large_body_at_once_from_one_address_is_refused_and_a_small_one_passes(
    keyed_door: gate.Gate,
) -> None:
    source = "127.0.3.1"
    held = [_trickle(keyed_door, source, 20_000, b'{"model"') for _ in range(2)]
    time.sleep(0.3)
    top, error = _answer(_trickle(keyed_door, source, 20_000, b'{"model"'))
    assert top.startswith(b"HTTP/1.1 429 ") and error["error"]["code"] == 429
    assert _post(keyed_door, CHAT, source).status == 200
    for sock in held:
        sock.close()
    line = next(e for e in keyed_door.log_entries() if e["status"] == 429)
    assert (line["client"], line["method"], line["uri"]) == (source, "POST", "/v1/chat/completions")


@real_nginx
def test_the_api_servers_own_counts_apply_per_client_past_the_public_ones(
    keyed_door: gate.Gate,
) -> None:
    # A large body is counted by the public server's `limit_conn`; the tiers count it again in
    # the API server, per client address (its own request): one in flight each here.
    held = LARGE[:-1] + b', "hold": 2}'
    first = threading.Thread(target=_post, args=(keyed_door, held, "127.0.4.1"))
    first.start()
    time.sleep(0.7)
    assert _post(keyed_door, held, "127.0.4.1").status == 429
    assert _post(keyed_door, LARGE, "127.0.4.2").status == 200
    first.join()
    # One line each, by the server that answered, with the client's own address.
    lines = [(e["client"], e["status"]) for e in keyed_door.log_entries()]
    assert sorted(line for line in lines if line[0].startswith("127.0.4.")) == [
        ("127.0.4.1", 200),
        ("127.0.4.1", 429),
        ("127.0.4.2", 200),
    ]


#: The longest key the stack accepts (`spec.KEY_MAX_CHARS`) and a load balancer's host name.
LONGEST_KEY = "k" * spec.KEY_MAX_CHARS
HOST = "a" * 32 + "-0123456789abcdef.elb.us-west-2.amazonaws.com"
#: Chromium's same-origin fetch from the chat page (Chrome 131's usual set, 18 lines; modelled).
CHROMIUM = (
    f"Host: {HOST}\r\nConnection: keep-alive\r\nContent-Length: {len(CHAT)}\r\n"
    'sec-ch-ua-platform: "Windows"\r\n'
    f"Authorization: Bearer {LONGEST_KEY}\r\n"
    'sec-ch-ua: "Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"\r\n'
    "sec-ch-ua-mobile: ?0\r\nUser-Agent: Mozilla/5.0 (Windows NT 10.0; Win64; x64) "
    "AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36\r\n"
    "Accept: text/event-stream\r\nContent-Type: application/json\r\n"
    f"Origin: http://{HOST}\r\nSec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: cors\r\n"
    f"Sec-Fetch-Dest: empty\r\nReferer: http://{HOST}/\r\n"
    "Accept-Encoding: gzip, deflate, br, zstd\r\nAccept-Language: en-US,en;q=0.9\r\n\r\n"
)


@real_nginx
def test_the_longest_key_passes_with_the_sdk_s_and_chromium_s_headers(tmp_path: Path) -> None:
    with door_harness.door_before(_Upstream, LIMITS, LONGEST_KEY, tmp_path) as running:
        with door_harness.connect(running) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\n" + CHROMIUM.encode() + CHAT)
            assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")
        # The OpenAI SDK's own 19 lines, organization and project set, under the same host.
        client = openai.OpenAI(
            api_key=LONGEST_KEY,
            base_url=f"{running.base_url}/v1",
            organization="org-" + "o" * 24,
            project="proj_" + "p" * 24,
            default_headers={"Host": HOST},
            max_retries=0,
        )
        messages = [{"role": "user", "content": "hi"}]
        sent = client.chat.completions.with_raw_response.create(model="m", messages=messages)
        assert sent.status_code == 200


def _lines(door: gate.Gate, client: str) -> list[tuple[int, str]]:
    return [(e["status"], e["upstream"]) for e in door.log_entries() if e["client"] == client]


@real_nginx
def test_every_request_is_logged_once_with_the_status_its_client_got(tmp_path: Path) -> None:
    # A chunked body past the limit: the outer hop answers 413, the API server's line (its
    # client gone, nothing sent) is not written. A body stalled: the outer hop's timer fires
    # first (the API server's is 2 s longer), 408.
    with door_harness.door_before(
        _Upstream, replace(KEYED, header_timeout_seconds=1), KEY, tmp_path
    ) as running:
        head = POST.split(b"Content-Length")[0] % KEY.encode()
        with door_harness.connect(running, "127.0.6.1") as chunked:
            chunked.sendall(head + b"Host: x\r\nTransfer-Encoding: chunked\r\n\r\n10000\r\n")
            time.sleep(0.3)  # on to the API server, which then reads the body as it comes
            with contextlib.suppress(OSError):
                chunked.sendall(b"a" * 0x10000 + b"\r\n1\r\na")
                assert _answer(chunked)[0].startswith(b"HTTP/1.1 413 ")
        with _trickle(running, "127.0.6.2", 9_999, b'{"model"') as stalled:
            assert stalled.recv(1) == b""
        time.sleep(0.5)
        api = str(tmp_path / "run" / "gatekeeper-api.sock")
        assert _lines(running, "127.0.6.1") == [(413, f"unix:{api}")]
        assert _lines(running, "127.0.6.2") == [(408, f"unix:{api}")]


@real_nginx
@pytest.mark.parametrize("asleep", [None, Asleep(370, 30)])
def test_a_keyed_request_in_a_graceful_quit_is_told_busy_never_restart_or_asleep(
    tmp_path: Path, asleep: Asleep | None
) -> None:
    with door_harness.door_before(_Upstream, KEYED, KEY, tmp_path, asleep=asleep) as running:
        head = POST % (KEY.encode(), len(CHAT), b"Host: x\r\n")
        body = _trickle(running, "127.0.7.1", len(CHAT), CHAT[:9])
        with door_harness.connect(running, "127.0.7.2") as s:
            s.sendall(head[:20])
            time.sleep(0.3)
            (tmp_path / "run" / "draining").touch()  # the drain's marker, then its quit
            os.kill(running.pgid, signal.SIGQUIT)
            time.sleep(0.5)
            s.sendall(head[20:] + CHAT)
            top, error = _answer(s)
        # One already at the API server whose body was still arriving finds the check server's
        # listener closed by the quit: busy too, never the restart's or the asleep answer.
        body.sendall(CHAT[9:])
        late, late_error = _answer(body)
        body.close()
    for answer, message in ((top, error), (late, late_error)):
        assert answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 5" in answer
        assert message["error"]["message"] == BUSY_MESSAGE
    run = tmp_path / "run"
    assert _lines(running, "127.0.7.2") == [(503, f"unix:{run / 'gatekeeper-api.sock'}")]
    assert _lines(running, "127.0.7.1") == [(503, f"unix:{run / 'gatekeeper-check.sock'}")]
    assert [e.get("asleep") for e in running.log_entries()] == [0 if asleep else None] * 2


@real_nginx
@pytest.mark.parametrize("hop", ["gatekeeper-api.sock", "gatekeeper-check.sock"])
def test_an_inner_server_unreachable_is_busy_in_a_drain_else_the_restart(
    tmp_path: Path, hop: str
) -> None:
    elastic = watch.answer_filter_pattern("5xx", elastic=True)
    with door_harness.door_before(_Upstream, KEYED, KEY, tmp_path, asleep=Asleep(370, 30)) as door:
        (tmp_path / "run" / hop).unlink()  # as if it closed early
        fault = _post(door, CHAT)
        (tmp_path / "run" / "draining").touch()
        busy = _post(door, CHAT)
        time.sleep(0.3)
    # Outside a drain, the API server gone is the restart's 503, the check server the
    # gatekeeper's own fault.
    fault_status = 503 if hop == "gatekeeper-api.sock" else 500
    assert (fault.status, busy.status) == (fault_status, 503)
    assert json.loads(fault.body)["error"]["message"] == gatekeeper_answers.ERRORS[fault_status][1]
    assert json.loads(busy.body)["error"]["message"] == BUSY_MESSAGE
    lines = [_record(json.dumps(e), "gatekeeper") for e in door.log_entries()]
    assert [_filter_matches(elastic, line) for line in lines] == [True, False]
