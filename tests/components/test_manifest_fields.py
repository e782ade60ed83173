"""The manifest builders field by field, from a `ServerSpec` of their own (`tests.builders`, no
planner): what each container may do, what it sees, how it is probed, what the gatekeeper
answers, and the objects around the pods. Every value here is one the builders promise; a
changed one is a changed pod."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from typing import Any

import pytest

from components import manifests
from components.manifests import gatekeeper, gatekeeper_map, images, probes, programs, volumes
from components.manifests.engine import EngineSpec, engine_args
from components.manifests.pods import PROGRAMS_ANNOTATION
from components.manifests.spec import ServerSpec, config_digest, key_fingerprint, object_labels
from infra.adapters import render
from tests import builders, door_harness

LIMITS = door_harness.PLAN_LIMITS
SPEC = builders.server_spec(limits=LIMITS)
NO_PREFETCH = replace(SPEC, weight_prefetch=False)
VOLUME = replace(SPEC, persistent_models=True, storage_class="gemma-graviton-gp3")
LABELS = {
    "app.kubernetes.io/name": "gemma",
    "app.kubernetes.io/part-of": "gemma-graviton",
}
CACHE_ENV = [
    {"name": "HOME", "value": "/cache"},
    {"name": "XDG_CACHE_HOME", "value": "/cache"},
    {"name": "VLLM_CACHE_ROOT", "value": "/cache/vllm"},
    {"name": "HF_HOME", "value": "/cache/huggingface"},
]
TOKEN_PATH = "/var/run/secrets/huggingface/token"
PROGRAMS_MOUNT = {"name": "programs", "mountPath": "/opt/gemma-graviton", "readOnly": True}


def _pods(spec: ServerSpec = SPEC) -> dict[str, dict[str, Any]]:
    template = manifests.leader_worker_set(spec, "f1f2")["spec"]["leaderWorkerTemplate"]
    return {role: template[f"{role}Template"] for role in ("leader", "worker")}


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [
        c for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
        if c["name"] == name
    ]  # fmt: skip
    return found


# -- what each container may do ----------------------------------------------------------------


@pytest.mark.parametrize("spec", [SPEC, NO_PREFETCH], ids=["prefetch", "no-prefetch"])
def test_every_container_runs_locked_down(spec: ServerSpec) -> None:
    for role, pod in _pods(spec).items():
        assert pod["spec"]["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        }, role
        assert pod["spec"]["automountServiceAccountToken"] is False, role
        assert pod["spec"]["enableServiceLinks"] is False, role
        # The drain's bound (`components.manifests.drain`), the builder's here.
        assert pod["spec"]["terminationGracePeriodSeconds"] == spec.drain.grace_s, role
        for container in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
            where = (role, container["name"])
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["runAsNonRoot"] is True, where
            assert context["capabilities"] == {"drop": ["ALL"]}, where
            # The engine too: vLLM goes on without its NUMA memory binding (pods._security_context).
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
            if container["name"] != "gatekeeper":
                assert (context["runAsUser"], context["runAsGroup"]) == (10001, 10001), where
            assert container["imagePullPolicy"] == "IfNotPresent", where


def test_resources_are_the_pods_share_and_the_gatekeepers_own() -> None:
    pod = _pods()["leader"]
    whole = {"cpu": "6", "memory": "27136Mi"}  # 26.5 GiB, as the API server writes it
    for name in ("vllm", "prefetch-weights"):
        assert _container(pod, name)["resources"] == {"requests": whole, "limits": whole}, name
    small = {"cpu": "30m", "memory": "64Mi"}
    assert _container(pod, "gatekeeper")["resources"] == {"requests": small, "limits": small}


# -- what each container sees ------------------------------------------------------------------


def test_the_engine_reads_prefetched_weights_offline() -> None:
    leader, worker = _pods()["leader"], _pods()["worker"]
    common = [
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "VLLM_CPU_OMP_THREADS_BIND", "value": "auto"},
        *CACHE_ENV,
        # The engine's step bound is the plan's stall bound (ProbeSpec's default here).
        {"name": "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "value": str(SPEC.probes.stall_s)},
        {"name": "HF_HUB_OFFLINE", "value": "1"},
    ]
    assert _container(worker, "vllm")["env"] == common
    assert _container(leader, "vllm")["env"] == [
        *common,
        {
            "name": "VLLM_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "gemma-api-key", "key": "engine-key"}},
        },
        {
            "name": "GEMMA_VLLM_LOGGING",
            "value": json.dumps(probes.engine_logging_config(), separators=(",", ":")),
        },
        {"name": "VLLM_LOGGING_CONFIG_PATH", "value": probes.LOGGING_CONFIG_PATH},
    ]
    assert _container(leader, "vllm")["volumeMounts"] == _container(worker, "vllm")["volumeMounts"]
    assert _container(leader, "vllm")["volumeMounts"] == [
        {"name": "models", "mountPath": "/models"},
        {"name": "cache", "mountPath": "/cache"},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "dshm", "mountPath": "/dev/shm"},
        PROGRAMS_MOUNT,
    ]


def test_without_the_prefetch_the_engine_downloads_into_the_model_volume() -> None:
    engine = _container(_pods(NO_PREFETCH)["worker"], "vllm")
    offline = _container(_pods()["worker"], "vllm")
    # The prefetched engine's environment without HF_HUB_OFFLINE, and where to download.
    assert offline["env"][-1] == {"name": "HF_HUB_OFFLINE", "value": "1"}
    assert engine["env"] == [
        *offline["env"][:-1],
        {"name": "HF_HUB_CACHE", "value": "/models"},
        {"name": "HF_TOKEN_PATH", "value": TOKEN_PATH},
    ]
    assert engine["volumeMounts"][-2:] == [
        {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True},
        PROGRAMS_MOUNT,
    ]
    assert engine["args"][1] == "google/gemma-4-12B-it"
    assert offline["args"][1] == "/models/google/gemma-4-12B-it"


def test_split_kv_attention_stays_on_for_the_vllm_version_it_was_read_against() -> None:
    # The decision beside `pods._engine_env`: vLLM 0.31.0's CPU split-KV path sizes its
    # scratchpad for what Arm writes (PR #45844's fix), so Gemma 4 keeps the default split.
    # A new pin must re-read that path before this test is changed.
    assert images.PINS["vllm"].tag == "v0.31.0-arm64", (
        "the vLLM pin moved: re-read csrc/cpu/cpu_attn_impl.hpp's split-KV scratchpad sizing "
        "(see components/manifests/pods.py `_engine_env`) and restate the decision"
    )
    for spec in (SPEC, NO_PREFETCH):
        for role, pod in _pods(spec).items():
            names = [e["name"] for e in _container(pod, "vllm")["env"]]
            assert "VLLM_CPU_ATTN_SPLIT_KV" not in names, (role, names)


def test_the_prefetch_downloads_with_the_token_into_the_model_directory() -> None:
    init = _container(_pods()["worker"], "prefetch-weights")
    assert init["image"] == SPEC.image
    assert init["command"] == ["python3", "/opt/gemma-graviton/prefetch.py", "download"]
    produced = _container(
        _pods(replace(SPEC, produced_checkpoint=True))["worker"], "prefetch-weights"
    )
    assert produced["command"] == ["python3", "/opt/gemma-graviton/prefetch.py", "produced"]
    assert init["env"] == [
        {"name": "MODEL_REPO", "value": "google/gemma-4-12B-it"},
        {"name": "MODEL_DIR", "value": "/models/google/gemma-4-12B-it"},
        {"name": "MODEL_REVISION", "value": ""},
        {"name": "DOWNLOAD_ATTEMPTS", "value": "6"},
        {"name": "HF_TOKEN_PATH", "value": TOKEN_PATH},
        {"name": "HOME", "value": "/cache"},
        {"name": "HF_HOME", "value": "/cache/huggingface"},
        {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"},
    ]
    assert init["volumeMounts"] == [
        {"name": "models", "mountPath": "/models"},
        {"name": "cache", "mountPath": "/cache"},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True},
        PROGRAMS_MOUNT,
    ]
    assert not any("initContainers" in pod["spec"] for pod in _pods(NO_PREFETCH).values())


def test_volumes_are_sized_and_the_leader_adds_the_gatekeepers() -> None:
    own = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
        {"name": "cache", "emptyDir": {"sizeLimit": "4Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "hf-token", "secret": {"secretName": "gemma-hf-token", "defaultMode": 0o440}},
        # The group's programs, one ConfigMap named by their digest, read by every container
        # that runs them.
        {
            "name": "programs",
            "configMap": {
                "name": f"gemma-programs-{gatekeeper.config_digest(programs.files())[:10]}",
                "defaultMode": 0o444,
            },
        },
        {"name": "models", "emptyDir": {"sizeLimit": "27Gi"}},
    ]
    pods = _pods()
    assert pods["worker"]["spec"]["volumes"] == own
    assert pods["leader"]["spec"]["volumes"] == own + gatekeeper.volumes(
        "gemma-gatekeeper", "gemma-api-key"
    )
    # On a persistent volume the claim template brings `models`.
    assert _pods(VOLUME)["worker"]["spec"]["volumes"] == own[:-1]


def test_the_gatekeeper_reads_its_config_and_only_the_key_snippet() -> None:
    assert gatekeeper.volumes("gk", "key") == [
        {"name": "gatekeeper-config", "configMap": {"name": "gk"}},
        {
            "name": "gatekeeper-key",
            "secret": {
                "secretName": "key",
                "items": [
                    {"key": "api-keys.json", "path": "api-keys.json"},
                    {"key": "engine.map", "path": "engine.map"},
                ],
                "defaultMode": 0o440,
            },
        },
        {"name": "gatekeeper-run", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
    door = gatekeeper.container(30, 64)
    assert door["image"] == gatekeeper.IMAGE
    assert door["command"] == ["nginx", "-e", "stderr", "-c", "/etc/gatekeeper/nginx.conf"]
    assert door["ports"] == [
        {"name": "gatekeeper", "containerPort": 8080, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
        {"name": "probe", "containerPort": 8081, "protocol": "TCP"},
    ]
    assert door["volumeMounts"] == [
        {"name": "gatekeeper-config", "mountPath": "/etc/gatekeeper", "readOnly": True},
        {"name": "gatekeeper-key", "mountPath": "/var/run/secrets/gatekeeper", "readOnly": True},
        {"name": "gatekeeper-run", "mountPath": "/tmp"},
    ]


# -- how the pods are probed and placed --------------------------------------------------------


def test_probes_reach_health_through_the_gatekeepers_probe_listener() -> None:
    engine = _container(_pods()["leader"], "vllm")
    # Start-up: the check process's startup phase inside the engine container (it measures the
    # node's step on loopback), 1,800 s of budget, each run with room for its requests (whole
    # periods and that room: tests/components/test_probes.py).
    startup = engine["startupProbe"]
    assert startup == probes.leader_startup_probe(SPEC.probes, 1800)
    assert (startup["periodSeconds"], startup["failureThreshold"]) == (10, 180)
    assert engine["readinessProbe"] == {
        # By number: a named port resolves only in the probed container's own ports
        # (kubernetes v1.35 pkg/probe/util.go findPortByName), and "probe" is not vllm's.
        # The probe listener, which no public client can fill.
        "httpGet": {"path": "/health", "port": 8081},
        "periodSeconds": 10,
        "failureThreshold": 3,
        "timeoutSeconds": 5,
    }
    # Liveness proves the pipeline: an httpGet of each rank's check process (the check:
    # tests/components/test_probes.py; the plan's bounds and each rank's command, every stack:
    # test_manifests.py test_liveness_and_startup_probes_are_what_the_plan_says).
    worker = _container(_pods()["worker"], "vllm")
    assert engine["livenessProbe"] == worker["livenessProbe"] == probes.liveness_probe(SPEC.probes)
    assert "readinessProbe" not in worker
    door = gatekeeper.container(30, 64)
    assert door["readinessProbe"] == {
        "tcpSocket": {"port": 8081},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
    }
    assert door["livenessProbe"] == {
        "tcpSocket": {"port": 8081},
        "periodSeconds": 20,
        "failureThreshold": 3,
        "timeoutSeconds": 5,
    }


def test_pods_are_labelled_and_the_leader_carries_its_fingerprints() -> None:
    pods = _pods()
    # A new program rolls the group: each container's check runs what it started with.
    ran = {PROGRAMS_ANNOTATION: gatekeeper.config_digest(programs.files())}
    assert pods["worker"]["metadata"] == {
        "labels": {**LABELS, "app.kubernetes.io/component": "vllm-worker"},
        "annotations": ran,
    }
    leader = pods["leader"]["metadata"]
    assert leader["labels"] == {**LABELS, "app.kubernetes.io/component": "vllm-leader"}
    files = gatekeeper.config_files(
        LIMITS, upstream_port=8000, self_metrics=gatekeeper.SELF_METRICS_PATH
    )
    assert leader["annotations"] == {
        **ran,
        gatekeeper.CONFIG_ANNOTATION: gatekeeper.config_digest(files),
        gatekeeper.KEY_ANNOTATION: "f1f2",
    }
    unkeyed = manifests.leader_worker_set(SPEC)["spec"]["leaderWorkerTemplate"]
    assert gatekeeper.KEY_ANNOTATION not in unkeyed["leaderTemplate"]["metadata"]["annotations"]
    assert [c["name"] for c in pods["leader"]["spec"]["containers"]] == ["vllm", "gatekeeper"]
    assert [c["name"] for c in pods["worker"]["spec"]["containers"]] == ["vllm"]


def test_the_group_set_restarts_whole_and_claims_per_rank() -> None:
    lws = manifests.leader_worker_set(VOLUME)
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["metadata"] == {
        "name": "gemma-vllm",
        "namespace": "serving",
        "labels": {**LABELS, "app.kubernetes.io/component": "vllm"},
        "annotations": {
            "pulumi.com/waitFor": "condition=Available",
            "pulumi.com/timeoutSeconds": "1800",
        },
    }
    assert lws["spec"]["replicas"] == 2
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 3
    # A pipeline's gloo group cannot take a rank back: a lone restarted pod would hang.
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert template["volumeClaimTemplates"] == [
        {
            "metadata": {"name": "models"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "gemma-graviton-gp3",
                "resources": {"requests": {"storage": "27Gi"}},
            },
        }
    ]
    assert template["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    plain = manifests.leader_worker_set(SPEC)["spec"]["leaderWorkerTemplate"]
    assert "volumeClaimTemplates" not in plain
    assert "persistentVolumeClaimRetentionPolicy" not in plain


def test_the_storage_class_is_encrypted_gp3_bound_where_the_pod_lands() -> None:
    assert volumes.storage_class("fast", 250) == {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fast", "labels": {"app.kubernetes.io/part-of": "gemma-graviton"}},
        "provisioner": "ebs.csi.aws.com",
        "parameters": {"type": "gp3", "encrypted": "true", "throughput": "250"},
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
    }


# -- the objects around the pods ---------------------------------------------------------------


def test_secrets_hold_the_values_and_say_where_they_come_from() -> None:
    key = "k" * 32
    metadata = {
        "name": "gemma-api-key",
        "namespace": "serving",
        "labels": {
            **LABELS,
            "app.kubernetes.io/component": "credentials",
            "gemma-graviton.dev/secret-source": "pulumi-secret",
        },
    }
    assert manifests.secret(SPEC, "api-key", key) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": {
            "api-key": key,
            "engine-key": "",
            "api-keys.json": gatekeeper.key_file_text(key),
            "engine.map": "# no usable engine key: vLLM refuses every request\n",
        },
    }
    token = manifests.secret(SPEC, "hf-token", "hf_abc")
    assert token["metadata"] == {**metadata, "name": "gemma-hf-token"}
    assert token["stringData"] == {"token": "hf_abc"}


def test_the_namespace_and_the_gatekeeper_config() -> None:
    assert manifests.namespace(SPEC) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "serving",
            "labels": {
                **LABELS,
                "app.kubernetes.io/component": "namespace",
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/warn": "restricted",
                "pod-security.kubernetes.io/audit": "restricted",
            },
        },
    }
    config = gatekeeper_map.config_map(SPEC)
    assert (config["apiVersion"], config["kind"]) == ("v1", "ConfigMap")
    assert config["metadata"]["name"] == "gemma-gatekeeper"
    assert config["metadata"]["labels"]["app.kubernetes.io/component"] == "gatekeeper"
    assert config["data"] == {
        "nginx.conf": gatekeeper.nginx_conf(
            LIMITS, upstream_port=8000, self_metrics=gatekeeper.SELF_METRICS_PATH
        ),
        "gatekeeper.js": gatekeeper.njs_script(LIMITS),
    }
    assert render.all_objects(SPEC)[0]["kind"] == "Namespace"
    # Every object's labels name the server, its project and the component.
    assert object_labels(SPEC, "x") == {**LABELS, "app.kubernetes.io/component": "x"}


def test_the_service_reaches_leaders_through_an_nlb() -> None:
    svc = manifests.service(SPEC)
    assert (svc["apiVersion"], svc["kind"]) == ("v1", "Service")
    assert svc["metadata"]["name"] == "gemma"
    assert svc["metadata"]["labels"]["app.kubernetes.io/component"] == "endpoint"
    # Cross-zone on: the NLB's address in the control plane's zone, where no target runs,
    # forwards to the node zone (cloud-provider-aws pkg/providers/v1/aws_loadbalancer.go
    # `reconcileLBAttributes` turns it off unless this annotation says true).
    assert svc["metadata"]["annotations"] == {
        "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
        "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled": "true",
        "pulumi.com/waitFor": "jsonpath={.status.loadBalancer.ingress[0].hostname}",
        **manifests.access.drain_annotations(SPEC.drain),
        # Said, not left to the controller: the AWS Load Balancer Controller's default is internal.
        "service.beta.kubernetes.io/aws-load-balancer-internal": "false",
        # The leaders' pool only, not every node of the cluster; a door's Service, the door's.
        "service.beta.kubernetes.io/aws-load-balancer-target-node-labels": (
            "gemma-graviton.dev/pool=model"
        ),
    }
    # Leaders only: LWS labels a group's workers `worker-index` 1 and on (pod_webhook.go).
    assert svc["spec"]["selector"] == {
        "leaderworkerset.sigs.k8s.io/name": "gemma-vllm",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "gatekeeper", "protocol": "TCP"}
    ]
    assert svc["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    arn = "arn:aws:acm:us-west-2:123456789012:certificate/abc"
    tls = manifests.service(replace(SPEC, tls_certificate_arn=arn))
    assert tls["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "gatekeeper", "protocol": "TCP"}
    ]
    assert {k: v for k, v in tls["metadata"]["annotations"].items() if "-ssl-" in k} == {
        "service.beta.kubernetes.io/aws-load-balancer-ssl-cert": arn,
        "service.beta.kubernetes.io/aws-load-balancer-ssl-ports": "https",
        "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy": (
            "ELBSecurityPolicy-TLS13-1-2-2021-06"
        ),
    }
    internal = manifests.service(replace(SPEC, internal_load_balancer=True))["metadata"]
    assert internal["annotations"] == {
        **svc["metadata"]["annotations"],
        "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    }
    door = manifests.service(builders.elastic_server_spec())["metadata"]["annotations"]
    assert door[manifests.access.TARGET_NODES_ANNOTATION] == "gemma-graviton.dev/pool=system"


def test_the_network_policy_admits_only_the_group_and_the_gatekeeper_port() -> None:
    policy = manifests.network_policy(SPEC)
    assert (policy["apiVersion"], policy["kind"]) == ("networking.k8s.io/v1", "NetworkPolicy")
    assert policy["metadata"]["name"] == "gemma-group"
    assert policy["metadata"]["namespace"] == "serving"
    assert policy["metadata"]["labels"]["app.kubernetes.io/component"] == "network-policy"
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    # Only the group and the gatekeeper's port; the third rule, the metrics port from the
    # collector only, is test_monitoring's
    # test_the_metrics_port_admits_the_collector_only_never_the_load_balancer.
    group = {"matchLabels": {manifests.LWS_NAME_LABEL: "gemma-vllm"}}
    assert policy["spec"]["podSelector"] == group
    assert policy["spec"]["ingress"][:2] == [
        {"from": [{"podSelector": group}]},
        {"ports": [{"port": 8080, "protocol": "TCP"}]},
    ]
    assert len(policy["spec"]["ingress"]) == 3


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["model", "served_model_name"])
def test_a_value_kubernetes_would_expand_is_refused(field: str) -> None:
    spec = replace(SPEC.engine(), **{field: "evil/$(LWS_LEADER_ADDRESS)"})
    with pytest.raises(ValueError) as error:
        engine_args(spec, "leader")
    assert str(error.value) == (
        f"{field} 'evil/$(LWS_LEADER_ADDRESS)' holds `$(`, which Kubernetes would expand"
    )
    assert engine_args(replace(SPEC.engine(), model="evil/$LWS"), "worker")[1] == "evil/$LWS"


def test_the_engine_spec_is_the_server_spec_s() -> None:
    engine = SPEC.engine()
    assert engine == EngineSpec(
        model="/models/google/gemma-4-12B-it",
        served_model_name="google/gemma-4-12B-it",
        pipeline_stages=3,
        kv_cache_bytes=4_529_848_320,
        max_model_len=8192,
        max_num_batched_tokens=4096,
        nnodes="$(LWS_GROUP_SIZE)",
        node_rank="$(LWS_WORKER_INDEX)",
        master_addr="$(LWS_LEADER_ADDRESS)",
        master_port=29501,
        port=8000,
        max_reply_tokens=1024,
        max_logprobs=0,
    )
    # No version or pipeline split in replies (every flag of each rank, from the plan:
    # test_manifests.py test_command_lines_are_exactly_the_plan), and unset bounds add no flag.
    leader = engine_args(engine, "leader")
    assert leader[-3:] == ["--fingerprint-mode=none", "--host=127.0.0.1", "--port=8000"]
    unset = replace(engine, max_reply_tokens=None, max_logprobs=None)
    assert not [a for a in engine_args(unset, "leader") if "logprobs" in a or "override" in a]


def test_a_command_line_is_shown_shell_quoted() -> None:
    container = {"command": ["vllm"], "args": ["serve", "a b", '--x={"k":1}']}
    assert manifests.command_line(container) == "vllm serve 'a b' '--x={\"k\":1}'"
    assert shlex.split(manifests.command_line(container)) == ["vllm", "serve", "a b", '--x={"k":1}']
    assert manifests.command_line({"args": ["serve"]}) == "serve"
    assert manifests.command_line({"command": ["vllm"]}) == "vllm"


# -- what the gatekeeper answers ---------------------------------------------------------------


def test_the_config_s_buffers_timeouts_and_log() -> None:
    conf = gatekeeper.nginx_conf(LIMITS)
    # A request the API server answers is logged there, once (`gatekeeper_logged`).
    assert "access_log /dev/stdout gatekeeper if=$gatekeeper_logged;" in conf
    # The whole body in one memory buffer: njs reads it there.
    assert "client_body_buffer_size 327680;" in conf and "client_body_in_single_buffer on;" in conf
    assert "client_header_timeout 10s;" in conf and conf.count("client_body_timeout 10s;") == 1
    # The API server's body timer outlasts the outer hop's, so the outer one answers.
    assert "client_body_timeout 12s;" in conf
    small = gatekeeper.nginx_conf(replace(LIMITS, max_request_bytes=2048))
    assert "client_body_buffer_size 2048;" in small
    # A refused key says which scheme to use (RFC 6750 section 3) from the config's 401 page
    # (test_gatekeeper.py): refusals are answered from the headers, never by the script.
    assert "WWW-Authenticate" not in gatekeeper.njs_script(LIMITS)


def test_key_shapes_and_fingerprints() -> None:
    key = "XXXX" + "x" * 28
    assert gatekeeper.key_file_text(key[:-1]) == '{"keys": []}\n'
    odd = "abc.def+ghi/jkl_mno~pqr=-0123456789"  # written as JSON whatever its characters
    assert gatekeeper.key_file_text(odd) == f'{{"keys": [{{"key": "{odd}", "until": null}}]}}\n'
    assert gatekeeper.engine_map_entry(key) == f'default "Bearer {key}";\n'
    one = key_fingerprint("a" * 40)
    assert re.fullmatch(r"[0-9a-f]{16}", one)
    assert one != key_fingerprint("b" * 40) and key_fingerprint("a" * 40) == one
    digest = config_digest("conf")
    assert re.fullmatch(r"[0-9a-f]{16}", digest)


def test_other_ports_reach_the_config_the_annotation_and_the_command_line() -> None:
    spec = replace(SPEC, port=8001, master_port=29502)
    files = gatekeeper.config_files(
        LIMITS, upstream_port=8001, self_metrics=gatekeeper.SELF_METRICS_PATH
    )
    assert "server 127.0.0.1:8001;" in files["nginx.conf"]
    assert gatekeeper_map.config_map(spec)["data"] == files
    leader = _pods(spec)["leader"]
    assert leader["metadata"]["annotations"][gatekeeper.CONFIG_ANNOTATION] == (
        gatekeeper.config_digest(files)
    )
    args = _container(leader, "vllm")["args"]
    assert "--port=8001" in args and "--master-port=29502" in args


def test_ranks_repel_each_other_by_the_group_s_name() -> None:
    for role, pod in _pods().items():
        assert pod["spec"]["affinity"] == {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {
                                    "key": "leaderworkerset.sigs.k8s.io/name",
                                    "operator": "In",
                                    "values": ["gemma-vllm"],
                                }
                            ]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }, role
        assert pod["spec"]["nodeSelector"] == {"gemma-graviton.dev/pool": "model"}, role


REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("role", ["leader", "worker"])
def test_a_pinned_revision_reaches_whoever_downloads(role: str) -> None:
    pinned = replace(NO_PREFETCH, model_revision=REVISION)
    args = _container(_pods(pinned)[role], "vllm")["args"]
    assert args[:2] == ["serve", "google/gemma-4-12B-it"]
    assert f"--revision={REVISION}" in args and f"--tokenizer-revision={REVISION}" in args
    assert pinned.engine().revision == REVISION
    # With the prefetch every rank's init container fetches that commit, with retries, and
    # vLLM reads the directory.
    prefetched = replace(SPEC, model_revision=REVISION)
    assert prefetched.engine().revision is None
    init = _container(_pods(prefetched)[role], "prefetch-weights")
    assert {"name": "MODEL_REVISION", "value": REVISION} in init["env"]
    assert {"name": "DOWNLOAD_ATTEMPTS", "value": "6"} in init["env"]
    assert not [a for a in _container(_pods(prefetched)[role], "vllm")["args"] if "revision" in a]


def test_every_rank_has_its_own_claim_named_as_its_statefulset_names_it() -> None:
    assert manifests.rank_pods(VOLUME) == [
        "gemma-vllm-0",
        "gemma-vllm-0-1",
        "gemma-vllm-0-2",
        "gemma-vllm-1",
        "gemma-vllm-1-1",
        "gemma-vllm-1-2",
    ]
    claims = manifests.model_claims(VOLUME)
    assert [c["metadata"]["name"] for c in claims] == [
        f"models-{pod}" for pod in manifests.rank_pods(VOLUME)
    ]
    for claim in claims:
        assert (claim["apiVersion"], claim["kind"]) == ("v1", "PersistentVolumeClaim")
        assert claim["metadata"]["namespace"] == "serving"
        assert claim["metadata"]["labels"]["app.kubernetes.io/component"] == "weights"
        assert claim["spec"] == {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "gemma-graviton-gp3",
            "resources": {"requests": {"storage": "27Gi"}},
        }
    assert manifests.model_claims(SPEC) == []
    # components/storage.py names each rank's PersistentVolume so; a new name would make Pulumi
    # replace every one of them (the EBS volumes stay, their PVs are recreated).
    assert volumes.static_volume_name(("gemma-graviton", "models-gemma-vllm-0-1")) == (
        "gemma-graviton-models-gemma-vllm-0-1"
    )


def test_tags_reach_the_volumes_and_the_load_balancer() -> None:
    tags = {"team": "ml", "costCenter": "42"}
    parameters = volumes.storage_class("fast", 250, tags)["parameters"]
    assert parameters == {
        "type": "gp3",
        "encrypted": "true",
        "throughput": "250",
        "tagSpecification_1": "costCenter=42",
        "tagSpecification_2": "team=ml",
    }
    annotations = manifests.service(replace(SPEC, aws_tags=tags))["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"] == (
        "costCenter=42,team=ml"
    )
