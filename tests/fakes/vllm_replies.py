"""What real vLLM 0.31 answered, as recorded by `tests.fakes.record_vllm`
(tests/fixtures/vllm/replies-v0.31.json), and the shape of a reply, by which a fake's reply is
held to the recording. Test infrastructure only.

The fakes copy a recorded reply and set only the values they own (ids, model, content, finish
reason, token counts): `put` refuses a key the recording does not have, so a field vLLM renames
fails the fake instead of being imitated by hand.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"
RECORDING = FIXTURES / "replies-v0.31.json"
#: The metric families vLLM exported in `make rehearse` (tools/rehearse/measure/metrics_capture.py).
METRICS = FIXTURES / "metrics-v0.31.json"
#: The end of an event stream, a line of its own (not JSON).
DONE = "[DONE]"


@functools.cache
def recording() -> dict[str, Any]:
    return json.loads(RECORDING.read_text())


def reply(name: str) -> dict[str, Any]:
    """A copy of one recorded reply: path, request, status, headers and body or stream."""
    return copy.deepcopy(recording()["replies"][name])


def put(obj: dict[str, Any], key: str, value: Any) -> None:
    """Set a value the recording has a key for; a key it lacks is a drift, not a default."""
    if key not in obj:
        raise KeyError(f"{key!r} is not in the recorded reply ({sorted(obj)}); refresh the fake")
    obj[key] = value


def frame() -> tuple[str, str]:
    """The event framing vLLM writes: (what starts an event, what ends it)."""
    # The field name, its colon and an optional space; then the payload and a run of newlines.
    first = re.match(r"([^:\n]*: ?)[^\n]*(\n+)", recording()["replies"]["chat_streamed"]["stream"])
    assert first is not None, f"{RECORDING.name}: the stream does not start with an event"
    return first[1], first[2]


def events(stream: str) -> list[str]:
    """The payloads of an event stream, in order; raises on a framing other than vLLM's."""
    prefix, ending = frame()
    if not stream.endswith(ending):
        raise ValueError(f"the stream does not end with {ending!r}: {stream[-40:]!r}")
    payloads = []
    for event in stream[: -len(ending)].split(ending):
        if not event.startswith(prefix):
            raise ValueError(f"an event does not start with {prefix!r}: {event[:40]!r}")
        payloads.append(event[len(prefix) :])
    return payloads


def chunks(name: str = "chat_streamed") -> list[dict[str, Any]]:
    """The JSON chunks of a recorded stream, without its end."""
    payloads = events(recording()["replies"][name]["stream"])
    return [json.loads(p) for p in payloads if p != DONE]


def stream_templates() -> dict[str, dict[str, Any]]:
    """The recorded stream's chunks by kind: the first (the role), a token's, the last token's
    (its finish reason set) and the usage chunk (no choices), as vLLM sends them in that order."""
    recorded = chunks()
    role, *rest = recorded
    finish = [c for c in rest if c["choices"] and c["choices"][0]["finish_reason"] is not None]
    usage = [c for c in rest if not c["choices"]]
    tokens = [c for c in rest if c not in finish and c not in usage]
    if len(finish) != 1 or len(usage) != 1 or not tokens:
        raise ValueError(f"{RECORDING.name}: expected a role, token, finish and usage chunk")
    if recorded != [role, *tokens, *finish, *usage]:
        raise ValueError(f"{RECORDING.name}: the recorded chunks are not in that order")
    return {"role": role, "token": tokens[0], "finish": finish[0], "usage": usage[0]}


def encode(payload: dict[str, Any] | str) -> bytes:
    """One event as vLLM frames it (a chunk's JSON, or the stream's end)."""
    prefix, ending = frame()
    # Compact and not ASCII-escaped, as pydantic's `model_dump_json` writes vLLM's chunks.
    compact = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    text = payload if isinstance(payload, str) else compact
    return f"{prefix}{text}{ending}".encode()


def shape(value: Any) -> Any:
    """The keys at each level, in order, and which values are null, objects or lists; leaves'
    values are left out."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        kinds: list[Any] = []
        for item in value:
            if shape(item) not in kinds:
                kinds.append(shape(item))
        return ["list", *kinds]
    return None if value is None else "value"


def stream_shape(stream: str) -> list[Any]:
    """The shapes of a stream's events in order, a run of equal shapes as one (a reply of any
    length has the same shape), and the stream's end."""
    shapes: list[Any] = []
    for payload in events(stream):
        this = DONE if payload == DONE else shape(json.loads(payload))
        if not shapes or shapes[-1] != this:
            shapes.append(this)
    return shapes


@functools.cache
def metric_families() -> dict[str, Any]:
    return json.loads(METRICS.read_text())["families"]


def exposition(values: dict[str, float], labels: dict[str, str]) -> str:
    """A `/metrics` page of the given samples, each under its recorded family's `# TYPE` line
    with exactly the recorded labels; a sample or label vLLM does not export raises."""
    lines = []
    for name, value in values.items():
        family = metric_families().get(name)
        if family is None or name not in family["samples"]:
            raise KeyError(f"vLLM 0.31 exports no sample {name!r} ({METRICS.name})")
        missing = set(family["labels"]) - set(labels)
        if missing:
            raise KeyError(f"{name} has labels {family['labels']}; give {sorted(missing)}")
        pairs = ",".join(f'{key}="{labels[key]}"' for key in family["labels"])
        lines += [f"# TYPE {name} {family['type']}", f"{name}{{{pairs}}} {float(value)!r}"]
    return "\n".join(lines) + "\n"
