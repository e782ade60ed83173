"""What the stack watches, held to the real thing.

The dashboard and the alarms may use only metric names, labels and bucket bounds that real vLLM
0.31 exported in the rehearsal. The fixture `tests/fixtures/vllm/metrics-v0.31.json` is written by
`make rehearse` (`tools/rehearse/measure/metrics_capture.py` scrapes the running leader through the
gatekeeper's metrics listener); to refresh it, run `make rehearse` and commit the diff.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from components import watch
from components.manifests import gatekeeper, metrics
from components.monitoring import load_balancer_dimension
from infra.adapters import wiring
from tests import builders
from tests.components.test_watch import _dev_collector, dev_spec
from tools.rehearse.measure.metrics_capture import parse_exposition

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm" / "metrics-v0.31.json"


@pytest.fixture(scope="module")
def exported() -> dict[str, Any]:
    document = json.loads(FIXTURE.read_text())
    assert document["vllm_version"].startswith("0.31"), document["vllm_version"]
    return document["families"]


def _vllm_samples(read: Any) -> set[str]:
    """Every exported vLLM metric name widgets or alarm arguments read, as the scraped name."""
    return set(re.findall(rf'"([^"]+){metrics.RAW_SUFFIX}"', json.dumps(read)))


def test_every_vllm_name_the_dashboard_and_alarms_use_is_real(exported: dict[str, Any]) -> None:
    spec = dev_spec()
    alarmed = _vllm_samples([alarm.args for alarm in watch.alarms(spec)])
    assert alarmed == {watch.WAITING, watch.KV_USAGE, watch.STARTED}
    used = _vllm_samples(watch.dashboard_widgets(spec))
    assert used == set(watch.SAMPLES) | set(watch.bucket_samples())
    real = {sample for family in exported.values() for sample in family["samples"]}
    assert used <= real, f"not among what real vLLM 0.31 exported ({FIXTURE.name}): {used - real}"


def test_bucket_bounds_and_labels_are_real(exported: dict[str, Any]) -> None:
    for family_name, bounds in watch.BUCKETS.items():
        family = exported[family_name]
        assert family["type"] == "histogram"
        assert watch.BUCKET_LABEL in family["labels"]
        assert list(bounds) == family["buckets"], family_name


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


def test_the_metrics_port_admits_the_collector_only_never_the_load_balancer() -> None:
    objects = builders.rendered("dev")
    (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"]
    (service,) = [o for o in objects if o["kind"] == "Service"]
    # The group's and the front door's rules are pinned in test_manifest_fields.py (no other
    # rule names no peer, so no client through the load balancer); the metrics port's rule
    # admits the collector's namespace and labels (`scraper_peer`) and nothing else.
    assert policy["spec"]["ingress"][2] == {
        "from": [metrics.scraper_peer(wiring.NAMESPACE)],
        "ports": [{"port": gatekeeper.METRICS_PORT, "protocol": "TCP"}],
    }
    targets = {p["targetPort"] for p in service["spec"]["ports"]}
    assert targets == {gatekeeper.PORT_NAME}
    # The collector's own pods carry exactly the labels the policy names.
    deployment = metrics.deployment(_dev_collector())
    assert deployment["spec"]["template"]["metadata"]["labels"] == metrics.LABELS
    assert deployment["metadata"]["namespace"] == wiring.NAMESPACE
    assert "hostNetwork" not in deployment["spec"]["template"]["spec"]


def test_load_balancer_dimension_from_its_dns_name() -> None:
    name = "a0123456789abcdef0123456789abcde-0123456789abcdef.elb.us-west-2.amazonaws.com"
    assert load_balancer_dimension(name) == (
        "net/a0123456789abcdef0123456789abcde/0123456789abcdef"
    )
