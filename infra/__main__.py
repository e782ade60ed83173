"""The Pulumi program: load config, plan, build providers, create components, export.

Pulumi runs this file with `infra/` as the program directory and the repository root as the
working directory, so the root is put on the import path first.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pulumi
import pulumi_aws as aws

from components import observability, stack_roles
from components.addons import ClusterRef
from components.cluster import Cluster, ClusterArgs
from components.leaderworkerset import LwsController, LwsControllerArgs
from components.manifests import identity
from components.manifests.lws import leader_worker_set
from components.model_server import ModelServer, ModelServerArgs
from components.network import Network, NetworkArgs
from components.observability import ClusterLogs, ClusterLogsArgs
from infra.adapters import wiring
from infra.adapters.pulumi_config import place_zones, read_stack_config, warn_about
from infra.plan import addons

if TYPE_CHECKING:
    from components.existing_cluster import ExistingCluster
    from components.storage import ModelVolumes

# An optional layer's wiring (its components and planning) is imported under its stack key only.

stack = pulumi.get_stack()
cfg, plan, secrets = read_stack_config(stack)

tags = wiring.stack_tags(cfg, stack)
addon_versions = addons.pinned(cfg.kubernetes_version) or {}
warn_about(cfg)

# Default tags reach what the provider creates itself; what EC2 Auto Scaling, the EBS CSI driver
# and the cloud provider create gets the same tags from the cluster and the model server.
aws_provider = aws.Provider("aws", region=cfg.region, default_tags={"tags": tags})
on_aws = pulumi.ResourceOptions(providers=[aws_provider])
placement = place_zones(cfg, plan, aws_provider)
elastic_nodes = None
if cfg.elastic:
    from infra.adapters import elastic_layer

    elastic_nodes = elastic_layer.elastic_nodes(cfg)
# The stack's IAM roles are the bootstrap's (`components.ci_stack_roles`): read, never created.
role_specs = identity.stack_roles(wiring.NAMESPACE, cfg.existing_cluster)
roles = stack_roles.existing_roles("role", stack, [r.key for r in role_specs], on_aws)
server_spec = wiring.server_spec(cfg, plan)
# What the stack makes in a cluster waits for the checks of it that are Outputs (the cluster's
# own LeaderWorkerSet CRD, `lwsInstalled`), so a refusal leaves nothing made, in an `up` too.
checked: list[pulumi.Input[pulumi.Resource]] = []
installed_lws = None

if cfg.existing_cluster is None:
    network = Network(
        "net",
        NetworkArgs(
            cidr_block=str(cfg.vpc_cidr),
            node_zone=placement.node.name,
            second_zone=placement.control_plane.name,
            node_subnets=cfg.node_subnets,
        ),
        opts=on_aws,
    )
    cluster: Cluster | ExistingCluster = Cluster(
        "eks",
        ClusterArgs(
            name=identity.cluster_name(stack),
            vpc_id=network.vpc_id,
            control_plane_subnet_ids=network.control_plane_subnet_ids,
            node_subnet_id=network.node_subnet_id,
            kubernetes_version=cfg.kubernetes_version,
            instance_type=plan.instance_type,
            node_count=plan.nodes,
            node_disk_gib=plan.node_disk_gib,
            node_labels=wiring.NODE_LABELS,
            surge_nodes=plan.rollout.surge_nodes,
            public_access_cidrs=[str(c) for c in cfg.endpoint_public_access_cidrs or ()],
            admin_arns=cfg.cluster_admin_arns,
            viewer_arns=cfg.cluster_viewer_arns,
            instance_tags=tags,
            addon_versions=addon_versions,
            elastic=elastic_nodes,
            service_role=roles["cluster"],
            node_role=roles["nodes"],
        ),
        opts=on_aws,
    )
    # Add-ons run on the system nodes of an elastic stack, which has model nodes only on demand.
    addon_nodes = cluster.system_node_group or cluster.node_group
    owned_addons: tuple[str, ...] = addons.ADDONS
else:
    # The cluster is a layer: read and checked before anything is created, never changed.
    from infra.adapters import existing_cluster

    group = leader_worker_set(server_spec) if cfg.lws_installed else None
    cluster, owned_addons = existing_cluster.adopt_cluster(
        cfg, plan, stack, placement.node, roles["nodes"], tags, addon_versions, aws_provider, group
    )
    addon_nodes = cluster.node_group
    installed_lws = cluster.installed_lws
    checked = [cluster.lws_checked] if cluster.lws_checked is not None else []
on_cluster = pulumi.ResourceOptions(
    providers=[cluster.provider, aws_provider], depends_on=checked or None
)
cluster_ref = ClusterRef(
    cluster_name=cluster.cluster_name,
    kubernetes_version=cfg.kubernetes_version,
    nodes=addon_nodes,
    addon_versions=addon_versions,
    pod_roles=stack_roles.pod_role_arns(role_specs, roles),
    identity_agent=cluster.identity_agent,
    foreign=cfg.existing_cluster is not None,
)
if addons.CLOUDWATCH in owned_addons:
    logs_opts = pulumi.ResourceOptions.merge(on_aws, pulumi.ResourceOptions(depends_on=checked))
    logs = ClusterLogs("logs", ClusterLogsArgs(cluster_ref, wiring.NAMESPACE), opts=logs_opts)
    log_group, logs_query = logs.log_group_name, logs.query
else:
    # The cluster's own CloudWatch add-on ships the logs, to the group it names after it.
    log_group = pulumi.Output.concat(
        "/aws/containerinsights/", cluster.cluster_name, "/application"
    )
    logs_query = pulumi.Output.from_input(observability.logs_query(wiring.NAMESPACE))
volumes: ModelVolumes | None = None
if plan.model_cache == "volume":
    # The weights' own volumes and their driver, for a stack that keeps them (`modelCache`).
    from components.storage import ModelVolumes, ModelVolumesArgs

    volumes = ModelVolumes(
        "weights",
        ModelVolumesArgs(
            cluster_ref,
            wiring.STORAGE_CLASS,
            wiring.STORAGE_THROUGHPUT_MIBPS,
            volume_tags=tags,
            claims=wiring.volume_claims(server_spec),
            size_gib=plan.model_volume_gib,
            zone=placement.node.name,
            install_driver=addons.EBS_CSI in owned_addons,
        ),
        opts=on_cluster,
    )
quantize = None
if plan.quantize is not None:
    # The Job that writes the produced checkpoint (`weightsSource: quantize`).
    from infra.adapters.quantize_layer import quantize_spec

    quantize = quantize_spec(plan)
if installed_lws is not None:
    # The cluster's own controller; its CRD must hold what the groups set (checked as the
    # cluster is read, before its nodes are made).
    lws, lws_controller = installed_lws
else:
    # In a cluster the stack does not own, destroy leaves the CRDs: other teams' groups may
    # use them (docs/deploying.md#into-a-cluster-you-already-have).
    lws_args = LwsControllerArgs(nodes=cluster_ref.nodes, retain_crds=cluster_ref.foreign)
    lws = LwsController("lws", lws_args, opts=on_cluster)
    lws_controller = pulumi.Output.concat("installed by the stack (", lws.namespace, ")")
server = ModelServer(
    "model",
    ModelServerArgs(
        spec=server_spec,
        hf_token=secrets.hf_token,
        region=cfg.region,
        api_key=secrets.api_key,
        api_key_previous=secrets.api_key_previous,
        api_key_overlap_until=cfg.api_key_overlap_until,
        lws_controller=lws,
        storage=volumes,
        volume_names=volumes.volume_names if volumes is not None else {},
        nodes=cluster.node_group,
        quantize=quantize,
    ),
    opts=on_cluster,
)

if cfg.elastic:
    elastic_layer.autoscaling(cfg, plan, cluster_ref, server_spec, server, on_cluster)

watcher = None
if cfg.monitoring:
    from infra.adapters import monitoring_layer

    watcher = monitoring_layer.monitoring(
        cfg, plan, stack, cluster_ref, log_group, server, on_cluster
    )

pulumi.export("clusterName", cluster.cluster_name)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("region", cfg.region)
pulumi.export("availabilityZone", placement.node.name)
pulumi.export("nodeInstanceType", plan.instance_type)
pulumi.export("nodeCount", plan.nodes)
pulumi.export("plan", plan.to_json())
pulumi.export("endpoint", server.endpoint)
pulumi.export("apiKey", server.api_key)
# Which key is current (a slow digest, never the key) and when the previous one stops.
pulumi.export("apiKeyFingerprint", server.api_key_fingerprint)
pulumi.export("apiKeyPreviousUntil", server.api_key_previous_until)
# Extra nodes a rollout's surge groups need above the running ones (the node group's max).
pulumi.export("rolloutSurgeNodes", plan.rollout.surge_nodes)
pulumi.export("model", server.served_model)
pulumi.export("maxModelLen", server.max_model_len)
pulumi.export("kvCacheTokens", plan.kv_cache_tokens)
pulumi.export("namespace", server.namespace)
pulumi.export("logGroup", log_group)
pulumi.export("logsQuery", logs_query)
# Whose LeaderWorkerSet controller runs the groups: the stack's, or the cluster's (checked).
pulumi.export("lwsController", lws_controller)
pulumi.export(
    "curlExample",
    server.endpoint.apply(lambda url: wiring.curl_example(url, cfg.model)),
)
if cfg.chat_page:
    # The gatekeeper serves the chat page at the endpoint's root (`chatPage`).
    pulumi.export("chatUrl", server.endpoint.apply(lambda url: url.removesuffix("/v1") + "/"))
if watcher is not None:
    pulumi.export("dashboardUrl", watcher.dashboard_url)
    pulumi.export("alarmTopic", watcher.topic_arn)
