"""The drain rows' verdicts (tools/rehearse/changes/drain_step.py `_rows`): each fails on what it
exists to catch, from recorded times rather than a running group."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tools.rehearse.changes import drain_step
from tools.rehearse.changes.balancer import Target
from tools.rehearse.changes.drain_step import READY_PERIOD_S, REHEARSAL_DRAIN, Stopped, Stream

T0 = 100.0
QUIT = T0 + REHEARSAL_DRAIN.accept_s + READY_PERIOD_S
GOOD = Stream(
    status=200,
    first_at=T0 - 0.5,
    done_at=QUIT + 2,
    chunks=40,
    finish_reason="length",
    finished=True,
)

CUT = replace(GOOD, chunks=12, finish_reason=None, error="error event: engine dead")


def _verdicts(
    stream: Stream = GOOD,
    statuses: list[tuple[float, int]] | None = None,
    served: list[str] | None = None,
    leader_at: float = QUIT + 4,
) -> dict[str, bool | None]:
    target = Target("A", 1, terminating=True, healthy=False, unhealthy_at=T0 + 0.5)
    statuses = [(T0 + 0.2, 200), (T0 + 1.0, 200), (T0 + 1.4, 200)] if statuses is None else statuses
    served = ["A", "B", "B"] if served is None else served
    stopped = Stopped(
        at={"gatekeeper": QUIT + 2.5, "vllm leader": leader_at, "vllm worker": leader_at + 1}
    )
    rows = drain_step._rows(stream, statuses, served, stopped, target, T0)
    return {row.name: row.ok for row in rows}


def test_a_stream_that_outlives_the_quit_and_new_requests_on_b_pass() -> None:
    assert set(_verdicts().values()) == {True}


@pytest.mark.parametrize(
    ("changes", "row"),
    [
        # A stream done before nginx quit shows no drain; one ended by an error event fails.
        ({"stream": replace(GOOD, done_at=QUIT - 0.1)}, "drain: stream from A"),
        ({"stream": CUT}, "drain: stream from A"),
        # A 5xx, or a request on A after it turned unhealthy.
        ({"statuses": [(T0 + 0.2, 200), (T0 + 1.0, 503), (T0 + 1.4, 200)]}, "drain: new requests"),
        ({"served": ["A", "B", "A"]}, "drain: new requests"),
        # vLLM stopped before its stream ended (at +2).
        ({"leader_at": QUIT + 1}, "drain: stop order"),
    ],
)
def test_each_row_fails_on_what_it_exists_to_catch(changes: dict[str, Any], row: str) -> None:
    assert _verdicts(**changes)[row] is False
