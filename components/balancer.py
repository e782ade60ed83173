"""The drain's attributes on the model Service's NLB target groups, set by `pulumi up` itself.

EKS's cloud controller makes the NLB from the Service's annotations, but from
kubernetes/cloud-provider-aws v1.34.0 it refuses a Service whose target-group attributes
annotation names any attribute but `preserve_client_ip.enabled` and `proxy_protocol_v2.enabled`
(pkg/providers/v1/aws_validations.go `validateServiceAnnotationTargetGroupAttributes`, called
first in `EnsureLoadBalancer`, aws.go; v1.35.2 read 2026-12-07). So the three the drain needs
(`manifests.access.target_group_attributes`) are set once the NLB exists, by `target_groups.sh`
with the AWS CLI, as whoever runs `pulumi up` (the credentials the kubeconfig's
`aws eks get-token` uses). The controller leaves them: it changes only the attributes its
annotation names (aws_loadbalancer.go `buildTargetGroupAttributes`). A target group it makes
anew starts from AWS's defaults; it does so when the node port, the protocol or the health
check's interval changes (aws_loadbalancer.go `ensureLoadBalancerv2`, "recreate targetGroup"),
or with a new NLB, so those are the command's triggers.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components.manifests.access import drain_annotations, target_group_attributes
from components.manifests.drain import DrainSpec

#: Run by `/bin/sh -c` (pulumi-command's default interpreter off Windows).
SCRIPT = Path(__file__).with_name("target_groups.sh").read_text()


def drain_attributes(
    name: str,
    svc: k8s.core.v1.Service,
    hostname: pulumi.Output[str],
    drain: DrainSpec,
    region: str,
    parent: pulumi.Resource,
) -> command.local.Command:
    """The command that sets `drain`'s attributes on the target groups of `svc`'s NLB (named by
    its `hostname`), again whenever a trigger says they may be new. It runs on `up` only, never
    in a preview, and deletes nothing: the target groups go with the Service."""
    attributes = " ".join(f"{k}={v}" for k, v in target_group_attributes(drain).items())
    node_ports = svc.spec.apply(lambda spec: [port.node_port for port in spec.ports or []])
    return command.local.Command(
        f"{name}-target-groups",
        create=SCRIPT,
        update=SCRIPT,
        environment={
            "AWS_REGION": region,
            # No pager (AWS CLI v2 pipes output through `less` by default).
            "AWS_PAGER": "",
            "NLB_HOSTNAME": hostname,
            "TARGET_GROUP_ATTRIBUTES": attributes,
        },
        triggers=[hostname, node_ports, *(f"{k}={v}" for k, v in drain_annotations(drain).items())],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[svc]),
    )
