"""The front door: an nginx container in every leader pod, the only way in to vLLM.

vLLM listens on 127.0.0.1 only; the Service and the NetworkPolicy reach the gatekeeper's port.
The gatekeeper passes two routes to vLLM, answers /v1/models and a cached /health itself and
refuses everything else (`gatekeeper_conf` says what each layer bounds and why). vLLM keeps its
own key check as a second lock.

Why nginx: it is in every distribution (the rehearsal runs Debian's build against real vLLM) and
in a small multi-arch official image; `map`, `limit_req`, `limit_conn`, `client_max_body_size`,
`stream` and unbuffered proxying are stock modules, and its njs module (nginx's own JavaScript,
in the official image and packaged by Debian as libnginx-mod-http-js) reads the JSON bodies, so
the whole policy is two generated files. (Envoy needs a far larger config for the same and is not
packaged by Debian; HAProxy would do, but its JSON error bodies and per-client concurrency take
more moving parts.)

The config is generated here, purely, from the plan's limits: the program mounts it from a
ConfigMap, `--render` writes it, and the rehearsal runs the same builder's output for real. No key
is in it. The keys live in the API key's Secret, mounted as files the kubelet refreshes when the
Secret changes:
- `api-keys.json` (`key_file_text`): every accepted client key, each with the time it stops
  being accepted (none for the current key; `apiKeyOverlapUntil` for the previous
  one during a rotation). The njs script reads it on every keyed request and compares by time,
  so a rotation and the end of its overlap need no reload and no restart of any pod. A missing,
  unreadable or empty file accepts nothing (fail closed).
- `engine.map` (`engine_map_entry`): the engine key, which vLLM checks (its own second lock) and
  the gatekeeper sends in place of the client's key. It never rotates with the client keys, so
  vLLM, which reads its key only at start, keeps working through a rotation.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import PurePosixPath
from typing import Any

from components.manifests import drain, images, spec
from components.manifests.gatekeeper_conf import (
    OPEN_PATHS,
    ROUTES,
    SELF_METRICS_ROUTE,
    GatekeeperLimits,
    nginx_conf,
    njs_script,
)
from components.manifests.probes import SELF_METRICS_FILE

__all__ = [
    "OPEN_PATHS",
    "ROUTES",
    "SELF_METRICS_ROUTE",
    "GatekeeperLimits",
    "config_files",
    "nginx_conf",
    "njs_script",
]

#: The official nginx image, stable line, Alpine variant: nginx 1.30.5 with the stream module
#: built in and njs 1.0.1 as a dynamic module (`nginx-module-njs`, in
#: /usr/lib/nginx/modules/ngx_http_js_module.so; the "slim" variant has no njs), pinned by the
#: digest of its multi-arch index in `images.json` (its source there; `make pin-images`).
IMAGE = images.reference("gatekeeper")
CONTAINER = spec.GATEKEEPER_CONTAINER
PORT_NAME = "gatekeeper"
PORT = spec.GATEKEEPER_PORT
#: The internal listener that passes vLLM's Prometheus `/metrics` and nothing else. The Service
#: never targets it, and the NetworkPolicy admits it from the metrics collector's pods only
#: (`components.manifests.metrics`).
METRICS_PORT_NAME = "metrics"
METRICS_PORT = 9090
PROBE_PORT_NAME = "probe"
PROBE_PORT = spec.GATEKEEPER_PROBE_PORT
#: The kubelet's timeout on the gatekeeper's own probes; the engine probe's calls to /health
#: through the probe listener have as long each (`probes.ProbeSpec.request_s`).
PROBE_TIMEOUT_S = 5
CONFIG_FILE = "nginx.conf"
SCRIPT_FILE = "gatekeeper.js"
CONFIG_MOUNT = "/etc/gatekeeper"
KEY_FILE = "api-keys.json"
ENGINE_FILE = "engine.map"
KEY_MOUNT = "/var/run/secrets/gatekeeper"
RUN_DIR = "/tmp"
#: The file whose presence fails the gatekeeper's readiness (`/ready` answers 503).
MARKER_NAME = "draining"
#: Where a leader's gatekeeper sees the engine container's /tmp (its `tmp` volume, read-only),
#: and in it the record the startup probe writes (`probes.SELF_METRICS_FILE`), which the
#: metrics listener serves at `gatekeeper_conf.SELF_METRICS_ROUTE`. Read-only: nginx reads one
#: file there, by an exact location, and can change nothing of the engine's.
ENGINE_MOUNT = "/var/run/gemma-engine"
SELF_METRICS_PATH = f"{ENGINE_MOUNT}/{PurePosixPath(SELF_METRICS_FILE).name}"
ENGINE_TMP_VOLUME = "tmp"
#: Rolls the leader pods when the config changes, as `KEY_ANNOTATION` does for the engine key
#: (nginx reads its config only at start; the client keys are re-read).
CONFIG_ANNOTATION = "gemma-graviton.dev/gatekeeper-config-sha256"
KEY_ANNOTATION = spec.KEY_ANNOTATION
config_digest = spec.config_digest


def config_files(limits: GatekeeperLimits, **where: Any) -> dict[str, str]:
    """The ConfigMap's files: nginx.conf (`where` as `nginx_conf` takes it, `asleep` too) and
    the njs script."""
    return {
        CONFIG_FILE: nginx_conf(limits, **where),
        SCRIPT_FILE: njs_script(limits, where.get("asleep")),
    }


def _usable(api_key: str | None) -> bool:
    return bool(api_key) and spec.KEY_SHAPE.fullmatch(api_key or "") is not None


def key_file_text(
    api_key: str,
    previous: str | None = None,
    previous_until: dt.datetime | None = None,
) -> str:
    """`api-keys.json` (the module doc says what reads it), the previous key's end in Unix
    seconds, rounded up: the overlap never ends before the time it was given. A missing,
    placeholder or oddly shaped key is left out, so the gatekeeper refuses it rather than guess;
    no usable key at all accepts nothing."""
    keys: list[dict[str, Any]] = []
    if _usable(api_key):
        keys.append({"key": api_key, "until": None})
    if previous is not None and previous_until is not None and _usable(previous):
        keys.append({"key": previous, "until": math.ceil(previous_until.timestamp())})
    return json.dumps({"keys": keys}, sort_keys=True) + "\n"


def engine_map_entry(engine_key: str) -> str:
    """`engine.map`: the `Authorization` value the gatekeeper sends vLLM. An unusable key gives
    none, and vLLM refuses every request (fail closed)."""
    if not _usable(engine_key):
        return "# no usable engine key: vLLM refuses every request\n"
    return f'default "Bearer {engine_key}";\n'


def nginx_security_context() -> dict[str, Any]:
    """The nginx containers' security context (the gatekeeper's, the door's and the queue
    floor's): the image's own non-root user, nothing to escalate to, a read-only root."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container(
    millicpu: int,
    memory_mib: int,
    drain_spec: drain.DrainSpec | None = None,
    engine_tmp: bool = False,
) -> dict[str, Any]:
    """The gatekeeper container: nginx as the pod's non-root user, requests equal to limits.
    With `drain_spec` it drains when the pod stops (`components.manifests.drain`): its readiness
    is `/ready`, which fails once the preStop has written the drain marker. With `engine_tmp`
    (a leader's sidecar) it sees the engine's /tmp, read-only, at `ENGINE_MOUNT`."""
    amount = {"cpu": f"{millicpu}m", "memory": f"{memory_mib}Mi"}
    return {
        "name": CONTAINER,
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        # Not the image's entrypoint: it rewrites files under /etc/nginx, which is read-only here.
        "command": ["nginx", "-e", "stderr", "-c", f"{CONFIG_MOUNT}/{CONFIG_FILE}"],
        "ports": [
            {"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"},
            {"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"},
            {"name": PROBE_PORT_NAME, "containerPort": PROBE_PORT, "protocol": "TCP"},
        ],
        "resources": {"requests": dict(amount), "limits": dict(amount)},
        "securityContext": nginx_security_context(),
        # nginx itself: accepting connections, on the probe listener, which no public client
        # can fill. (vLLM's readiness, through it, is the engine container's probe on /health.)
        "readinessProbe": (
            ready_probe(PROBE_PORT_NAME)
            if drain_spec
            else {
                "tcpSocket": {"port": PROBE_PORT},
                "periodSeconds": 10,
                "timeoutSeconds": PROBE_TIMEOUT_S,
            }
        ),
        "livenessProbe": {
            "tcpSocket": {"port": PROBE_PORT},
            "periodSeconds": 20,
            "failureThreshold": 3,
            "timeoutSeconds": PROBE_TIMEOUT_S,
        },
        "volumeMounts": [
            {"name": "gatekeeper-config", "mountPath": CONFIG_MOUNT, "readOnly": True},
            {"name": "gatekeeper-key", "mountPath": KEY_MOUNT, "readOnly": True},
            {"name": "gatekeeper-run", "mountPath": RUN_DIR},
            *(
                [{"name": ENGINE_TMP_VOLUME, "mountPath": ENGINE_MOUNT, "readOnly": True}]
                if engine_tmp
                else []
            ),
        ],
        **({"lifecycle": drain.lifecycle(pre_stop(drain_spec, RUN_DIR))} if drain_spec else {}),
    }


def pre_stop(
    drain_spec: drain.DrainSpec, run_dir: str, ready_period_s: int = drain.READY_PERIOD_S
) -> list[str]:
    """The gatekeeper's preStop command: accept while the NLB notices, fail readiness, let a
    readiness period pass (`ready_probe`'s, so the pod is out of the Service before nginx stops
    listening), quit gracefully and wait for nginx to finish its requests until the hooks' end
    (`drain.hooks_end`), within the pod's grace. `run_dir`
    holds nginx's pid file and the drain marker (the config's `run_dir`)."""
    pid_file, marker = f"{run_dir}/nginx.pid", f"{run_dir}/{MARKER_NAME}"
    wait = drain.hooks_end(drain_spec) - drain_spec.accept_s - ready_period_s
    script = (
        f"sleep {drain_spec.accept_s}; touch {marker}; sleep {ready_period_s}; "
        f'pid=$(cat {pid_file}); kill -QUIT "$pid"; n=0; '
        f'while kill -0 "$pid" 2>/dev/null && [ "$n" -lt {wait} ]; do sleep 1; n=$((n+1)); done'
    )
    return ["/bin/sh", "-c", script]


def ready_probe(port: str) -> dict[str, Any]:
    """The gatekeeper's readiness: `/ready` answers 200 until the drain marker exists. One
    failure is enough: the marker is written only when the pod is leaving."""
    return {
        "httpGet": {"path": "/ready", "port": port},
        "periodSeconds": drain.READY_PERIOD_S,
        "failureThreshold": 1,
        "timeoutSeconds": 5,
    }


def volumes(config_map: str, secret_name: str) -> list[dict[str, Any]]:
    """The config (a ConfigMap), the key files (only those items of the key's Secret, as a
    volume the kubelet refreshes: no `subPath`) and a scratch directory for nginx's pid, its
    temporary files and the drain marker."""
    return [
        {"name": "gatekeeper-config", "configMap": {"name": config_map}},
        {
            "name": "gatekeeper-key",
            "secret": {
                "secretName": secret_name,
                "items": [
                    {"key": KEY_FILE, "path": KEY_FILE},
                    {"key": ENGINE_FILE, "path": ENGINE_FILE},
                ],
                "defaultMode": 0o440,
            },
        },
        {"name": "gatekeeper-run", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
