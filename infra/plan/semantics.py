"""A stack's world for `components.manifests.semantics`: the node groups and the objects the
program creates beside the rendered ones, built from the same config and plan as the program
(`infra/__main__.py`), so the check sees what `pulumi up` makes."""

from __future__ import annotations

from components import manifests
from components.manifests.semantics import ZONE_LABEL, NodeGroup, World, check
from components.manifests.spec import MODEL_TAINT, Manifest
from infra.plan import catalog, elastic
from infra.plan.config import StackConfig
from infra.plan.render import rendered_objects
from infra.plan.sizing import Plan
from infra.plan.wiring import NAMESPACE, NODE_LABELS, STORAGE_CLASS, SYSTEM_LABELS, server_spec


def _group(
    name: str,
    instance_type: str,
    labels: dict[str, str],
    zone: str,
    volumes: bool,
    taints: list[dict[str, str]] | None = None,
) -> NodeGroup:
    """One node's room for the stack's pods: the planner's allocatable (the EKS AMI's reserve and
    eviction threshold, `catalog.allocatable_*`) less the DaemonSets every node runs."""
    instance = catalog.INSTANCE_TYPES[instance_type]
    daemons = [
        c
        for c in catalog.COTENANTS
        if c.kind == "daemonset" and (volumes or not c.with_volumes_only)
    ]
    return NodeGroup(
        name,
        {**labels, ZONE_LABEL: zone},
        taints or [],
        millicpu=catalog.allocatable_millicpu(instance) - sum(c.millicpu for c in daemons),
        memory_mib=catalog.allocatable_mib(instance) - sum(c.memory_mib for c in daemons),
    )


def node_groups(cfg: StackConfig, plan: Plan) -> list[NodeGroup]:
    """The model node group (tainted on an elastic stack) and an elastic stack's system group,
    both in the one node zone (components/cluster.py; `availabilityZone`)."""
    zone = cfg.availability_zone
    volumes = plan.model_cache == "volume"
    taints = [MODEL_TAINT] if cfg.elastic else []
    groups = [_group("model", plan.instance_type, NODE_LABELS, zone, volumes, taints)]
    if cfg.elastic:
        system = elastic.system_group(cfg)
        groups.append(_group("system", system.instance_type, SYSTEM_LABELS, zone, volumes))
    return groups


def program_objects(cfg: StackConfig, plan: Plan) -> list[Manifest]:
    """What the program creates that no file renders: the two Secrets (`ModelServer`) and, with
    volumes, one PersistentVolume per rank's claim in the node zone (`ModelVolumes`)."""
    spec = server_spec(cfg, plan)
    made = manifests.program_secrets(spec)
    if plan.model_cache == "volume":
        for claim in manifests.model_claims(spec):
            ref = (NAMESPACE, claim["metadata"]["name"])
            made.append(
                manifests.static_volume(
                    manifests.static_volume_name(ref),
                    ref,
                    STORAGE_CLASS,
                    plan.model_volume_gib,
                    "vol-by-the-program",
                    cfg.availability_zone,
                )
            )
    return made


def world(cfg: StackConfig, plan: Plan) -> World:
    return World(node_groups(cfg, plan), program_objects(cfg, plan))


def findings(cfg: StackConfig, plan: Plan) -> list[str]:
    """Every semantic fault of the stack's rendered objects (`semantics.check`)."""
    return check(rendered_objects(cfg, plan), world(cfg, plan))
