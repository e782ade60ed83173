"""What the stack watches, held to the real thing.

The dashboard and the alarms may use only metric names, labels and bucket bounds that real vLLM
0.31 exported in the rehearsal. The fixture `tests/fixtures/vllm/metrics-v0.31.json` is written by
`make rehearse` (`tools/rehearse/measure/metrics_capture.py` scrapes the running leader through the
gatekeeper's metrics listener); to refresh it, run `make rehearse` and commit the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import watch
from components.manifests import gatekeeper, metrics
from components.monitoring import load_balancer_dimension
from infra.adapters import monitoring_layer, wiring
from infra.adapters.render import rendered_objects
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests import builders
from tools.rehearse.measure.metrics_capture import parse_exposition

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm" / "metrics-v0.31.json"
SPEC = watch.WatchSpec(
    stack="dev",
    region="us-west-2",
    namespace="GemmaGraviton/dev",
    cluster_name="eks-cluster",
    load_balancer="net/a1b2/c3d4",
    waiting_threshold=3,
    server_errors_threshold=5,
)


@pytest.fixture(scope="module")
def exported() -> dict[str, Any]:
    document = json.loads(FIXTURE.read_text())
    assert document["vllm_version"].startswith("0.31"), document["vllm_version"]
    return document["families"]


def _sample_family(families: dict[str, Any], sample: str) -> dict[str, Any]:
    for family in families.values():
        if sample in family["samples"]:
            return family
    pytest.fail(f"{sample} is not among the samples real vLLM 0.31 exported ({FIXTURE.name})")


def test_every_vllm_name_the_dashboard_and_alarms_use_is_real(exported: dict[str, Any]) -> None:
    used = watch.used_vllm_samples(watch.dashboard_widgets(SPEC), watch.alarms(SPEC))
    assert used == set(watch.SAMPLES) | set(watch.bucket_samples())
    for sample in used:
        _sample_family(exported, sample)


def test_bucket_bounds_and_labels_are_real(exported: dict[str, Any]) -> None:
    for family_name, bounds in watch.BUCKETS.items():
        family = exported[family_name]
        assert family["type"] == "histogram"
        assert watch.BUCKET_LABEL in family["labels"]
        assert list(bounds) == family["buckets"], family_name
    # The only labels the exported metrics are split by, besides the stack's own dimension:
    # vLLM's by bucket, the leaders' own records by group.
    declarations = yaml.safe_load(metrics.collector_config(_collector()))["exporters"]["awsemf"][
        "metric_declarations"
    ]
    labels = {label for d in declarations for dims in d["dimensions"] for label in dims}
    assert labels == {metrics.STACK_DIMENSION, watch.BUCKET_LABEL, metrics.GROUP_DIMENSION}
    (records,) = [d for d in declarations if metrics.GROUP_DIMENSION in d["dimensions"][0]]
    assert records["metric_name_selectors"] == [
        f"^{metrics.exported_name(s)}$" for s in sorted(watch.SELF_SAMPLES)
    ]


def test_the_capture_parser_reads_families_types_labels_and_buckets() -> None:
    text = """# HELP vllm:x_seconds h
# TYPE vllm:x_seconds histogram
vllm:x_seconds_bucket{engine="0",le="0.5",model_name="m"} 1.0
vllm:x_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:x_seconds_count{engine="0",model_name="m"} 2.0
vllm:x_seconds_sum{engine="0",model_name="m"} 0.7
# TYPE vllm:n_total counter
vllm:n_total{engine="0"} 3.0
"""
    families = parse_exposition(text)
    assert families["vllm:x_seconds"].buckets == ("0.5",)
    assert families["vllm:x_seconds"].labels == ("engine", "le", "model_name")
    assert "vllm:x_seconds_bucket" in families["vllm:x_seconds"].samples
    assert families["vllm:n_total"].type == "counter"


def _collector() -> metrics.CollectorSpec:
    return monitoring_layer.collector_spec(load_stack("dev"), "dev")


def test_the_collector_scrapes_leaders_metrics_port_and_keeps_only_used_series() -> None:
    config = yaml.safe_load(metrics.collector_config(_collector()))
    scrape, records = config["receivers"]["prometheus"]["config"]["scrape_configs"]
    assert records["job_name"] == "leader-records"
    (sd,) = scrape["kubernetes_sd_configs"]
    assert sd["namespaces"]["names"] == [wiring.NAMESPACE]
    assert "leaderworkerset.sigs.k8s.io/worker-index=0" in sd["selectors"][0]["label"]
    keep_port = scrape["relabel_configs"][0]
    assert keep_port["action"] == "keep" and keep_port["regex"] == gatekeeper.METRICS_PORT_NAME
    keep, rename = scrape["metric_relabel_configs"]
    assert set(keep["regex"].split("|")) == set(watch.SAMPLES) | set(watch.bucket_samples())
    # `$$` is the collector config's escape for a literal `$`.
    assert rename["replacement"] == "$${1}" + metrics.RAW_SUFFIX
    assert config["exporters"]["awsemf"]["namespace"] == "GemmaGraviton/dev"


def _admits(policy: dict[str, Any], peer: dict[str, dict[str, str]] | None, port: int) -> bool:
    """Whether an ingress NetworkPolicy admits a connection on `port` from `peer`
    ({"namespace": labels, "pod": labels}; None for an address outside the cluster, such as a
    client the load balancer forwards). The subset of the API the policies here use."""

    def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())

    for rule in policy["spec"]["ingress"]:
        ports = [p["port"] for p in rule.get("ports", [])]
        if ports and port not in ports:
            continue
        sources = rule.get("from")
        if not sources:
            return True
        for source in sources:
            if peer is None or "ipBlock" in source:
                continue
            ns_ok = (
                matches(source["namespaceSelector"], peer["namespace"])
                if "namespaceSelector" in source
                else peer["namespace"] == {metrics.NAMESPACE_NAME_LABEL: wiring.NAMESPACE}
            )
            pod_ok = (
                matches(source["podSelector"], peer["pod"]) if "podSelector" in source else True
            )
            if ns_ok and pod_ok:
                return True
    return False


def test_the_metrics_port_admits_the_collector_only_never_the_load_balancer() -> None:
    cfg = load_stack("dev")
    objects = rendered_objects(cfg, plan(cfg, "dev"))
    (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"]
    (service,) = [o for o in objects if o["kind"] == "Service"]
    here = {metrics.NAMESPACE_NAME_LABEL: wiring.NAMESPACE}
    elsewhere = {metrics.NAMESPACE_NAME_LABEL: "amazon-cloudwatch"}
    collector = {"namespace": here, "pod": dict(metrics.LABELS)}
    port = gatekeeper.METRICS_PORT
    assert _admits(policy, collector, port)
    assert not _admits(policy, {"namespace": here, "pod": {"app": "other"}}, port)
    assert not _admits(policy, {"namespace": elsewhere, "pod": dict(metrics.LABELS)}, port)
    assert not _admits(policy, None, port)  # a client through the load balancer
    assert _admits(policy, None, gatekeeper.PORT)  # ... reaches the front door only
    targets = {p["targetPort"] for p in service["spec"]["ports"]}
    assert targets == {gatekeeper.PORT_NAME}
    # The collector's own pods carry exactly the labels the policy names.
    deployment = metrics.deployment(_collector())
    assert deployment["spec"]["template"]["metadata"]["labels"] == metrics.LABELS
    assert deployment["metadata"]["namespace"] == wiring.NAMESPACE
    assert "hostNetwork" not in deployment["spec"]["template"]["spec"]


def test_dashboard_has_every_panel_the_issue_lists() -> None:
    titles = [w["properties"]["title"] for w in watch.dashboard_widgets(SPEC)]
    for needle in (
        "Time to first token",
        "Inter-token latency",
        "Generation tokens/s",
        "Requests running and waiting",
        "KV cache usage",
        "Preemptions",
        "Front-door answers by status",
        "Group restarts",
        "Node memory and CPU",
    ):
        assert any(needle in t for t in titles), needle
    answers = next(
        w for w in watch.dashboard_widgets(SPEC) if "Front-door" in w["properties"]["title"]
    )
    assert [m[1] for m in answers["properties"]["metrics"]] == [
        watch.answers_metric(s) for s in ("2xx", "401", "413", "429", "5xx")
    ]


def test_percentile_is_the_first_bucket_reaching_the_share() -> None:
    rows = watch.percentile_queries(SPEC, watch.TTFT, "t")
    bounds = [*watch.BUCKETS[watch.TTFT], watch.INF]
    assert [r[5] for r in rows if isinstance(r[0], str)] == bounds
    p95 = next(r[0] for r in rows if isinstance(r[0], dict) and r[0]["id"] == "tp95")
    total = f"ti{len(bounds) - 1}"
    assert p95["expression"].startswith(f"IF({total} > 0, MIN([")
    assert f"IF(ti0 >= 0.95 * {total}, 0.001," in p95["expression"]


def test_alarms_read_what_the_issue_asks() -> None:
    specs = {a.key: a for a in watch.alarms(SPEC)}
    assert set(specs) == {
        "no-healthy-target",
        "requests-waiting",
        "kv-cache-full",
        "group-restart",
        "server-errors",
    }
    assert specs["requests-waiting"].args["threshold"] == 3
    assert specs["requests-waiting"].args["evaluation_periods"] * watch.PERIOD == 300
    kv = specs["kv-cache-full"].args
    assert kv["threshold"] == 0.9 and kv["evaluation_periods"] * watch.PERIOD == 600
    healthy = specs["no-healthy-target"].args["metric_queries"][0]["expression"]
    assert "HealthyHostCount" in healthy and "net/a1b2/c3d4" in healthy
    assert specs["server-errors"].args["metric_name"] == watch.answers_metric("5xx")


def test_answer_filters_read_the_gatekeepers_log_fields() -> None:
    pattern = watch.answer_filter_pattern("429")
    assert pattern == (
        '{ $.kubernetes.container_name = "gatekeeper" && $.log_processed.status = 429 }'
    )
    # The gatekeeper writes `status` as a JSON number (see its log_format).
    assert '"status":$status' in gatekeeper.nginx_conf(
        builders.gatekeeper_limits(
            max_request_bytes=1000,
            client_requests_per_minute=60,
            client_burst=2,
            client_concurrent_requests=1,
            reply_timeout_seconds=120,
        )
    )


def test_load_balancer_dimension_from_its_dns_name() -> None:
    name = "a0123456789abcdef0123456789abcde-0123456789abcdef.elb.us-west-2.amazonaws.com"
    assert load_balancer_dimension(name) == (
        "net/a0123456789abcdef0123456789abcde/0123456789abcdef"
    )
