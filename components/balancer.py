"""The drain's attributes on the model Service's NLB target groups, set by `pulumi up` itself.

EKS's cloud controller makes the NLB from the Service's annotations, but it refuses a Service
whose target-group attributes annotation names any attribute but `preserve_client_ip.enabled`
and `proxy_protocol_v2.enabled` (kubernetes/cloud-provider-aws pkg/providers/v1/
aws_validations.go `validateServiceAnnotationTargetGroupAttributes`, called first in
`EnsureLoadBalancer`, aws.go; in v1.32.6, v1.33.3, v1.34.0 and every later release of each,
v1.35.2 read 2026-12-07). So the three the drain needs (`manifests.access.
target_group_attributes`) are set once the NLB exists, by `target_groups.sh` with the AWS CLI,
as whoever runs `pulumi up` (the credentials the kubeconfig's `aws eks get-token` uses). The
controller leaves them: it changes only the attributes its annotation names (aws_loadbalancer.go
`buildTargetGroupAttributes`). It makes a target group anew, with AWS's defaults, when what its
name hashes changes: the Service's port, node port, protocol, the health check's protocol or
interval (`ensureLoadBalancerv2`, "recreate targetGroup"; `buildTargetGroupName`), or with a new
NLB. Each of those is in the Service's ports, `externalTrafficPolicy` or annotations, so those
are the command's triggers; and as the controller reconciles after `pulumi up` has updated the
Service, the script waits until the load balancer holds only target groups of the Service's
node ports and health-check interval. What changes a target group outside `pulumi up` (a
controller upgrade, a hand edit of the Service) is set right on the next `up` that changes a
trigger, not before: the command has no read, so `pulumi refresh` cannot see it.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components.manifests.access import target_group_attributes
from components.manifests.drain import DrainSpec

#: Run by `/bin/sh -c`, named (pulumi-command's default on Windows is `cmd /C`).
SCRIPT = Path(__file__).with_name("target_groups.sh").read_text()
#: How long the script waits for the cloud controller to make the Service's new target groups:
#: pulumi-kubernetes' own wait for a Service, 10 minutes (provider/pkg/await/service.go
#: `DefaultServiceTimeoutMins`, v4.32.0), on the side of letting a slow reconcile finish.
WAIT_SECONDS = 600


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
    ports = svc.spec.apply(
        lambda spec: [(p.port, p.protocol, p.node_port) for p in spec.ports or []]
    )
    return command.local.Command(
        f"{name}-target-groups",
        create=SCRIPT,
        update=SCRIPT,
        interpreter=["/bin/sh", "-c"],
        environment={
            "AWS_REGION": region,
            # None while the Service has no load balancer: the script then says so.
            "NLB_HOSTNAME": hostname.apply(lambda host: host or ""),
            "NODE_PORTS": ports.apply(lambda ps: " ".join(str(p[2]) for p in ps)),
            "HEALTH_CHECK_INTERVAL": str(drain.health_check_interval_s),
            "WAIT_SECONDS": str(WAIT_SECONDS),
            "TARGET_GROUP_ATTRIBUTES": attributes,
            # Neither a pager nor a prompt (AWS CLI v2 settings a user may have on).
            "AWS_PAGER": "",
            "AWS_CLI_AUTO_PROMPT": "off",
        },
        triggers=[
            hostname,
            ports.apply(lambda ps: [f"{p[0]}/{p[1]}/{p[2]}" for p in ps]),
            svc.spec.apply(lambda spec: spec.external_traffic_policy or ""),
            svc.metadata.apply(
                lambda m: sorted(f"{k}={v}" for k, v in (m.annotations or {}).items())
            ),
        ],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[svc]),
    )
