"""What a change of each stack key costs the running service: the plan prints it, the docs table
("What a change costs") is checked against it.

Three kinds, from how the program wires each key:
- node replacement: the key reaches the managed node group (type, version, subnet) or its launch
  template (`owner`, `endDate` and `tags` are instance tags there: EKS does not copy node group
  tags to instances, and the clean-up jobs that stopped the field report's nodes read them from
  the instance). A new launch-template version makes EKS replace every node, one at a time
  (the node group's default update config, one unavailable); every node that goes breaks the
  pipeline, so LWS recreates the group on each, and the endpoint answers nothing from the first
  drain until the last group has cold-started. Chosen over tags that never reach the instances.
- group restart: the key changes the ranks' pod template (engine flags, image, model, the
  gatekeeper's config digest or the API key's fingerprint); LWS recreates the group once. A new
  `weights` or `weightsSource` also runs a new quantize Job first (minutes, `make plan` shows
  them) when the stack makes its own checkpoint, and may change the number of nodes.
- nothing running: security groups, IAM, alarms and access entries change in place;
- rebuild: the network itself changes, so everything is created again.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.plan.sizing import Plan

NODE_KEYS = (
    "instanceType",
    "kubernetesVersion",
    "availabilityZone",
    "nodeSubnets",
    "owner",
    "endDate",
    "tags",
)
GROUP_KEYS = (
    "model",
    "modelRevision",
    "vllmImage",
    "pipelineStages",
    "maxModelLen",
    "maxContextCap",
    "kvCacheBytes",
    "maxNumBatchedTokens",
    "podMemoryGiB",
    "weightPrefetch",
    "modelCache",
    "firstByteTimeoutSeconds",
    "maxRequestBytes",
    "clientRequestsPerMinute",
    "clientConcurrentRequests",
    "maxReplyTokens",
    "clientConnections",
    "maxSequencesPerRequest",
    "maxLogprobs",
    "maxSchemaBytes",
    "chatPage",
    "downloadMBps",
    "modelProfile",
    "apiKey",
    "weights",
    "weightsSource",
)
REBUILD_KEYS = ("region", "vpcCidr", "controlPlaneZone")
IDLE_KEYS = (
    "allowedCidrs",
    "endpointPublicAccessCidrs",
    "clusterAdminArns",
    "clusterViewerArns",
    "alarmEmail",
    "waitingRequestsAlarm",
    "monitoring",
    "tlsCertificateArn",
    "allowPlainHttp",
    "replicas",
    "vcpuQuota",
)


@dataclass(frozen=True)
class ChangeCost:
    """One kind of change: its keys, what it does, and how long the endpoint gives no answer."""

    kind: str
    keys: tuple[str, ...]
    effect: str
    outage: str


def change_costs(p: Plan) -> list[ChangeCost]:
    """The kinds for this plan, with outages from its cold start (modelled, as the plan's
    own cold-start figure is)."""
    cold = p.cold_start_seconds
    restart = p.warm_restart_seconds
    return [
        ChangeCost(
            "node replacement",
            NODE_KEYS,
            "EKS replaces every node, one at a time; each one recreates the group",
            f"~{p.nodes} x ({cold} s cold start + a node launch), from the first drain",
        ),
        ChangeCost(
            "group restart",
            GROUP_KEYS,
            "LWS recreates the group once with the new pod template",
            f"~{restart} s (one restart)",
        ),
        ChangeCost("nothing running", IDLE_KEYS, "changed in place", "none"),
        ChangeCost(
            "rebuild",
            REBUILD_KEYS,
            "a new VPC and cluster replace the old ones",
            "a first deploy (cluster, nodes, one cold start)",
        ),
    ]


def describe(p: Plan) -> list[str]:
    """The plan's lines, one per kind."""
    lines = []
    for c in change_costs(p):
        answer = (
            "the endpoint keeps answering" if c.outage == "none" else f"no answer for {c.outage}"
        )
        lines.append(f"{c.kind}: {', '.join(f'`{k}`' for k in c.keys)}: {c.effect}; {answer}")
    return lines
