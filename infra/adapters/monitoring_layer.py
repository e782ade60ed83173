"""The monitoring layer's wiring (`monitoring`): the metrics collector's spec and the
`Monitoring` component (dashboard, alarms, log filters). The program imports it only for a
monitored stack."""

from __future__ import annotations

import pulumi

from components import watch
from components.addons import ClusterRef
from components.manifests import identity
from components.manifests.metrics import CollectorSpec
from components.manifests.spec import ServerSpec, stack_taint, toleration
from components.model_server import ModelServer
from components.monitoring import Monitoring, MonitoringArgs
from infra.adapters import wiring
from infra.plan import watching
from infra.plan.config import StackConfig
from infra.plan.sizing import Plan


def collector_spec(cfg: StackConfig, stack: str) -> CollectorSpec:
    """The metrics collector of a stack: its leaders, CloudWatch names and log group."""
    return CollectorSpec(
        namespace=wiring.NAMESPACE,
        lws_name=f"{wiring.SERVER_NAME}-vllm",
        cloudwatch_namespace=watching.cloudwatch_namespace(stack),
        stack=stack,
        region=cfg.region,
        log_group=identity.metrics_log_group(stack),
        samples=watch.SAMPLES,
        bucket_samples=watch.bucket_samples(),
        # Behind the door, or with `vllm-key`, no gatekeeper serves the leaders' records.
        self_samples=watch.SELF_SAMPLES if wiring.gatekeeper_in_pod(cfg) else (),
        # Elastic: the collector stays up on the system nodes while no model node runs.
        node_selector=wiring.SYSTEM_LABELS if cfg.elastic else wiring.NODE_LABELS,
        # In a cluster the stack does not own it runs on the model nodes the plan counts it on.
        tolerations=[toleration(stack_taint(stack))] if cfg.existing_cluster else [],
        # Without a gatekeeper in the pod the leaders' vLLM answers /metrics on its own port.
        engine_port=None if wiring.gatekeeper_in_pod(cfg) else ServerSpec.port,
    )


def monitoring(
    cfg: StackConfig,
    plan: Plan,
    stack: str,
    cluster: ClusterRef,
    log_group: pulumi.Input[str],
    server: ModelServer,
    opts: pulumi.ResourceOptions,
) -> Monitoring:
    """The collector, the dashboard and the alarms of the stack."""
    return Monitoring(
        "watch",
        MonitoringArgs(
            cluster=cluster,
            collector=collector_spec(cfg, stack),
            application_log_group=log_group,
            namespace=server.namespace,
            load_balancer_hostname=server.load_balancer_hostname,
            watch_spec=watching.watch_spec(cfg, plan),
            alarm_email=cfg.alarm_email,
        ),
        opts=opts,
    )
