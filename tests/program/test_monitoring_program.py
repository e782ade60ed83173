"""Watching it, under the mocks: every stack creates the collector, the answer counts, the
dashboard, the alarms and their topic, and exports `dashboardUrl`; `monitoring: false` creates
none of them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from components import watch
from components.manifests import identity, metrics
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests.fakes.pulumi_mocks import RecordingMocks, by_type, named, one, resolve
from tests.program.harness import EVERYTHING_ON, run_program, shared_run, stacks_with

pytestmark = pytest.mark.usefixtures("as_pulumi_host")

ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"


@pytest.mark.parametrize("stack", stacks_with("monitoring"))
def test_every_stack_watches_its_model_server(stack: str) -> None:
    mocks, exports = shared_run(stack)
    dashboard = one(mocks.records, "aws:cloudwatch/dashboard:Dashboard")
    body = json.loads(dashboard.inputs["dashboardBody"])
    cfg = load_stack(stack)
    # A fixed stack's leaders serve their own start-up records: one panel more, drawn beside
    # the plan's slow-end step and stall ceiling (behind a door no leader serves one).
    assert len(body["widgets"]) == (10 if cfg.elastic else 11), dashboard.urn
    if not cfg.elastic:
        live = plan(cfg, stack).liveness
        panel = body["widgets"][-1]["properties"]
        assert panel["title"].startswith("Leaders' measured step"), dashboard.urn
        planned = [live.calibrate_step_s, live.probes.stall_s]
        assert [a["value"] for a in panel["annotations"]["horizontal"]] == planned, dashboard.urn
    region = named(mocks.records, "pulumi:providers:aws", "aws").inputs["region"]
    assert resolve(exports["dashboardUrl"]) == (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region="
        f"{region}#dashboards/dashboard/gemma-graviton-{stack}"
    )
    alarms = by_type(mocks.records, "aws:cloudwatch/metricAlarm:MetricAlarm")
    # An elastic stack has not-waking in place of group-restart (every planned wake-up would
    # fire that one), and idle-nodes in place of no-metrics (it sleeps with no samples).
    elastic = cfg.elastic
    keys = {a.name.removeprefix("watch-") for a in alarms}
    assert len(alarms) == 6
    assert ("not-waking" in keys, "group-restart" in keys) == (elastic, not elastic)
    # Its clock, the plan's: tests/program/test_elastic_program.py.
    assert ("idle-nodes" in keys, "no-metrics" in keys) == (elastic, not elastic)
    if not elastic:
        # It waits out the plan's start-up timeout and names the collector's own namespace.
        silent = named(mocks.records, "aws:cloudwatch/metricAlarm:MetricAlarm", "watch-no-metrics")
        assert silent.inputs["evaluationPeriods"] == plan(cfg, stack).startup_timeout_seconds // 60
        # It pages on INSUFFICIENT_DATA (no data at all), which a new alarm starts in: never at
        # a first deploy before the group serves.
        assert silent.inputs["treatMissingData"] == "missing", silent.urn
        assert silent.inputs["insufficientDataActions"] == silent.inputs["alarmActions"]
        logs = f"kubectl -n gemma-graviton logs deploy/{metrics.NAME}"
        assert logs in silent.inputs["alarmDescription"], silent.urn
    topic = one(mocks.records, "aws:sns/topic:Topic")
    for alarm in alarms:
        assert alarm.inputs["alarmActions"] == [topic.outputs["arn"]], alarm.urn
    (healthy,) = [a for a in alarms if a.name == "watch-no-healthy-target"]
    query = healthy.inputs["metricQueries"][0]["expression"]
    assert "LoadBalancer = 'net/a" in query, healthy.urn
    filters = by_type(mocks.records, "aws:cloudwatch/logMetricFilter:LogMetricFilter")
    assert sorted(f.inputs["metricTransformation"]["name"] for f in filters) == sorted(
        [watch.answers_metric(s) for s in watch.ANSWER_CLASSES]
        + ([watch.ASLEEP_ANSWERS] if elastic else [])
    )
    deployment = named(mocks.records, "kubernetes:apps/v1:Deployment", "watch-collector")
    assert deployment.inputs["metadata"]["namespace"] == "gemma-graviton"
    config = named(mocks.records, "kubernetes:core/v1:ConfigMap", "watch-collector-config")
    scrape = yaml.safe_load(config.inputs["data"][metrics.CONFIG_FILE])
    assert scrape["exporters"]["awsemf"]["namespace"] == f"GemmaGraviton/{stack}"
    # EKS Pod Identity maps the account to the bootstrap's collector role.
    account = named(mocks.records, "kubernetes:core/v1:ServiceAccount", "watch-collector-sa")
    association = named(mocks.records, ASSOCIATION, "watch-collector-identity")
    role = named(mocks.records, "aws:iam/role:Role", "role-collector")
    assert association.inputs["roleArn"] == role.outputs["arn"], association.urn
    assert association.inputs["serviceAccount"] == account.inputs["metadata"]["name"]
    assert association.inputs["namespace"] == account.inputs["metadata"]["namespace"]
    assert by_type(mocks.records, "aws:sns/topicSubscription:TopicSubscription") == []
    # The group the program creates is the one the bootstrap's role writes to, and only there
    # (its policy: tests/components/test_stack_roles.py).
    group = named(mocks.records, "aws:cloudwatch/logGroup:LogGroup", "watch-emf")
    assert group.inputs["name"] == identity.metrics_log_group(stack), group.urn


def test_an_alarm_email_subscribes_to_the_topic() -> None:
    mocks, _ = shared_run("dev", EVERYTHING_ON)
    subscription = one(mocks.records, "aws:sns/topicSubscription:TopicSubscription")
    assert subscription.inputs["protocol"] == "email"
    assert subscription.inputs["endpoint"] == "oncall@example.com"


def test_monitoring_off_creates_none_of_it(mocks: RecordingMocks, exports: dict[str, Any]) -> None:
    dev = {(r.type_, r.name) for r in shared_run("dev")[0].records}
    run_program(mocks, "dev", {"monitoring": False})
    # No Monitoring component (named `watch`), so no child of one.
    assert not [r.urn for r in mocks.records if r.name.startswith("watch")]
    assert "dashboardUrl" not in exports and "alarmTopic" not in exports
    # Off removes exactly the Monitoring component and its children (named after it), as minimal.
    layer = {(t, n) for t, n in dev if n.startswith("watch")}
    assert dev - {(r.type_, r.name) for r in mocks.records} == layer
    assert ("gemma-graviton:monitoring:Monitoring", "watch") in layer
    assert not [r.urn for r in shared_run("minimal")[0].records if r.name.startswith("watch")]
