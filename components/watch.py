"""What a stack watches, as pure data: the vLLM metrics it exports, the front-door answer counts
it makes from the gatekeeper's access log, the dashboard's widgets and the alarms. No Pulumi: the
`Monitoring` component applies these, and the tests hold every vLLM name used here to the names
real vLLM 0.31 exported in the rehearsal (`tests/fixtures/vllm/metrics-v0.31.json`).

Percentiles: the collector exports each bucket of vLLM's latency histograms as its own metric
(`le` a dimension; see `components.manifests.metrics`). Per minute, the q-th percentile is
estimated as the upper bound of the first bucket whose increase reaches q of the requests in
that minute, the usual bucket estimate: it can be no finer than vLLM's bucket bounds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from components.manifests.asleep import ASLEEP_PAGE
from components.manifests.gatekeeper_answers import BUSY_PAGE
from components.manifests.identity import COLLECTOR_NAME
from components.manifests.metrics import (
    GROUP_DIMENSION,
    STACK_DIMENSION,
    exported_name,
)
from components.manifests.programs import liveness as check

#: vLLM gauges and counters the dashboard and alarms read (Prometheus sample names).
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"
PREEMPTIONS = "vllm:num_preemptions_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
#: The leader's API server process start time: it changes when LWS recreates the group. Read as
#: the newest over the stack's leaders (`Maximum`), which rises on every restart (a restarted
#: leader holds the newest start time) and only then: not when the collector writes one leader's
#: sample twice in a minute (a new collector pod's first scrape in the minute of the old one's
#: last: Prometheus sets a scrape's phase from the collector's hostname, and awsemf stamps each
#: event with its scrape's time), nor when an older leader's scrape is missing for a minute, as
#: a `Sum` would.
STARTED = "process_start_time_seconds"
#: The group-restart alarm reads the newest start time over 5 minutes, not 1: with several
#: groups, a minute in which the newest leader's scrape alone was missing reads an older
#: leader's start time, and the next minute's rise would page for a restart that never was.
#: Five such minutes in a row still page; restarts less than 5 minutes apart hold one alarm.
RESTART_PERIOD = 300
SAMPLES = (RUNNING, WAITING, KV_USAGE, PREEMPTIONS, GENERATION_TOKENS, STARTED)

#: Each leader's own record (the startup check's `GAUGES`, `programs/liveness.py`), one series
#: per group: the step its startup probe measured, the stall bound it took, whether vLLM fell back.
SELF_SAMPLES = tuple(check.GAUGES)
MEASURED_STEP, STALL_BOUND, PREFILL_FALLBACK = SELF_SAMPLES

#: Latency histograms and the finite bucket bounds vLLM 0.31 uses for them, as it prints them
#: (v1/metrics/loggers.py; the rehearsal's fixture holds the bounds it really exported).
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
BUCKETS: dict[str, tuple[str, ...]] = {
    TTFT: (
        "0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75",
        "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0",
    ),
    ITL: (
        "0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75",
        "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0",
    ),
}  # fmt: skip
BUCKET_LABEL = "le"
INF = "+Inf"
PERCENTILES = (0.5, 0.95)
PERIOD = 60

#: Front-door answers counted from the gatekeeper's JSON access log, which the add-on's Fluent Bit
#: ships with the line parsed under `log_processed` (Merge_Log_Key of the add-on's application
#: log config). nginx-light has `stub_status` (connections) only, no per-status counters, so a
#: log metric filter is the cheap honest source: the log is shipped anyway. The busy 503 (every
#: slot of the gatekeeper's `all_requests` taken) is load shedding the stack chose, not a fault:
#: 5xx leaves it out by the page that answered, as it leaves out the door's asleep answers.
ANSWER_CLASSES: dict[str, str] = {
    "2xx": "$.log_processed.status >= 200 && $.log_processed.status < 300",
    "401": "$.log_processed.status = 401",
    "413": "$.log_processed.status = 413",
    "429": "$.log_processed.status = 429",
    "5xx": f'$.log_processed.status >= 500 && $.log_processed.page != "{BUSY_PAGE}"',
}
GATEKEEPER_CONTAINER = "gatekeeper"


def answers_metric(status: str) -> str:
    return f"front_door_answers_{status}"


#: At an elastic stack's door every access-log line carries `asleep` (1 for the answers it gives
#: while no group runs, else 0; components/manifests/asleep.py): a planned sleep's 503s are not
#: server errors.
AWAKE_ONLY = "$.log_processed.asleep = 0"


def answer_filter_pattern(status: str, elastic: bool = False) -> str:
    """The metric filter pattern counting the gatekeeper's answers of one status class (at an
    elastic stack's door, 5xx leaves out the asleep answers)."""
    match = ANSWER_CLASSES[status]
    if elastic and status == "5xx":
        match = f"{match} && {AWAKE_ONLY}"
    return f'{{ $.kubernetes.container_name = "{GATEKEEPER_CONTAINER}" && {match} }}'


#: An elastic stack's door: model requests it answered asleep (no group serving). The asleep
#: page is reached by an internal redirect, logged as the `page` that answered; /health's
#: asleep answers have another page and are not counted (an uptime check polls it all night).
ASLEEP_ANSWERS = "front_door_asleep_answers"


def asleep_filter_pattern() -> str:
    """The metric filter pattern counting the door's asleep answers to model requests."""
    return (
        f'{{ $.kubernetes.container_name = "{GATEKEEPER_CONTAINER}" && '
        f'$.log_processed.asleep = 1 && $.log_processed.page = "{ASLEEP_PAGE}" }}'
    )


def not_waking_period_s(wake_seconds: int) -> int:
    """The not-waking alarm's period: at least half again a planned wake-up and a minute's scrape
    past it (the slow end of a wake, so a wake-up that is late but comes does not page), in
    whole minutes, 5 at least."""
    return 60 * max(5, math.ceil(max(1.5 * wake_seconds, wake_seconds + 120) / 60))


def bucket_samples() -> tuple[str, ...]:
    return tuple(f"{family}_bucket" for family in BUCKETS)


def self_metric_count(groups: int = 1, elastic: bool = False) -> int:
    """The leaders' own records: one metric per record series and group (`group` is a
    dimension); none behind an elastic stack's door, whose groups have no gatekeeper to serve
    them."""
    return 0 if elastic else len(SELF_SAMPLES) * groups


def custom_metric_count(elastic: bool = False, groups: int = 1) -> int:
    """CloudWatch custom metrics the stack adds (each name-dimensions pair is one): the vLLM
    series, the leaders' records of `groups` groups, the answer counts; an elastic stack's door
    adds its asleep answers."""
    vllm = len(SAMPLES) + sum(len(bounds) + 1 for bounds in BUCKETS.values())
    answers = len(ANSWER_CLASSES) + (1 if elastic else 0)
    return vllm + self_metric_count(groups, elastic) + answers


#: Container Insights' count of the cluster's worker nodes (`ClusterName` its one dimension;
#: "Enhanced Container Insights (Classic) metric reference", docs.aws.amazon.com AmazonCloudWatch
#: container-insights-eks-classic-metrics, read 2026-12-03), published by the
#: amazon-cloudwatch-observability add-on every stack installs.
NODE_COUNT = "cluster_node_count"
CONTAINER_INSIGHTS = "ContainerInsights"

#: What only the deploy knows, as the planner leaves it in a `WatchSpec`: the `Monitoring`
#: component puts the cluster's name and the load balancer's dimension in their place.
CLUSTER_PLACEHOLDER = "CLUSTER-NAME"
LOAD_BALANCER_PLACEHOLDER = "LOAD-BALANCER"


@dataclass(frozen=True)
class WatchSpec:
    """Where the metrics are and what the alarms compare them with, as the planner sets it
    (`infra.plan.watching`)."""

    stack: str
    region: str
    #: CloudWatch namespace of the stack's own metrics (EMF and log filters).
    namespace: str
    #: Alarm when more requests than this wait for 5 minutes.
    waiting_threshold: int
    #: Alarm when the front door answers more 5xx than this in 5 minutes.
    server_errors_threshold: int
    #: Groups follow the queue and the clock, and none may run (an elastic stack's door).
    elastic: bool = False
    #: The door's planned wake-up, seconds (its `Retry-After`; elastic stacks only).
    wake_seconds: int = 0
    #: The always-on system nodes (elastic stacks): the cluster's nodes above these are model
    #: nodes.
    system_nodes: int = 0
    #: Model nodes up with no Ready leader for longer than this (seconds, whole minutes) raise
    #: the idle-nodes alarm (elastic stacks; `infra.plan.elastic.idle_alarm_seconds`).
    idle_alarm_s: int = 0
    #: The plan's range for a leader's start-up measurement (`infra.plan.liveness.Liveness`):
    #: the slow end's step of the prompt a leader measures (`calibrate_step_s`) and the stall
    #: ceiling (`stall_s`), drawn beside every leader's own (fixed stacks; 0 draws none).
    plan_step_s: float = 0.0
    plan_stall_s: int = 0
    #: The plan's start-up timeout (seconds, `Plan.startup_timeout_seconds`): a fixed stack's
    #: no-metrics alarm waits this long, in whole minutes, so a cold start does not fire it.
    startup_s: int = 0
    #: The metrics collector's Kubernetes namespace (the `Monitoring` component puts its
    #: collector's): the no-metrics alarm says where its logs are.
    collector_namespace: str = "default"
    cluster_name: str = CLUSTER_PLACEHOLDER
    #: `net/<name>/<id>`, the NLB's CloudWatch dimension.
    load_balancer: str = LOAD_BALANCER_PLACEHOLDER


def _metric(namespace: str, name: str, stat: str, *dimensions: str, **options: Any) -> list[Any]:
    """A dashboard row of one metric (`dimensions`: name, value pairs)."""
    return [namespace, name, *dimensions, {"stat": stat, "period": PERIOD, **options}]


def _vllm(spec: WatchSpec, sample: str, stat: str, *dimensions: str, **options: Any) -> list[Any]:
    """A dashboard row of one of the stack's vLLM metrics (`dimensions`: more name, value pairs)."""
    name = exported_name(sample)
    return _metric(spec.namespace, name, stat, STACK_DIMENSION, spec.stack, *dimensions, **options)


def _expression(expression: str, query_id: str, **options: Any) -> list[Any]:
    return [{"expression": expression, "id": query_id, **options}]


def _per_leader(spec: WatchSpec, sample: str, query_id: str, label: str) -> list[Any]:
    """One line per leader: a SEARCH over the `group` dimension of one record series (a group
    that is gone stops drawing), labelled with its group index (CloudWatch's dynamic label
    `${PROP('Dim.group')}`)."""
    return _expression(
        f"SEARCH('{{{spec.namespace},{STACK_DIMENSION},{GROUP_DIMENSION}}} "
        f'MetricName="{exported_name(sample)}" {STACK_DIMENSION}="{spec.stack}"\', '
        f"'Maximum', {PERIOD})",
        query_id,
        label=f"{label}, group ${{PROP('Dim.{GROUP_DIMENSION}')}}",
    )


def _measurement_panel(spec: WatchSpec) -> tuple[str, list[list[Any]], dict[str, Any]]:
    """Every leader's start-up measurement beside the plan's range: its step and stall bound on
    the left, the plan's slow-end step and stall ceiling as lines across, and on the right
    whether vLLM fell back to torch's linear (1)."""
    annotations = [
        {"label": "plan: slow end's step", "value": spec.plan_step_s},
        {"label": "plan: stall ceiling", "value": spec.plan_stall_s},
    ]
    fallback = _per_leader(spec, PREFILL_FALLBACK, "fb", "fell back")
    fallback[0]["yAxis"] = "right"
    return (
        "Leaders' measured step and stall bound, seconds",
        [
            _per_leader(spec, MEASURED_STEP, "ms", "step"),
            _per_leader(spec, STALL_BOUND, "sb", "stall bound"),
            fallback,
        ],
        {
            "annotations": {"horizontal": [a for a in annotations if a["value"]]},
            "yAxis": {"left": {"min": 0}, "right": {"min": 0, "max": 1}},
        },
    )


def _increase(metric_id: str) -> str:
    """Per-minute increase of a cumulative series; 0 where it restarted."""
    return f"IF(DIFF({metric_id}) > 0, DIFF({metric_id}), 0)"


def percentile_queries(spec: WatchSpec, family: str, prefix: str) -> list[list[Any]]:
    """Dashboard metric rows: every bucket of `family` (hidden), its increases, and one visible
    expression per percentile."""
    bounds = [*BUCKETS[family], INF]
    rows: list[list[Any]] = []
    for index, bound in enumerate(bounds):
        bucket = f"{prefix}b{index}"
        rows.append(
            _vllm(spec, f"{family}_bucket", "Sum", BUCKET_LABEL, bound, id=bucket, visible=False)
        )
        rows.append(_expression(_increase(bucket), f"{prefix}i{index}", visible=False))
    total = f"{prefix}i{len(bounds) - 1}"
    for q in PERCENTILES:
        candidates = ", ".join(
            f"IF({prefix}i{index} >= {q} * {total}, {bound}, {bounds[-2]})"
            for index, bound in enumerate(bounds[:-1])
        )
        name = f"p{int(q * 100)}"
        rows.append(
            _expression(f"IF({total} > 0, MIN([{candidates}]))", f"{prefix}{name}", label=name)
        )
    return rows


def dashboard_widgets(spec: WatchSpec) -> list[dict[str, Any]]:
    """The dashboard's panels, in reading order."""
    counted = {answers_metric(status): status for status in ANSWER_CLASSES}
    if spec.elastic:
        counted[ASLEEP_ANSWERS] = "asleep"
    answers = [
        _metric(spec.namespace, metric, "Sum", label=label) for metric, label in counted.items()
    ]
    healthy = (
        "SEARCH('{AWS/NetworkELB,LoadBalancer,TargetGroup} "
        f'MetricName="HealthyHostCount" LoadBalancer="{spec.load_balancer}"\', '
        f"'Minimum', {PERIOD})"
    )
    nodes = [
        _metric(CONTAINER_INSIGHTS, metric, "Maximum", "ClusterName", spec.cluster_name, label=use)
        for metric, use in (("node_memory_utilization", "memory"), ("node_cpu_utilization", "cpu"))
    ]
    waiting_alarm = {"label": "waiting alarm", "value": spec.waiting_threshold}
    panels: list[tuple[str, list[list[Any]], dict[str, Any]]] = [
        ("Time to first token, seconds (p50, p95)", percentile_queries(spec, TTFT, "t"), {}),
        ("Inter-token latency, seconds (p50, p95)", percentile_queries(spec, ITL, "l"), {}),
        (
            "Generation tokens/s",
            [
                _vllm(spec, GENERATION_TOKENS, "Sum", id="g", visible=False),
                _expression(f"{_increase('g')} / {PERIOD}", "gps", label="tokens/s"),
            ],
            {},
        ),
        (
            "Requests running and waiting",
            [
                _vllm(spec, RUNNING, "Sum", label="running"),
                _vllm(spec, WAITING, "Sum", label="waiting"),
            ],
            {"annotations": {"horizontal": [waiting_alarm]}},
        ),
        (
            "KV cache usage (0-1)",
            [_vllm(spec, KV_USAGE, "Maximum", label="KV cache used")],
            {"yAxis": {"left": {"min": 0, "max": 1}}},
        ),
        (
            "Preemptions per minute",
            [
                _vllm(spec, PREEMPTIONS, "Sum", id="pr", visible=False),
                _expression(_increase("pr"), "prm", label="preemptions"),
            ],
            {},
        ),
        ("Front-door answers by status, per minute", answers, {"stat": "Sum"}),
        (
            "Group restarts",
            [
                _vllm(spec, STARTED, "Maximum", id="st", visible=False),
                _expression("IF(DIFF(st) > 0, 1, 0)", "rs", label="restarted"),
            ],
            {},
        ),
        ("Healthy load balancer targets", [_expression(healthy, "hh")], {}),
        (
            "Node memory and CPU, % (Container Insights)",
            nodes,
            {"yAxis": {"left": {"min": 0, "max": 100}}},
        ),
    ]
    if not spec.elastic:  # behind a door no leader serves its record
        panels.append(_measurement_panel(spec))
    return [
        {
            "type": "metric",
            "x": 12 * (i % 2),
            "y": 6 * (i // 2),
            "width": 12,
            "height": 6,
            "properties": {
                "title": title,
                "view": "timeSeries",
                "region": spec.region,
                "metrics": metrics,
                "period": PERIOD,
                **props,
            },
        }
        for i, (title, metrics, props) in enumerate(panels)
    ]


def dashboard_body(spec: WatchSpec) -> str:
    return json.dumps({"widgets": dashboard_widgets(spec)}, sort_keys=True)


def dashboard_url(region: str, name: str) -> str:
    return f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#dashboards/dashboard/{name}"


@dataclass(frozen=True)
class AlarmSpec:
    """One alarm, in `aws.cloudwatch.MetricAlarm`'s words (snake_case keyword arguments)."""

    key: str
    description: str
    args: dict[str, Any]
    #: It pages when it turns INSUFFICIENT_DATA (no data at all in its window), not ALARM.
    pages_on_no_data: bool = False


def _rule(
    comparison: str, threshold: float, periods: int, datapoints: int | None = None
) -> dict[str, Any]:
    """When an alarm fires: `comparison` (PutMetricAlarm's operator) with `threshold` in
    `datapoints` of the last `periods` periods (all of them when not given); missing data does
    not breach."""
    rule = {
        "comparison_operator": comparison,
        "threshold": threshold,
        "evaluation_periods": periods,
        "treat_missing_data": "notBreaching",
    }
    return rule if datapoints is None else {**rule, "datapoints_to_alarm": datapoints}


def _vllm_metric(spec: WatchSpec, sample: str) -> dict[str, Any]:
    """One of the stack's vLLM metrics, in `MetricAlarm`'s words."""
    return {
        "namespace": spec.namespace,
        "metric_name": exported_name(sample),
        "dimensions": {STACK_DIMENSION: spec.stack},
    }


def _query(
    query_id: str, stat: str, metric: dict[str, Any], period: int = PERIOD
) -> dict[str, Any]:
    """A metric an alarm's expression reads."""
    return {
        "id": query_id,
        "return_data": False,
        "metric": {**metric, "stat": stat, "period": period},
    }


def _result(query_id: str, expression: str, label: str) -> dict[str, Any]:
    """The query whose values the alarm compares with its threshold."""
    return {"id": query_id, "return_data": True, "expression": expression, "label": label}


def alarms(spec: WatchSpec) -> list[AlarmSpec]:
    """The stack's alarms. docs/watching.md says what each means and what to do.

    A planned sleep (an elastic stack with no group) breaches none: the load balancer's target is
    the always-on door, so it keeps a healthy target; the vLLM alarms treat missing data as not
    breaching; the 5xx count leaves out the door's asleep answers (`answer_filter_pattern`). The
    group-restart alarm is left out of elastic stacks: it watches the leaders' start times, which
    every planned wake-up and added group changes; in its place, `not-waking` fires when the door
    keeps answering model requests asleep with no group coming (a crash loop, no capacity in the
    zone, the quota); and `idle-nodes` (`_idle_nodes`) is added. A fixed stack adds
    `no-metrics` (`_no_metrics`) instead: an elastic stack sleeps with no samples."""
    if not spec.elastic:
        return [*_alarms(spec), _no_metrics(spec)]
    kept = [a for a in _alarms(spec) if a.key != "group-restart"]
    return [*kept, _not_waking(spec), _idle_nodes(spec)]


def _idle_nodes(spec: WatchSpec) -> AlarmSpec:
    """Every minute for `idle_alarm_s`, the cluster had more nodes than its system nodes (a
    model node up) and no Ready leader was scraped (the collector keeps Ready leaders only
    behind a door, `components.manifests.metrics`): past the time KEDA and the autoscaler take
    to remove a group that cannot serve and its nodes (`infra.plan.elastic.idle_alarm_seconds`),
    the nodes are billed for nothing (docs/watching.md says why and what to do). An update of
    the system nodes surges extra nodes and may raise it; it clears when the update ends."""
    minutes = max(1, spec.idle_alarm_s // PERIOD)
    nodes = {
        "namespace": CONTAINER_INSIGHTS,
        "metric_name": NODE_COUNT,
        "dimensions": {"ClusterName": spec.cluster_name},
    }
    idle = f"IF(nodes > {spec.system_nodes}, IF(FILL(up, 0) == 0, 1, 0), 0)"
    return AlarmSpec(
        "idle-nodes",
        f"Model nodes up with no Ready leader for {minutes} minutes: past the "
        f"{spec.idle_alarm_s} s in which KEDA and the Cluster Autoscaler remove a group that "
        "cannot serve and its nodes; the nodes are billed for nothing.",
        {
            **_rule("GreaterThanOrEqualToThreshold", 1, minutes, minutes),
            "metric_queries": [
                _query("nodes", "Minimum", nodes),
                # A Ready leader scraped in the minute: its queue gauge's samples.
                _query("up", "SampleCount", _vllm_metric(spec, WAITING)),
                _result("idle", idle, "model nodes with no Ready leader"),
            ],
        },
    )


def _no_metrics(spec: WatchSpec) -> AlarmSpec:
    """In every minute for the plan's start-up timeout (whole minutes, at most a day: PutMetricAlarm
    takes at most 86,400 s of evaluation), no sample of the leaders' queue gauge reached
    CloudWatch: the collector is down (Pending, OOM-killed) or its writes are refused
    (PutLogEvents is dropped after its retries: opentelemetry-collector-contrib
    internal/aws/cwlogs/cwlog_client.go), or no leader has served. Missing data is `missing`, so
    a window with no data at all turns the alarm INSUFFICIENT_DATA, which pages
    (`pages_on_no_data`); a new alarm starts there, so it pages only once data has flowed and
    stopped, never at a first deploy before the group serves (CloudWatch counts the periods
    before an alarm existed as missing: with `breaching` it would fire as soon as it is made)."""
    minutes = min(24 * 60, max(1, math.ceil(spec.startup_s / PERIOD)))
    logs = f"kubectl -n {spec.collector_namespace} logs deploy/{COLLECTOR_NAME}"
    return AlarmSpec(
        "no-metrics",
        f"No vLLM metric reached CloudWatch for {minutes} minutes: the metrics collector is down "
        f"or cannot write (its logs: `{logs}`), or no leader has served for that long (then "
        "no-healthy-target fires too).",
        {
            **_rule("LessThanThreshold", 1, minutes, minutes),
            "treat_missing_data": "missing",
            **_vllm_metric(spec, WAITING),
            "statistic": "SampleCount",
            "period": PERIOD,
        },
        pages_on_no_data=True,
    )


def _not_waking(spec: WatchSpec) -> AlarmSpec:
    """In each of two periods of `not_waking_period_s`, the door answered a model request asleep
    and no leader was scraped. A wake-up that comes puts a leader's samples in the period its
    asleep answers ended in or the next, so only a stretch longer than a slow wake-up without any
    group breaches; clients that stop asking end it (nobody is waiting)."""
    period = not_waking_period_s(spec.wake_seconds)
    asleep = {"namespace": spec.namespace, "metric_name": ASLEEP_ANSWERS}
    stuck = "IF(asleep > 0, IF(FILL(up, 0) == 0, 1, 0), 0)"
    return AlarmSpec(
        "not-waking",
        f"Model requests answered asleep in two {period // 60}-minute periods in a row with no "
        f"group scraped (a wake-up is planned at {spec.wake_seconds} s): the model does not wake.",
        {
            **_rule("GreaterThanOrEqualToThreshold", 1, 2, 2),
            "metric_queries": [
                _query("asleep", "Sum", asleep, period),
                # Any leader scraped in the period: a group is up (its gauge's samples).
                _query("up", "SampleCount", _vllm_metric(spec, WAITING), period),
                _result("stuck", stuck, "asleep with no group"),
            ],
        },
    )


def _alarms(spec: WatchSpec) -> list[AlarmSpec]:
    healthy = (
        'SELECT MIN(HealthyHostCount) FROM SCHEMA("AWS/NetworkELB", LoadBalancer, TargetGroup) '
        f"WHERE LoadBalancer = '{spec.load_balancer}'"
    )
    return [
        AlarmSpec(
            "no-healthy-target",
            "No healthy target behind the load balancer for 2 minutes: the endpoint is down.",
            {
                **_rule("LessThanThreshold", 1, 2, 2),
                # No data at all: nothing is reported healthy.
                "treat_missing_data": "breaching",
                "metric_queries": [
                    {"id": "healthy", "return_data": True, "period": PERIOD, "expression": healthy}
                ],
            },
        ),
        AlarmSpec(
            "requests-waiting",
            f"More than {spec.waiting_threshold} requests waiting for 5 minutes: the group is "
            "saturated.",
            {
                **_rule("GreaterThanThreshold", spec.waiting_threshold, 5, 5),
                **_vllm_metric(spec, WAITING),
                "statistic": "Sum",
                "period": PERIOD,
            },
        ),
        AlarmSpec(
            "kv-cache-full",
            "KV cache above 90% for 10 minutes: requests will queue and be preempted.",
            {
                **_rule("GreaterThanThreshold", 0.9, 10, 10),
                **_vllm_metric(spec, KV_USAGE),
                "statistic": "Maximum",
                "period": PERIOD,
            },
        ),
        AlarmSpec(
            "group-restart",
            "A vLLM group restarted (its leader's process start time changed).",
            {
                **_rule("GreaterThanOrEqualToThreshold", 1, 1),
                "metric_queries": [
                    _query("st", "Maximum", _vllm_metric(spec, STARTED), RESTART_PERIOD),
                    _result("restarted", "IF(DIFF(st) > 0, 1, 0)", "group restarted"),
                ],
            },
        ),
        AlarmSpec(
            "server-errors",
            f"More than {spec.server_errors_threshold} 5xx answers from the front door in 5 "
            "minutes.",
            {
                **_rule("GreaterThanThreshold", spec.server_errors_threshold, 1),
                "namespace": spec.namespace,
                "metric_name": answers_metric("5xx"),
                "statistic": "Sum",
                "period": 300,
            },
        ),
    ]
