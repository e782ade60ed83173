"""The chat page's browser rows, against the real gatekeeper config in front of the OpenAI stub
(against real vLLM in `make rehearse`): they pass on the page as shipped, and the cut-off row
fails on a page that drops `finish_reason: "length"` silently."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from components.manifests import chat
from components.manifests.gatekeeper import GatekeeperLimits
from tests import builders, door_harness
from tests.fakes.openai_stub import StubConfig, StubServer
from tools.rehearse.front_door import chat_page, gatekeeper_run
from tools.rehearse.group.ranks import free_port
from tools.rehearse.group.workspace import RehearsalError, poll

LIMITS = builders.gatekeeper_limits(
    max_request_bytes=64 * 1024, client_burst=10, client_concurrent_requests=2
)
KEY = "k" * 48
PAGE = chat.ChatPage(model="m", max_reply_tokens=128, max_model_len=2048)


def _missing() -> str | None:
    try:
        chat_page.find_browser()
        gatekeeper_run.find_nginx()
    except RehearsalError as error:
        return str(error)
    return None


needs_browser = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def test_missing_browser_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chat_page.shutil, "which", lambda _name: None)
    monkeypatch.setattr(chat_page.Path, "exists", lambda _self: False)
    with pytest.raises(RehearsalError, match="apt-get install -y chromium chromium-driver"):
        chat_page.find_browser()


def test_the_mutant_changes_exactly_the_note_condition() -> None:
    files = chat.files(PAGE)
    mutant = chat_page.mutant_files(files)
    assert set(mutant) == set(files)
    changed = [name for name in files if files[name] != mutant[name]]
    assert changed == ["chat-app.js"]
    assert mutant["chat-app.js"].count(chat_page.NOTE_MUTANT) == 1
    assert chat_page.NOTE_CONDITION not in mutant["chat-app.js"]


def _door(
    tmp: Path, upstream: int, files: Mapping[str, str], limits: GatekeeperLimits = LIMITS
) -> AbstractContextManager[gatekeeper_run.Gate]:
    return door_harness.door(limits, KEY, upstream, tmp, page_files=files)


@contextmanager
def _session(
    tmp: Path, upstream: int, files: Mapping[str, str], limits: GatekeeperLimits = LIMITS
) -> Iterator[chat_page.ChatSession]:
    """The page behind a gatekeeper in front of `upstream`, opened with the key in a browser."""
    with (
        _door(tmp / "page", upstream, files, limits) as door,
        chat_page.browser_session() as driver,
    ):
        session = chat_page.ChatSession(driver, door.base_url, tmp, [])
        session.open(KEY)
        yield session


@needs_browser
def test_the_page_rows_pass_and_the_cut_off_mutant_is_caught(tmp_path: Path) -> None:
    # 20 ms a token: a 64-token reply streams for over a second, long enough to watch.
    with StubServer(StubConfig(api_key=KEY, model="m", seconds_per_token=0.02)) as stub:
        upstream = int(stub.root_url.rsplit(":", 1)[1])
        files = chat.files(PAGE)
        with _door(tmp_path / "page", upstream, files) as door:
            checks = chat_page.chat_checks(door, KEY, PAGE.max_model_len, tmp_path / "shots")
        failed = [c for c in checks if not c.ok]
        assert not failed, failed
        assert [c.name for c in checks] == [name for name, _ in _rows()[:-1]]
        mutant = chat_page.mutant_check(
            lambda f: _door(tmp_path / "mutant", upstream, f), files, KEY, tmp_path / "shots"
        )
    assert mutant.ok, mutant
    assert mutant.observed.startswith("row failed: finish length")
    shots = sorted(p.name for p in (tmp_path / "shots").iterdir())
    assert shots == [
        "chat-cut-off.png", "chat-loaded.png", "chat-mutant.png", "chat-new-chat.png",
        "chat-phone.png", "chat-streamed.png", "chat-streaming.png", "chat-wrong-key.png",
    ]  # fmt: skip
    # What the page sent: the typed limit, a stream with usage, the whole conversation.
    cut = next(r for r in stub.requests if r["max_tokens"] == chat_page.CUT_LIMIT)
    assert cut["stream"] is True and cut["stream_options"] == {"include_usage": True}
    assert [m["role"] for m in cut["messages"]] == ["user", "assistant", "user"]


@needs_browser
def test_a_reply_that_ends_its_turn_at_once_is_asked_again_and_fails_the_stream_row(
    tmp_path: Path,
) -> None:
    # The model ends its turn after one token every time: nothing streams, the row asks again
    # up to its limit and fails rather than passing on a reply that says nothing.
    config = StubConfig(api_key=KEY, model="m", seconds_per_token=0.02, stop_at=1)
    with StubServer(config) as stub:
        upstream = int(stub.root_url.rsplit(":", 1)[1])
        with _session(tmp_path, upstream, chat.files(PAGE)) as session:
            check = chat_page.stream_check(session)
    assert not check.ok
    assert check.observed.endswith(f"asked {chat_page.CUT_ATTEMPTS} time(s)")
    assert len(stub.requests) == chat_page.CUT_ATTEMPTS


def _rows() -> tuple[tuple[str, str], ...]:
    from tools.rehearse.cli import CHAT_NOT_REACHED

    return CHAT_NOT_REACHED


@needs_browser
def test_the_page_warns_before_the_context_fills_and_reads_the_front_doors_refusals(
    tmp_path: Path,
) -> None:
    small = chat.ChatPage(model="m", max_reply_tokens=100, max_model_len=200)
    # One request a minute and a burst of one: the third request in a row meets the limit.
    strict = builders.gatekeeper_limits(
        max_request_bytes=512, client_requests_per_minute=1, client_burst=1
    )
    with StubServer(StubConfig(api_key=KEY, model="m", seconds_per_token=0.001)) as stub:
        upstream = int(stub.root_url.rsplit(":", 1)[1])
        with _session(tmp_path, upstream, chat.files(small), strict) as session:
            session.ask("Hi.", 100)
            session.wait_reply()
            # 3 prompt "tokens" (the stub counts characters) + 100: another 100 would not fit.
            assert session.notice().startswith(
                "This conversation has used 103 of the model's 200 tokens of context: another "
                "100-token reply will not fit."
            )
            session.ask("And more?", 100)
            assert session.notice().startswith("This conversation has used 103 of the model's")
            assert len(stub.requests) == 1
            session.click("new-chat")
            # Fits the context (~140 tokens + 20), not the gatekeeper's 512-byte body limit.
            session.ask("x" * 560, 20)
            assert _notice(session).startswith("The request is too long for the endpoint (413).")
            session.ask("Again?", 20)
            session.wait_reply()
            session.ask("Once more?", 20)
            assert _notice(session).startswith("Slow down: too many requests from this address")
    # No group behind the gatekeeper: it is starting, or asleep.
    with _session(tmp_path / "gone", free_port(), chat.files(small), strict) as session:
        session.ask("Anyone?", 50)
        assert _notice(session) == (
            "The model is starting, restarting or asleep (503); a stack that scales to zero "
            "wakes in a few minutes. Retry in 5 s."
        )


def _notice(session: chat_page.ChatSession) -> str:
    """The page's notice once it shows one (10 s at most), or ""."""
    return poll(session.notice, bool, 10)


@needs_browser
def test_stop_ends_the_stream_and_keeps_what_came(tmp_path: Path) -> None:
    with StubServer(StubConfig(api_key=KEY, model="m", seconds_per_token=0.05)) as stub:
        upstream = int(stub.root_url.rsplit(":", 1)[1])
        with _session(tmp_path, upstream, chat.files(PAGE)) as session:
            session.ask("A long one, please.", 128)
            poll(session.last_reply, lambda r: bool(r and r["content"]), 10, 0.01)
            session.click("stop")
            reply = session.wait_reply()
    assert reply["state"] == "stopped" and reply["finish"] == ""
    shown = int(reply["note"].removeprefix("Stopped after ").split(" ")[0])
    assert 1 <= shown < 128 and reply["note"] == f"Stopped after {shown} tokens."
    assert reply["content"].split() == [f"tok{i}" for i in range(shown)]
