"""Pod Security Admission: what the namespaces enforce, and that seccomp `Unconfined` on the
engine is the model pods' only finding at the baseline level (so the `privileged` enforcement
the namespace needs for it admits nothing else)."""

from __future__ import annotations

from typing import Any

import pytest

from components import manifests
from components.leaderworkerset import POD_SECURITY_LABELS as LWS_LABELS
from components.manifests import gate
from infra.plan.render import rendered_objects
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


@pytest.mark.parametrize("stack", stack_names())
def test_seccomp_unconfined_on_the_engine_is_the_only_baseline_finding(stack: str) -> None:
    cfg = load_stack(stack)
    objects = rendered_objects(cfg, plan(cfg, stack))
    (lws,) = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = lws["spec"]["leaderWorkerTemplate"][role]["spec"]
        assert baseline_findings(pod) == ["vllm: seccomp Unconfined"], role


def test_the_model_namespace_enforces_what_it_can_and_audits_the_rest() -> None:
    cfg = load_stack("dev")
    (ns,) = [o for o in rendered_objects(cfg, plan(cfg, "dev")) if o["kind"] == "Namespace"]
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == "baseline"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"
    assert manifests.POD_SECURITY_LABELS.items() <= labels.items()


def test_the_lws_namespace_enforces_baseline_and_the_gate_meets_restricted() -> None:
    assert LWS_LABELS["pod-security.kubernetes.io/enforce"] == "baseline"
    job = gate.webhook_gate("lws-system", "gate")[-1]
    pod = job["spec"]["template"]["spec"]
    assert baseline_findings(pod) == []
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
