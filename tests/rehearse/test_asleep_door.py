"""The door of an elastic stack while no group runs, run by a real nginx with the generated
config: asleep answers and the wake flag, then 200 once an upstream answers behind the same port
(the rehearsal runs the same rows against real vLLM)."""

from __future__ import annotations

import json
from pathlib import Path

from components import watch
from components.manifests import gatekeeper
from components.manifests.asleep import ASLEEP_HEALTH_PAGE, ASLEEP_PAGE, Asleep
from tests import door_harness
from tests.components.test_watch import _filter_matches, _record
from tests.rehearse.test_gatekeeper_run import KEY, LIMITS
from tools.rehearse.front_door import asleep_checks, gatekeeper_run


class _Serving(door_harness.Upstream):
    """A serving group as the door sees it: /health and a chat answer, nothing else."""

    def do_GET(self) -> None:
        self.answer(200 if self.path == "/health" else 404, b"{}")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        ok = self.path == "/v1/chat/completions"
        self.answer(200 if ok else 404, b'{"choices": [{"message": {"content": "hi"}}]}')


@door_harness.needs_nginx
def test_asleep_door_answers_503_with_retry_after_wakes_and_serves_once_a_group_is_back(
    tmp_path: Path,
) -> None:
    sleeper = asleep_checks.Sleeper(LIMITS, asleep_checks.rehearsal_asleep(431), KEY, "m")
    with door_harness.upstream(_Serving) as port:
        checks = asleep_checks.door_sleep_checks(
            gatekeeper_run.find_nginx(), sleeper, port, tmp_path, lambda _line: None
        )
    assert [c.name for c in checks] == [
        "asleep: model request",
        "asleep: /health",
        "wake signal",
        "awake: upstream back",
    ]
    assert all(c.ok for c in checks), [c.observed for c in checks if not c.ok]
    assert "Retry-After 431" in checks[0].observed
    # The asleep answers are marked in the access log (the 5xx alarm leaves them out).
    lines = (tmp_path / "run" / "access.log").read_text().split()
    entries = [json.loads(line) for line in lines]
    asleep = [e for e in entries if e["asleep"] == 1]
    assert {e["status"] for e in asleep} == {503}
    assert all(e["asleep"] == 0 for e in entries if e["status"] != 503)
    # The not-waking alarm's filter counts the asleep model request, not the asleep /health.
    pattern = watch.asleep_filter_pattern()
    counted = [json.loads(line)["page"] for line in lines if _matches(pattern, line)]
    assert counted == [ASLEEP_PAGE]
    assert any(e["page"] == ASLEEP_HEALTH_PAGE and e["asleep"] == 1 for e in entries)


def _matches(pattern: str, line: str) -> bool:
    return _filter_matches(pattern, _record(line, gatekeeper.CONTAINER))


@door_harness.needs_nginx
def test_a_wake_flag_that_does_not_fall_fails_its_row(tmp_path: Path) -> None:
    """A door whose flag outlasts the row: the row that expects it to fall says so."""
    sleeper = asleep_checks.Sleeper(LIMITS, Asleep(wake_seconds=60, signal_seconds=600), KEY, "m")
    with door_harness.upstream(_Serving) as port:
        checks = asleep_checks.door_sleep_checks(
            gatekeeper_run.find_nginx(), sleeper, port, tmp_path, lambda _line: None
        )
    signal = next(c for c in checks if c.name == "wake signal")
    assert not signal.ok
    assert signal.observed == "0, 0, 1, 1"
