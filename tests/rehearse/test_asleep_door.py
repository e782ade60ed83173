"""The door of an elastic stack while no group runs, run by a real nginx with the generated
config (`components.manifests.asleep`) whose upstream port has nothing behind it, as the leaders'
Service has no endpoints while no group runs: asleep answers and the wake flag KEDA's metrics-api
trigger reads; then 200 once a group answers behind the same port, as kube-proxy forwards once a
group is ready."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from components import watch
from components.manifests import gatekeeper
from components.manifests.asleep import (
    ASLEEP_HEALTH_PAGE,
    ASLEEP_PAGE,
    WAKE_FIELD,
    WAKE_PATH,
    Asleep,
)
from tests import door_harness
from tests.components.test_watch import _filter_matches, _record
from tests.rehearse.test_gatekeeper_run import KEY, LIMITS
from tools.rehearse.front_door import gatekeeper_run
from tools.rehearse.group.ranks import free_port
from tools.rehearse.group.workspace import poll

#: The flag lasts this long here, so the test can see it fall (the plan's is longer than KEDA's
#: polling interval).
SIGNAL_SECONDS = 2


class _Serving(door_harness.Upstream):
    """A serving group as the door sees it: /health and a chat answer, nothing else; a chat
    without the engine key refused, as vLLM refuses it."""

    def do_GET(self) -> None:
        self.answer(200 if self.path == "/health" else 404, b"{}")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            self.answer(401, b"{}")
            return
        ok = self.path == "/v1/chat/completions"
        self.answer(200 if ok else 404, b'{"choices": [{"message": {"content": "hi"}}]}')


def _wake(door: gatekeeper_run.Gate) -> object:
    try:
        return json.loads(gatekeeper_run.request(door.metrics_url, "GET", WAKE_PATH).body)[
            WAKE_FIELD
        ]
    except (ValueError, KeyError, OSError):
        return "no answer"


def _wake_within(door: gatekeeper_run.Gate) -> object:
    """The flag, polled for a second until it is 1: the subrequest that raises it is detached, so
    it may land a moment after the answer (KEDA polls every few tens of seconds)."""
    return poll(lambda: _wake(door), lambda found: found == 1, 1.0)


@door_harness.needs_nginx
@pytest.mark.parametrize(
    # A flag that outlasts the wait is still up after it: the flag's seconds are the config's.
    ("signal_seconds", "flag_after"),
    [(SIGNAL_SECONDS, 0), (600, 1)],
)
def test_asleep_door_answers_503_with_retry_after_wakes_and_serves_once_a_group_is_back(
    tmp_path: Path, signal_seconds: int, flag_after: int
) -> None:
    upstream = free_port()
    asleep = Asleep(wake_seconds=431, signal_seconds=signal_seconds)
    chat = gatekeeper_run.chat_body("m", max_tokens=2)
    with door_harness.door(LIMITS, KEY, upstream, tmp_path, asleep=asleep) as door:
        health = gatekeeper_run.request(door.base_url, "GET", "/health")
        models = gatekeeper_run.request(door.base_url, "GET", "/v1/models", None, KEY)
        flags = [_wake(door)]
        unkeyed = gatekeeper_run.request(door.base_url, "POST", "/v1/chat/completions", chat)
        flags.append(_wake_within(door))
        reply = gatekeeper_run.request(door.base_url, "POST", "/v1/chat/completions", chat, KEY)
        flags.append(_wake_within(door))
        time.sleep(SIGNAL_SECONDS + 1)
        flags.append(_wake(door))
        with door_harness.upstream(_Serving, upstream):
            back = gatekeeper_run.request(door.base_url, "POST", "/v1/chat/completions", chat, KEY)
            health_back = gatekeeper_run.request(door.base_url, "GET", "/health")
    # The model request: 503, Retry-After the wake time, an OpenAI error body saying it.
    error = json.loads(reply.body)["error"]
    assert (reply.status, reply.headers["Retry-After"]) == (503, "431")
    assert error["type"] == "service_unavailable_error"
    assert "asleep" in error["message"] and "within 431 s" in error["message"]
    assert unkeyed.status == 401
    # /health is asleep; the door itself answers /v1/models.
    assert (health.status, json.loads(health.body)["status"], models.status) == (503, "asleep", 200)
    # The flag: 0 after /health and an unkeyed request, 1 after the model request, and 0 again
    # once its seconds pass.
    assert flags == [0, 0, 1, flag_after]
    # Awake: the upstream back behind the same port, the engine key passed.
    assert back.status == health_back.status == 200
    # The asleep answers are marked in the access log (the 5xx alarm leaves them out).
    lines = (tmp_path / "run" / "access.log").read_text().split()
    entries = [json.loads(line) for line in lines]
    asleep_entries = [e for e in entries if e["asleep"] == 1]
    assert {e["status"] for e in asleep_entries} == {503}
    assert all(e["asleep"] == 0 for e in entries if e["status"] != 503)
    # The not-waking alarm's filter counts the asleep model request, not the asleep /health.
    pattern = watch.asleep_filter_pattern()
    counted = [json.loads(line)["page"] for line in lines if _matches(pattern, line)]
    assert counted == [ASLEEP_PAGE]
    assert any(e["page"] == ASLEEP_HEALTH_PAGE and e["asleep"] == 1 for e in entries)


def _matches(pattern: str, line: str) -> bool:
    return _filter_matches(pattern, _record(line, gatekeeper.CONTAINER))
