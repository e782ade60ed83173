"""Watching the model server: the metrics collector, the front-door answer counts, a CloudWatch
dashboard and alarms that notify an SNS topic.

The collector (`components.manifests.metrics`) scrapes every leader's gatekeeper metrics listener
and writes EMF log events that CloudWatch turns into metrics; log metric filters count the
gatekeeper's answers by status from the access log the logs add-on already ships; the dashboard,
alarms and filters are pure data from `components.watch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import watch
from components.addons import ClusterRef, PodIdentity, pod_identity
from components.manifests import metrics
from components.manifests.metrics import CollectorSpec


@dataclass(frozen=True)
class MonitoringArgs:
    """What is watched and who is told."""

    #: The cluster (for the collector's IAM role and Container Insights' dimension).
    cluster: ClusterRef
    #: The collector's objects, as planned (namespace, leaders, CloudWatch names).
    collector: CollectorSpec
    #: Log group of the containers' output (the gatekeeper's access log is in it).
    application_log_group: pulumi.Input[str]
    #: The model server's namespace object name; the collector is created once it exists.
    namespace: pulumi.Input[str]
    #: Hostname of the load balancer (its CloudWatch dimension is derived from it).
    load_balancer_hostname: pulumi.Input[str]
    #: Alarm when more requests than this wait for 5 minutes.
    waiting_threshold: int
    #: Alarm when the front door answers more 5xx than this in 5 minutes.
    server_errors_threshold: int
    #: E-mail address subscribed to the alarms' topic (it must confirm), or None.
    alarm_email: str | None = None
    #: Days the EMF log events are kept (the metrics themselves stay 15 months).
    metrics_log_retention_days: int = 7
    #: Groups follow the queue and the clock and may all sleep (`watch.alarms` says what
    #: changes).
    elastic: bool = False
    #: The door's planned wake-up, seconds (elastic stacks: the not-waking alarm's clock).
    wake_seconds: int = 0
    #: The always-on system nodes (elastic stacks: more nodes than these are model nodes).
    system_nodes: int = 0
    #: The idle-nodes alarm's clock, seconds (elastic stacks; `watch.WatchSpec.idle_alarm_s`).
    idle_alarm_s: int = 0
    #: The plan's range for the leaders' start-up measurement, drawn beside it: the slow end's
    #: step of the measured prompt and the stall ceiling (`watch.WatchSpec.plan_step_s`).
    plan_step_s: float = 0.0
    plan_stall_s: int = 0


def load_balancer_dimension(hostname: str) -> str:
    """`net/<name>/<id>` from an NLB's DNS name `<name>-<id>.elb.<region>.amazonaws.com`."""
    first = hostname.split(".", 1)[0]
    name, _, lb_id = first.rpartition("-")
    return f"net/{name}/{lb_id}"


class Monitoring(pulumi.ComponentResource):
    """Collector, answer counts, dashboard, topic and alarms.

    Pass the cluster's `k8s.Provider` and the AWS provider in `opts.providers`.
    """

    dashboard_url: pulumi.Output[str]
    """Console URL of the dashboard."""
    topic_arn: pulumi.Output[str]
    """SNS topic the alarms notify."""

    def __init__(
        self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:monitoring:Monitoring", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec = args.collector

        emf_logs = aws.cloudwatch.LogGroup(
            f"{name}-emf",
            name=spec.log_group,
            retention_in_days=args.metrics_log_retention_days,
            opts=child,
        )
        # The bootstrap's role for the collector (`components.stack_roles`, `emf_policy`).
        identity = pod_identity(
            f"{name}-collector-identity",
            args.cluster,
            namespace=spec.namespace,
            service_account=spec.name,
            parent=self,
        )
        self._collector(name, spec, args.namespace, emf_logs, identity, args.cluster)

        for status in watch.ANSWER_CLASSES:
            aws.cloudwatch.LogMetricFilter(
                f"{name}-answers-{status}",
                log_group_name=args.application_log_group,
                pattern=watch.answer_filter_pattern(status, args.elastic),
                metric_transformation={
                    "name": watch.answers_metric(status),
                    "namespace": spec.cloudwatch_namespace,
                    "value": "1",
                    "default_value": "0",
                    "unit": "Count",
                },
                opts=child,
            )
        if args.elastic:
            aws.cloudwatch.LogMetricFilter(
                f"{name}-answers-asleep",
                log_group_name=args.application_log_group,
                pattern=watch.asleep_filter_pattern(),
                metric_transformation={
                    "name": watch.ASLEEP_ANSWERS,
                    "namespace": spec.cloudwatch_namespace,
                    "value": "1",
                    "default_value": "0",
                    "unit": "Count",
                },
                opts=child,
            )

        watch_spec = pulumi.Output.all(
            args.cluster.cluster_name, args.load_balancer_hostname
        ).apply(
            lambda parts: watch.WatchSpec(
                stack=spec.stack,
                region=spec.region,
                namespace=spec.cloudwatch_namespace,
                cluster_name=parts[0],
                load_balancer=load_balancer_dimension(parts[1]),
                waiting_threshold=args.waiting_threshold,
                server_errors_threshold=args.server_errors_threshold,
                elastic=args.elastic,
                wake_seconds=args.wake_seconds,
                system_nodes=args.system_nodes,
                idle_alarm_s=args.idle_alarm_s,
                plan_step_s=args.plan_step_s,
                plan_stall_s=args.plan_stall_s,
            )
        )
        dashboard = aws.cloudwatch.Dashboard(
            f"{name}-dashboard",
            dashboard_name=f"gemma-graviton-{spec.stack}",
            dashboard_body=watch_spec.apply(watch.dashboard_body),
            opts=child,
        )
        topic = aws.sns.Topic(f"{name}-alarms", opts=child)
        if args.alarm_email:
            aws.sns.TopicSubscription(
                f"{name}-alarms-email",
                topic=topic.arn,
                protocol="email",
                endpoint=args.alarm_email,
                opts=child,
            )
        self._alarms(name, spec, args, topic)

        self.dashboard_url = dashboard.dashboard_name.apply(
            lambda dashboard_name: watch.dashboard_url(spec.region, dashboard_name)
        )
        self.topic_arn = topic.arn
        self.register_outputs({"dashboardUrl": self.dashboard_url, "topicArn": self.topic_arn})

    def _collector(
        self,
        name: str,
        spec: CollectorSpec,
        namespace: pulumi.Input[str],
        emf_logs: aws.cloudwatch.LogGroup,
        identity: PodIdentity,
        cluster: ClusterRef,
    ) -> None:
        child = pulumi.ResourceOptions(parent=self)
        account, role_, binding, config, deployment = metrics.collector_objects(spec)

        def meta(obj: metrics.Manifest) -> dict[str, Any]:
            return {**obj["metadata"], "namespace": namespace}

        k8s.core.v1.ServiceAccount(f"{name}-collector-sa", metadata=meta(account), opts=child)
        k8s.rbac.v1.Role(
            f"{name}-collector-role", metadata=meta(role_), rules=role_["rules"], opts=child
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-collector-binding",
            metadata=meta(binding),
            role_ref=binding["roleRef"],
            subjects=binding["subjects"],
            opts=child,
        )
        k8s.core.v1.ConfigMap(
            f"{name}-collector-config", metadata=meta(config), data=config["data"], opts=child
        )
        template = deployment["spec"]["template"]
        pod_meta = template["metadata"]
        k8s.apps.v1.Deployment(
            f"{name}-collector",
            metadata=meta(deployment),
            spec={
                **deployment["spec"],
                # The association's id, read from its wait: a new association rolls the pod.
                "template": {
                    **template,
                    "metadata": {
                        **pod_meta,
                        "annotations": {**pod_meta["annotations"], **identity.pod_annotations()},
                    },
                },
            },
            # The log group exists before the first EMF event, the pod comes after its
            # association is effective (the wait) and the agent that serves its credentials,
            # and goes before the nodes on destroy.
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[
                    emf_logs,
                    identity.settled,
                    *cluster.after_identity(),
                    *([cluster.nodes] if cluster.nodes is not None else []),
                ],
            ),
        )

    def _alarms(
        self, name: str, spec: CollectorSpec, args: MonitoringArgs, topic: aws.sns.Topic
    ) -> None:
        lb = pulumi.Output.from_input(args.load_balancer_hostname).apply(load_balancer_dimension)
        cluster = pulumi.Output.from_input(args.cluster.cluster_name)
        # The specs need the LB dimension for the healthy-target query and the cluster's name
        # for the idle-nodes one; build them with placeholders and substitute, so the alarms
        # are registered outside any apply.
        placeholder, cluster_placeholder = "LOAD-BALANCER", "CLUSTER-NAME"
        specs = watch.alarms(
            watch.WatchSpec(
                stack=spec.stack,
                region=spec.region,
                namespace=spec.cloudwatch_namespace,
                cluster_name=cluster_placeholder,
                load_balancer=placeholder,
                waiting_threshold=args.waiting_threshold,
                server_errors_threshold=args.server_errors_threshold,
                elastic=args.elastic,
                wake_seconds=args.wake_seconds,
                system_nodes=args.system_nodes,
                idle_alarm_s=args.idle_alarm_s,
            )
        )
        for alarm in specs:
            kwargs: dict[str, Any] = dict(alarm.args)
            if "metric_queries" in kwargs:
                kwargs["metric_queries"] = [
                    _with_cluster(_with_lb(query, placeholder, lb), cluster_placeholder, cluster)
                    for query in kwargs["metric_queries"]
                ]
            aws.cloudwatch.MetricAlarm(
                f"{name}-{alarm.key}",
                alarm_description=alarm.description,
                alarm_actions=[topic.arn],
                ok_actions=[topic.arn],
                opts=pulumi.ResourceOptions(parent=self),
                **kwargs,
            )


def _with_lb(query: Mapping[str, Any], placeholder: str, lb: pulumi.Output[str]) -> Any:
    expression = query.get("expression")
    if isinstance(expression, str) and placeholder in expression:
        return {
            **query,
            "expression": lb.apply(lambda value: expression.replace(placeholder, value)),
        }
    return dict(query)


def _with_cluster(query: Mapping[str, Any], placeholder: str, name: pulumi.Output[str]) -> Any:
    metric = query.get("metric")
    if not isinstance(metric, Mapping):
        return dict(query)
    dimensions = dict(metric.get("dimensions") or {})
    if dimensions.get("ClusterName") != placeholder:
        return dict(query)
    return {**query, "metric": {**metric, "dimensions": {**dimensions, "ClusterName": name}}}
