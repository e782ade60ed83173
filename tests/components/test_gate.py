"""The LeaderWorkerSet webhook gate as pure objects: real schemas and what makes it a gate."""

from __future__ import annotations

import yaml

from components.manifests import gate
from infra.plan import catalog
from tests.fakes import k8s_schemas

OBJECTS = gate.webhook_gate("lws-system", "lws-webhook-gate", deadline_seconds=600)


def test_gate_objects_pass_the_real_schemas() -> None:
    for obj in OBJECTS:
        errors = k8s_schemas.core_errors(obj, catalog.DEFAULT_KUBERNETES_VERSION)
        assert errors == [], (obj["kind"], errors)
    probe = yaml.safe_load(OBJECTS[3]["data"]["leaderworkerset.yaml"])
    assert k8s_schemas.lws_errors(probe) == []


def test_the_job_dry_runs_a_leaderworkerset_until_the_webhooks_admit_it() -> None:
    kinds = [o["kind"] for o in OBJECTS]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Job"]
    role, job = OBJECTS[1], OBJECTS[4]
    assert role["rules"] == [
        {
            "apiGroups": ["leaderworkerset.x-k8s.io"],
            "resources": ["leaderworkersets"],
            "verbs": ["create"],
        }
    ]
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == [
        "kubectl",
        "create",
        "--dry-run=server",
        "--filename=/probe/leaderworkerset.yaml",
        "--output=name",
    ]
    # A refused call fails the pod, the Job retries it, and the deadline bounds the whole wait;
    # kubectl's error is the termination message Pulumi shows.
    assert pod["restartPolicy"] == "Never"
    assert job["spec"]["activeDeadlineSeconds"] == 600
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["image"] == gate.KUBECTL_IMAGE and ":v1." in gate.KUBECTL_IMAGE
    assert pod["serviceAccountName"] == OBJECTS[0]["metadata"]["name"]
    resources = container["resources"]
    assert resources["requests"] == resources["limits"]
