"""Requests vLLM 0.31 admits and then cannot carry, for real (issue 43): through the gatekeeper
in front of the real vLLM leader, and once straight to vLLM, with the API server's memory read
from /proc before and after. Loopback only, bounded in count (`RUN`).

vLLM registers a request in its output processor before it msgpack-encodes it for the engine
core; a string with an unpaired UTF-16 surrogate or an integer past 64 bits fails that encoding
and the registration is never freed (`components/manifests/gatekeeper.js`, `carriageProblem`).
The rows:

- `leak_rows`: each shape (`leak_shapes`) answered 400 naming its field through the gatekeeper;
  the API server's USS growth over `RUN` of them within `tolerance_mib` of its growth over `RUN`
  valid `max_tokens=1` chats (the control, after a warm-up; short prompts, so the run stays
  short); the same shapes sent straight to vLLM, the door's absence, reported beside them (the
  leak the door stops, so the row can fail);
- `ref_schema_check`: `{"$ref": "#"}`, a schema no text satisfies, answered 400 without
  `Retry-After` (a client error, not the restart's 503), and a valid chat served after it.

USS (the pages only this process maps: Private_Clean + Private_Dirty of
/proc/<pid>/smaps_rollup) rather than RSS, which also moves when the engine core or a worker
touches a shared page of a library.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tools.rehearse.checks import Check
from tools.rehearse.front_door.door_checks import Door, ask, chat, param, shown

#: Requests in each run: the issue's A/B size (+33 MiB per 600 leaking, 1,890-token prompts).
RUN = 600
WARM_UP = 100
#: USS is read after every `SAMPLE_EVERY` requests of the control run; their spread is its noise.
SAMPLE_EVERY = 100
#: The row's floor: one pymalloc/glibc growth step; control runs are often flat to the page.
FLOOR_MIB = 1.0
#: Senders in flight; each request comes from the next of `ADDRESSES`, so no address meets its
#: rate limit (a rehearsal client's burst is 30, 900 a minute).
THREADS = 4
ADDRESSES = tuple(f"127.0.1.{n}" for n in range(1, 41))
#: A long prompt, so each leaked registration holds what the issue's did: 1,800 tokens of the
#: tiny model's 512-token vocabulary ("a " is one), under its 2,048-token context.
PROMPT = "a " * 1800
CHAT = "/v1/chat/completions"


def leak_shapes(model: str) -> list[tuple[str, dict[str, object]]]:
    """Build 1's shapes (issue 43) with the field the gatekeeper must name for each."""
    messages = [{"role": "user", "content": PROMPT}]
    base = {"model": model, "max_tokens": 1, "messages": messages}
    schema = {"type": "integer", "maximum": 10**23}  # 24 digits
    return [
        ("stop", {**base, "stop": ["\ud800"]}),
        ("bad_words", {**base, "bad_words": ["\ud800"]}),
        (
            "response_format",
            {
                **base,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "big", "schema": schema},
                },
            },
        ),
        ("messages", {**base, "messages": [{"role": "user", "content": PROMPT + "\ud800"}]}),
    ]


def uss_mib(smaps_rollup: str) -> float:
    """Private_Clean + Private_Dirty of a /proc/<pid>/smaps_rollup text, in MiB."""
    kib = 0
    for line in smaps_rollup.splitlines():
        name, _, value = line.partition(":")
        if name in ("Private_Clean", "Private_Dirty"):
            kib += int(value.split()[0])
    return kib / 1024


def process_uss(pid: int) -> Callable[[], float]:
    """A reader of `pid`'s USS in MiB. The leader rank's own process is vLLM's API server
    (`vllm serve` serves HTTP in the process the rank starts, which the seccomp wrapper execs;
    its log lines read "(APIServer pid=<that pid>)"); the engine core and the worker are its
    children, and the leak is in the API server's output processor."""
    return lambda: uss_mib(Path(f"/proc/{pid}/smaps_rollup").read_text(encoding="ascii"))


@dataclass(frozen=True)
class Run:
    """USS at the start of a run of requests and after each `SAMPLE_EVERY` of them; statuses."""

    uss: tuple[float, ...]
    statuses: Counter[str]

    @property
    def delta(self) -> float:
        return self.uss[-1] - self.uss[0]

    @property
    def spread(self) -> float:
        return max(self.uss) - min(self.uss)


def tolerance_mib(control: Run) -> float:
    """What the attack's growth may exceed the control's by: twice the control's own spread
    (its largest swing between samples), at least `FLOOR_MIB`. The leak this must catch grows
    by tens of MiB per `RUN` (the issue: +33 MiB)."""
    return max(2 * control.spread, FLOOR_MIB)


def send_run(
    door: Door,
    bodies: list[tuple[str, dict[str, object]]],
    memory: Callable[[], float],
    count: int = RUN,
) -> Run:
    """`count` requests cycling through `bodies` (field, body), `THREADS` at a time; each answer
    tallied as "<status>" or "<status> <named field>" when it names a different one."""
    uss = [memory()]
    statuses: Counter[str] = Counter()

    def one(index: int) -> str:
        field, body = bodies[index % len(bodies)]
        answer = ask(door, "POST", CHAT, body, source=ADDRESSES[index % len(ADDRESSES)])
        named = param(answer.body)
        return str(answer.status) if named in (field, "") else f"{answer.status} {named}"

    with ThreadPoolExecutor(THREADS) as pool:
        for start in range(0, count, SAMPLE_EVERY):
            stop = min(start + SAMPLE_EVERY, count)
            statuses.update(pool.map(one, range(start, stop)))
            uss.append(memory())
    return Run(tuple(uss), statuses)


def leak_rows(door: Door, vllm: Door, memory: Callable[[], float]) -> list[Check]:
    """The control run, the shapes through the gatekeeper, then straight to vLLM (last: what it
    leaks stays for the group's life)."""
    # Short: served 1,800-token prompts take ~0.5 s each on two shared cores.
    valid = [("", chat(door, 1))]
    shapes = leak_shapes(door.model)
    send_run(door, valid, memory, WARM_UP)
    control = send_run(door, valid, memory)
    attack = send_run(door, shapes, memory)
    without = send_run(vllm, shapes, memory)
    return [refused_check(attack), memory_check(control, attack, without)]


def refused_check(attack: Run) -> Check:
    fields = ", ".join(field for field, _ in leak_shapes(""))
    return Check(
        "unencodable bodies",
        f"{RUN} of them (a lone surrogate in {fields}; a 24-digit integer in a schema): "
        "400 naming the field",
        f"{shown(attack.statuses)}",
        set(attack.statuses) == {"400"},
    )


def memory_check(control: Run, attack: Run, without: Run) -> Check:
    """The attack's USS growth against the control's, with the door's absence beside it."""
    tolerance = tolerance_mib(control)
    over = attack.delta - control.delta
    return Check(
        "vLLM memory under them",
        f"API server USS over {RUN} within {tolerance:.1f} MiB of {RUN} valid requests "
        f"(twice the control's spread, at least {FLOOR_MIB:g})",
        f"{attack.delta:+.1f} MiB, control {control.delta:+.1f} MiB (spread "
        f"{control.spread:.1f}); straight to vLLM, no door: {without.delta:+.1f} MiB "
        f"({shown(without.statuses)})",
        over <= tolerance and control.statuses == Counter({"200": RUN}),
    )


def ref_schema_check(door: Door) -> Check:
    """A schema no text satisfies: vLLM fails the request; the client gets 400, no
    `Retry-After`, and the engine serves the next chat."""
    schema = {"type": "json_schema", "json_schema": {"name": "ref", "schema": {"$ref": "#"}}}
    body = chat(door, 4, response_format=schema)
    answer = ask(door, "POST", CHAT, body, source=ADDRESSES[0])
    after = ask(door, "POST", CHAT, {**body, "response_format": {"type": "text"}})
    retry = {k.lower(): v for k, v in answer.headers.items()}.get("retry-after")
    return Check(
        '{"$ref": "#"} schema',
        "400, no Retry-After; the next chat served",
        f"{answer.status} in {answer.seconds:.1f} s, Retry-After {retry or 'none'}; next chat "
        f"{after.status}",
        answer.status == 400 and retry is None and after.status == 200,
    )
