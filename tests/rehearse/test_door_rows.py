"""The front door's rows of issue 43: for bodies vLLM cannot carry (`leak_checks`) the USS read,
the verdict against the control, and the shapes and the `{"$ref": "#"}` row on real nginx in
front of a fake vLLM (the real one in `make rehearse`); the verdicts of the crowd rows on stubbed
answers: twelve addresses at their limits beside a victim (`share_checks.crowd_verdict`), twelve
keyed body tricklers (`siege_checks.keyed_verdict`), and the CPU an invalid 327 KB body costs
(`door_checks.costly_body_check`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest

from tests import builders, door_harness
from tools.rehearse.front_door import door_checks, leak_checks, share_checks, siege_checks
from tools.rehearse.front_door.door_checks import Answer, Door

KEY = "k" * 32
LIMITS = builders.gatekeeper_limits(
    max_request_bytes=65536,
    client_requests_per_minute=6000,
    client_burst=100,
    max_schema_bytes=2000,
    served_model="m",
)

SMAPS_ROLLUP = """\
55d0c0a00000-7ffd5b9f4000 ---p 00000000 00:00 0                          [rollup]
Rss:              629504 kB
Pss:              520118 kB
Shared_Clean:     135168 kB
Shared_Dirty:          0 kB
Private_Clean:     10240 kB
Private_Dirty:    424960 kB
Referenced:       629504 kB
Anonymous:        423936 kB
Swap:                  0 kB
"""


def test_uss_is_the_private_pages_of_smaps_rollup() -> None:
    assert leak_checks.uss_mib(SMAPS_ROLLUP) == (10240 + 424960) / 1024


def _run(*uss: float, status: str = "200") -> leak_checks.Run:
    return leak_checks.Run(tuple(uss), Counter({status: leak_checks.RUN}))


def test_the_memory_row_holds_a_flat_attack_and_catches_the_issues_leak() -> None:
    control = _run(500.0, 500.4, 500.2, 500.6, 500.5, 500.6, 500.6)
    assert leak_checks.tolerance_mib(control) == pytest.approx(1.2)
    flat = _run(500.6, 500.6, 501.0, 501.2, 501.3, 501.5, 501.6, status="400")
    leaking = _run(500.6, 506.1, 511.6, 517.1, 522.6, 528.1, 533.6, status="400")  # +33 MiB
    assert leak_checks.memory_check(control, flat, leaking).ok
    row = leak_checks.memory_check(control, leaking, leaking)
    assert not row.ok
    assert row.observed.startswith("+33.0 MiB, control +0.6 MiB (spread 0.6)")
    # A control that failed measures nothing.
    failed = leak_checks.Run(control.uss, Counter({"200": 599, "503": 1}))
    assert not leak_checks.memory_check(failed, flat, leaking).ok


def test_a_flat_control_still_allows_one_growth_step() -> None:
    assert leak_checks.tolerance_mib(_run(500.0, 500.0)) == leak_checks.FLOOR_MIB


def test_the_refused_row_wants_every_answer_400_naming_its_field() -> None:
    assert leak_checks.refused_check(_run(1.0, status="400")).ok
    assert not leak_checks.refused_check(_run(1.0, status="400 messages")).ok
    assert not leak_checks.refused_check(_run(1.0, status="200")).ok


class _Vllm(door_harness.Upstream):
    """vLLM's answers: a JSON 500 for a schema no text satisfies (serving `_raise_if_error`),
    the same for everything once `dead` (vLLM 0.31 answers EngineDeadError with a JSON 500 too,
    and /health 503), else 200. Each request body is kept."""

    dead: ClassVar[bool] = False
    seen: ClassVar[list[dict[str, object]]] = []

    def do_GET(self) -> None:
        self.answer(503 if _Vllm.dead else 200, b"", None)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Vllm.seen.append(body)
        failed = _Vllm.dead or "$ref" in json.dumps(body)
        reply = (
            b'{"error":{"message":"Internal server error","type":"InternalServerError",'
            b'"param":null,"code":500}}'
            if failed
            else b'{"id": "chatcmpl-1", "choices": []}'
        )
        self.answer(500 if failed else 200, reply)


@contextmanager
def _gate(tmp_path: Path) -> Iterator[Door]:
    _Vllm.dead, _Vllm.seen = False, []
    with door_harness.door_before(_Vllm, LIMITS, KEY, tmp_path) as running:
        yield Door("127.0.0.1", door_harness.port_of(running), KEY, "m")


@door_harness.needs_nginx
def test_every_shape_is_refused_naming_its_field_before_vllm(tmp_path: Path) -> None:
    with _gate(tmp_path) as door:
        shapes = leak_checks.leak_shapes("m")
        run = leak_checks.send_run(door, shapes, lambda: 1.0, count=2 * len(shapes))
        assert run.statuses == Counter({"400": 2 * len(shapes)})
        assert _Vllm.seen == []
        # Without the shape the same body reaches vLLM: the 400s are the shapes', not the prompt's.
        body = {**shapes[0][1]}
        del body["stop"]
        valid = leak_checks.send_run(door, [("", body)], lambda: 1.0, count=1)
        assert valid.statuses == Counter({"200": 1})


@door_harness.needs_nginx
def test_the_ref_row_wants_a_400_and_an_engine_that_still_serves(tmp_path: Path) -> None:
    with _gate(tmp_path) as door:
        row = leak_checks.ref_schema_check(door)
        assert row.ok, row.observed
        assert row.observed.endswith("Retry-After none; next chat 200")
        # An engine the request killed: the restart's 503, and the next chat is not served.
        _Vllm.dead = True
        row = leak_checks.ref_schema_check(door)
        assert not row.ok
        assert row.observed.startswith("503 in "), row.observed


def test_the_row_fails_on_a_503_with_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old answer (the restart's 503) fails the row, whatever follows."""
    answers = iter([Answer(503, {"Retry-After": "5"}, b"{}", 0.1), Answer(200, {}, b"{}", 0.1)])
    monkeypatch.setattr(leak_checks, "ask", lambda *_a, **_k: next(answers))
    row = leak_checks.ref_schema_check(Door("127.0.0.1", 1, KEY, "m"))
    assert not row.ok
    assert row.observed.startswith("503 in 0.1 s, Retry-After 5")


def _answer(status: int, seconds: float, retry: bool = True) -> Answer:
    return Answer(status, {"Retry-After": "5"} if retry else {}, b"{}", seconds)


@pytest.mark.parametrize(
    ("victim", "ok"),
    [
        ([_answer(200, 3.0), _answer(503, 0.02), _answer(200, 9.0), _answer(200, 4.0)], True),
        ([_answer(503, 0.02)] * 3, True),  # refused at once every time: the plan's other branch
        ([_answer(200, 3.0), _answer(200, 11.0), _answer(200, 12.0)], False),  # median over
        ([_answer(200, 3.0), _answer(503, 0.02, retry=False)], False),  # no Retry-After
        ([_answer(200, 3.0), _answer(503, 1.5)], False),  # not at once
        ([_answer(200, 3.0), _answer(429, 0.02)], False),
        ([_answer(200, 3.0), None], False),  # left hanging
        ([], False),
    ],
)
def test_the_victim_is_served_within_the_bound_or_refused_cleanly_at_once(
    victim: list[Answer | None], ok: bool
) -> None:
    assert share_checks.crowd_verdict(victim, 10.0)[0] is ok


def test_the_crowd_figures_name_what_the_victim_got() -> None:
    victim = [_answer(200, 3.0), _answer(503, 0.25), None]
    assert share_checks.crowd_verdict(victim, 10.0)[1] == (
        "victim 1 served (median 3.00 s), 1 refused (1 503 with Retry-After, slowest 0.25 s), "
        "1 unanswered"
    )


@pytest.mark.parametrize(
    ("served", "failed", "json_refusals", "logged", "ok"),
    [
        (19, 1, 1, 1, True),
        (20, 0, 0, 0, True),
        (18, 2, 2, 2, False),  # 90% served
        (19, 1, 0, 1, False),  # a reset, not a JSON answer
        (19, 1, 1, 0, False),  # answered, not logged
        (0, 0, 0, 0, False),
    ],
)
def test_keyed_tricklers_leave_the_chats_served_and_every_refusal_logged_json(
    served: int, failed: int, json_refusals: int, logged: int, ok: bool
) -> None:
    counts = {("keyed chat", "ok"): served, ("keyed chat", "failed"): failed}
    tally = siege_checks._Tally(Counter({**counts, ("JSON refusal", "ok"): json_refusals}))
    assert siege_checks.keyed_verdict(tally, logged)[0] is ok


@pytest.mark.parametrize("shape", [door_checks.costly_body, door_checks.chat_shaped])
def test_the_costly_bodies_are_valid_json_but_for_their_last_byte(shape: Callable) -> None:
    body = shape() if shape is door_checks.costly_body else shape(Door("h", 1, KEY, "m"))
    assert len(body) == door_checks.COSTLY_BYTES
    with pytest.raises(json.JSONDecodeError) as failed:
        json.loads(body)
    assert failed.value.pos == len(body) - 1
    assert json.loads(body[:-1] + b"}")


@pytest.mark.parametrize(
    ("status", "chat_ms", "costly_ms", "ok"),
    [
        (400, 4.0, 12.0, True),
        (400, 6.0, 12.0, True),
        (400, 25.0, 12.0, False),
        (400, 4.0, 25.0, False),
        (413, 1, 1, False),
    ],
)
def test_the_costly_body_row_holds_every_refusal_to_the_plans_charge(
    monkeypatch: pytest.MonkeyPatch, status: int, chat_ms: float, costly_ms: float, ok: bool
) -> None:
    spent = [0.0]

    def ask(_door: Door, _method: str, _path: str, body: bytes, **_kwargs: object) -> Answer:
        spent[0] += (costly_ms if b'"pad"' in body else chat_ms) / 1000
        return Answer(status, {}, b"{}", 0.01)

    monkeypatch.setattr(door_checks, "ask", ask)
    row = door_checks.costly_body_check(Door("127.0.0.1", 1, "k", "m"), lambda: spent[0])
    assert row.ok is ok
    aim = "within" if chat_ms < door_checks.COSTLY_MS else "over"
    assert row.observed == (
        f"chat-shaped 200x {status}, {chat_ms:.2f} ms of CPU each ({aim} the 5 ms aimed at on "
        f"this CPU); costliest 200x {status}, {costly_ms:.2f} ms each"
    )
