"""The deploy roles can do everything the program registers, and the table they come from covers
every resource type and invoke the program uses (infra/bootstrap/permissions.py names the
provider source of each row)."""

from __future__ import annotations

import fnmatch
from typing import Any
from unittest import mock

import pulumi
import pulumi_aws as aws
import pytest

from infra.bootstrap import permissions
from infra.bootstrap.access import deploy_policy
from infra.plan.stackfile import stack_names
from tests.fakes.pulumi_host import pulumi_host
from tests.fakes.pulumi_mocks import RecordingMocks
from tests.program import harness
from tests.program.harness import EVERYTHING_ON


def _registered(stack: str, overrides: dict[str, Any], extra: Any = None) -> tuple[set, set]:
    """The type tokens and invoke tokens of one run of the program (plus `extra()`, if given)."""
    mocks = RecordingMocks()
    with pulumi_host(harness.PROGRAM), mock.patch.object(pulumi, "export"):
        harness.run_program(mocks, stack, overrides, extra=extra)
    return {r.type_ for r in mocks.records}, {c.token for c in mocks.calls}


def _allowed(policy: dict[str, Any], action: str) -> bool:
    for statement in policy["Statement"]:
        if statement["Effect"] != "Allow":
            continue
        granted = statement["Action"]
        if any(fnmatch.fnmatchcase(action.lower(), g.lower()) for g in granted):
            return True
    return False


def _lacking(policy: dict[str, Any], types: set[str], invokes: set[str]) -> list[str]:
    rows = [permissions.RESOURCE_ACTIONS.get(t) for t in types]
    rows += [permissions.INVOKE_ACTIONS.get(i) for i in invokes]
    needed = {a for row in rows if row is not None for a in row.actions}
    return sorted(a for a in needed if not _allowed(policy, a))


@pytest.mark.parametrize("overrides", [{}, EVERYTHING_ON], ids=["as-written", "everything-on"])
@pytest.mark.parametrize("stack", stack_names())
def test_the_deploy_role_can_do_what_the_program_registers(
    stack: str, overrides: dict[str, Any]
) -> None:
    types, invokes = _registered(stack, overrides)
    assert permissions.missing_rows(types, invokes) == []
    policy = deploy_policy(stack, "us-west-2", "acme-pulumi-state")
    assert _lacking(policy, types, invokes) == []
    # What monitoring creates is among them (the first CI `pulumi up` failed on these).
    if overrides:
        for action in ("eks:CreatePodIdentityAssociation", "cloudwatch:PutDashboard",
                       "cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms", "sns:CreateTopic",
                       "sns:DeleteTopic", "sns:Subscribe"):  # fmt: skip
            assert _allowed(policy, action), action


def test_a_type_added_without_its_row_fails() -> None:
    def a_queue() -> None:
        aws.sqs.Queue("requests")

    types, invokes = _registered("dev", {}, extra=a_queue)
    assert permissions.missing_rows(types, invokes) == ["aws:sqs/queue:Queue"]


def test_a_role_without_the_actions_of_a_row_fails() -> None:
    types, invokes = _registered("dev", EVERYTHING_ON)
    policy = deploy_policy("dev", "us-west-2", None)
    for statement in policy["Statement"]:
        statement["Action"] = [a for a in statement["Action"] if not a.startswith("sns:")]
    assert _lacking(policy, types, invokes) == sorted(
        a
        for t in ("aws:sns/topic:Topic", "aws:sns/topicSubscription:TopicSubscription")
        for a in permissions.RESOURCE_ACTIONS[t].actions
    )


@pytest.mark.parametrize("lws", [False, True], ids=["lws-by-the-stack", "lws-of-the-cluster"])
def test_the_deploy_role_can_do_what_a_stack_into_an_existing_cluster_registers(lws: bool) -> None:
    """Its reads of the cluster (data sources) and its node group, with volumes and the Pod
    Identity agent the cluster lacks; the policy is the one fenced to that cluster."""
    mocks = RecordingMocks()
    present = {**harness.EXISTING_ADDONS, "aws-ebs-csi-driver": "", "eks-pod-identity-agent": None}
    harness.existing_cluster(mocks, addons=present, lws=harness.lws_crd() if lws else None)
    with pulumi_host(harness.PROGRAM), mock.patch.object(pulumi, "export"):
        harness.run_into_existing(mocks, {**EVERYTHING_ON, "lwsInstalled": lws})
    types, invokes = {r.type_ for r in mocks.records}, {c.token for c in mocks.calls}
    assert "aws:eks/getCluster:getCluster" in invokes and "aws:eks/nodeGroup:NodeGroup" in types
    assert permissions.missing_rows(types, invokes) == []
    policy = deploy_policy("dev", "us-west-2", "acme-pulumi-state", harness.EXISTING_CLUSTER)
    assert _lacking(policy, types, invokes) == []
