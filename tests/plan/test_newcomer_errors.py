"""Errors a newcomer met on a fresh clone, through `python -m infra.plan`: each exits 2 with one
line, and the fix that line gives is itself accepted by the same stack."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.adapters.cli import main
from infra.plan import prices, stackfile

TODAY = prices.READ_ON


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv, TODAY) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _accepted(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv, TODAY) == 0, capsys.readouterr().err
    capsys.readouterr()


@pytest.mark.parametrize(
    ("stack", "example"), [("dev", "203.0.113.0/32"), ("prod", "203.0.113.0/24")]
)
def test_a_single_range_names_the_list_syntax_with_an_example_the_stack_accepts(
    stack: str, example: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Dev serves plain HTTP to single addresses: a public /24 is refused there, so the example
    is the range's first address alone; with a certificate (prod) the range itself."""
    assert _refused(["--stack", stack, "--set", "allowedCidrs=203.0.113.0/24"], capsys) == (
        "error: `allowedCidrs` must be a list (got '203.0.113.0/24'); write a list, as --set "
        f"'allowedCidrs=[\"{example}\"]' or one `- {example}` line per item under the key in "
        "the stack file"
    )
    _accepted(["--stack", stack, "--set", f'allowedCidrs=["{example}"]'], capsys)


OUTSIDE = "outside the commercial and GovCloud regions the project deploys to; use"


@pytest.mark.parametrize(
    ("stack", "region", "told"),
    [
        ("dev", "cn-north-1", f"is an AWS China region, {OUTSIDE} us-west-2"),
        ("prod", "cn-north-1", f"is an AWS China region, {OUTSIDE} us-east-1"),
        ("dev", "us-iso-east-1", f"is an AWS isolated region, {OUTSIDE} us-west-2"),
        ("dev", "eu-nort-1", "is not an AWS region; use eu-north-1 with `availabilityZone` "
         "eu-north-1a"),
    ],
)  # fmt: skip
def test_a_region_is_suggested_only_among_the_projects(
    stack: str, region: str, told: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A region outside the project's partitions is told the stack's own; a misspelt one its
    nearest spelling, with a zone of it; either fix is accepted."""
    line = _refused(["--stack", stack, "--set", f"region={region}"], capsys)
    assert line == f"error: `region` {region} {told}"
    fix = re.search(r"; use ([a-z0-9-]+)(?: with `availabilityZone` ([a-z0-9-]+))?$", line)
    assert fix is not None, line
    assert fix.group(1) in prices.KNOWN_REGIONS
    change = ["--set", f"region={fix.group(1)}"]
    if fix.group(2):
        change += ["--set", f"availabilityZone={fix.group(2)}"]
    _accepted(["--stack", stack, *change], capsys)


@pytest.fixture
def stacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch `stacks/` folder in place of the repository's."""
    monkeypatch.setattr(stackfile, "REPO", tmp_path)
    monkeypatch.setattr(stackfile, "STACKS", tmp_path / "stacks")
    (tmp_path / "stacks").mkdir()
    return tmp_path / "stacks"


REQUIRED = ("endpointPublicAccessCidrs", "owner", "endDate")
EVERY_KEY_MISSING = (
    "error: `endpointPublicAccessCidrs`, `owner` and `endDate` are required; "
    "`endpointPublicAccessCidrs`: list the IPv4 ranges of your operators and CI runners, such "
    "as 198.51.100.0/24; `owner`: set it to a team or e-mail address, such as ml-platform; "
    "`endDate`: use an ISO date such as 2027-06-30"
)


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("", REQUIRED),
        ("config:\n  gemma-graviton:region: us-west-2\n", REQUIRED),
        ("config:\n  gemma-graviton:owner: me\n", ("endpointPublicAccessCidrs", "endDate")),
    ],
    ids=["empty", "region only", "owner only"],
)
def test_a_partial_stack_file_names_every_missing_key_at_once(
    text: str, missing: tuple[str, ...], stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (stacks / "Pulumi.new.yaml").write_text(text)
    line = _refused(["--stack", "new"], capsys)
    names = ", ".join(f"`{k}`" for k in missing[:-1]) + f" and `{missing[-1]}`"
    assert line.startswith(f"error: {names} are required; "), line
    if missing == REQUIRED:
        assert line == EVERY_KEY_MISSING
    # Each key's fix gives an example; written into the file, they are accepted.
    examples = dict(re.findall(r"`(\w+)`: [^;]*?such as ([\w./@-]+)", line))
    assert set(examples) == set(missing), line
    lines = [f"  gemma-graviton:{k}: {v}" for k, v in examples.items() if not k.endswith("Cidrs")]
    lines += [f"  gemma-graviton:{k}: [{v}]" for k, v in examples.items() if k.endswith("Cidrs")]
    with (stacks / "Pulumi.new.yaml").open("a") as file:
        file.write(("" if text else "config:\n") + "\n".join(lines) + "\n")
    _accepted(["--stack", "new"], capsys)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_an_upper_case_instance_type_is_told_the_names_are_lower_case(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """EC2 instance type names are lower case (pulumi-aws 7.51.1 `ec2/_enums.py`, InstanceType:
    `M7G_2_X_LARGE = "m7g.2xlarge"`): refused, not folded, so the stack file holds what AWS
    receives; the lower-case name it suggests is accepted."""
    assert _refused(["--stack", stack, "--set", "instanceType=M7G.2XLARGE"], capsys) == (
        "error: `instanceType` M7G.2XLARGE is not an EC2 type name: EC2 instance type names are "
        "lower case; use m7g.2xlarge"
    )
    _accepted(["--stack", stack, "--set", "instanceType=m7g.2xlarge"], capsys)


def test_an_upper_case_type_outside_the_catalogue_is_still_told_about_case(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """c7g is Graviton: an upper-case c7g.16xlarge is a case mistake, not "not a Graviton type";
    the catalogue has no 16xlarge, so the fix is the cheapest type that starts, itself accepted."""
    refused = _refused(["--stack", "dev", "--set", "instanceType=C7G.16XLARGE"], capsys)
    assert refused.startswith(
        "error: `instanceType` C7G.16XLARGE is not an EC2 type name: EC2 instance type names are "
        "lower case; choose "
    )
    fix = refused.split("; choose ", 1)[1].split(",", 1)[0]
    _accepted(["--stack", "dev", "--set", f"instanceType={fix}"], capsys)


CERT = "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d"


def test_the_whole_internet_over_plain_http_names_the_rule_and_fixes_it_accepts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0.0.0.0/0 on dev (plain HTTP, `allowPlainHttp` for single addresses) is refused for what
    it is, not just for the list syntax, and not told to write 0.0.0.0/32: 0.0.0.0/8 is RFC 1122
    section 3.2.1.3's "this network", never a client's source address. Both fixes it names are
    accepted: one's own address as a /32 (an address of the kind checkip prints), or a
    certificate, with which the whole internet is admitted (as prod does)."""
    assert _refused(["--set", "allowedCidrs=0.0.0.0/0"], capsys) == (
        "error: `allowedCidrs` must be a list (got '0.0.0.0/0'), as --set "
        "'allowedCidrs=[\"0.0.0.0/0\"]' writes one, but as a list 0.0.0.0/0 (the whole internet) "
        "reaches beyond private ranges without a `tlsCertificateArn`, and `allowPlainHttp` admits "
        "single addresses (/32) only; list your own address as a /32 (`curl -s "
        "https://checkip.amazonaws.com` prints it), or set `tlsCertificateArn` to an ACM "
        "certificate in us-west-2"
    )
    assert _refused(["--set", 'allowedCidrs=["0.0.0.0/32"]'], capsys) == (
        'error: `allowedCidrs` holds 0.0.0.0/32, in 0.0.0.0/8 (RFC 1122 "this network"), '
        "addresses no client can come from; list your own address as a /32 (`curl -s "
        "https://checkip.amazonaws.com` prints it) or your clients' ranges"
    )
    _accepted(["--set", 'allowedCidrs=["52.94.236.248/32"]'], capsys)
    argv = ["--set", 'allowedCidrs=["0.0.0.0/0"]', "--set", f"tlsCertificateArn={CERT}"]
    assert main(argv, TODAY) == 0
    # Accepted as `pulumi up` sees it too: the whole internet is not named a placeholder.
    assert "`allowedCidrs`" not in capsys.readouterr().out.split("\n", 1)[0]


def test_this_network_is_refused_for_what_it_is_before_the_certificate_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0.0.0.0/8 without a certificate was first told to add one, and then, with it, refused as
    "this network": the range no client comes from is named first, whatever else the stack
    lacks, so the first fix offered is one that is accepted."""
    expected = (
        'error: `allowedCidrs` holds 0.0.0.0/8, in 0.0.0.0/8 (RFC 1122 "this network"), '
        "addresses no client can come from; list your own address as a /32 (`curl -s "
        "https://checkip.amazonaws.com` prints it) or your clients' ranges"
    )
    assert _refused(["--set", 'allowedCidrs=["0.0.0.0/8"]'], capsys) == expected
    with_cert = ["--set", 'allowedCidrs=["0.0.0.0/8"]', "--set", f"tlsCertificateArn={CERT}"]
    assert _refused(with_cert, capsys) == expected
    # Link-local likewise, before the certificate rule.
    assert "a loopback or link-local range" in _refused(
        ["--set", 'allowedCidrs=["169.254.0.0/16"]'], capsys
    )
