"""Pod Security Admission: what the namespaces enforce, and that the model pods have no finding
at the baseline level the namespace enforces, nor at the restricted level it warns about."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.leaderworkerset import POD_SECURITY_LABELS as LWS_LABELS
from components.manifests import gate
from infra.adapters.render import rendered_objects
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack, stack_names

#: Capabilities the baseline level allows to be added (pod-security-admission
#: policy/check_capabilities_baseline.go).
BASELINE_CAPS = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip


def baseline_findings(pod: dict[str, Any]) -> list[str]:
    """The baseline checks this project's pods could trip, as "<container>: <finding>"."""
    found = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            found.append(f"pod: {key}")
    for volume in pod.get("volumes", []):
        if "hostPath" in volume:
            found.append(f"pod: hostPath volume {volume['name']}")
    if (pod.get("securityContext") or {}).get("seccompProfile", {}).get("type") == "Unconfined":
        found.append("pod: seccomp Unconfined")
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        ctx = container.get("securityContext") or {}
        name = container["name"]
        if ctx.get("privileged"):
            found.append(f"{name}: privileged")
        added = set((ctx.get("capabilities") or {}).get("add", [])) - BASELINE_CAPS
        if added:
            found.append(f"{name}: capabilities {sorted(added)}")
        if (ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append(f"{name}: seccomp Unconfined")
        if ctx.get("procMount", "Default") != "Default":
            found.append(f"{name}: procMount")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            found.append(f"{name}: hostPort")
    return found


#: Volume types the restricted level allows (pod-security-admission
#: policy/check_restrictedVolumes.go).
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip


def restricted_findings(pod: dict[str, Any]) -> list[str]:
    """The restricted checks beyond baseline (pod-security-admission policy/check_*_restricted
    and check_restrictedVolumes.go), as "<container>: <finding>"."""
    found = baseline_findings(pod)
    pod_ctx = pod.get("securityContext") or {}
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"pod: volume {volume['name']} of type {sorted(kinds)}")
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        ctx = container.get("securityContext") or {}
        name = container["name"]
        if ctx.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation not false")
        if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is not True:
            found.append(f"{name}: runAsNonRoot not true")
        if ctx.get("runAsUser", pod_ctx.get("runAsUser")) == 0:
            found.append(f"{name}: runAsUser 0")
        seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccomp {seccomp}")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):
            found.append(f"{name}: capabilities not dropped")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities added")
    return found


@pytest.mark.parametrize("stack", stack_names())
def test_the_model_pods_meet_baseline_and_restricted(stack: str) -> None:
    cfg = load_stack(stack)
    objects = rendered_objects(cfg, plan(cfg, stack))
    (lws,) = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = lws["spec"]["leaderWorkerTemplate"][role]["spec"]
        assert restricted_findings(pod) == [], role  # baseline's findings included


def test_the_checks_see_what_they_look_for() -> None:
    cfg = load_stack("dev")
    (lws,) = [o for o in rendered_objects(cfg, plan(cfg, "dev")) if o["kind"] == "LeaderWorkerSet"]
    pod = copy.deepcopy(lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"])
    engine = pod["containers"][0]["securityContext"]
    engine["seccompProfile"] = {"type": "Unconfined"}
    engine["allowPrivilegeEscalation"] = True
    pod["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    assert baseline_findings(pod) == ["pod: hostPath volume host", "vllm: seccomp Unconfined"]
    assert restricted_findings(pod) == [
        "pod: hostPath volume host",
        "vllm: seccomp Unconfined",
        "pod: volume host of type ['hostPath']",
        "vllm: allowPrivilegeEscalation not false",
        "vllm: seccomp Unconfined",
    ]


def test_the_lws_namespace_enforces_baseline_and_the_gate_meets_restricted() -> None:
    assert LWS_LABELS["pod-security.kubernetes.io/enforce"] == "baseline"
    job = gate.webhook_gate("lws-system", "gate")[-1]
    pod = job["spec"]["template"]["spec"]
    assert restricted_findings(pod) == []  # baseline's findings included
