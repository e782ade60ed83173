"""From a stack's config and plan to the components' arguments: the one place stack words become
component words, shared by the program and the offline render. An optional layer's own wiring
(`elastic_layer`, `monitoring_layer`, `existing_cluster`, `quantize_layer`) stands beside it,
loaded by its key."""

from __future__ import annotations

import json
import shlex

from components.manifests import ServerSpec, model_claims
from components.manifests.spec import MODEL_TAINT, stack_taint
from infra.plan import catalog
from infra.plan.config import StackConfig
from infra.plan.config_parts import PROJECT
from infra.plan.sizing import Plan

#: Label of the model node group; the model pods select it.
NODE_POOL_LABEL = "gemma-graviton.dev/pool"
NODE_LABELS = {NODE_POOL_LABEL: "model"}
#: The node label holding a node's instance type: preset on every node whose kubelet knows it
#: (kubernetes.io/docs/reference/node/node-labels, read 2026-12-03; on EKS the AWS cloud
#: provider gives it), and on the Cluster Autoscaler's template node of a group with no node
#: (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_manager.go
#: `buildGenericLabels`, `apiv1.LabelInstanceTypeStable`, master at 00a2c93 read 2026-12-03).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def model_node_selector(instance_type: str) -> dict[str, str]:
    """The model pods' nodeSelector: the model node group, and its nodes of the planned
    instance type only. An `instanceType` change replaces the node group (`instance_types` is
    ForceNew on aws_eks_node_group, hashicorp/terraform-provider-aws
    internal/service/eks/node_group.go, commit 012e0a32 read 2026-12-03) and Pulumi creates the
    new group before it deletes the old one. With the type in the selector the pod template
    changes with it, so the LeaderWorkerSet moves each group to the new nodes once; with the pool
    alone a restarted group could land on an old node and be stopped again when the old group is
    deleted. The preset label, not one of the group's own: existing nodes carry it already, so
    adding it to the selector strands no pod."""
    return {**NODE_LABELS, INSTANCE_TYPE_LABEL: instance_type}


#: Label of the always-on system node group of an elastic stack.
SYSTEM_LABELS = {NODE_POOL_LABEL: "system"}
#: Namespace of the model server (kubectl users need to find it, so it is fixed).
NAMESPACE = "gemma-graviton"
#: Base name of the model server's objects.
SERVER_NAME = "gemma"
#: Storage class the per-rank weight volumes use (created with the EBS CSI driver).
STORAGE_CLASS = "gemma-graviton-gp3"
#: gp3 throughput of those volumes in MiB/s: the first start writes ~24 GB, every start reads it.
STORAGE_THROUGHPUT_MIBPS = catalog.WEIGHTS_VOLUME_MIBPS


def stack_tags(cfg: StackConfig, stack: str) -> dict[str, str]:
    """The tags on everything the stack pays for: the AWS provider's default tags, the nodes'
    launch template (instances, root volumes, network interfaces), the storage class of the CSI
    volumes and the load balancer's annotation."""
    return {
        **cfg.tags,
        "project": PROJECT,
        "stack": stack,
        "owner": cfg.owner,
        "endDate": cfg.end_date.isoformat(),
    }


def model_taint(cfg: StackConfig, stack: str) -> dict[str, str] | None:
    """The model nodes' taint: an elastic stack's (its system nodes run everything else), the
    stack's own in a cluster it does not own (the cluster's nodes run everything else), none
    on a fixed stack's own cluster, whose model nodes run its add-ons and controllers too."""
    if cfg.elastic:
        return MODEL_TAINT
    return stack_taint(stack) if cfg.existing_cluster is not None else None


def server_spec(cfg: StackConfig, plan: Plan) -> ServerSpec:
    """The model server exactly as the plan sizes it; refuses `vllmExtraArgs` that vLLM would not
    take or that set what the plan sets (`engine_flags.check`)."""
    door = None
    if cfg.elastic:
        from infra.plan import sleep  # the elastic layer's door, wired only for an elastic stack

        door = sleep.door_spec(cfg, plan, SYSTEM_LABELS)
    spec = ServerSpec(
        name=SERVER_NAME,
        namespace=NAMESPACE,
        image=cfg.vllm_image,
        model=cfg.model,
        stages=plan.stages,
        replicas=plan.replicas,
        pod_memory_gib=plan.pod_memory_gib,
        pod_cpu=plan.pod_cpu,
        shm_gib=plan.shm_gib,
        kv_cache_bytes=plan.kv_cache_bytes,
        max_model_len=plan.max_model_len,
        max_num_batched_tokens=plan.max_num_batched_tokens,
        weight_prefetch=plan.weight_prefetch,
        model_volume_gib=plan.model_volume_gib,
        persistent_models=plan.model_cache == "volume",
        storage_class=STORAGE_CLASS if plan.model_cache == "volume" else None,
        startup_timeout_seconds=plan.startup_timeout_seconds,
        node_selector=model_node_selector(plan.instance_type),
        node_pool=NODE_LABELS,
        allowed_cidrs=tuple(str(c) for c in cfg.allowed_cidrs),
        limits=plan.front_door,
        gatekeeper_millicpu=catalog.GATEKEEPER_MILLICPU,
        gatekeeper_memory_mib=catalog.GATEKEEPER_MEMORY_MIB,
        tls_certificate_arn=cfg.tls_certificate_arn,
        probes=plan.liveness.probes,
        internal_load_balancer=cfg.private_clients_only,
        aws_tags=stack_tags(cfg, plan.stack),
        model_revision=cfg.revision,
        weights=plan.weights,
        checkpoint_repo=None if cfg.weights_source == "quantize" else cfg.weights_repo[0],
        checkpoint_revision=None if cfg.weights_source == "quantize" else cfg.weights_repo[1],
        produced_checkpoint=plan.quantize is not None,
        drain=plan.drain,
        rollout_surge=plan.rollout.surge_groups,
        autoscaled=cfg.elastic,
        model_taint=model_taint(cfg, plan.stack),
        door=door,
        front_door=cfg.front_door,
        engine_extra_args=cfg.vllm_extra_args,
    )
    if cfg.vllm_extra_args:
        from infra.plan import engine_flags  # vLLM's recorded parser, for `vllmExtraArgs` only

        engine_flags.check(spec.engine())
    return spec


def volume_claims(spec: ServerSpec) -> list[tuple[str, str]]:
    """The claims (namespace, name) that each get a program-made EBS volume and PersistentVolume
    (`components.storage.ModelVolumes`): every rank's, as the StatefulSets name them."""
    return [(spec.namespace, c["metadata"]["name"]) for c in model_claims(spec)]


def gatekeeper_in_pod(cfg: StackConfig) -> bool:
    """The stack's leader pods run the gatekeeper (`ServerSpec.gatekeeper_in_pod`): neither an
    elastic stack's door nor `frontDoor: vllm-key`."""
    return cfg.gatekeeper and not cfg.elastic


def curl_example(endpoint: str, model: str) -> str:
    """A ready streamed request. Every value is shell-quoted; the one substitution is the
    command that reads the key, so the key itself never appears in the output."""
    body = {
        "model": model,
        "stream": True,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Hello"}],
    }
    return (
        f"curl -sN {shlex.quote(endpoint + '/chat/completions')} "
        '-H "Authorization: Bearer $(pulumi stack output --show-secrets apiKey)" '
        "-H 'Content-Type: application/json' "
        f"-d {shlex.quote(json.dumps(body))}"
    )
