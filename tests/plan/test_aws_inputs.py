"""Values AWS would refuse halfway through `pulumi up` are refused at plan time, with the exact
line the user sees, and the fix that line suggests is itself accepted (`infra.plan.aws_inputs`).

The issue's own examples, typed as a new user would (a line break in `owner`, `downloadMBps`
0.0001, zone us-west-2z), are test_bad_input's cases, through both readers."""

from __future__ import annotations

import pytest

from infra.adapters.cli import main
from infra.plan import aws_inputs, catalog, prices

# (--set value, exact error line, --set value of the fix it suggests)
REFUSED = [
    (
        "downloadMBps=inf",
        "error: `downloadMBps` inf MB/s is above 625 MB/s, the most an m7g.2xlarge moves "
        "through an internet gateway (EC2 caps that at 5 Gbit/s below 32 vCPUs, else at half the "
        "instance's bandwidth); use 625 or less, such as 140",
        "downloadMBps=625",
    ),
    (
        "controlPlaneZone=us-west-2q",
        "error: `controlPlaneZone` us-west-2q is not a zone of us-west-2, whose zones are "
        "us-west-2a to us-west-2d; use one of them, such as us-west-2b",
        "controlPlaneZone=us-west-2b",
    ),
    (
        "owner=ml platform\r2",
        "error: `owner` 'ml platform\\r2' holds '\\r'; it becomes the tag `owner`, whose value is "
        "at most 256 letters, digits, spaces and _ . : / + - @; use 'ml platform-2'",
        "owner=ml platform-2",
    ),
    (
        "owner=équipe<ml>",
        "error: `owner` 'équipe<ml>' holds '<'; it becomes the tag `owner`, whose value is at "
        "most 256 letters, digits, spaces and _ . : / + - @; use 'équipe-ml'",
        "owner=équipe-ml",
    ),
    (
        "tags={'aws:team': ml}",
        "error: `tags` key 'aws:team' starts with aws:, a prefix AWS reserves for itself; "
        "rename it, such as 'team'",
        "tags={team: ml}",
    ),
    (
        "tags={'aws:owner': ml}",
        "error: `tags` key 'aws:owner' starts with aws:, a prefix AWS reserves for itself; "
        "rename it, such as 'owner-2'",
        "tags={owner-2: ml}",
    ),
    (
        "tags={'a#b': x, a-b: y}",
        "error: `tags` key 'a#b' holds '#'; a tag key is 1 to 128 letters, digits, spaces and "
        "_ . : / + - @; rename it, such as 'a-b-2'",
        "tags={a-b-2: x, a-b: y}",
    ),
    (
        "tags={'cost center!': ml}",
        "error: `tags` key 'cost center!' holds '!'; a tag key is 1 to 128 letters, digits, "
        "spaces and _ . : / + - @; rename it, such as 'cost center'",
        "tags={cost center: ml}",
    ),
    (
        'tags={team: "ml\\u0000x"}',
        "error: `tags` value of 'team' holds '\\x00'; a tag value is at most 256 letters, "
        "digits, spaces and _ . : / + - @; use 'ml-x'",
        "tags={team: ml-x}",
    ),
]


@pytest.mark.parametrize(("setting", "message", "fix"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_a_fix_that_is_accepted(
    setting: str, message: str, fix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--stack", "dev", "--set", setting]) == 2
    assert capsys.readouterr().err == message + "\n"
    assert main(["--stack", "dev", "--set", fix, "--json"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    "setting",
    ["owner=ml-platform@example.com", "owner=Équipe ML/Inférence:2027+", "tags={a.b/c:d: e_f}"],
)
def test_every_character_aws_allows_is_accepted(
    setting: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--stack", "dev", "--set", setting, "--json"]) == 0, capsys.readouterr().err


def test_every_catalogued_region_has_zone_letters_from_a() -> None:
    assert set(aws_inputs.ZONE_LETTERS) == set(prices.KNOWN_REGIONS)
    for region, letters in aws_inputs.ZONE_LETTERS.items():
        assert letters.startswith("abc") and list(letters) == sorted(letters), region


@pytest.mark.parametrize(
    ("instance_type", "mbps"),
    [("m7g.2xlarge", 625.0), ("m6g.4xlarge", 625.0), ("m7g.8xlarge", 937.5), ("m6g.8xlarge", 750)],
)
def test_internet_bound_per_type(instance_type: str, mbps: float) -> None:
    # 5 Gbit/s below 32 vCPUs; from 32, half the baseline (15,000 or 12,000 Mbit/s) when larger.
    assert aws_inputs.internet_download_mbps(catalog.INSTANCE_TYPES[instance_type]) == mbps
