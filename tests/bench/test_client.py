"""Tests for `tools.bench.client`: stream timing, reply verdicts, rounds sent at once."""

from __future__ import annotations

from types import SimpleNamespace

import openai
import pytest

from tests.bench.support import StubFactory
from tests.fakes.openai_stub import STUB_API_KEY, STUB_MODEL
from tools.bench.args import parse_args
from tools.bench.client import RequestRecord, classify_reply, consume_stream, run_round


def test_consume_stream_times_from_first_content_not_the_role_chunk() -> None:
    def chunk(content: str | None, finish: str | None = None) -> SimpleNamespace:
        delta = SimpleNamespace(content=content)
        return SimpleNamespace(
            choices=[SimpleNamespace(delta=delta, finish_reason=finish)], usage=None
        )

    usage = SimpleNamespace(choices=[], usage=SimpleNamespace(completion_tokens=5))
    # Five tokens in three content chunks: usage, not the chunk count, is the token count.
    chunks = [chunk(""), chunk("a"), chunk("b c"), chunk("d e", "length"), usage]
    ticks = iter([1.0, 2.0, 3.0, 4.0, 4.5])
    record = RequestRecord(concurrency=1, round=1, stream=1, requested=5, started=0.5)
    consume_stream(chunks, record, clock=lambda: next(ticks))
    record.ended = 4.5
    assert (record.first_token_at, record.last_token_at) == (2.0, 4.0)
    assert record.content_chunks == 3
    assert (record.completion_tokens, record.token_source) == (5, "usage")
    assert record.ttft_s == 1.5
    assert record.decode_tokens_per_s == 2.0  # (5 - 1) tokens over 4.0 - 2.0 s
    assert record.ms_per_token == 500.0
    assert record.total_s == 4.0
    assert record.verdict.status == "ok"


@pytest.mark.parametrize(
    ("tokens", "finish", "source", "error", "status", "ok"),
    [
        (100, "length", "usage", None, "ok", True),
        (100, "stop", "usage", None, "ok", True),
        (60, "length", "usage", None, "cut_off", False),
        (60, "stop", "usage", None, "short", False),
        (60, "stop", "chunks", None, "short", False),
        (101, "length", "usage", None, "long", False),
        (100, None, "usage", None, "unfinished", False),
        (100, "abort", "usage", None, "unexpected_finish", False),
        (0, None, "chunks", "connection failed", "failed", False),
    ],
)
def test_classify_reply(
    tokens: int, finish: str | None, source: str, error: str | None, status: str, ok: bool
) -> None:
    verdict = classify_reply(100, tokens, finish, source, error)
    assert (verdict.status, verdict.ok) == (status, ok)
    if not ok:
        assert verdict.note.split(":")[0].isupper(), "problems must be loud"
    if source == "chunks" and error is None:
        assert "counted from content chunks" in verdict.note


def test_length_at_requested_count_is_labelled_expected() -> None:
    verdict = classify_reply(100, 100, "length")
    assert verdict.note == (
        'finish_reason "length" at the requested 100 tokens: the expected end of a fixed-length run'
    )


def test_a_round_sends_its_requests_at_once(stub: StubFactory) -> None:
    """The stub holds every first token until two streams are open: only a concurrent round passes.

    Nothing is timed: a client that sent the round's requests one after another would leave the
    stub with one stream open at a time (`peak_in_flight` 1) after its barrier gave up.
    """
    server = stub(together=2)
    args = parse_args(["--endpoint", server.base_url, "--tokens", "3", "--concurrency", "2"])
    client = openai.OpenAI(base_url=server.base_url, api_key=STUB_API_KEY, max_retries=0)
    try:
        first, second = (run_round(client, STUB_MODEL, args, 2, index) for index in (1, 2))
    finally:
        client.close()
    assert server.peak_in_flight == 2
    assert server.together_broken is False
    for result in (first, second):
        assert [r.verdict.status for r in result.records] == ["ok", "ok"]
        assert [r.stream for r in result.records] == [1, 2]
