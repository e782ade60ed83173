"""Watching the model server: the metrics collector, the front-door answer counts, a CloudWatch
dashboard and alarms that notify an SNS topic.

The collector (`components.manifests.metrics`) scrapes every leader's gatekeeper metrics listener
and writes EMF log events that CloudWatch turns into metrics; log metric filters count the
gatekeeper's answers by status from the access log the logs add-on already ships; the dashboard,
alarms and filters are pure data from `components.watch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pulumi
import pulumi_aws as aws

from components import watch
from components.addons import ClusterRef, pod_identity
from components.manifests import metrics
from components.manifests.metrics import CollectorSpec
from components.objects import create


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
    #: The dashboard's and the alarms' figures, as planned (the deploy's names in placeholders).
    watch_spec: watch.WatchSpec
    #: E-mail address subscribed to the alarms' topic (it must confirm), or None.
    alarm_email: str | None = None
    #: Days the EMF log events are kept (the metrics themselves stay 15 months).
    metrics_log_retention_days: int = 7


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
        spec, elastic = args.collector, args.watch_spec.elastic
        self._collector(name, args)

        # One counter per answer class, and at an elastic stack's door the asleep answers.
        filters = {
            status: (watch.answers_metric(status), watch.answer_filter_pattern(status, elastic))
            for status in watch.ANSWER_CLASSES
        }
        if elastic:
            filters["asleep"] = (watch.ASLEEP_ANSWERS, watch.asleep_filter_pattern())
        for status, (metric, pattern) in filters.items():
            aws.cloudwatch.LogMetricFilter(
                f"{name}-answers-{status}",
                log_group_name=args.application_log_group,
                pattern=pattern,
                metric_transformation={
                    "name": metric,
                    "namespace": spec.cloudwatch_namespace,
                    "value": "1",
                    "default_value": "0",
                    "unit": "Count",
                },
                opts=child,
            )

        # The planned spec holds placeholders for the LB dimension (the healthy-target panel and
        # query) and the cluster's name (the nodes panel and the idle-nodes alarm); the
        # collector's namespace is this component's own (the no-metrics alarm names it).
        planned = replace(args.watch_spec, collector_namespace=spec.namespace)
        deployed = {
            planned.load_balancer: pulumi.Output.from_input(args.load_balancer_hostname).apply(
                load_balancer_dimension
            ),
            planned.cluster_name: pulumi.Output.from_input(args.cluster.cluster_name),
        }
        watch_spec = pulumi.Output.all(*deployed.values()).apply(
            lambda parts: replace(planned, load_balancer=parts[0], cluster_name=parts[1])
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
        # The alarms put the deploy's names in their place, so they are registered outside any
        # apply.
        for alarm in watch.alarms(planned):
            aws.cloudwatch.MetricAlarm(
                f"{name}-{alarm.key}",
                alarm_description=alarm.description,
                alarm_actions=[topic.arn],
                ok_actions=[topic.arn],
                insufficient_data_actions=[topic.arn] if alarm.pages_on_no_data else None,
                opts=child,
                **_deployed(alarm.args, deployed),
            )

        self.dashboard_url = dashboard.dashboard_name.apply(
            lambda dashboard_name: watch.dashboard_url(spec.region, dashboard_name)
        )
        self.topic_arn = topic.arn
        self.register_outputs({"dashboardUrl": self.dashboard_url, "topicArn": self.topic_arn})

    def _collector(self, name: str, args: MonitoringArgs) -> None:
        spec, namespace, cluster = args.collector, args.namespace, args.cluster
        emf_logs = aws.cloudwatch.LogGroup(
            f"{name}-emf",
            name=spec.log_group,
            retention_in_days=args.metrics_log_retention_days,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # The bootstrap's role for the collector (`components.stack_roles`, `emf_policy`).
        identity = pod_identity(
            f"{name}-collector-identity",
            cluster,
            namespace=spec.namespace,
            service_account=spec.name,
            parent=self,
        )
        *objects, deployment = metrics.collector_objects(spec)
        for obj, suffix in zip(objects, ("sa", "role", "binding", "config"), strict=True):
            create(obj, f"{name}-collector-{suffix}", namespace, parent=self)
        # The association's id, read from its wait: a new association rolls the pod.
        deployment["spec"]["template"]["metadata"]["annotations"].update(identity.pod_annotations())
        # The log group exists before the first EMF event, the pod comes after its association
        # is effective (the wait) and the agent that serves its credentials, and goes before
        # the nodes on destroy.
        create(
            deployment,
            f"{name}-collector",
            namespace,
            parent=self,
            depends_on=[
                emf_logs,
                identity.settled,
                *cluster.after_identity(),
                *([cluster.nodes] if cluster.nodes is not None else []),
            ],
        )


def _deployed(value: Any, deployed: Mapping[str, pulumi.Output[str]]) -> Any:
    """`value` with each string that holds a placeholder made the deploy's own value."""
    if isinstance(value, Mapping):
        return {key: _deployed(item, deployed) for key, item in value.items()}
    if isinstance(value, list):
        return [_deployed(item, deployed) for item in value]
    for placeholder, output in deployed.items():
        if isinstance(value, str) and placeholder in value:
            return output.apply(lambda real, p=placeholder, v=value: v.replace(p, real))
    return value
