"""Keys that rotate without breaking a client: the key file the gatekeeper reads, run by real
nginx in front of a stub vLLM that accepts only the engine key."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from components.manifests import gatekeeper
from tests import builders, door_harness
from tests.fakes.openai_stub import StubConfig, StubServer
from tools.rehearse.front_door import gatekeeper_run as gate

LIMITS = builders.gatekeeper_limits(
    max_request_bytes=4096,
    client_requests_per_minute=600,
    client_burst=20,
    client_concurrent_requests=2,
    reply_timeout_seconds=30,
)
ENGINE, OLD, NEW = "e" * 48, "o" * 40, "n" * 40
NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)


def test_the_key_file_holds_the_keys_and_the_previous_key_s_end() -> None:
    text = gatekeeper.key_file_text(NEW, OLD, NOW)
    assert json.loads(text) == {
        "keys": [
            {"key": NEW, "until": None},
            {"key": OLD, "until": 1_796_212_800},
        ]
    }
    # Without an end the previous key is not written: it would be accepted for ever.
    assert json.loads(gatekeeper.key_file_text(NEW, OLD, None))["keys"] == [
        {"key": NEW, "until": None}
    ]


def test_an_overlap_ending_inside_a_second_ends_at_the_next_whole_second() -> None:
    # Truncating would end the overlap up to a second before the time the operator gave.
    end = NOW + dt.timedelta(seconds=5, microseconds=1)
    keys = json.loads(gatekeeper.key_file_text(NEW, OLD, end))["keys"]
    assert keys[1]["until"] == int(NOW.timestamp()) + 6
    assert json.loads(gatekeeper.key_file_text(NEW, OLD, NOW))["keys"][1]["until"] == int(
        NOW.timestamp()
    )


@pytest.mark.parametrize("key", ["", "short", "k" * 31 + " ", "<placeholder>" * 3])
def test_an_unusable_key_is_left_out_and_accepts_nothing(key: str) -> None:
    assert json.loads(gatekeeper.key_file_text(key)) == {"keys": []}
    assert gatekeeper.engine_map_entry(key).startswith("# no usable engine key")


def _chat(door: gate.Gate, key: str) -> int:
    message = {"role": "user", "content": "x"}
    body = json.dumps({"model": "m", "stream": True, "max_tokens": 2, "messages": [message]})
    return gate.request(door.base_url, "POST", "/v1/chat/completions", body.encode(), key).status


@pytest.mark.skipif(not gate.nginx_ready(), reason=gate.INSTALL_HINT)
def test_both_keys_serve_during_the_overlap_the_old_one_is_refused_after_and_nothing_reloads(
    tmp_path: Path,
) -> None:
    with StubServer(StubConfig(api_key=ENGINE, model="m", seconds_per_token=0.0)) as stub:
        upstream = int(stub.root_url.rsplit(":", 1)[1])
        with door_harness.door(LIMITS, OLD, upstream, tmp_path, engine_key=ENGINE) as door:
            pid = (tmp_path / "run" / "nginx.pid").read_text()
            assert (_chat(door, OLD), _chat(door, NEW)) == (200, 401)
            now = dt.datetime.now(dt.UTC)
            gate.write_keys(
                tmp_path / "key", gatekeeper.key_file_text(NEW, OLD, now + dt.timedelta(hours=1))
            )
            assert (_chat(door, OLD), _chat(door, NEW)) == (200, 200)
            gate.write_keys(
                tmp_path / "key", gatekeeper.key_file_text(NEW, OLD, now - dt.timedelta(hours=1))
            )
            assert (_chat(door, OLD), _chat(door, NEW)) == (401, 200)
            # The engine key is what vLLM checks (the stub refuses anything else), never sent by
            # a client: as a client key it is refused.
            assert _chat(door, ENGINE) == 401
            (tmp_path / "key" / gatekeeper.KEY_FILE).unlink()
            assert _chat(door, NEW) == 401  # no key file: fail closed
            assert (tmp_path / "run" / "nginx.pid").read_text() == pid
        assert {r["model"] for r in stub.requests} == {"m"}
        assert len(stub.requests) == 4  # the four 200s above
