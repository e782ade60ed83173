"""A stack's world for `components.manifests.semantics`: the node groups and the objects the
program creates beside the rendered ones, built from the same config and plan as the program
(`infra/__main__.py`), so the check sees what `pulumi up` makes."""

from __future__ import annotations

from typing import Literal

from components import manifests
from components.manifests import metrics, volumes
from components.manifests.pod_world import INSTANCE_TYPE_LABEL, ZONE_LABEL, NodeGroup, World
from components.manifests.semantics import check
from components.manifests.spec import Manifest
from infra.adapters.monitoring_layer import collector_spec
from infra.adapters.render import rendered_objects
from infra.adapters.wiring import (
    NODE_LABELS,
    STORAGE_CLASS,
    SYSTEM_LABELS,
    model_taint,
    server_spec,
    volume_claims,
)
from infra.plan import catalog, elastic
from infra.plan.config import StackConfig
from infra.plan.sizing import Plan


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
        {**labels, ZONE_LABEL: zone, INSTANCE_TYPE_LABEL: instance_type},
        taints or [],
        millicpu=catalog.allocatable_millicpu(instance) - sum(c.millicpu for c in daemons),
        memory_mib=catalog.allocatable_mib(instance) - sum(c.memory_mib for c in daemons),
        instance_type=instance_type,
    )


#: The Secrets the program creates (components/model_server.py `_secret`, `_key_secret`).
PROGRAM_SECRETS: tuple[Literal["hf-token", "api-key"], ...] = ("hf-token", "api-key")


def node_groups(cfg: StackConfig, plan: Plan) -> list[NodeGroup]:
    """The model node group (tainted on an elastic stack and in a cluster the stack does not
    own, `wiring.model_taint`) and an elastic stack's system group,
    both in the one node zone (components/cluster.py; `availabilityZone`)."""
    zone = cfg.availability_zone
    volumes = plan.model_cache == "volume"
    taint = model_taint(cfg, plan.stack)
    taints = [taint] if taint else []
    groups = [_group("model", plan.instance_type, NODE_LABELS, zone, volumes, taints)]
    if cfg.elastic:
        system = elastic.system_group(cfg)
        groups.append(_group("system", system.instance_type, SYSTEM_LABELS, zone, volumes))
    return groups


def program_objects(cfg: StackConfig, plan: Plan) -> list[Manifest]:
    """What the program creates that no file renders: the two Secrets (`ModelServer`), with
    volumes one PersistentVolume per rank's claim in the node zone (`ModelVolumes`), and with
    `monitoring` the metrics collector's objects (`Monitoring`)."""
    spec = server_spec(cfg, plan)
    # ModelServer builds both with `secret` from the same spec, with the real values.
    made = [manifests.secret(spec, which, "") for which in PROGRAM_SECRETS]
    if plan.model_cache == "volume":
        # As infra/__main__.py passes them to ModelVolumes, which builds each with static_volume.
        made += [
            volumes.static_volume(
                volumes.static_volume_name(claim),
                claim,
                STORAGE_CLASS,
                plan.model_volume_gib,
                "vol-made-by-the-program",
                cfg.availability_zone,
            )
            for claim in volume_claims(spec)
        ]
    if cfg.monitoring:
        # The role's ARN is the program's output; nothing here reads it.
        made += metrics.collector_objects(collector_spec(cfg, plan.stack))
    return made


def undeclared_ports(cfg: StackConfig, plan: Plan) -> dict[tuple[str, int], str]:
    """The ports a pod serves without declaring them, and why: behind a door (an elastic stack)
    the leaders' vLLM listens on the pod network (`ServerSpec.engine`, `--host 0.0.0.0`) for the
    door, the collector and KEDA, which reach it by number through the leaders' Services and the
    group's NetworkPolicy; it declares no container port, so nothing can target it by a name
    (policies/rules.py `leaders_behind_gatekeeper`)."""
    spec = server_spec(cfg, plan)
    if spec.gatekeeper_in_pod:
        return {}
    leader = f"LeaderWorkerSet/{spec.lws_name} leaderTemplate"
    why = "vLLM checking its own key" if spec.vllm_key else "vLLM behind the door"
    return {(leader, spec.port): f"{why}, reached by number only"}


def world(cfg: StackConfig, plan: Plan) -> World:
    return World(node_groups(cfg, plan), program_objects(cfg, plan), undeclared_ports(cfg, plan))


def findings(cfg: StackConfig, plan: Plan) -> list[str]:
    """Every semantic fault of the stack's rendered objects (`semantics.check`)."""
    return check(rendered_objects(cfg, plan), world(cfg, plan))
