"""The plan answers at a glance and advises honestly: the verdict first, `--brief` alone, and
advice that holds when followed."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import shlex

import pytest

from infra.adapters import verdict
from infra.adapters.cli import main
from infra.plan import catalog
from infra.plan.advice import Offer, better_buy

TODAY = dt.date(2026, 11, 30)
#: The field report's settings: vLLM read the weights in the engine container and the KV budget
#: was cut to what its memory guard then saw.
REPORT = ["--set", "weightPrefetch=false", "--set", "kvCacheBytes=400000000"]


def _out(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv), today=TODAY) == 0
    return capsys.readouterr().out


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    return json.loads(_out(capsys, *argv, "--json"))


# -- the verdict ----------------------------------------------------------------------------------


def test_the_default_plan_opens_with_the_verdict_brief_prints_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The committed dev stack and the bootstrap's file still hold their placeholders: the line
    # naming each comes first.
    lines = _out(capsys).splitlines()
    assert lines[0].startswith("PLACEHOLDERS, which `pulumi up` refuses"), lines[0]
    assert lines[1].startswith("PLACEHOLDERS in infra/bootstrap/Pulumi.ci.yaml"), lines[1]
    head = lines[2 : 2 + verdict.MAX_LINES]
    assert head == [
        "dev starts: 2 x m7g.2xlarge, one group of 2 pipeline stages, serving "
        "google/gemma-4-12B-it",
        "context: 8,192 tokens x 10.26 requests at once",
        "decode: 4.24 tokens/s for one stream (calibrated), 36.35 in all at 10 streams, 3.63 "
        "each (modelled)",
        "first token: ~44 s for 1,000 prompt tokens, ~379 s for 8,192 (modelled: 29-70% of an "
        "assumed peak, on vLLM's oneDNN path)",
        "cost: $647.44/month; $6.78 per million output tokens at full load, $58.10 with one stream",
        "cheaper: 1 x m7g.4xlarge, $639.26/month, $4.82 per million tokens; 8,192 tokens x "
        "23.88, 4.24 tokens/s per stream (extrapolated: the low end), first token ~163 s "
        "(--set instanceType=m7g.4xlarge)",
        # The support window, the region's prices, no alarmEmail (every add-on pin is listed
        # for 1.35 by its source, infra/plan/addons.py).
        "warnings: 3, listed at the end",
        "",
    ]
    # `--brief` prints the verdict alone.
    brief = _out(capsys, "--brief")
    assert "\n".join(lines).startswith(brief + "\n")
    assert len(brief.splitlines()) <= 2 + verdict.MAX_LINES  # two placeholder lines, the verdict
    assert "why:" not in brief and "kv cache size" not in brief


def test_brief_refuses_compare_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """And `--json` as argparse refuses any flag it cannot take: test_bad_input.py."""
    assert main(["--brief", "--compare"], today=TODAY) == 2
    assert capsys.readouterr().err == (
        "error: `--brief` is the verdict of one plan; drop --compare\n"
    )


def test_warnings_are_listed_once_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    out = _out(capsys, *REPORT)
    before, listed = out.split("\nwarnings:\n")
    items = [line[4:] for line in listed.splitlines()]
    assert len(items) == 4
    # The what-if that adds a node says so, and what it costs.
    assert items[0].startswith("3 x m7g.2xlarge instead of 2 x m7g.2xlarge")
    assert "too little KV for 2 stages" in items[0] and "/month" in items[0]
    assert f"warnings: {len(items)}, listed at the end" in before.splitlines()
    for item in items:
        assert out.count(item) == 1, item
    assert _json(capsys, *REPORT)["warnings"] == items


def test_the_field_reports_settings_say_to_prefetch_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # After dev's and the bootstrap's placeholder lines.
    brief = _out(capsys, *REPORT, "--set", "maxModelLen=2048", "--brief").splitlines()[2:]
    assert brief[1] == "context: 2,048 tokens x 1.07 requests at once"
    assert brief[5] == (
        "change first: --set weightPrefetch=true --set kvCacheBytes=auto --set maxModelLen=auto: "
        "2 x m7g.2xlarge, $647.44/month, $6.78 per million tokens; 8,192 tokens x 10.26, 4.24 "
        "tokens/s per stream, first token ~379 s; the memory guard then sees 4.50 GiB, not 0.58"
    )
    # Followed, the advice gives what it promised.
    fixed = _json(capsys, *REPORT, *shlex.split(brief[5].split(": ")[1]))
    assert (fixed["nodes"], fixed["max_model_len"], fixed["max_concurrency"]) == (2, 8192, 10.26)
    assert fixed["guard_available_gib"] == 4.5


def test_short_requests_are_as_many_as_the_kv_blocks_hold(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The report's 2,186-token cache holds two 1,000-token requests, not 256 of 8 tokens."""
    out = _out(capsys, *REPORT, "--set", "maxModelLen=2048")
    (row,) = [line for line in out.splitlines() if line.startswith("decode, short requests")]
    assert row.split(None, 3)[3] == (
        "7.85 tokens/s in all at 2 x 1,000 tokens, as many as fit (memory-bound; modelled)"
    )
    limit = _json(capsys, *REPORT, "--set", "maxModelLen=2048")["served"]["limit"]
    assert (limit["sequences"], limit["context"]) == (2, 1000)


# -- advice that holds ---------------------------------------------------------------------------

STACK = Offer("m7g.2xlarge", 2, 8192, 10.69, 4.24, 50, 407, 646.49, 6.77, 58.02)


def _offer(**change: object) -> Offer:
    return dataclasses.replace(STACK, **{"instance_type": "x", **change})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "worse",
    [
        {"context": 4096},
        {"concurrency": 9.9},
        {"one_stream": 4.23},
        {"ttft_1k_s": 51},
        {"ttft_max_s": 408},
    ],
)
def test_cheaper_never_names_a_type_worse_on_the_need(worse: dict[str, object]) -> None:
    cheap = {"usd_per_month": 400.0, "usd_per_million_full": 4.0, "usd_per_million_one": 40.0}
    assert better_buy(STACK, [_offer(**cheap)]) == ("cheaper", _offer(**cheap))
    assert better_buy(STACK, [_offer(**cheap, **worse)]) is None


def test_faster_for_the_same_money() -> None:
    faster = _offer(one_stream=9.9, usd_per_month=646.49, usd_per_million_full=7.5)
    fastest = _offer(instance_type="y", one_stream=11.0, usd_per_month=640.0)
    dearer = _offer(instance_type="z", one_stream=20.0, usd_per_month=700.0)
    assert better_buy(STACK, [faster, dearer]) == ("faster for the same money", faster)
    assert better_buy(STACK, [faster, fastest, dearer]) == ("faster for the same money", fastest)
    # Cheaper per month and per token as well is the stronger claim, and wins.
    cheaper = _offer(
        instance_type="c", usd_per_month=600.0, usd_per_million_full=6.0, usd_per_million_one=54.0
    )
    assert better_buy(STACK, [fastest, cheaper]) == ("cheaper", cheaper)


def test_the_cheaper_line_names_the_cheapest_that_qualifies_per_month_and_per_token() -> None:
    per_token = {"usd_per_million_full": 6.0, "usd_per_million_one": 50.0}
    a = _offer(instance_type="a", usd_per_month=600, **per_token)
    b = _offer(instance_type="b", usd_per_month=500, **per_token)
    assert better_buy(STACK, [a, b]) == ("cheaper", b)
    # r7g.2xlarge against the dev stack before this rule: less a month, more a token.
    dearer = _offer(usd_per_month=474.35, usd_per_million_full=8.88, usd_per_million_one=42.57)
    assert better_buy(STACK, [dearer]) is None


def _advice(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict, str | None]:
    data = _json(capsys, *argv)
    return data, data["verdict"]["advice"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_cheaper_holds_over_the_whole_catalogue(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On every type a stack starts on, a `cheaper:` or `faster for the same money:` line,
    followed with its own `--set`s, never streams slower or costs more per million tokens."""
    named = 0
    for name in catalog.INSTANCE_TYPES:
        argv = ["--stack", stack, "--set", f"instanceType={name}"]
        started = main([*argv, "--json"], today=TODAY) == 0
        out = capsys.readouterr().out
        if not started:
            continue
        data = json.loads(out)
        advice = data["verdict"]["advice"]
        if not advice or advice.startswith("change first"):
            continue
        named += 1
        sets = shlex.split(re.search(r"\((--set [^)]*)\)$", advice).group(1))  # type: ignore[union-attr]
        after, _ = _advice(capsys, *argv, *sets)
        one, one_after = (d["served"]["one"]["aggregate_tokens_per_s"] for d in (data, after))
        assert one_after >= one, (name, advice)
        assert after["max_model_len"] >= data["max_model_len"], (name, advice)
        assert int(after["max_concurrency"]) >= int(data["max_concurrency"]), (name, advice)
        assert after["served"]["ttft_max_len_s"] <= data["served"]["ttft_max_len_s"]
        assert _month(after) <= _month(data) + 1, (name, advice)
        if advice.startswith("cheaper: "):
            assert _month(after) < _month(data), (name, advice)
            assert f"${_month(after):,.2f}/month" in advice, (name, advice)
            key = "usd_per_million_tokens_full_load"
            assert after[key] < data[key], (name, advice)
        else:
            assert advice.startswith("faster for the same money: "), advice
            assert one_after > one, (name, advice)
    assert named >= 4


def _month(data: dict) -> float:
    """The month the verdict prices a stack on: an elastic one's schedule month (else its most
    groups'), system nodes included; a fixed one's as planned."""
    scaled = data["elastic"]
    if scaled is None:
        return data["usd_per_month"]
    return scaled["usd_month_schedule"] or scaled["usd_month_most"]


def test_cheaper_on_an_elastic_stack_prices_the_alternative_as_its_verdict_would(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """prod's verdict costs its schedule month; its `cheaper:` line costs the alternative's
    schedule month under the same keys, which that alternative's own plan then states."""
    data, advice = _advice(capsys, "--stack", "prod")
    assert advice == (
        "cheaper: 3 x m7g.4xlarge, $455.92/month on its schedule, system nodes included, $4.42 "
        "per million tokens; 7,168 tokens x 23.71, 4.24 tokens/s per stream (extrapolated: the low "
        "end), first token ~153 s (--set instanceType=m7g.4xlarge)"
    )
    after, _ = _advice(capsys, "--stack", "prod", "--set", "instanceType=m7g.4xlarge")
    (cost,) = [x for x in after["verdict"]["lines"] if x.startswith("cost:")]
    assert cost.startswith("cost: $455.92/month on its schedule, system nodes included")
    assert _month(after) == 455.92 < _month(data)
    # Without a schedule the basis is the most groups' month, as the verdict's upper figure.
    data, advice = _advice(capsys, "--stack", "dev", "--set", "minGroups=0", "--set", "maxGroups=2")
    assert advice is not None and advice.startswith("cheaper: ")
    assert "/month with 2 groups, system nodes included, " in advice
    lines = " ".join(data["verdict"]["lines"])
    assert f"${data['elastic']['usd_month_most']:,.2f} with 2 groups" in lines


@pytest.mark.parametrize(
    ("stack", "sets"),
    [
        ("prod", ()),
        ("prod", ("--set", "maxGroups=2")),
        ("dev", ("--set", "minGroups=0", "--set", "maxGroups=1")),
    ],
)
def test_an_elastic_stacks_verdict_costs_its_schedule_with_the_system_nodes(
    capsys: pytest.CaptureFixture[str], stack: str, sets: tuple[str, ...]
) -> None:
    data = _json(capsys, "--stack", stack, *sets)
    scaled = data["elastic"]
    assert scaled is not None, f"{stack} {sets} is not elastic"
    (line,) = [x for x in data["verdict"]["lines"] if x.startswith("cost:")]
    fewest, most = scaled["usd_month_fewest"], scaled["usd_month_most"]
    # The month of every group running all month without the system nodes is not the headline.
    assert f"${data['costs']['usd_per_month']:,.2f}/month" not in line
    assert f"${fewest:,.2f} with" in line and f"${most:,.2f} with" in line
    assert "system nodes included" in line
    if scaled["usd_month_schedule"] is not None:
        assert line.startswith(f"cost: ${scaled['usd_month_schedule']:,.2f}/month on its schedule")
