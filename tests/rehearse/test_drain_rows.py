"""The drain rows' verdicts (tools/rehearse/changes/drain_step.py `_rows`): each fails on what it
exists to catch, from recorded times rather than a running group."""

from __future__ import annotations

from dataclasses import replace

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


def test_a_stream_done_before_nginx_quit_shows_no_drain() -> None:
    early = replace(GOOD, done_at=QUIT - 0.1)
    assert _verdicts(early)["drain: stream from A"] is False


def test_a_stream_ended_by_an_error_event_fails() -> None:
    cut = replace(GOOD, chunks=12, finish_reason=None, error="error event: engine dead")
    assert _verdicts(cut)["drain: stream from A"] is False


def test_a_5xx_or_a_request_on_a_after_it_turned_unhealthy_fails() -> None:
    assert (
        _verdicts(statuses=[(T0 + 0.2, 200), (T0 + 1.0, 503), (T0 + 1.4, 200)])[
            "drain: new requests"
        ]
        is False
    )
    assert _verdicts(served=["A", "B", "A"])["drain: new requests"] is False


def test_vllm_stopped_before_its_stream_ended_fails_the_order() -> None:
    assert _verdicts(leader_at=QUIT + 1)["drain: stop order"] is False  # the stream ends at +2
