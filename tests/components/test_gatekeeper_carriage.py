"""What reaches vLLM and what its failures become, on real nginx and njs (Debian 12's nginx 1.22,
njs 0.7.9) in front of an upstream that records what it is sent.

Bodies vLLM 0.31 would read but could not hand to its engine (an unpaired surrogate anywhere, an
integer beyond 64 bits) are refused naming the field, and so is grammar input whose counts cost
more compile than its bytes say; vLLM's JSON 500 is a client's 400 while its engine's /health
answers 200, else (a dead engine) the restart's 503, as is its empty 500; and every line of the
access log keeps the method and route the client sent, refusals included.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from components import watch
from components.manifests.asleep import Asleep
from components.manifests.gatekeeper_answers import BUSY_MESSAGE, ERRORS
from infra.plan import frontdoor
from tests import builders, door_harness
from tests.components.test_watch import _filter_matches, _record
from tools.rehearse.front_door import gatekeeper_run as gate

KEY = "k" * 32
LIMITS = builders.gatekeeper_limits(
    max_request_bytes=65536,
    client_requests_per_minute=6000,
    client_burst=200,
    client_concurrent_requests=4,
    max_schema_bytes=4000,
    max_schema_counts=(frontdoor.SCHEMA_MAX_COUNT, frontdoor.SCHEMA_MAX_PATTERN_COUNT),
)
CHAT = '{"model": "m", "messages": [{"role": "user", "content": "hi"}]'
SURROGATE = (
    "holds an unpaired UTF-16 surrogate escape (\\uD800-\\uDFFF without its other half), "
    "which vLLM cannot encode"
)
BEYOND_64_BITS = "holds a whole number of 2^63 or more in size; vLLM's engine carries integers of 64 bits at most"  # noqa: E501
pytestmark = door_harness.needs_nginx


class _Upstream(door_harness.Upstream):
    """vLLM's answers: 200, or for `"fail"` its JSON 500 (a generation that ended in error, or
    EngineDeadError) or its empty 500 (entrypoints/launcher.py); /health answers `health`, after
    `health_delay` seconds, and each call's request line and headers are kept."""

    seen: ClassVar[list[bytes]] = []
    health: ClassVar[int] = 200
    health_delay: ClassVar[float] = 0.0
    health_calls: ClassVar[list[tuple[str, dict[str, str]]]] = []

    def do_GET(self) -> None:
        _Upstream.health_calls.append((self.requestline, dict(self.headers)))
        time.sleep(_Upstream.health_delay)
        if not _Upstream.health:  # closed unanswered: nginx's 502
            self.close_connection = True
            return
        self.answer(_Upstream.health, b"", None)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        _Upstream.seen.append(raw)
        asked = json.loads(raw)
        time.sleep(asked.get("hold", 0))
        if asked.get("fail") == "empty":
            self.answer(500, b"", None)
        elif asked.get("fail") == "json":
            error = {"message": "Internal server error", "type": "InternalServerError"}
            self.answer(500, json.dumps({"error": error}).encode())
        else:
            self.answer(200, b'{"id": "chatcmpl-1", "choices": []}')


door = door_harness.module_door(_Upstream, LIMITS, KEY)


def _post(door: gate.Gate, body: bytes, path: str = "/v1/chat/completions") -> gate.Reply:
    return gate.request(door.base_url, "POST", path, body, KEY)


def _schema(schema: dict[str, object]) -> str:
    wrapped = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
    return f'"response_format": {json.dumps(wrapped)}'


def _tool(parameters: dict[str, object]) -> str:
    tools = [{"type": "function", "function": {"name": "f", "parameters": parameters}}]
    return f'"tools": {json.dumps(tools)}'


UNROLLED = ": vLLM compiles each unit of it, one grammar at a time"
SCHEMA = "response_format.json_schema.schema"


def _count(path: str, value: int) -> str:
    """The refusal of a count (`maxLength`...) above its bound of 10."""
    counts = "maxLength, minLength, maxItems, minItems, maxProperties and minProperties"
    return f"`{path}` is {value}; {counts} may be at most 10 here{UNROLLED}"


def _repeats(path: str, times: int) -> str:
    """The refusal of a counted repetition above its bound of 100."""
    return f"`{path}` repeats {times} times; a counted repetition may be at most 100 here{UNROLLED}"


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        (r'"stop": ["\ud800"]', "stop", SURROGATE),  # a high half alone
        (r'"stop": ["x\uDC00"]', "stop", SURROGATE),  # a low half alone, upper case
        (r'"bad_words": ["a\ud800\ud800\udc00"]', "bad_words", SURROGATE),  # a pair after one
        (r'"stop": ["\\\ud800"]', "stop", SURROGATE),  # an escaped backslash, then the escape
        (r'"logit_bias": {"\udfff": 1}', "logit_bias", SURROGATE),  # in a key
        (r'"messages": [{"role": "user", "content": "\ud800"}]', "messages", SURROGATE),
        (
            _schema({"type": "integer", "maximum": 123456789012345678901234}),
            "response_format",
            BEYOND_64_BITS,
        ),
        ('"seed": -9223372036854775809', "seed", BEYOND_64_BITS),
        ('"max_tokens": 1' + "0" * 400, "max_tokens", BEYOND_64_BITS),
        # Grammar input whose counts cost more compile than its bytes say.
        (
            _schema(
                {"type": "object", "properties": {"name": {"type": "string", "maxLength": 11}}}
            ),
            "response_format",
            _count(f"{SCHEMA}.properties.name.maxLength", 11),
        ),
        (
            _schema({"type": "string", "maxLength": 100000}),
            "response_format",
            _count(f"{SCHEMA}.maxLength", 100000),
        ),
        (
            _tool({"type": "object", "properties": {"x": {"type": "array", "minItems": 50}}}),
            "tools",
            _count("tools.0.function.parameters.properties.x.minItems", 50),
        ),
        (
            _schema({"type": "string", "pattern": "^[a-z0-9]{1,3000}$"}),
            "response_format",
            _repeats(f"{SCHEMA}.pattern", 3000),
        ),
        (
            _schema({"type": "object", "patternProperties": {"^k{101}$": {"type": "integer"}}}),
            "response_format",
            _repeats(f"{SCHEMA}.patternProperties.^k{{101}}$", 101),
        ),
        (
            '"structured_outputs": {"regex": "[0-9]{200,}"}',
            "structured_outputs",
            _repeats("structured_outputs.regex", 200),
        ),
        # Nested counts multiply; `{,n}` counts n.
        (
            '"structured_outputs": {"regex": "(a{100}){100}"}',
            "structured_outputs",
            _repeats("structured_outputs.regex", 10000),
        ),
        (
            '"structured_outputs": {"regex": "a{,500}"}',
            "structured_outputs",
            _repeats("structured_outputs.regex", 500),
        ),
        # A schema sent as a JSON string is read and walked too.
        (
            '"structured_outputs": {"json": "{\\"type\\": \\"string\\", \\"maxLength\\": 5000}"}',
            "structured_outputs",
            _count("structured_outputs.json.maxLength", 5000),
        ),
        (
            '"structured_outputs": {"json": "{not json"}',
            "structured_outputs",
            f"`structured_outputs.json` is a string that is not JSON{UNROLLED}",
        ),
        # Each count within its bound, all of them together above one compile.
        (
            _schema(
                {
                    "type": "object",
                    "properties": {k: {"type": "string", "maxLength": 5} for k in "abc"},
                }
            ),
            "response_format",
            "the counts of the grammar input up to `response_format` take 150% of one compile (a "
            "unit of a count takes 10%, of a counted repetition 1%); at most 100% here"
            f"{UNROLLED}",
        ),
    ],
)
def test_what_vllm_cannot_carry_or_compile_cheaply_is_refused_naming_the_field(
    door: gate.Gate, extra: str, field: str, message: str
) -> None:
    before = len(_Upstream.seen)
    text = CHAT.replace('"messages"', '"ignored"') if field == "messages" else CHAT
    reply = _post(door, f"{text}, {extra}}}".encode())
    assert reply.status == 400, reply.body
    error = json.loads(reply.body)["error"]
    if message in (SURROGATE, BEYOND_64_BITS):
        message = f"`{field}` {message}"
    assert (error["param"], error["message"]) == (field, message)
    assert len(_Upstream.seen) == before


@pytest.mark.parametrize(
    "extra",
    [
        r'"stop": ["\ud83d\ude00", "\uD83D\uDE00"]',  # a pair, either case
        r'"stop": ["\\ud800"]',  # a backslash, then text that looks like an escape
        '"seed": 1234567890123456789',  # 19 digits within 64 bits
        '"user": "12345678901234567890123"',  # digits in a string
        '"temperature": 1e30',
        # Grammar counts within their bound: a min and max pair counts as its larger; 50% and
        # 40% of one compile.
        _schema({"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]{1,40}$"}),
        _schema(
            {"type": "string", "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"}
        ),
        _tool({"type": "object", "maxProperties": 10, "properties": {"x": {"type": "array"}}}),
        # A property named like a keyword, and counts in text no grammar reads.
        _schema(
            {
                "type": "object",
                "description": "ids like a{1,3000}, maxLength 500",
                "properties": {"maxLength": {"type": "integer"}, "pattern": {"type": "string"}},
            }
        ),
        '"response_format": {"type": "text", "maxLength": 500}',
    ],
)
def test_what_vllm_can_carry_and_compile_reaches_it_unchanged(door: gate.Gate, extra: str) -> None:
    body = f"{CHAT}, {extra}}}".encode()
    assert _post(door, body).status == 200
    assert _Upstream.seen[-1] == body


DEEP = "The request body nests arrays and objects more than 30 levels deep; this endpoint reads at most 30"  # noqa: E501


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # Surrogates written as UTF-8 bytes: Python's json reads them as a lone surrogate
        # ("surrogatepass"), njs as bytes.
        (CHAT.encode() + b', "stop": ["a\xed\xa0\x80"]}', "The request body is not valid UTF-8"),
        # No second scan after JSON.parse fails: nesting past njs's depth is the parser's
        # message, whether or not the rest of the body is well formed.
        (b'{"x": ' + b"[" * 40 + b"]" * 40 + b"}", DEEP),
        (b'{"x": ' + b"[" * 40, DEEP),
        (b'{"x": [1, 2}', "The request body is not valid JSON"),
    ],
)
def test_a_body_that_is_not_utf8_json_gets_the_parser_s_own_verdict(
    door: gate.Gate, body: bytes, message: str
) -> None:
    reply = _post(door, body)
    assert reply.status == 400
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": 400}
    assert json.loads(reply.body)["error"] == error


def _fail(door: gate.Gate, how: str, health: int = 200, delay: float = 0.0) -> gate.Reply:
    _Upstream.health, _Upstream.health_delay = health, delay
    try:
        return _post(door, f'{CHAT}, "fail": "{how}"}}'.encode())
    finally:
        _Upstream.health, _Upstream.health_delay = 200, 0.0


def test_vllm_s_failure_of_a_request_is_a_client_error_while_its_engine_lives(
    door: gate.Gate,
) -> None:
    calls, before = len(_Upstream.health_calls), len(door.log_entries())
    content = _fail(door, "json")
    assert content.status == 400
    # vLLM's 500 in the log, but not counted by the 5xx alarm: the client's own error.
    (line,) = _logged(door, before, 1)
    assert json.loads(line)["upstream_status"] == "500"
    assert not _filter_matches(watch.answer_filter_pattern("5xx"), _record(line, "gatekeeper"))
    assert "Retry-After" not in content.headers
    assert json.loads(content.body)["error"] == {
        "message": "vLLM failed this request (Internal server error) and would fail it again "
        "(a schema no text satisfies does this); change the request, do not retry",
        "type": "invalid_request_error",
        "code": 400,
    }
    # The engine itself was asked, once, uncached, without the request's body.
    assert _fail(door, "json").status == 400
    asked = _Upstream.health_calls[calls:]
    assert [line for line, _ in asked] == ["GET /health HTTP/1.1"] * 2
    assert all("Content-Length" not in headers for _, headers in asked), asked


@pytest.mark.parametrize(
    ("how", "health", "delay"),
    [
        ("json", 503, 0.0),  # EngineDeadError: vLLM's JSON 500, and /health 503
        ("json", 200, 3.0),  # /health not answered within the bound
        ("empty", 200, 0.0),  # the empty 500: a fault without asking
    ],
)
def test_an_engine_fault_is_the_restart_counted_by_the_5xx_alarm(
    door: gate.Gate, how: str, health: int, delay: float
) -> None:
    before = len(door.log_entries())
    fault = _fail(door, how, health, delay)
    assert fault.status == 503, fault.body
    assert fault.headers["Retry-After"] == "5"
    assert json.loads(fault.body)["error"]["type"] == "service_unavailable_error"
    (line,) = _logged(door, before, 1)
    assert json.loads(line)["upstream_status"] == "500"
    assert _filter_matches(watch.answer_filter_pattern("5xx"), _record(line, "gatekeeper"))


def test_an_engine_fault_at_the_door_is_counted_never_asleep(tmp_path: Path) -> None:
    # The engine's /health unanswered (502) after a vLLM 500: not the asleep page, whose mark
    # the subrequest would share with the request.
    with door_harness.door_before(_Upstream, LIMITS, KEY, tmp_path, asleep=Asleep(370, 30)) as d:
        fault = _fail(d, "json", health=0)
        (line,) = _logged(d, 0, 1)
    assert fault.status == 503 and json.loads(fault.body)["error"]["message"] == ERRORS[503][1]
    assert json.loads(line)["asleep"] == 0
    pattern = watch.answer_filter_pattern("5xx", elastic=True)
    assert _filter_matches(pattern, _record(line, "gatekeeper"))


def _logged(door: gate.Gate, before: int, count: int) -> list[str]:
    """The access log's lines after the first `before`, once `count` are there: nginx writes a
    request's line in its log phase, after the answer went out."""
    deadline = time.monotonic() + 5.0
    while len(_lines(door)) - before < count and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # and any line more
    return _lines(door)[before:]


def _lines(door: gate.Gate) -> list[str]:
    return [line for line in door.access_log.read_text().splitlines() if line.startswith("{")]


def test_a_client_gone_before_vllm_answers_is_logged_once(door: gate.Gate) -> None:
    before = len(door.log_entries())
    body = f'{CHAT}, "hold": 1}}'.encode()
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
    with door_harness.connect(door) as s:
        s.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(0.3)
    time.sleep(1.2)
    (line,) = _logged(door, before, 1)
    entry = json.loads(line)  # the outer hop's: its upstream is the API server, not vLLM
    assert (entry["status"], entry["uri"]) == (499, "/v1/chat/completions")
    assert entry["upstream"].endswith("/gatekeeper-api.sock")


def test_the_access_log_keeps_the_method_and_route_of_every_refusal(door: gate.Gate) -> None:
    before = len(door.log_entries())
    gate.request(door.base_url, "POST", "/v1/chat/completions?x=1", b"{}", "wrong-key" * 4)
    gate.request(door.base_url, "DELETE", "/v1/models", None, KEY)
    _post(door, b'{"x": [1, 2}', "/v1/completions")
    _post(door, f'{CHAT}, "fail": "empty"}}'.encode())
    entries = [json.loads(line) for line in _logged(door, before, 4)]
    logged = [(e["method"], e["uri"], e["status"], e["page"]) for e in entries]
    assert logged == [
        ("POST", "/v1/chat/completions", 401, "/.gatekeeper/e401"),
        ("DELETE", "/v1/models", 404, "/.gatekeeper/e404"),
        ("POST", "/v1/completions", 400, "/v1/completions"),
        ("POST", "/v1/chat/completions", 503, "/.gatekeeper/e503"),
    ]


def test_a_failed_request_holds_a_slot_at_vllm_while_it_asks_the_engine(tmp_path: Path) -> None:
    # The parsed body stays until the request ends: the engine's /health is asked in a slot of
    # `all_requests`, so the requests holding one are never more than the plan charges.
    limits = dataclasses.replace(LIMITS, all_requests=1)
    with door_harness.door_before(_Upstream, limits, KEY, tmp_path) as running:
        failing = threading.Thread(target=_fail, args=(running, "json", 200, 1.5))
        failing.start()
        time.sleep(0.7)
        busy = _post(running, f"{CHAT}}}".encode())
        failing.join()
    assert busy.status == 503 and json.loads(busy.body)["error"]["message"] == BUSY_MESSAGE
    assert [e["status"] for e in running.log_entries()] == [503, 400]
