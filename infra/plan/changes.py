"""What a change of each stack key costs the running service: the plan prints it, the docs table
("What a change costs") is checked against it.

Six kinds, from how the program wires each key:
- node group replacement: `instanceType` cannot change in place (`instance_types` is ForceNew on
  aws_eks_node_group, hashicorp/terraform-provider-aws internal/service/eks/node_group.go, commit
  012e0a32 read 2026-12-03). Pulumi creates the new group first and deletes the old one last
  (create before delete, its default, kept: the other way round deletes every node, and on a
  fixed stack the only nodes, before a new one exists). The model pods select the instance type
  (`wiring.model_node_selector`), so their template changes with it and the LeaderWorkerSet moves
  each group to the new nodes once, as a group restart; the old group holds no model pod when it
  goes. Both groups run meanwhile: the vCPU quota check counts them (`readiness.peak_nodes`);
- node replacement: the key reaches the managed node group (version, subnet) or its launch
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
- group count: `replicas` resizes a fixed stack's node group before its groups (`_group_count`);
- nothing running: security groups, IAM, alarms and access entries change in place;
- rebuild: the network itself changes, so everything is created again.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.plan import readiness
from infra.plan.rollout import RolloutPlan
from infra.plan.sizing import Plan

TYPE_KEYS = ("instanceType",)
NODE_KEYS = (
    "kubernetesVersion",
    "availabilityZone",
    "nodeSubnets",
    "existingClusterSubnet",
    "owner",
    "endDate",
    "tags",
)
GROUP_KEYS = (
    "model",
    "modelRevision",
    "vllmImage",
    "vllmExtraArgs",
    "frontDoor",
    "pipelineStages",
    "maxModelLen",
    "maxContextCap",
    "kvCacheBytes",
    "maxNumBatchedTokens",
    "podMemoryGiB",
    "weightPrefetch",
    "modelCache",
    "prefillPath",
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
REBUILD_KEYS = ("region", "vpcCidr", "controlPlaneZone", "existingCluster")
#: Whose LeaderWorkerSet controller runs the groups in a cluster the stack does not own.
CONTROLLER_KEYS = ("lwsInstalled",)
COUNT_KEYS = ("replicas",)
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
    "vcpuQuota",
    # A mark the planner reads: the image itself is `vllmImage`'s.
    "vllmImageOwnBuild",
    # The gatekeeper re-reads its key file, which the kubelet refreshes from the Secret: a
    # rotation changes no pod template (`components.manifests.gatekeeper`).
    "apiKey",
    "apiKeyPrevious",
    "apiKeyOverlapUntil",
    # The LeaderWorkerSet's rollout strategy is outside its revision hash (lws v0.10.0
    # pkg/utils/revision/revision_utils.go `getPatch`: leaderWorkerTemplate and networkConfig).
    "rolloutSurge",
    # The ScaledObject changes in place; the model node group's scaling block does not change
    # at all (its maximum is `elastic.MODEL_NODES_CEILING`, fixed), since any change to it
    # sends Pulumi's stale desired size to EKS (terraform-provider-aws
    # internal/service/eks/node_group.go `resourceNodeGroupUpdate`, commit 012e0a32). What starts
    # or stops then is KEDA's and the Cluster Autoscaler's doing, one group at a time.
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


def _type_change(p: Plan) -> ChangeCost:
    """A new node group of the new type beside the old one; the groups move once, as a group
    restart does (the new pods select the new type), and the old group goes last."""
    rolls = p.rollout
    peak = readiness.peak_nodes(p.nodes, rolls.surge_nodes)
    return ChangeCost(
        "node group replacement",
        TYPE_KEYS,
        "a second node group of the new type is created beside the old one; the model pods "
        "select the instance type, so LWS moves each group to the new nodes once, each after it "
        "drained, and the old group is deleted last, holding no model pod",
        f"~{rolls.outage_s} s (drain, then one restart)" if rolls.outage_s else "none",
        f"{describe_rollout(rolls)}; both node groups run until then (up to {peak} nodes, "
        "counted at the new type in the vcpu quota row)",
    )


def _group_count(p: Plan) -> ChangeCost:
    """`replicas` resizes a fixed stack's node group (min = desired = max, the desired size
    sent with it) and its LeaderWorkerSet. The LeaderWorkerSet depends on the node group, so
    the node group changes first: more nodes, then more groups, and nothing restarts; fewer
    nodes first, picked by the node group's Auto Scaling group, which knows nothing of the
    groups, so a group that keeps serving can lose a rank and restart."""
    if p.rollout.grows:
        return ChangeCost(
            "group count",
            COUNT_KEYS,
            "not a key of an elastic stack: `maxGroups` bounds the groups, KEDA sets them",
            "none",
            "nothing restarts (`replicas` is refused beside the elasticity keys)",
        )
    restart = p.warm_restart_seconds
    return ChangeCost(
        "group count",
        COUNT_KEYS,
        "more: the node group grows, then LWS adds the groups; fewer: the node group shrinks "
        "first and its Auto Scaling group picks the nodes that go, then LWS removes the last "
        "groups",
        f"~{restart} s (one restart) on fewer groups, when the nodes removed reach every group "
        "that stays; none on more",
        "more: nothing restarts; fewer: each group that stays and lost a node restarts once",
    )


def change_costs(p: Plan) -> list[ChangeCost]:
    """The kinds for this plan, with outages from its cold start (modelled, as the plan's
    own cold-start figure is)."""
    rolls = p.rollout
    return [
        _type_change(p),
        _node_replacement(p),
        ChangeCost(
            "group restart",
            GROUP_KEYS,
            "LWS recreates the groups with the new pod template, each after it drained",
            f"~{rolls.outage_s} s (drain, then one restart)" if rolls.outage_s else "none",
            describe_rollout(rolls),
        ),
        _group_count(p),
        ChangeCost("nothing running", IDLE_KEYS, "changed in place", "none"),
        ChangeCost(
            "rebuild",
            REBUILD_KEYS,
            "a new VPC and cluster replace the old ones",
            "a first deploy (cluster, nodes, one cold start)",
            "everything is created again",
        ),
        ChangeCost(
            "LWS controller",
            CONTROLLER_KEYS,
            "with `existingCluster` only, its VPC and cluster untouched: true deletes the "
            "stack's LWS controller, webhooks and lws-system namespace and leaves the groups to "
            "the cluster's controller, set only where its owner runs one (the CRDs stay once an "
            "`up` with false on this version recorded them as kept; before that they, and every "
            "LeaderWorkerSet, go); false installs the stack's, which fails while the cluster "
            "runs one or keeps its CRDs",
            "none: the groups' pods keep running",
            "nothing restarts; nothing reconciles the groups between the two controllers",
        ),
    ]


def describe_rollout(r: RolloutPlan) -> str:
    """One line for the plan: what a new pod template costs."""
    longer = f"a stream in flight can hold each drain up to {r.drain_bound_s} s"
    if r.outage_s:
        return (
            f"an outage: the one group drains, then restarts, ~{r.outage_s} s without an "
            f"answer ({longer}); the node group cannot grow, so no surge group "
            "(`rolloutSurge` 0)"
        )
    if not r.surge_groups:
        return (
            f"one group at a time in place, the others serving: ~{r.seconds} s in all, "
            f"no extra nodes ({longer})"
        )
    cost = f"${r.surge_usd:.2f}" if r.surge_usd is not None else "unpriced"
    return (
        f"{r.surge_groups} surge group(s) on {r.surge_nodes} extra node(s), the old "
        f"groups serving until they are ready: ~{r.seconds} s, {cost} of extra nodes, "
        f"no outage ({longer})"
    )


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
