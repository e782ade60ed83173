"""Every IAM entity the program creates lives under its stack's path (`infra.plan.iam`) with the
stack's boundary, and everything `pulumi up` does to them is what the stack's deploy role may do.

The deploy role's IAM rights reach the stack's path only (infra/bootstrap/access.py), so a role
created elsewhere would fail the first CI deploy with AccessDenied, and a role without the
boundary could not be created at all. Checked on every registration of both stacks, with
everything the program can create turned on.
"""

from __future__ import annotations

import json
import runpy
from typing import Any

import pulumi_aws as aws
import pytest

from components.manifests.spec import ROLE_ANNOTATION
from infra.bootstrap.access import deploy_policy
from infra.plan import iam
from infra.plan.stackfile import load_stack, stack_names
from tests.bootstrap import iam_eval
from tests.fakes.pulumi_mocks import ACCOUNT_ID, Recorded, RecordingMocks, by_type
from tests.program.harness import run_program

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ADDON = "aws:eks/addon:Addon"
#: IAM types whose entities have a path (and so an ARN the deploy role's fence can name).
PATHED = (ROLE, "aws:iam/policy:Policy", "aws:iam/instanceProfile:InstanceProfile")
EVERYTHING_ON = {"monitoring": True, "modelCache": "volume", "alarmEmail": "oncall@example.com"}


def _boundary(stack: str) -> str:
    """What the bootstrap's `setupCommands` set as the stack's `permissionsBoundaryArn`."""
    return iam.boundary_arn(stack, account=ACCOUNT_ID)


def _run(mocks: RecordingMocks, stack: str, overrides: dict[str, Any], extra: Any = None) -> None:
    if extra is None:
        run_program(mocks, stack, overrides)
        return
    original = runpy.run_path

    def program_then_extra(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        extra()
        return result

    runpy.run_path = program_then_extra  # type: ignore[assignment]
    try:
        run_program(mocks, stack, overrides)
    finally:
        runpy.run_path = original  # type: ignore[assignment]


def outside_the_scope(records: list[Recorded], stack: str, boundary: str | None) -> list[str]:
    """The IAM entities not under `stack`'s path or without `boundary`, and the policies and
    attachments on a role the program did not create, each as `<urn>: <what is wrong>`."""
    wrong = []
    for record in [r for r in records if r.type_ in PATHED]:
        if record.inputs.get("path") != iam.role_path(stack):
            wrong.append(f"{record.urn}: path {record.inputs.get('path')!r}")
        if record.type_ == ROLE and record.inputs.get("permissionsBoundary") != boundary:
            wrong.append(f"{record.urn}: boundary {record.inputs.get('permissionsBoundary')!r}")
    names = {r.outputs["name"] for r in by_type(records, ROLE)}
    for record in [*by_type(records, ROLE_POLICY), *by_type(records, ATTACHMENT)]:
        if record.inputs["role"] not in names:
            wrong.append(f"{record.urn}: on role {record.inputs['role']!r}")
    return wrong


VARIANTS = {
    "as-written": {},
    "everything-on": EVERYTHING_ON,
    "with-boundary": {**EVERYTHING_ON, "permissionsBoundaryArn": "<boundary>"},
}


def _overrides(stack: str, variant: str) -> dict[str, Any]:
    return {k: _boundary(stack) if v == "<boundary>" else v for k, v in VARIANTS[variant].items()}


@pytest.mark.usefixtures("as_pulumi_host")
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("stack", stack_names())
def test_every_iam_entity_is_under_the_stacks_path_with_its_boundary(
    mocks: RecordingMocks, stack: str, variant: str
) -> None:
    overrides = _overrides(stack, variant)
    _run(mocks, stack, overrides)
    roles = by_type(mocks.records, ROLE)
    # The cluster's, the nodes' and the add-ons' at least: pulumi-eks creates none of its own.
    assert len(roles) >= 3, [r.urn for r in roles]
    assert {r.type_ for r in mocks.records if r.type_.startswith("aws:iam/")} <= {
        ROLE,
        ROLE_POLICY,
        ATTACHMENT,
    }
    assert outside_the_scope(mocks.records, stack, overrides.get("permissionsBoundaryArn")) == []


@pytest.mark.usefixtures("as_pulumi_host")
def test_a_role_created_anywhere_else_is_found(mocks: RecordingMocks) -> None:
    def stray() -> None:
        aws.iam.Role("stray", assume_role_policy="{}")
        aws.iam.RolePolicy("stray-inline", role="platform-admin", policy="{}")

    _run(mocks, "dev", {}, extra=stray)
    stack = "urn:pulumi:dev::gemma-graviton::pulumi:pulumi:Stack$"
    assert outside_the_scope(mocks.records, "dev", None) == [
        f"{stack}aws:iam/role:Role::stray: path None",
        f"{stack}aws:iam/rolePolicy:RolePolicy::stray-inline: on role 'platform-admin'",
    ]


@pytest.mark.usefixtures("as_pulumi_host")
@pytest.mark.parametrize("stack", stack_names())
def test_the_deploy_role_may_do_what_up_and_destroy_do_to_them(
    mocks: RecordingMocks, stack: str
) -> None:
    """Role by role, policy by policy, as the provider calls IAM (terraform-provider-aws
    internal/service/iam/role.go, role_policy.go, role_policy_attachment.go): each call with the
    condition keys IAM gives it."""
    boundary = _boundary(stack)
    _run(mocks, stack, {**EVERYTHING_ON, "permissionsBoundaryArn": boundary})
    policy = deploy_policy(stack, load_stack(stack).region, "acme-pulumi-state")
    bounded = {"iam:PermissionsBoundary": boundary}
    arns = {r.outputs["name"]: r.outputs["arn"] for r in by_type(mocks.records, ROLE)}
    denied = []

    def check(action: str, arn: str, context: dict[str, str], urn: str) -> None:
        if not iam_eval.allowed(policy, action, arn, context):
            denied.append(f"{action} on {arn} ({urn})")

    for role in by_type(mocks.records, ROLE):
        arn = role.outputs["arn"]
        assert arn.startswith(f"arn:aws:iam::{ACCOUNT_ID}:role{iam.role_path(stack)}"), role.urn
        for action in ("iam:CreateRole", "iam:PutRolePermissionsBoundary"):
            check(action, arn, bounded, role.urn)
        for action in ("iam:GetRole", "iam:TagRole", "iam:DeleteRole"):
            check(action, arn, {}, role.urn)
        check("iam:PassRole", arn, {"iam:PassedToService": "eks.amazonaws.com"}, role.urn)
    for inline in by_type(mocks.records, ROLE_POLICY):
        for action in ("iam:PutRolePolicy", "iam:DeleteRolePolicy"):
            check(action, arns[inline.inputs["role"]], bounded, inline.urn)
    for attachment in by_type(mocks.records, ATTACHMENT):
        context = {**bounded, "iam:PolicyARN": attachment.inputs["policyArn"]}
        for action in ("iam:AttachRolePolicy", "iam:DetachRolePolicy"):
            check(action, arns[attachment.inputs["role"]], context, attachment.urn)
    assert denied == []
    # And the same operations on the same names without the boundary are refused.
    assert not iam_eval.allowed(policy, "iam:CreateRole", next(iter(arns.values())))


def test_the_path_is_the_programs_own() -> None:
    assert iam.role_path("dev") == "/gemma-graviton/dev/"
    assert iam.role_path("dev").startswith(iam.PROGRAM_PATH_ROOT)
    assert not iam.role_path("dev").startswith(iam.CI_PATH)
    assert iam.boundary_arn("dev") == "arn:aws:iam::*:policy/github-ci/gemma-graviton-dev-boundary"


def _principals(trust: str) -> set[str]:
    return {kind for st in json.loads(trust)["Statement"] for kind in st["Principal"]}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _pod_template_roles(records: list[Recorded]) -> set[str]:
    """Role ARNs that pod templates name (`ROLE_ANNOTATION`): in the Deployments the program
    renders and in the Helm charts' `podAnnotations` values."""
    named = set()
    for record in records:
        spec = record.inputs.get("spec")
        template = spec.get("template", {}) if isinstance(spec, dict) else {}
        annotations = template.get("metadata", {}).get("annotations", {})
        named |= set(_strings(annotations.get(ROLE_ANNOTATION)))
        values = record.inputs.get("values")
        if isinstance(values, dict):
            named |= set(_strings(values.get("podAnnotations", {}).get(ROLE_ANNOTATION)))
    return named


@pytest.mark.usefixtures("as_pulumi_host")
@pytest.mark.parametrize("stack", stack_names())
def test_no_role_trust_is_rewritten_in_place(mocks: RecordingMocks, stack: str) -> None:
    """The deploy role may not call iam:UpdateAssumeRolePolicy, which terraform-provider-aws
    (internal/service/iam/role.go `resourceRoleUpdate`) calls when `assume_role_policy` changes.
    A trust that follows the cluster (a federated principal: its OIDC issuer) replaces its role
    when it changes, and then every pod template that runs as the role names it, so the pods
    roll onto the new one (EKS's webhook sets `AWS_ROLE_ARN` at pod creation only); an EKS
    add-on's role, whose pods are EKS's, is not replaced (its trust change fails). A service's
    trust (EKS, EC2) never replaces its role: a new cluster role is a new cluster
    (eks/cluster.go `role_arn` ForceNew). Every role of every stack, everything turned on."""
    _run(mocks, stack, {**EVERYTHING_ON, "permissionsBoundaryArn": _boundary(stack)})
    policy = deploy_policy(stack, load_stack(stack).region, "acme-pulumi-state")
    addon_roles = {r.inputs.get("serviceAccountRoleArn") for r in by_type(mocks.records, ADDON)}
    in_templates = _pod_template_roles(mocks.records)
    wrong, replaced = [], []
    for role in by_type(mocks.records, ROLE):
        arn = role.outputs["arn"]
        replaced_on = mocks.monitor.replace_on_changes[role.urn]
        federated = "Federated" in _principals(role.inputs["assumeRolePolicy"])
        should = federated and arn not in addon_roles
        if should != ("assumeRolePolicy" in replaced_on):
            wrong.append(f"{role.urn}: federated {federated}, replaced on {replaced_on}")
        if should:
            replaced.append(arn)
            if arn not in in_templates:
                wrong.append(f"{role.urn}: replaced, but no pod template names it")
        if iam_eval.allowed(policy, "iam:UpdateAssumeRolePolicy", arn, {}):
            wrong.append(f"{role.urn}: the deploy role may rewrite its trust")
    assert wrong == []
    assert replaced  # the collector's, and on an elastic stack the autoscaler's


@pytest.mark.usefixtures("as_pulumi_host")
@pytest.mark.parametrize("stack", stack_names())
def test_no_launch_template_default_version_is_ever_changed(
    mocks: RecordingMocks, stack: str
) -> None:
    """The deploy role has no ec2:ModifyLaunchTemplate, which terraform-provider-aws calls only
    for `update_default_version` or a changed `default_version` (internal/service/ec2/
    ec2_launch_template.go `resourceLaunchTemplateUpdate`): no template sets either."""
    _run(mocks, stack, EVERYTHING_ON)
    templates = by_type(mocks.records, "aws:ec2/launchTemplate:LaunchTemplate")
    assert templates
    for template in templates:
        assert {"updateDefaultVersion", "defaultVersion"} & set(template.inputs) == set()
    policy = deploy_policy(stack, load_stack(stack).region, "acme-pulumi-state")
    arn = f"arn:aws:ec2:{load_stack(stack).region}:{ACCOUNT_ID}:launch-template/lt-0123"
    context = {f"aws:ResourceTag/{k}": v for k, v in {"project": "gemma-graviton",
                                                       "stack": stack}.items()}  # fmt: skip
    assert iam_eval.allowed(policy, "ec2:CreateLaunchTemplateVersion", arn, context)
    assert not iam_eval.allowed(policy, "ec2:ModifyLaunchTemplate", arn, context)
