"""The shipped placeholders: `make plan` names them first, a preview runs with them, and `pulumi up`
refuses them with one line before any resource exists (`infra.plan.placeholders`)."""

from __future__ import annotations

import ipaddress

import pulumi
import pytest

from infra.adapters.cli import main
from infra.bootstrap import config as bootstrap_config
from infra.plan import placeholders
from infra.plan.stackfile import load_stack
from tests.fakes.pulumi_mocks import RecordingMocks
from tests.program.harness import OWN_VALUES, run_program

SHIPPED = {
    "dev": ["endpointPublicAccessCidrs", "allowedCidrs", "clusterAdminArns", "vllmImage"],
    "prod": [
        "endpointPublicAccessCidrs",
        "allowedCidrs",
        "tlsCertificateArn",
        "clusterAdminArns",
        "clusterViewerArns",
        "vllmImage",
    ],
}
REFUSAL = {
    "dev": "`endpointPublicAccessCidrs` still holds the placeholder 203.0.113.0/24, an RFC 5737 "
    "documentation range (3 more key(s) too: `make plan` lists them); set it to your own value "
    "with `pulumi config set`; a preview runs with it, `pulumi up` does not",
    "prod": "`endpointPublicAccessCidrs` still holds the placeholder 198.51.100.0/24, an RFC 5737 "
    "documentation range (5 more key(s) too: `make plan` lists them); set it to your own value "
    "with `pulumi config set`; a preview runs with it, `pulumi up` does not",
}


@pytest.mark.parametrize("stack", sorted(SHIPPED))
def test_the_committed_stacks_hold_exactly_these_placeholders(stack: str) -> None:
    assert [p.key for p in placeholders.find(load_stack(stack))] == SHIPPED[stack]
    assert placeholders.find(load_stack(stack, OWN_VALUES[stack])) == []


def test_make_plan_names_them_in_its_first_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "prod"]) == 0
    head = capsys.readouterr().out.splitlines()
    assert head[0] == (
        "PLACEHOLDERS, which `pulumi up` refuses (set your own): `endpointPublicAccessCidrs` "
        "198.51.100.0/24, an RFC 5737 documentation range; `allowedCidrs` 198.51.100.0/24, an RFC "
        "5737 documentation range; `tlsCertificateArn` arn:aws:acm:us-east-1:123456789012:"
        "certificate/00000000-0000-0000-0000-000000000000, an all-zero ARN; `clusterAdminArns` "
        "arn:aws:iam::123456789012:role/platform-admin, a principal in AWS's documentation "
        "account 123456789012; `clusterViewerArns` arn:aws:iam::123456789012:role/ml-oncall, a "
        "principal in AWS's documentation account 123456789012; `vllmImage` "
        "vllm/vllm-openai-cpu:v0.31.0-arm64, pinned by a tag only; run `make pin-images`, or set "
        "repository:tag@sha256:<the index's digest>"
    )
    # The bootstrap's own, as it runs first in the account, then the verdict.
    assert head[1] == (
        "PLACEHOLDERS in infra/bootstrap/Pulumi.ci.yaml, which `pulumi -C infra/bootstrap up` "
        "refuses (set your own): `repository` example-org/gemma-graviton, the shipped example: "
        "every CI role would trust its owner's workflows"
    )
    assert head[2].startswith("prod starts: "), head[2]


def test_a_stack_without_placeholders_plans_without_the_notice(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    own = [f"{k}={v if isinstance(v, str) else f'[{v[0]}]'}" for k, v in OWN_VALUES["dev"].items()]
    monkeypatch.setattr(bootstrap_config, "notice", lambda: None)  # as if it were filled in too
    assert main(["--stack", "dev", *(a for kv in own for a in ("--set", kv))]) == 0
    assert capsys.readouterr().out.startswith("dev starts: ")


@pytest.mark.parametrize(
    ("network", "placeholder"),
    [
        ("192.0.2.0/24", True),
        ("198.51.100.7/32", True),
        ("203.0.0.0/16", True),  # contains 203.0.113.0/24
        ("2001:db8:1::/48", True),
        ("203.0.114.0/24", False),
        ("2001:db9::/32", False),
        # The whole internet holds every documentation range but is no sample value: with a
        # certificate the plan admits it, so `pulumi up` must not call it a placeholder.
        ("0.0.0.0/0", False),
        ("::/0", False),
    ],
)
def test_documentation_ranges(network: str, placeholder: bool) -> None:
    found = placeholders._documentation(ipaddress.ip_network(network))
    assert (found is not None) is placeholder


@pytest.mark.parametrize(
    ("arn", "placeholder"),
    [
        ("arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000", 1),
        ("arn:aws:iam::000000000000:role/platform-admin", 1),
        ("arn:aws:acm:us-east-1:123456789012:certificate/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", 0),
        ("arn:aws:iam::123456789012:role/platform-admin", 0),
    ],
)
def test_all_zero_arns(arn: str, placeholder: int) -> None:
    assert bool(placeholders.ZERO_ARN.fullmatch(arn)) is bool(placeholder)


@pytest.mark.parametrize(
    ("arn", "placeholder"),
    [
        ("arn:aws:iam::123456789012:role/platform-admin", True),
        ("arn:aws:iam::111122223333:user/auditor", True),
        ("arn:aws:iam::012345678901:role/ops", True),
        ("arn:aws:iam::210987654321:role/auditor", False),
        ("arn:aws:iam::123456789013:role/auditor", False),
    ],
)
def test_kubectl_principals_in_a_documentation_account(arn: str, placeholder: bool) -> None:
    """EKS refuses an access entry for a principal that does not exist, after the cluster exists;
    a documentation account's principal never does, for either list."""
    own = OWN_VALUES["prod"]
    for key in ("clusterAdminArns", "clusterViewerArns"):
        cfg = load_stack("prod", {**own, key: [arn]})
        found = [(p.key, p.value) for p in placeholders.find(cfg)]
        assert found == ([(key, arn)] if placeholder else []), key


def test_a_certificate_in_the_documentation_account_is_no_principal_placeholder() -> None:
    """The account test is for kubectl principals only; a certificate is judged by its all-zero ID
    (the own values' certificate keeps the documentation account with a real-looking ID)."""
    cfg = load_stack("prod", OWN_VALUES["prod"])
    assert ":123456789012:" in (cfg.tls_certificate_arn or "")
    assert placeholders.find(cfg) == []


@pytest.mark.usefixtures("as_pulumi_host")
def test_up_refuses_a_documentation_account_admin_in_one_line(mocks: RecordingMocks) -> None:
    admin = "arn:aws:iam::123456789012:role/platform-admin"
    with pytest.raises(pulumi.RunError) as error:
        run_program(mocks, "dev", {"clusterAdminArns": [admin]})
    assert str(error.value) == (
        f"`clusterAdminArns` still holds the placeholder {admin}, a principal in AWS's "
        "documentation account 123456789012; set it to your own value with `pulumi config set`; "
        "a preview runs with it, `pulumi up` does not"
    )
    assert mocks.records == []


@pytest.mark.parametrize("stack", sorted(SHIPPED))
@pytest.mark.usefixtures("as_pulumi_host")
def test_preview_runs_with_the_placeholders(stack: str, mocks: RecordingMocks) -> None:
    run_program(mocks, stack, preview=True, as_shipped=True)
    assert any(r.type_ == "eks:index:Cluster" for r in mocks.records)


@pytest.mark.parametrize("stack", sorted(SHIPPED))
@pytest.mark.usefixtures("as_pulumi_host")
def test_up_refuses_them_before_any_resource(stack: str, mocks: RecordingMocks) -> None:
    with pytest.raises(pulumi.RunError) as error:
        run_program(mocks, stack, as_shipped=True)
    assert str(error.value) == REFUSAL[stack]
    assert mocks.records == []
