"""The capacity run as a Kubernetes Job inside the cluster, as a pure object.

The Job runs the load generator (`vllm bench serve`, `tools.bench.loadgen`) from the stack's own
pinned vLLM image against the leaders' Service, so the figures leave out the client's network
and the load balancer. It is not part of `all_objects`: applying the rendered objects must not
start a load test. `python -m tools.bench.capacity --job` prints it for `kubectl apply -f -`.

- The key comes from the stack's API-key Secret as `OPENAI_API_KEY` (where the generator reads
  it), the Hugging Face token from the stack's token Secret (the tokenizer of a gated model).
- The tokenizer is downloaded at the stack's pinned commit first (the generator has no revision
  flag), tokenizer and config files only.
- Each point's result JSON is printed after a marker line (`RESULT_MARKER`), so `kubectl logs`
  carries the raw results out and `--from-logs` renders the table from them.
- Pod security as the model pods: non-root, no privilege escalation, every capability dropped,
  the runtime's seccomp profile, a read-only root with scratch space in an emptyDir.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from components.manifests.pods import container_security_context
from components.manifests.spec import (
    API_KEY_KEY,
    HF_TOKEN_KEY,
    Manifest,
    ServerSpec,
    object_meta,
    pod_security_context,
    toleration,
)

#: The line before each point's result JSON in the Job's log; the point's name follows it.
RESULT_MARKER = "=== capacity result "
WORK_MOUNT = "/work"
TOKENIZER_DIR = f"{WORK_MOUNT}/tokenizer"
RESULTS_DIR = f"{WORK_MOUNT}/results"
#: The generator's container: asyncio and the tokenizer, one core at most. Memory: `vllm bench
#: serve` imports vLLM and torch; 2 GiB is above the peak measured locally (the rehearsal's
#: capacity step), the safe end for a limit that kills. It comes out of the headroom the plan
#: leaves on a model node (`make plan`, "pod memory"); when that is taken the Job stays Pending.
CPU = "500m"
MEMORY = "2Gi"

_FETCH_TOKENIZER = (
    "from huggingface_hub import snapshot_download; import os; "
    "snapshot_download(os.environ['MODEL_REPO'], revision=os.environ.get('MODEL_REVISION') or None,"
    " local_dir=os.environ['TOKENIZER_DIR'], allow_patterns=['*.json', '*.model', '*.jinja',"
    " 'tokenizer*'])"
)


def job_name(spec: ServerSpec) -> str:
    return f"{spec.name}-capacity"


def service_url(spec: ServerSpec) -> str:
    """The leaders' Service from inside the cluster. Its port is 443 with a certificate, but TLS
    ends at the load balancer: inside the cluster the Service forwards plain HTTP."""
    port = 443 if spec.tls_certificate_arn else 80
    return f"http://{spec.name}.{spec.namespace}.svc.cluster.local:{port}"


def job_script(commands: Sequence[Sequence[str]], names: Sequence[str]) -> str:
    """The container's shell script: fetch the tokenizer, run every point, print each result.

    A failed point does not stop the others; the script exits 1 when any failed."""
    lines = ["set -u", "status=0", f'python3 -c "{_FETCH_TOKENIZER}" || exit 1']
    for argv, name in zip(commands, names, strict=True):
        result = f"{RESULTS_DIR}/{name}.json"
        lines += [
            f"{shlex.join(argv)} || status=1",
            f"echo {shlex.quote(RESULT_MARKER + name)}",
            f"cat {result} || status=1",
            "echo",
        ]
    lines.append('exit "$status"')
    return "\n".join(lines) + "\n"


def capacity_job(
    spec: ServerSpec,
    commands: Sequence[Sequence[str]],
    names: Sequence[str],
    deadline_seconds: int,
) -> Manifest:
    """The Job running `commands` (one generator command line per point, named by `names`)."""
    name = job_name(spec)
    labels = object_meta(spec, name, "capacity")["labels"]
    container: dict[str, Any] = {
        "name": "load-generator",
        "image": spec.image,
        "command": ["/bin/sh", "-c", job_script(commands, names)],
        "env": [
            {"name": "OPENAI_API_KEY", "valueFrom": _secret(spec.api_key_secret_name, API_KEY_KEY)},
            {"name": "HF_TOKEN", "valueFrom": _secret(spec.hf_secret_name, HF_TOKEN_KEY)},
            {"name": "HF_HOME", "value": f"{WORK_MOUNT}/hf"},
            {"name": "HOME", "value": WORK_MOUNT},
            {"name": "MODEL_REPO", "value": spec.model},
            {"name": "MODEL_REVISION", "value": spec.model_revision or ""},
            {"name": "TOKENIZER_DIR", "value": TOKENIZER_DIR},
        ],
        "resources": {
            "requests": {"cpu": CPU, "memory": MEMORY},
            "limits": {"cpu": CPU, "memory": MEMORY},
        },
        # The model pods' own: non-root, no capabilities, read-only root, RuntimeDefault.
        "securityContext": container_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "work", "mountPath": WORK_MOUNT}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(spec, name, "capacity"),
        "spec": {
            # A load test run twice measures twice: no retry.
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_seconds,
            "ttlSecondsAfterFinished": 7 * 24 * 3600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": dict(spec.node_selector),
                    **({"tolerations": [toleration(spec.model_taint)]} if spec.model_taint else {}),
                    "securityContext": pod_security_context(),
                    "containers": [container],
                    "volumes": [{"name": "work", "emptyDir": {"sizeLimit": "2Gi"}}],
                },
            },
        },
    }


def _secret(name: str, key: str) -> dict[str, Any]:
    return {"secretKeyRef": {"name": name, "key": key}}
