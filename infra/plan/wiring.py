"""From a stack's config and plan to the components' arguments: the one place stack words become
component words, shared by the program and the offline render."""

from __future__ import annotations

from components.manifests import ProbeSpec, ServerSpec
from infra.plan.config import StackConfig
from infra.plan.sizing import Plan

#: Label of the model node group; the model pods select it.
NODE_POOL_LABEL = "gemma-graviton.dev/pool"
NODE_LABELS = {NODE_POOL_LABEL: "model"}
#: Namespace of the model server (kubectl users need to find it, so it is fixed).
NAMESPACE = "gemma-graviton"
#: Base name of the model server's objects.
SERVER_NAME = "gemma"
#: Storage class the per-rank weight volumes use (created with the EBS CSI driver).
STORAGE_CLASS = "gemma-graviton-gp3"
#: gp3 throughput of those volumes in MiB/s: the first start writes ~24 GB, every start reads it.
STORAGE_THROUGHPUT_MIBPS = 250


def server_spec(cfg: StackConfig, plan: Plan) -> ServerSpec:
    """The model server exactly as the plan sizes it."""
    return ServerSpec(
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
        node_selector=NODE_LABELS,
        allowed_cidrs=tuple(str(c) for c in cfg.allowed_cidrs),
        tls_certificate_arn=cfg.tls_certificate_arn,
        probes=ProbeSpec(
            stall_s=plan.liveness.stall_s,
            period_s=plan.liveness.period_s,
            failures=plan.liveness.failures,
            timeout_s=plan.liveness.timeout_s,
            request_s=plan.liveness.request_s,
        ),
    )
