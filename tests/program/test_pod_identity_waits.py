"""Every workload that reads EKS Pod Identity credentials is admitted only after its association
is effective, on a first `up` and after the association is replaced (why:
`components.addons.pod_identity`).

So each association has a wait that is created again whenever the association is, and each
workload that runs as the association's service account depends on that wait and carries the
association's id in its pod template, so a new association re-creates its pods after the new
wait. EKS makes an add-on's pods itself; its association is replaced only with a new cluster,
which replaces the add-on too. Checked on every association of every stack, with everything the
program can create turned on, against every workload that runs as its account.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.addons import ASSOCIATION_ANNOTATION
from tests.fakes.pulumi_mocks import Recorded, RecordingMocks, by_type
from tests.program.harness import (
    EVERYTHING_ON,
    run_program,
    shared_run,
    stack_values,
    stacks_with,
)

pytestmark = pytest.mark.usefixtures("as_pulumi_host")

ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
SLEEP = "time:index/sleep:Sleep"
ADDON = "aws:eks/addon:Addon"
CHART = "kubernetes:helm.sh/v4:Chart"
#: Workload kinds whose pod template names its service account.
POD_TEMPLATES = (
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:apps/v1:StatefulSet",
    "kubernetes:batch/v1:Job",
)
#: The service account each add-on's pods that call AWS run as (`components.storage`,
#: `components.observability`): EKS makes those pods, not the program.
ADDON_ACCOUNTS = {
    "aws-ebs-csi-driver": "kube-system/ebs-csi-controller-sa",
    "amazon-cloudwatch-observability": "amazon-cloudwatch/cloudwatch-agent",
}
#: The shortest wait taken as safe: six times the longest wait aws/eks-pod-identity-agent#52
#: saw suffice (5-10 s); the program's own is `components.addons.ASSOCIATION_SETTLE`.
SHORTEST_SAFE_WAIT_S = 60
#: Each stack as committed and elastic (a fixed stack runs no Cluster Autoscaler).
VARIANTS = {
    "as-committed": EVERYTHING_ON,
    "elastic": {**EVERYTHING_ON, "minGroups": 0, "maxGroups": 3},
}


def _seconds(duration: str) -> int:
    """A Go duration of whole seconds, minutes or hours (`120s`, `2m`, `1h`) in seconds."""
    match = re.fullmatch(r"(\d+)([smh])", duration)
    assert match, f"{duration!r} is not a duration of whole s, m or h"
    return int(match[1]) * {"s": 1, "m": 60, "h": 3600}[match[2]]


def _workloads(records: list[Recorded]) -> dict[str, list[tuple[str, Recorded]]]:
    """`namespace/service-account` -> [(kind of workload, record)] for everything that runs pods
    as that account: pod templates, charts (the account their values name) and add-ons."""
    found: dict[str, list[tuple[str, Recorded]]] = {}
    for type_ in POD_TEMPLATES:
        for record in by_type(records, type_):
            pod = record.inputs["spec"]["template"]["spec"]
            account = pod.get("serviceAccountName", "default")
            key = f"{record.inputs['metadata'].get('namespace', 'default')}/{account}"
            found.setdefault(key, []).append(("template", record))
    for record in by_type(records, CHART):
        values = record.inputs.get("values") or {}
        account = (values.get("rbac") or {}).get("serviceAccount", {}).get("name") or (
            values.get("serviceAccount") or {}
        ).get("name")
        if account:
            found.setdefault(f"{record.inputs['namespace']}/{account}", []).append(
                ("chart", record)
            )
    for record in by_type(records, ADDON):
        account = ADDON_ACCOUNTS.get(record.inputs["addonName"])
        if account:
            found.setdefault(account, []).append(("addon", record))
    return found


def _pod_annotations(kind: str, record: Recorded) -> dict[str, Any]:
    if kind == "chart":
        return dict(record.inputs["values"].get("podAnnotations") or {})
    return dict(record.inputs["spec"]["template"]["metadata"].get("annotations") or {})


def late_workloads(mocks: RecordingMocks) -> list[str]:
    """What breaks the rule, one line each: an association without its wait or without a
    workload, a workload not after its own association's wait, or one without the roll key."""
    records = mocks.records
    waits = {r.inputs.get("triggers", {}).get("associationId"): r for r in by_type(records, SLEEP)}
    workloads = _workloads(records)
    wrong = []
    associations = by_type(records, ASSOCIATION)
    all_waits = {wait.urn for wait in waits.values()}
    for association in associations:
        account = f"{association.inputs['namespace']}/{association.inputs['serviceAccount']}"
        association_id = association.outputs["associationId"]
        wait = waits.get(association_id)
        if wait is None:
            wrong.append(f"{association.urn}: no wait triggered by its id")
            continue
        if _seconds(wait.inputs["createDuration"]) < SHORTEST_SAFE_WAIT_S:
            wrong.append(f"{wait.urn}: waits {wait.inputs['createDuration']}")
        if not workloads.get(account):
            wrong.append(f"{association.urn}: no workload runs as {account}")
        for kind, workload in workloads.get(account, []):
            depends = set(mocks.monitor.dependencies[workload.urn])
            if wait.urn not in depends:
                wrong.append(f"{workload.urn}: not after {wait.urn}")
            if depends & all_waits - {wait.urn}:
                wrong.append(f"{workload.urn}: after another account's wait")
            if kind == "addon":
                # Replaced with the association: both are the cluster's, by its name.
                if workload.inputs["clusterName"] != association.inputs["clusterName"]:
                    wrong.append(f"{workload.urn}: not in its association's cluster")
            elif _pod_annotations(kind, workload).get(ASSOCIATION_ANNOTATION) != association_id:
                wrong.append(f"{workload.urn}: its pods do not carry {ASSOCIATION_ANNOTATION}")
    return wrong


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("stack", stacks_with("monitoring"))
def test_every_pod_identity_workload_comes_after_its_association_is_effective(
    stack: str, variant: str
) -> None:
    mocks, _ = shared_run(stack, VARIANTS[variant])
    associations = by_type(mocks.records, ASSOCIATION)
    accounts = {f"{a.inputs['namespace']}/{a.inputs['serviceAccount']}" for a in associations}
    expected = {*ADDON_ACCOUNTS.values(), "gemma-graviton/metrics-collector"}
    if variant == "elastic" or "gemma-graviton:minGroups" in stack_values(stack):
        expected.add("kube-system/cluster-autoscaler")
    assert accounts == expected, sorted(accounts)
    assert late_workloads(mocks) == []


def test_a_workload_that_skips_its_wait_or_its_roll_key_is_named(mocks: RecordingMocks) -> None:
    run_program(mocks, "prod", EVERYTHING_ON)
    by_name = {r.name: r for r in mocks.records}
    collector, chart = by_name["watch-collector"], by_name["scale-cluster-autoscaler"]
    csi, csi_wait = by_name["weights-csi"], by_name["weights-csi-identity-settled"]
    # The add-on created right after its association; the chart's pods without the key.
    deps = mocks.monitor.dependencies
    deps[csi.urn] = [urn for urn in deps[csi.urn] if urn != csi_wait.urn]
    values = {**chart.inputs["values"], "podAnnotations": {}}
    unkeyed = Recorded(**{**vars(chart), "inputs": {**chart.inputs, "values": values}})
    mocks.records[mocks.records.index(chart)] = unkeyed
    # The collector after the autoscaler's wait as well as its own.
    deps[collector.urn] = [*deps[collector.urn], by_name["scale-autoscaler-identity-settled"].urn]
    assert sorted(late_workloads(mocks)) == sorted(
        [
            f"{csi.urn}: not after {csi_wait.urn}",
            f"{collector.urn}: after another account's wait",
            f"{chart.urn}: its pods do not carry {ASSOCIATION_ANNOTATION}",
        ]
    )
