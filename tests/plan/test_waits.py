"""The bounds that wait: a long context's hour-long bounds are on the first screen with the key
that drives them and the value that keeps them practical; the client timeout is the plan's."""

from __future__ import annotations

import openai._constants
import pytest

from infra.adapters.cli import main
from infra.plan import waits
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests import builders
from tests.plan.test_verdict_and_advice import TODAY, _json

LONG = (
    "`maxModelLen` 131,072 makes the bounds that wait above 20 min: first byte within 17,795 s, "
    "reply timeout 18,091 s, drain grace and the autoscaler's graceful termination 18,159 s; set "
    "`maxModelLen` to 9,216 or less to keep them within 20 min; else every client must wait "
    "17,855 s (the client timeout row)"
)


def _brief(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main([*argv, "--brief"], today=TODAY) == 0
    return capsys.readouterr().out.splitlines()


def test_a_long_context_warns_on_the_first_screen(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = _brief(capsys)
    long = _brief(capsys, "--set", "maxModelLen=131072")
    assert f"warning: {LONG}" in long
    assert not [line for line in shipped if line.startswith("warning: ")]
    count = [int(line.split()[1].rstrip(",")) for x in (shipped, long) for line in x[-1:]]
    assert count[1] == count[0] + 1, (shipped[-1], long[-1])
    data = _json(capsys, "--set", "maxModelLen=131072")
    assert data["warnings"][0] == LONG
    assert data["client_timeout_s"] == {"stream": 17_855, "whole": 18_151}


def test_the_offered_value_is_the_largest_that_keeps_the_bounds_practical() -> None:
    def grace(length: int) -> int:
        return plan(load_stack("dev", {"maxModelLen": length}), "dev").drain.grace_s

    assert grace(9216) <= waits.PRACTICAL_BOUND_S < grace(9216 + 1024)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        # The context the cap lets the planner choose.
        (
            {"maxContextCap": 16384},
            "`maxContextCap` 16,384 makes the bounds that wait above 20 min: first byte within "
            "1,442 s, reply timeout 1,738 s, drain grace and the autoscaler's graceful termination "
            "1,806 s; set `maxContextCap` to 9,216 or less to keep them within 20 min; else every "
            "client must wait 1,502 s (the client timeout row)",
        ),
        # A reply whose decode outweighs the first byte.
        (
            {"maxReplyTokens": 8000},
            "`maxReplyTokens` 8,000 makes the bounds that wait above 20 min: first byte within "
            "729 s, reply timeout 3,040 s, drain grace and the autoscaler's graceful termination "
            "3,108 s; set `maxReplyTokens` to 1,395 or less to keep them within 20 min; else "
            "every client must wait 789 s (the client timeout row)",
        ),
        # The stack's own first-byte bound: every other bound is it plus fixed seconds.
        (
            {"firstByteTimeoutSeconds": 3000},
            "`firstByteTimeoutSeconds` 3,000 makes the bounds that wait above 20 min: first byte "
            "within 3,000 s, reply timeout 3,296 s, drain grace and the autoscaler's graceful "
            "termination 3,364 s; set `firstByteTimeoutSeconds` to 836 or less to keep them "
            "within 20 min; else every client must wait 3,060 s (the client timeout row)",
        ),
    ],
)
def test_the_warning_names_the_key_that_drives_the_bounds(
    overrides: dict[str, object], message: str
) -> None:
    cfg = load_stack("dev", overrides)
    assert waits.warning(cfg, plan(cfg, "dev"), "dev") == message


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_wait_within_the_bound_and_name_their_client_timeout(stack: str) -> None:
    cfg, p = builders.planned(stack)
    assert waits.warning(cfg, p, stack) is None
    need = waits.client_timeouts(p)
    assert need.stream_s == p.liveness.first_byte_s + waits.CLIENT_MARGIN_S
    assert need.whole_s == p.front_door.reply_timeout_seconds + waits.CLIENT_MARGIN_S
    row = waits.describe_client(p)
    assert row.startswith(f"{need.stream_s} s between bytes of a streamed reply (first byte ")
    assert f"{need.whole_s} s for a whole reply" in row
    # dev and prod alike outwait the OpenAI client's default: the row says to pass `timeout=`.
    assert "OpenAI Python client's default 600 s (openai 3.57.0 `DEFAULT_TIMEOUT`): pass" in row


def test_the_openai_default_is_the_pinned_clients() -> None:
    """The figure the plan compares with is the installed client's own (requirements.txt pins
    openai 3.57.0): its default timeout, read timeout included."""
    default = openai._constants.DEFAULT_TIMEOUT
    assert openai.__version__ == "3.57.0"
    assert default.read == waits.OPENAI_DEFAULT_TIMEOUT_S
