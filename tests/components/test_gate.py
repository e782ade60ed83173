"""The LeaderWorkerSet webhook gate as pure objects: real schemas and what makes it a gate."""

from __future__ import annotations

import yaml

from components.manifests import gate
from infra.plan import catalog
from tests.fakes import k8s_schemas

#: A container that cannot gain privileges, write its root or use a capability.
LOCKED_DOWN = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def assert_binds(binding: dict, role: dict, account: dict) -> None:
    """The RoleBinding grants the Role to the ServiceAccount, in the account's namespace."""
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    named = {k: account["metadata"][k] for k in ("name", "namespace")}
    assert binding["subjects"] == [{"kind": "ServiceAccount", **named}]


def _objects() -> list[dict]:
    # Built inside each test, never at import: mutation testing switches a mutant on only then.
    return gate.webhook_gate("lws-system", "lws-webhook-gate", deadline_seconds=600)


def test_gate_objects_pass_the_real_schemas() -> None:
    objects = _objects()
    for obj in objects:
        errors = k8s_schemas.core_errors(obj, catalog.DEFAULT_KUBERNETES_VERSION)
        assert errors == [], (obj["kind"], errors)
    probe = yaml.safe_load(objects[3]["data"]["leaderworkerset.yaml"])
    assert k8s_schemas.lws_errors(probe) == []


def test_the_job_dry_runs_a_leaderworkerset_until_the_webhooks_admit_it() -> None:
    objects = _objects()
    kinds = [o["kind"] for o in objects]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Job"]
    role, job = objects[1], objects[4]
    assert role["rules"] == [
        {
            "apiGroups": ["leaderworkerset.x-k8s.io"],
            "resources": ["leaderworkersets"],
            "verbs": ["create"],
        }
    ]
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "dry-run-create"
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
    # Retries are bounded by the deadline; Pulumi waits a minute longer, so the Job's own
    # failure (kubectl's message) is what the operator sees.
    assert job["spec"]["backoffLimit"] >= 10
    assert job["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] == str(600 + 60)
    # Ten minutes unless the caller says otherwise (the LWS controller's own start fits in it).
    assert gate.webhook_gate("lws-system", "g")[4]["spec"]["activeDeadlineSeconds"] == 600
    other = gate.webhook_gate("lws-system", "g", deadline_seconds=120, image="example/kubectl:1")
    assert other[4]["spec"]["activeDeadlineSeconds"] == 120
    assert other[4]["spec"]["template"]["spec"]["containers"][0]["image"] == "example/kubectl:1"


def test_the_gate_s_objects_refer_to_each_other() -> None:
    """The Job runs as the ServiceAccount the RoleBinding grants the Role to, and reads the probe
    object from the ConfigMap at the path kubectl is given."""
    account, role, binding, config, job = _objects()
    name = "lws-webhook-gate"
    for obj in (account, role, binding, config, job):
        assert obj["metadata"]["name"] == name
        assert obj["metadata"]["namespace"] == "lws-system"
        assert obj["metadata"]["labels"] == gate.GATE_LABELS
    assert_binds(binding, role, account)
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["template"]["metadata"]["labels"] == gate.GATE_LABELS
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    probe_mount = mounts[gate.PROBE_MOUNT]
    assert probe_mount["readOnly"] is True
    assert volumes[probe_mount["name"]]["configMap"] == {"name": config["metadata"]["name"]}
    (filename,) = [a.split("=", 1)[1] for a in container["command"] if a.startswith("--filename")]
    assert filename == f"{gate.PROBE_MOUNT}/{next(iter(config['data']))}"
    # kubectl writes its cache under HOME, the only writable path of a read-only root.
    home = {e["name"]: e["value"] for e in container["env"]}["HOME"]
    assert volumes[mounts[home]["name"]] == {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}


def test_the_probe_object_is_one_small_leaderworkerset_in_the_gate_s_namespace() -> None:
    probe = gate.probe_object("serving", "p")
    assert (probe["apiVersion"], probe["kind"]) == (gate.LWS_API, "LeaderWorkerSet")
    assert probe["metadata"] == {"name": "p", "namespace": "serving"}
    assert probe["spec"]["replicas"] == 1
    template = probe["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 1
    (container,) = template["workerTemplate"]["spec"]["containers"]
    assert container == {"name": "probe", "image": gate.PROBE_POD_IMAGE}
    assert k8s_schemas.lws_errors(probe) == []
    shipped = yaml.safe_load(_objects()[3]["data"]["leaderworkerset.yaml"])
    assert shipped == gate.probe_object("lws-system", "lws-webhook-gate-probe")


def test_the_job_is_small_and_unprivileged() -> None:
    pod = _objects()[4]["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["securityContext"] == LOCKED_DOWN
    small = {"cpu": "50m", "memory": "64Mi"}
    assert container["resources"] == {"requests": small, "limits": small}
