"""The elastic layer's wiring (`minGroups`/`maxGroups`): the cluster's elastic node groups and
the `Autoscaling` component. The program imports it only for an elastic stack."""

from __future__ import annotations

import pulumi

from components.addons import ClusterRef
from components.autoscaling import Autoscaling, AutoscalingArgs, ElasticNodes
from components.manifests import door
from components.manifests.spec import MODEL_TAINT, ServerSpec
from components.model_server import ModelServer
from infra.adapters.wiring import SYSTEM_LABELS
from infra.plan import elastic
from infra.plan.config import StackConfig
from infra.plan.sizing import Plan


def elastic_nodes(cfg: StackConfig) -> ElasticNodes:
    """The model node group under the Cluster Autoscaler and the always-on system group."""
    system = elastic.system_group(cfg)
    return ElasticNodes(
        max_nodes=elastic.MODEL_NODES_CEILING,
        system_instance_type=system.instance_type,
        system_nodes=system.nodes,
        system_labels=SYSTEM_LABELS,
        model_taint=MODEL_TAINT,
    )


def autoscaling(
    cfg: StackConfig,
    plan: Plan,
    cluster: ClusterRef,
    server_spec: ServerSpec,
    server: ModelServer,
    opts: pulumi.ResourceOptions,
) -> Autoscaling:
    """The Cluster Autoscaler and KEDA, scaling the groups as the plan's elastic figures say."""
    return Autoscaling(
        "scale",
        AutoscalingArgs(
            cluster=cluster,
            region=cfg.region,
            system_labels=SYSTEM_LABELS,
            server=server_spec,
            scaler=elastic.scaling_parameters(cfg, plan),
            autoscaler_image_tag=elastic.autoscaler_tag(cfg.kubernetes_version),
            workload=server,
            # A request that finds no group raises the door's wake flag: KEDA wakes one group.
            extra_triggers=[door.wake_trigger(server_spec)] if server_spec.door else [],
            max_nodes_total=elastic.nodes_total_cap(cfg, plan),
        ),
        opts=opts,
    )
