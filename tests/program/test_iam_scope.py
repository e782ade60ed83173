"""The program creates no IAM entity: it reads the bootstrap's roles of its stack and passes them
to EKS, and everything `pulumi up` does to them is what the stack's deploy role may do.

The deploy role writes no IAM (infra/bootstrap/access.py): a role, policy, attachment, provider
or profile the program created would fail the first CI deploy with AccessDenied. Checked on
every registration of both stacks, with everything the program can create turned on.
"""

from __future__ import annotations

import pulumi_aws as aws
import pytest

from components.manifests import identity
from infra.adapters.wiring import NAMESPACE
from infra.bootstrap.access import deploy_policy
from infra.plan import iam
from infra.plan.stackfile import load_stack, stack_names
from tests.bootstrap import iam_eval
from tests.fakes.pulumi_mocks import ACCOUNT_ID, Recorded, RecordingMocks, by_type
from tests.program.harness import EVERYTHING_ON, run_program, shared_run

pytestmark = pytest.mark.usefixtures("as_pulumi_host")

ROLE = "aws:iam/role:Role"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
VARIANTS = {"as-written": {}, "everything-on": EVERYTHING_ON}
#: Writes the provider would make on a role it owned (iam/role.go, role_policy.go,
#: role_policy_attachment.go): none is the deploy role's.
WRITES = (
    "iam:PutRolePolicy",
    "iam:AttachRolePolicy",
    "iam:UpdateAssumeRolePolicy",
    "iam:DeleteRole",
    "iam:CreateRole",
    "iam:DeleteRolePermissionsBoundary",
)


def iam_writes(records: list[Recorded]) -> list[str]:
    """Every IAM entity the program creates (anything of IAM but a read), as `<urn>: created`."""
    return [f"{r.urn}: created" for r in records if r.type_.startswith("aws:iam/") and not r.read]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("stack", stack_names())
def test_the_program_creates_no_iam_entity(stack: str, variant: str) -> None:
    mocks, _ = shared_run(stack, VARIANTS[variant])
    assert iam_writes(mocks.records) == []
    read = {r.resource_id for r in by_type(mocks.records, ROLE)}
    assert read == {identity.role_name(stack, r.key) for r in identity.stack_roles(NAMESPACE)}


def test_a_role_created_by_the_program_is_found(mocks: RecordingMocks) -> None:
    def stray() -> None:
        aws.iam.Role("stray", assume_role_policy="{}")
        aws.iam.RolePolicy("stray-inline", role="platform-admin", policy="{}")

    run_program(mocks, "dev", extra=stray)
    stack = "urn:pulumi:dev::gemma-graviton::pulumi:pulumi:Stack$"
    assert iam_writes(mocks.records) == [
        f"{stack}aws:iam/role:Role::stray: created",
        f"{stack}aws:iam/rolePolicy:RolePolicy::stray-inline: created",
    ]


def test_a_stack_whose_bootstrap_has_not_run_fails_on_its_first_role(
    mocks: RecordingMocks,
) -> None:
    """No role in the account: the first read fails, naming the role, before anything that
    costs is created (a preview fails the same way)."""
    with pytest.raises(Exception, match="gemma-graviton-dev-cluster"):
        run_program(mocks, "dev", bootstrapped=False)


@pytest.mark.parametrize("stack", stack_names())
def test_the_deploy_role_may_do_what_up_and_destroy_do_with_them(stack: str) -> None:
    """Each role read (terraform-provider-aws internal/service/iam/role.go `resourceRoleRead`),
    passed to EKS (the cluster's and the nodes' roles) or to EKS Pod Identity (the pods'):
    allowed, with the condition keys IAM gives each call, and no IAM write on any of them."""
    mocks, _ = shared_run(stack, EVERYTHING_ON)
    policy = deploy_policy(stack, load_stack(stack).region, "acme-pulumi-state")
    denied = []
    arns = {}
    for role in by_type(mocks.records, ROLE):
        arn = role.outputs["arn"]
        arns[arn] = role.resource_id
        assert arn.startswith(f"arn:aws:iam::{ACCOUNT_ID}:role{iam.role_path(stack)}"), role.urn
        for action in ("iam:GetRole", "iam:ListRolePolicies", "iam:ListAttachedRolePolicies"):
            if not iam_eval.allowed(policy, action, arn, {}):
                denied.append(f"{action} on {arn}")
        for action in WRITES:
            if iam_eval.allowed(policy, action, arn, {"iam:PolicyARN": "*"}):
                denied.append(f"{action} on {arn} is allowed")
    passed = {
        identity.role_name(stack, "cluster"): "eks.amazonaws.com",
        identity.role_name(stack, "nodes"): "eks.amazonaws.com",
    }
    associations = by_type(mocks.records, ASSOCIATION)
    assert associations
    for association in associations:
        passed[arns[association.inputs["roleArn"]]] = "pods.eks.amazonaws.com"
    for arn, name in arns.items():
        if name in passed:
            context = {"iam:PassedToService": passed[name]}
            if not iam_eval.allowed(policy, "iam:PassRole", arn, context):
                denied.append(f"iam:PassRole of {arn} to {passed[name]}")
    assert denied == []


@pytest.mark.parametrize("stack", stack_names())
def test_every_pod_that_calls_aws_has_its_own_role(stack: str) -> None:
    """Each association maps one service account to the bootstrap's role for that account, and
    each role with a service account that the stack runs is associated: with everything on,
    all but the autoscaler's on a fixed stack."""
    mocks, _ = shared_run(stack, EVERYTHING_ON)
    specs = {
        str(r.service_account): identity.role_name(stack, r.key)
        for r in identity.stack_roles(NAMESPACE)
        if r.service_account is not None
    }
    names = {r.outputs["arn"]: r.resource_id for r in by_type(mocks.records, ROLE)}
    seen = {}
    for association in by_type(mocks.records, ASSOCIATION):
        account = f"{association.inputs['namespace']}/{association.inputs['serviceAccount']}"
        seen[account] = names[association.inputs["roleArn"]]
        assert association.inputs["clusterName"] == identity.cluster_name(stack)
    expected = dict(specs)
    if not load_stack(stack).elastic:
        expected.pop(f"{identity.AUTOSCALER_NAMESPACE}/{identity.AUTOSCALER_SERVICE_ACCOUNT}")
    assert seen == expected


@pytest.mark.parametrize("stack", stack_names())
def test_no_launch_template_default_version_is_ever_changed(stack: str) -> None:
    """The deploy role has no ec2:ModifyLaunchTemplate, which terraform-provider-aws calls only
    for `update_default_version` or a changed `default_version` (internal/service/ec2/
    ec2_launch_template.go `resourceLaunchTemplateUpdate`): no template sets either."""
    mocks, _ = shared_run(stack, EVERYTHING_ON)
    templates = by_type(mocks.records, "aws:ec2/launchTemplate:LaunchTemplate")
    assert templates
    for template in templates:
        assert {"updateDefaultVersion", "defaultVersion"} & set(template.inputs) == set()
    policy = deploy_policy(stack, load_stack(stack).region, "acme-pulumi-state")
    arn = f"arn:aws:ec2:{load_stack(stack).region}:{ACCOUNT_ID}:launch-template/lt-0123"
    context = {"aws:ResourceTag/project": "gemma-graviton", "aws:ResourceTag/stack": stack}
    assert iam_eval.allowed(policy, "ec2:CreateLaunchTemplateVersion", arn, context)
    assert not iam_eval.allowed(policy, "ec2:ModifyLaunchTemplate", arn, context)


def test_the_path_is_the_stacks_own() -> None:
    assert iam.role_path("dev") == "/gemma-graviton/dev/"
    assert iam.role_path("dev").startswith(iam.PROGRAM_PATH_ROOT)
    assert not iam.role_path("dev").startswith(iam.CI_PATH)
    assert iam.boundary_arn("dev") == "arn:aws:iam::*:policy/github-ci/gemma-graviton-dev-boundary"
