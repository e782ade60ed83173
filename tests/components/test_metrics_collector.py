"""The metrics collector's objects and config as rules (`components.manifests.metrics`): valid
Kubernetes objects that refer to each other, and a collector config that, read the way the
Prometheus receiver and the EMF exporter read it, turns real vLLM 0.31 samples into exactly the
CloudWatch metrics the dashboard reads."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from components import watch
from components.manifests import gatekeeper, metrics
from components.manifests.programs import liveness as check
from components.manifests.spec import LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL
from infra.adapters import monitoring_layer, wiring
from infra.plan import catalog
from infra.plan.stackfile import load_stack
from tests.components.test_gate import LOCKED_DOWN, assert_binds
from tests.components.test_monitoring import FIXTURE
from tests.components.test_watch import _collector_config as _config
from tests.components.test_watch import _dev_collector as _spec
from tests.components.test_watch import _relabel, leader_target
from tests.fakes import k8s_schemas


def _job(config: dict[str, Any], name: str) -> dict[str, Any]:
    (scrape,) = [
        job
        for job in config["receivers"]["prometheus"]["config"]["scrape_configs"]
        if job["job_name"] == name
    ]
    return scrape


def _by_kind() -> dict[str, dict[str, Any]]:
    objects = {o["kind"]: o for o in metrics.collector_objects(_spec())}
    assert list(objects) == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment"]
    return objects


def _exported_samples() -> list[str]:
    """Every sample real vLLM 0.31 exported in the rehearsal."""
    families = json.loads(FIXTURE.read_text())["families"].values()
    return [sample for family in families for sample in family["samples"]]


def _renamed(rules: list[dict[str, Any]], samples: list[str]) -> dict[str, str]:
    """Each sample the job's metric relabelling keeps, and the name it keeps it under."""
    kept = {s: _relabel(rules, {"__name__": s}) for s in samples}
    return {s: labels["__name__"] for s, labels in kept.items() if labels is not None}


# -- the Kubernetes objects --------------------------------------------------------------------


def test_every_object_passes_the_real_schemas() -> None:
    for obj in metrics.collector_objects(_spec()):
        errors = k8s_schemas.core_errors(obj, catalog.DEFAULT_KUBERNETES_VERSION)
        assert errors == [], (obj["kind"], errors)
        assert obj["metadata"]["namespace"] == wiring.NAMESPACE
        assert obj["metadata"]["name"] == metrics.NAME
        assert obj["metadata"]["labels"] == metrics.LABELS


def test_the_objects_refer_to_each_other() -> None:
    objects = _by_kind()
    account, binding, config = (objects[k] for k in ("ServiceAccount", "RoleBinding", "ConfigMap"))
    # EKS Pod Identity maps the account to its role in EKS's API; the account names none.
    assert "annotations" not in account["metadata"]
    assert_binds(binding, objects["Role"], account)
    deployment = objects["Deployment"]["spec"]
    pod = deployment["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert deployment["selector"]["matchLabels"] == deployment["template"]["metadata"]["labels"]
    (container,) = pod["containers"]
    (mount,) = container["volumeMounts"]
    (volume,) = pod["volumes"]
    assert mount == {"name": volume["name"], "mountPath": metrics.CONFIG_MOUNT, "readOnly": True}
    assert volume["configMap"] == {"name": config["metadata"]["name"]}
    (arg,) = container["args"]
    (key,) = config["data"]
    assert arg == f"--config={metrics.CONFIG_MOUNT}/{key}"
    assert config["data"][key] == metrics.collector_config(_spec())


def test_the_collector_may_only_discover_pods() -> None:
    assert _by_kind()["Role"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]


def test_one_small_unprivileged_replica_on_the_model_nodes() -> None:
    deployment = _by_kind()["Deployment"]["spec"]
    assert deployment["replicas"] == 1
    assert deployment["strategy"] == {"type": "Recreate"}  # never two writing every point twice
    pod = deployment["template"]["spec"]
    assert pod["nodeSelector"] == wiring.NODE_LABELS
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["name"] == "collector"  # `kubectl logs deploy/metrics-collector -c collector`
    assert container["image"] == metrics.IMAGE
    assert re.search(r":v\d+\.\d+\.\d+@sha256:[0-9a-f]{64}$", metrics.IMAGE)
    assert container["imagePullPolicy"] == "IfNotPresent"
    amount = {"cpu": f"{metrics.MILLICPU}m", "memory": f"{metrics.MEMORY_MIB}Mi"}
    assert container["resources"] == {"requests": amount, "limits": amount}
    assert container["securityContext"] == LOCKED_DOWN
    # The planner counts exactly this pod as a tenant of a model node.
    (tenant,) = [c for c in catalog.COTENANTS if c.name == metrics.NAME]
    assert (tenant.millicpu, tenant.memory_mib) == (metrics.MILLICPU, metrics.MEMORY_MIB)


def test_the_policy_peer_is_the_collector_s_namespace_and_labels() -> None:
    assert metrics.scraper_peer("serving") == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "serving"}},
        "podSelector": {"matchLabels": metrics.LABELS},
    }


# -- the collector's config ------------------------------------------------------------------


def test_the_pipeline_names_only_components_it_defines() -> None:
    config = _config()
    (pipeline,) = config["service"]["pipelines"].values()
    assert list(config["service"]["pipelines"]) == ["metrics"]
    for kind in ("receivers", "processors", "exporters"):
        assert pipeline[kind] == list(config[kind]), kind
    # The memory limiter comes first, so it can refuse data before anything buffers it.
    assert pipeline["processors"][0] == "memory_limiter"


def test_the_memory_limiter_stays_inside_the_container() -> None:
    limiter = _config()["processors"]["memory_limiter"]
    assert limiter["check_interval"] == "5s"
    assert limiter["limit_mib"] == metrics.MEMORY_MIB * 3 // 4
    assert limiter["spike_limit_mib"] == metrics.MEMORY_MIB // 5
    assert limiter["spike_limit_mib"] < limiter["limit_mib"] < metrics.MEMORY_MIB
    # The collector reads whole MiB (uint32): a float here would fail its config.
    assert isinstance(limiter["limit_mib"], int) and isinstance(limiter["spike_limit_mib"], int)


def test_one_scrape_a_minute_batched_by_the_minute() -> None:
    config = _config()
    jobs = config["receivers"]["prometheus"]["config"]["scrape_configs"]
    assert [job["job_name"] for job in jobs] == ["vllm-leaders", "leader-records"]
    scrape = _job(config, "vllm-leaders")
    assert scrape["scrape_interval"] == f"{metrics.SCRAPE_INTERVAL_SECONDS}s" == "60s"
    assert int(scrape["scrape_timeout"].rstrip("s")) < metrics.SCRAPE_INTERVAL_SECONDS
    assert scrape["metrics_path"] == "/metrics"
    assert scrape["sample_limit"] >= len(_exported_samples())
    assert config["processors"]["batch/metrics"] == {"timeout": "60s"}


def test_discovery_finds_this_stack_s_leaders_on_their_metrics_port_only() -> None:
    spec = _spec()
    scrape = _job(_config(), "vllm-leaders")
    (sd,) = scrape["kubernetes_sd_configs"]
    assert sd["role"] == "pod"
    assert sd["namespaces"] == {"names": [spec.namespace]}
    (selector,) = sd["selectors"]
    assert selector["role"] == "pod"
    wanted = dict(pair.split("=") for pair in selector["label"].split(","))
    assert wanted == {LWS_NAME_LABEL: spec.lws_name, LWS_WORKER_INDEX_LABEL: "0"}
    leader = leader_target("1")
    target = _relabel(scrape["relabel_configs"], leader)
    assert target is not None
    assert target[metrics.STACK_DIMENSION] == "dev"
    assert target["group"] == "1"
    front_door = {**leader, "__meta_kubernetes_pod_container_port_name": gatekeeper.PORT_NAME}
    assert _relabel(scrape["relabel_configs"], front_door) is None


def test_behind_a_door_the_ready_leaders_engine_is_scraped_on_vllms_port() -> None:
    # prometheus discovery/kubernetes/pod.go `buildPod` (v3.x): one target per declared container
    # port, and for a container that declares none one target on the pod's address, with its
    # container name and `__meta_kubernetes_pod_container_init`; `__meta_kubernetes_pod_ready`
    # on every target. Behind a door the engine declares no port (policies/rules.py), so the
    # gatekeeper's port name matched no target and the leaders were never scraped.
    spec = monitoring_layer.collector_spec(load_stack("prod"), "prod")
    assert spec.engine_port == 8000
    config = _config(spec)
    # No leader's record: the door's groups have no gatekeeper to serve it, even if asked.
    assert spec.self_samples == ()
    (scrape,) = config["receivers"]["prometheus"]["config"]["scrape_configs"]
    assert scrape["job_name"] == "vllm-leaders"
    asked = dataclasses.replace(spec, self_samples=watch.SELF_SAMPLES)
    assert metrics.collector_config(asked) == metrics.collector_config(spec)
    engine = {
        "__address__": "10.0.1.7",
        "__meta_kubernetes_pod_ip": "10.0.1.7",
        "__meta_kubernetes_pod_ready": "true",
        "__meta_kubernetes_pod_container_name": "vllm",
        "__meta_kubernetes_pod_container_init": "false",
        "__meta_kubernetes_pod_label_leaderworkerset_sigs_k8s_io_group_index": "0",
    }
    target = _relabel(scrape["relabel_configs"], engine)
    assert target is not None
    assert target["__address__"] == "10.0.1.7:8000"
    assert target[metrics.STACK_DIMENSION] == "prod"
    not_ready = {**engine, "__meta_kubernetes_pod_ready": "false"}
    assert _relabel(scrape["relabel_configs"], not_ready) is None
    init = {**engine, "__meta_kubernetes_pod_container_init": "true"}
    assert _relabel(scrape["relabel_configs"], init) is None
    # A fixed stack keeps the gatekeeper's named port, as before.
    assert _spec().engine_port is None


def test_real_vllm_samples_become_exactly_the_metrics_the_dashboard_reads() -> None:
    spec = _spec()
    scrape = _job(_config(), "vllm-leaders")
    kept = _renamed(scrape["metric_relabel_configs"], _exported_samples())
    used = set(spec.samples) | set(spec.bucket_samples)
    assert set(kept) == used
    assert kept == {s: metrics.exported_name(s) for s in used}
    assert all(name.endswith(metrics.RAW_SUFFIX) for name in kept.values())


def test_emf_declares_each_exported_metric_once_with_its_dimensions() -> None:
    spec = _spec()
    emf = _config()["exporters"]["awsemf"]
    assert emf["namespace"] == spec.cloudwatch_namespace == "GemmaGraviton/dev"
    assert emf["region"] == spec.region
    assert emf["log_group_name"] == spec.log_group == "/gemma-graviton/dev/metrics"
    assert emf["log_stream_name"] == "vllm-leaders"
    # Without this the exporter adds rolled-up copies of every metric: more metrics to pay for.
    assert emf["dimension_rollup_option"] == "NoDimensionRollup"
    plain, buckets, records = emf["metric_declarations"]
    assert plain["dimensions"] == [[metrics.STACK_DIMENSION]]
    assert buckets["dimensions"] == [[metrics.STACK_DIMENSION, "le"]]
    # A leader's own record is per leader.
    assert records["dimensions"] == [[metrics.STACK_DIMENSION, metrics.GROUP_DIMENSION]]

    def declared(name: str) -> list[int]:
        return [
            i
            for i, d in enumerate((plain, buckets, records))
            if any(re.search(p, name) for p in d["metric_name_selectors"])
        ]

    for index, samples in enumerate((spec.samples, spec.bucket_samples, spec.self_samples)):
        for sample in samples:
            assert declared(metrics.exported_name(sample)) == [index], sample
    # Anchored: a longer name that merely contains a declared one is not exported.
    some = metrics.exported_name(spec.samples[0])
    assert declared("x" + some) == [] and declared(some + "x") == []


def test_each_leader_s_record_is_scraped_from_its_gatekeeper_and_kept_per_group() -> None:
    """The second job reads the same leaders' metrics port at the record's route, keeps the
    gauges the startup probe writes and nothing else, renamed as every exported series is."""
    config = _config()
    engine, record = _job(config, "vllm-leaders"), _job(config, "leader-records")
    assert record["metrics_path"] == gatekeeper.SELF_METRICS_ROUTE == "/metrics/self"
    for key in ("kubernetes_sd_configs", "relabel_configs", "scrape_interval", "scrape_timeout"):
        assert record[key] == engine[key], key
    target = _relabel(record["relabel_configs"], leader_target("2"))
    assert target is not None and target[metrics.GROUP_DIMENSION] == "2"
    # What the probe writes, beside a vLLM name that must not come through this job twice.
    written = [*check.GAUGES, "vllm:num_requests_waiting", "process_start_time_seconds"]
    kept = _renamed(record["metric_relabel_configs"], written)
    assert kept == {s: metrics.exported_name(s) for s in check.GAUGES}
    # And the vLLM job keeps none of the record's names.
    assert _renamed(engine["metric_relabel_configs"], list(check.GAUGES)) == {}
    assert record["sample_limit"] >= len(check.GAUGES)


def test_the_dashboard_reads_what_the_collector_writes() -> None:
    assert set(watch.SAMPLES) == set(_spec().samples)
    assert set(watch.bucket_samples()) == set(_spec().bucket_samples)
    assert set(watch.SELF_SAMPLES) == set(_spec().self_samples) == set(check.GAUGES)
    assert metrics.exported_name("vllm:x_total") == "vllm:x_total" + metrics.RAW_SUFFIX


def test_a_config_change_rolls_the_collector() -> None:
    """A ConfigMap edit does not restart the pods that mount it (the collector reads its config
    at start), and pulumi-kubernetes updates the Deployment only when its template changes: the
    config's digest in the template is what rolls it."""
    spec = _spec()
    digest = _by_kind()["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert digest == {
        metrics.CONFIG_ANNOTATION: metrics.config_digest(metrics.collector_config(spec))
    }
    other = dataclasses.replace(spec, cloudwatch_namespace="GemmaGraviton/other")
    assert metrics.collector_config(other) != metrics.collector_config(spec)
    rolled = metrics.deployment(other)["spec"]["template"]["metadata"]["annotations"]
    assert rolled != digest


def test_no_object_of_the_collector_names_a_role() -> None:
    """The collector's role reaches its pod through EKS Pod Identity (the association in
    `components.monitoring`), not through its objects: an IRSA annotation on the account, or a
    role in the pod's environment, would send the SDK to a web identity no OIDC provider of the
    account vouches for, and its calls would fail."""
    for obj in metrics.collector_objects(_spec()):
        text = json.dumps(obj)
        assert "eks.amazonaws.com/role-arn" not in text, obj["kind"]
        assert "AWS_ROLE_ARN" not in text and "AWS_WEB_IDENTITY_TOKEN_FILE" not in text, obj["kind"]
        assert "arn:aws:iam::" not in text, obj["kind"]
