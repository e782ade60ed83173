"""The one-time Job that quantizes the model into every rank's weights volume, as pure objects.

A stack with `weights` int8 or int4 and `weightsSource: quantize` serves a checkpoint it makes
itself. Before the LeaderWorkerSet exists, this Job runs on a model node (the group is not there
yet, so the node's whole model-pod budget is free), and:

1. skips everything when every volume already holds this checkpoint (its `quantized.json` names
   the same scheme and source revision, and every file it lists has its recorded size): a Job
   recreated with the same inputs, or a retried pod, does no work twice;
2. downloads the pinned bf16 revision into scratch space on the node's disk;
3. installs the pinned quantizer (`requirements-quantize.txt`: llm-compressor and what it
   needs) into that scratch space and runs `python -m infra.quantize --source ... --scheme ...
   --out <first volume>` from the project's own source, shipped in a ConfigMap. The module
   writes the compressed-tensors checkpoint and, last, `quantized.json` with the sha256 of
   every file;
4. copies the checkpoint to every other rank's volume, checks each file's sha256 against the
   marker, and writes the marker last.

Where the checkpoint lives, and why the volumes: the ranks already load their weights from a
per-rank volume (`modelCache: volume`), which the program creates, tags and deletes with the
stack; the Job writes there through the same claims, so nothing new holds the weights, no new
IAM role exists (the EBS CSI driver's role attaches the volumes), and the vLLM image, which ships
no S3 client, needs none. An S3 bucket would add a bucket, its policy, a role for the Job and a
client in every rank's prefetch.

On a running stack whose `weights` change, the old group still holds the model nodes' memory
(requests = limits) when the new Job starts, and the group is updated only after the Job: the
Job's pod would wait for room that never comes. Its PriorityClass lets the scheduler preempt a
model pod (priority 0) to place it; the endpoint is down for a weights change anyway (a group
restart), and the group's pods wait until the Job is done.

Pulumi awaits a batch/v1 Job until it is Complete (pulumi-kubernetes provider/pkg/await/job.go,
read 2026-12-02), within `pulumi.com/timeoutSeconds`; the group depends on the Job. The Job's
name carries a hash of its inputs, so a second `pulumi up` with the same inputs finds the same
object and changes nothing, and new inputs make a new Job.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.manifests.lws import model_claims
from components.manifests.pods import container_security_context, memory_quantity
from components.manifests.spec import (
    HF_TOKEN_KEY,
    HF_TOKEN_MOUNT,
    MODELS_MOUNT,
    Manifest,
    ServerSpec,
    object_meta,
    pod_security_context,
    toleration,
)

CODE_MOUNT = "/opt/quantize"
SCRATCH_MOUNT = "/scratch"
OUT_MOUNT = "/out"
#: The quantizer's requirements file, as shipped in the ConfigMap.
REQUIREMENTS = "requirements-quantize.txt"
#: Pulumi waits this much longer than the Job's own deadline, so the Job's failure (with its
#: pod's message) is what a failed run reports, not Pulumi's timeout. Without the annotation
#: Pulumi gives a Job 10 minutes (`DefaultJobTimeoutMins` in provider/pkg/await/job.go, read
#: 2026-12-02), less than the quantization's modelled run.
AWAIT_MARGIN_SECONDS = 300

_SCRIPT = r"""
set -eu
python3 - <<'PY'
import hashlib, json, os, shutil, subprocess, sys, time
from pathlib import Path

scheme, repo = os.environ["SCHEME"], os.environ["SOURCE_REPO"]
revision = os.environ.get("SOURCE_REVISION") or None
outs = [Path(p) for p in os.environ["OUT_DIRS"].split(":")]
scratch = Path(os.environ["SCRATCH"])
start = time.time()
for directory in [scratch / "tmp", *outs]:
    directory.mkdir(parents=True, exist_ok=True)


def say(text):
    print(f"[{time.time() - start:7.1f} s] {text}", flush=True)


def whole(out):
    try:
        marker = json.loads((out / "quantized.json").read_text())
    except (OSError, ValueError):
        return None
    if marker.get("scheme") != scheme or marker.get("sourceRevision") != revision:
        return None
    files = marker.get("files") or {}
    for name, entry in files.items():
        path = out / name
        if not path.is_file() or path.stat().st_size != entry.get("bytes"):
            return None
    return marker if files else None


if all(whole(out) for out in outs):
    say(f"every volume already holds {scheme} of {repo}@{revision}; nothing to do")
    sys.exit(0)
if not whole(outs[0]):
    from huggingface_hub import snapshot_download
    source = scratch / "source"
    say(f"downloading {repo}@{revision}")
    snapshot_download(repo, revision=revision, local_dir=source, allow_patterns=[
        "*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "tokenizer*"])
    say("installing the pinned quantizer")
    # Every package is pinned in the file: pip resolves nothing on its own.
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-cache-dir", "--quiet",
                    "--no-deps", "--target", str(scratch / "site"), "--requirement",
                    os.environ["REQUIREMENTS"]], check=True)
    env = dict(os.environ, PYTHONPATH=f"{scratch / 'site'}:{os.environ['CODE']}")
    command = [sys.executable, "-m", "infra.quantize", "--source", str(source), "--scheme",
               scheme, "--out", str(outs[0])]
    if revision:
        command += ["--source-revision", revision]
    say("quantizing: " + " ".join(command))
    # From the shipped source's directory: `-m` looks there first, whatever the image's workdir.
    # Its exit code is the pod's (2: input it refuses; a signal as the shell reports one).
    code = subprocess.run(command, env=env, cwd=os.environ["CODE"]).returncode
    if code:
        sys.exit(128 - code if code < 0 else code)
    shutil.rmtree(source)
marker = whole(outs[0])
if marker is None:
    sys.exit(f"{outs[0]} holds no whole {scheme} checkpoint after the quantizer ran")
for out in outs[1:]:
    if whole(out):
        continue
    say(f"copying to {out}")
    (out / "quantized.json").unlink(missing_ok=True)
    for name, entry in sorted(marker["files"].items()):
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(outs[0] / name, target)
        digest = hashlib.sha256()
        with open(target, "rb") as handle:
            while chunk := handle.read(64 << 20):
                digest.update(chunk)
        if digest.hexdigest() != entry["sha256"]:
            sys.exit(f"{target} does not match its sha256 in the marker")
    shutil.copyfile(outs[0] / "quantized.json", out / "quantized.json")
say("done")
PY
"""


@dataclass(frozen=True)
class QuantizeSpec:
    """The Job that produces a stack's int8 or int4 checkpoint, as the planner sizes it. What it
    makes is the server's: `weights` from `model` at `model_revision`, into every rank's claim
    (`model_claims`)."""

    #: The compressed-tensors scheme the quantizer applies (W8A8, W4A8).
    scheme: str
    #: Copies written: one per rank's weights volume.
    volumes: int
    modelled_seconds: int
    #: activeDeadlineSeconds of the Job; Pulumi waits a little longer.
    deadline_seconds: int
    #: The container's memory and CPU (requests = limits): the model pod's.
    memory_gib: float
    cpu: int
    #: Modelled peak of the heaviest way to quantize (the whole bf16 model in memory).
    peak_gib: float
    #: Scratch space on the node's disk: the bf16 download and the installed quantizer.
    scratch_gib: int
    #: vLLM ops the image must carry to serve the checkpoint (`infra.plan.moe.kernel_ops`):
    #: checked by the Job's first container, before anything is downloaded.
    required_ops: tuple[str, ...] = ()
    #: Relative path -> text: the quantizer's package (`infra/quantize/...`, `infra/__init__.py`)
    #: and `requirements-quantize.txt`, shipped as a ConfigMap. The program adds them from its
    #: checkout; the plan holds none.
    files: Mapping[str, str] = field(default_factory=dict)


def claims(spec: ServerSpec) -> list[str]:
    """Every rank's weights claim: the first gets the quantizer's output, the others a checked
    copy."""
    return [claim["metadata"]["name"] for claim in model_claims(spec)]


#: The Job's first container when the served format needs ops not every vLLM build has: it
#: imports the image's vLLM CPU extension (which registers its ops under `torch.ops._C`, as
#: vLLM 0.31's CPU MoE kernels look them up) and stops in one line when one is missing, before
#: the bf16 download and the quantization, whose result that vLLM could not load.
KERNEL_CHECK = r"""
import os, sys
import torch
from vllm.platforms import current_platform
# vLLM's own loader registers its CPU ops under torch.ops._C, from the library built for this
# CPU (on x86 `_C` needs AVX-512 BF16, and importing it on an AVX2 CPU dies with SIGILL).
current_platform.import_kernels()
ops = os.environ["REQUIRED_OPS"].split(",")
missing = [op for op in ops if not hasattr(torch.ops._C, op)]
if missing:
    sys.exit(
        f"the image's vLLM has no {', '.join(missing)}, so it cannot serve "
        f"{os.environ['SCHEME']} experts: set `vllmImage` to a build that has it "
        "(an Arm build for CPUs with i8mm and bf16), or `weights` to bf16"
    )
print(f"the image's vLLM has {', '.join(ops)}", flush=True)
"""
#: What the check takes: torch and vLLM's extension imported, nothing more (requests = limits).
KERNEL_CHECK_RESOURCES = {"cpu": "1", "memory": "2Gi"}


def _kernel_check(spec: ServerSpec, job: QuantizeSpec) -> dict[str, Any]:
    return {
        "name": "kernel-check",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-c", KERNEL_CHECK],
        "env": [
            {"name": "REQUIRED_OPS", "value": ",".join(job.required_ops)},
            {"name": "SCHEME", "value": spec.weights},
        ],
        "resources": {
            "requests": dict(KERNEL_CHECK_RESOURCES),
            "limits": dict(KERNEL_CHECK_RESOURCES),
        },
        "securityContext": container_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _key(path: str) -> str:
    """A ConfigMap key for a relative path (keys may not hold `/`)."""
    return path.replace("/", ".")


def inputs_digest(spec: ServerSpec, job: QuantizeSpec) -> str:
    """A hash of everything the checkpoint depends on: the Job's name carries it."""
    inputs = {
        "image": spec.image,
        "scheme": spec.weights,
        "source": [spec.model, spec.model_revision],
        "out": spec.model_dir,
        "claims": claims(spec),
        "files": dict(sorted(job.files.items())),
    }
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def job_name(spec: ServerSpec, job: QuantizeSpec) -> str:
    return f"{spec.name}-quantize-{inputs_digest(spec, job)}"


def code_config_map(spec: ServerSpec, job: QuantizeSpec) -> Manifest:
    """The quantizer's source and requirements, mounted where `python -m infra.quantize` finds
    them. Named with the Job's hash, so a new quantizer is a new ConfigMap beside a new Job."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(spec, f"{job_name(spec, job)}-code", "quantize"),
        "data": {_key(path): text for path, text in sorted(job.files.items())},
    }


def quantize_job(spec: ServerSpec, job: QuantizeSpec) -> Manifest:
    """The Job (see the module docstring)."""
    name = job_name(spec, job)
    # The checkpoint's place inside each volume: where the ranks, which mount it at
    # MODELS_MOUNT, find it as `spec.model_dir`.
    inside = spec.model_dir.removeprefix(MODELS_MOUNT)
    outs = [f"{OUT_MOUNT}/{i}{inside}" for i in range(len(claims(spec)))]
    amount = {"cpu": str(job.cpu), "memory": memory_quantity(job.memory_gib)}
    container: dict[str, Any] = {
        "name": "quantize",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", _SCRIPT],
        "env": [
            {"name": "SCHEME", "value": spec.weights},
            {"name": "SOURCE_REPO", "value": spec.model},
            {"name": "SOURCE_REVISION", "value": spec.model_revision or ""},
            {"name": "OUT_DIRS", "value": ":".join(outs)},
            {"name": "SCRATCH", "value": SCRATCH_MOUNT},
            {"name": "CODE", "value": CODE_MOUNT},
            {"name": "REQUIREMENTS", "value": f"{CODE_MOUNT}/{REQUIREMENTS}"},
            {"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_MOUNT}/{HF_TOKEN_KEY}"},
            {"name": "HOME", "value": SCRATCH_MOUNT},
            {"name": "HF_HOME", "value": f"{SCRATCH_MOUNT}/huggingface"},
            {"name": "TMPDIR", "value": f"{SCRATCH_MOUNT}/tmp"},
            {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"},
        ],
        "resources": {"requests": dict(amount), "limits": dict(amount)},
        "securityContext": container_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"name": "code", "mountPath": CODE_MOUNT, "readOnly": True},
            {"name": "scratch", "mountPath": SCRATCH_MOUNT},
            {"name": "hf-token", "mountPath": HF_TOKEN_MOUNT, "readOnly": True},
            *({"name": f"out-{i}", "mountPath": f"{OUT_MOUNT}/{i}"} for i in range(len(outs))),
        ],
    }
    timeout = job.deadline_seconds + AWAIT_MARGIN_SECONDS
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(
            spec, name, "quantize", annotations={"pulumi.com/timeoutSeconds": str(timeout)}
        ),
        "spec": {
            # A retried pod resumes: the quantizer redoes only what has no whole marker.
            "backoffLimit": 2,
            # A pod evicted by a drain, preempted or evicted for node pressure (the
            # DisruptionTarget condition) takes no retry; the deadline still bounds them all
            # (batch/v1 JobSpec.podFailurePolicy, GA in 1.31). No FailJob rule: pulumi-kubernetes'
            # Job await reads a failed Job only by BackoffLimitExceeded or DeadlineExceeded
            # (provider/pkg/await/checker/job/check.go), so `up` would wait out its timeout.
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "Ignore",
                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                    }
                ]
            },
            "activeDeadlineSeconds": job.deadline_seconds,
            "template": {
                "metadata": {"labels": object_meta(spec, name, "quantize")["labels"]},
                "spec": {
                    "restartPolicy": "Never",
                    "priorityClassName": priority_class(spec)["metadata"]["name"],
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "nodeSelector": dict(spec.node_selector),
                    # The model nodes' taint (`ServerSpec.model_taint`): on an elastic stack the
                    # Cluster Autoscaler adds a node only for a pod that tolerates its template
                    # node's taints (cluster-autoscaler 1.35 simulator, the scheduler's
                    # TaintToleration filter): without it the Job never runs and `pulumi up`
                    # waits its deadline.
                    **({"tolerations": [toleration(spec.model_taint)]} if spec.model_taint else {}),
                    "securityContext": pod_security_context(),
                    **({"initContainers": [_kernel_check(spec, job)]} if job.required_ops else {}),
                    "containers": [container],
                    "volumes": _volumes(spec, job, name),
                },
            },
        },
    }


def _volumes(spec: ServerSpec, job: QuantizeSpec, name: str) -> list[dict[str, Any]]:
    items = [{"key": _key(path), "path": path} for path in sorted(job.files)]
    return [
        {"name": "code", "configMap": {"name": f"{name}-code", "items": items}},
        {"name": "scratch", "emptyDir": {"sizeLimit": f"{job.scratch_gib}Gi"}},
        {"name": "hf-token", "secret": {"secretName": spec.hf_secret_name, "defaultMode": 0o440}},
        *(
            {"name": f"out-{i}", "persistentVolumeClaim": {"claimName": claim}}
            for i, claim in enumerate(claims(spec))
        ),
    ]


#: Above every pod of the stack's (priority 0), far below the system's critical classes
#: (2,000,000,000 and up, which no user class may reach).
PRIORITY = 1000


def priority_class(spec: ServerSpec) -> Manifest:
    """The Job's PriorityClass: it may preempt the group it replaces (see the module doc)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": f"{spec.name}-quantize",
            "labels": {"app.kubernetes.io/part-of": "gemma-graviton"},
        },
        "value": PRIORITY,
        "preemptionPolicy": "PreemptLowerPriority",
        "globalDefault": False,
        "description": "The one-time quantize Job may preempt the model group it replaces.",
    }


def quantize_objects(spec: ServerSpec, job: QuantizeSpec | None) -> list[Manifest]:
    """The PriorityClass, the ConfigMap and the Job, in apply order; none when the stack makes
    no checkpoint."""
    if job is None:
        return []
    return [priority_class(spec), code_config_map(spec, job), quantize_job(spec, job)]
