"""The rows for bodies vLLM cannot carry (`leak_checks`): the USS read, the verdict against the
control, and the shapes and the `{"$ref": "#"}` row on real nginx in front of a fake vLLM (the
real one in `make rehearse`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest

from tests import builders, door_harness
from tools.rehearse.front_door import leak_checks
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
        yield Door("127.0.0.1", door_harness.port_of(running), KEY, "m", lambda: "")


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
    row = leak_checks.ref_schema_check(Door("127.0.0.1", 1, KEY, "m", lambda: ""))
    assert not row.ok
    assert row.observed.startswith("503 in 0.1 s, Retry-After 5")
