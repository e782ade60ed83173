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
  gatekeeper's config digest); LWS recreates the groups, with surge groups when the node group
  can grow (`infra.plan.rollout`), each old group only after it drained. A new `weights` or
  `weightsSource` also runs a new quantize Job first (minutes, `make plan` shows them) when
  the stack makes its own checkpoint, and may change the number of nodes;
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
    "clientTokensInFlight",
    "maxReplyTokens",
    "clientConnections",
    "maxSequencesPerRequest",
    "maxLogprobs",
    "maxSchemaBytes",
    "chatPage",
    "downloadMBps",
    "modelProfile",
    "weights",
    "weightsSource",
)
REBUILD_KEYS = ("region", "vpcCidr", "controlPlaneZone")
IDLE_KEYS = (
    "allowedCidrs",
    "endpointPublicAccessCidrs",
    "clusterAdminArns",
    "clusterViewerArns",
    # IAM sets or swaps a role's boundary in place (PutRolePermissionsBoundary); no role is
    # replaced and nothing that runs under one restarts.
    "permissionsBoundaryArn",
    "alarmEmail",
    "waitingRequestsAlarm",
    "monitoring",
    "tlsCertificateArn",
    "allowPlainHttp",
    "replicas",
    "vcpuQuota",
    # The gatekeeper re-reads its key file, which the kubelet refreshes from the Secret: a
    # rotation changes no pod template (`components.manifests.gatekeeper`).
    "apiKey",
    "apiKeyPrevious",
    "apiKeyOverlapUntil",
    # The LeaderWorkerSet's rollout strategy is outside its revision hash (lws v0.10.0
    # pkg/utils/revision/revision_utils.go `getPatch`: leaderWorkerTemplate and networkConfig).
    "rolloutSurge",
    # The ScaledObject and the node groups' sizes change in place; what starts or stops then is
    # KEDA's and the Cluster Autoscaler's doing, one group at a time.
    "minGroups",
    "maxGroups",
    "schedule",
    "queuePerGroup",
)


@dataclass(frozen=True)
class ChangeCost:
    """One kind of change: its keys, what it does, how long the endpoint gives no answer, and
    how the running groups get there (`rollout`)."""

    kind: str
    keys: tuple[str, ...]
    effect: str
    outage: str
    rollout: str = "nothing restarts"


def _node_replacement(p: Plan) -> ChangeCost:
    """EKS drains the nodes one at a time; with two or more groups the PodDisruptionBudget makes
    it wait until the broken group serves again before it takes the next node."""
    cold = p.cold_start_seconds
    each = f"{p.drain.accept_s} s drain + {cold} s cold start + a node launch"
    if p.replicas >= 2:
        # An elastic stack (its node group grows) may be running one group when the change
        # lands: the budget then keeps nothing serving.
        one_running = f"~{p.stages} x ({cold} s cold start + a node launch) while one group runs"
        return ChangeCost(
            "node replacement",
            NODE_KEYS,
            "EKS replaces every node, one at a time; each one recreates its group",
            f"none while two or more groups run; {one_running}" if p.rollout.grows else "none",
            f"one group at a time, the PodDisruptionBudget keeping the others serving: "
            f"~{p.nodes} x ({each}) in all",
        )
    return ChangeCost(
        "node replacement",
        NODE_KEYS,
        "EKS replaces every node, one at a time; each one recreates the group",
        f"~{p.nodes} x ({cold} s cold start + a node launch), from the first drain",
        f"an outage: one group, so each node's drain stops it (~{p.nodes} x ({each}))",
    )


def change_costs(p: Plan) -> list[ChangeCost]:
    """The kinds for this plan, with outages from its cold start (modelled, as the plan's
    own cold-start figure is)."""
    rolls = p.rollout
    return [
        _node_replacement(p),
        ChangeCost(
            "group restart",
            GROUP_KEYS,
            "LWS recreates the groups with the new pod template, each after it drained",
            f"~{rolls.outage_s} s (drain, then one restart)" if rolls.outage_s else "none",
            rolls.describe(),
        ),
        ChangeCost("nothing running", IDLE_KEYS, "changed in place", "none"),
        ChangeCost(
            "rebuild",
            REBUILD_KEYS,
            "a new VPC and cluster replace the old ones",
            "a first deploy (cluster, nodes, one cold start)",
            "everything is created again",
        ),
    ]


def describe(p: Plan) -> list[str]:
    """The plan's lines, one per kind."""
    lines = []
    for c in change_costs(p):
        answer = (
            "the endpoint keeps answering" if c.outage == "none" else f"no answer for {c.outage}"
        )
        keys = ", ".join(f"`{k}`" for k in c.keys)
        lines.append(f"{c.kind}: {keys}: {c.effect}; {answer}; rollout: {c.rollout}")
    return lines
