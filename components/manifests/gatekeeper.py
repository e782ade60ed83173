"""The front door: an nginx container in every leader pod, the only way in to vLLM.

vLLM listens on 127.0.0.1 only; the Service and the NetworkPolicy reach the gatekeeper's port.
The gatekeeper passes four routes (`ROUTES`) and answers everything else itself: 404 for any
other path or method, 401 without the right bearer key, 413 for a body over the limit, 429 with
Retry-After above a client's rate or concurrency. vLLM keeps its own key check as a second lock.

Why nginx: it is in every distribution (the rehearsal runs Debian's build against real vLLM) and
in a small multi-arch official image; `map`, `limit_req`, `limit_conn`, `client_max_body_size` and
unbuffered proxying are stock modules, so the whole policy is one generated file. (Envoy needs a
far larger config for the same and is not packaged by Debian; HAProxy would do, but its JSON
error bodies and per-client concurrency take more moving parts.)

The config is generated here, purely, from the plan's limits: the program mounts it from a
ConfigMap, `--render` writes it, and the rehearsal runs the same builder's output for real. The
key is not in it: the config includes a `map` snippet from the API key's Secret
(`key_map_entry`), and with no snippet, or one for a missing, empty or placeholder key, the `map`
accepts nothing and every request but /health is refused (fail closed).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from components.manifests import chat

#: The official nginx image, stable line, Alpine "slim" variant (no njs or extra modules), pinned
#: by the digest of its multi-arch index (linux/arm64/v8 and linux/amd64 among its platforms).
#: Source: docker-library/repo-info `repos/nginx/remote/1.30.5-alpine-slim.md` at commit
#: 08b3b898fc18da523d5d6e30a868c60805acb3bc, read 2026-11-30.
IMAGE = (
    "nginx:1.30.5-alpine-slim"
    "@sha256:f56e56413ea294b1532917c0b36fc676725f0af2ac766989f06f4b69cf83b12b"
)
CONTAINER = "gatekeeper"
PORT_NAME = "gatekeeper"
PORT = 8080
#: The internal listener that passes vLLM's Prometheus `/metrics` and nothing else. The Service
#: never targets it, and the NetworkPolicy admits it from the metrics collector's pods only
#: (`components.manifests.metrics`).
METRICS_PORT_NAME = "metrics"
METRICS_PORT = 9090
CONFIG_FILE = "nginx.conf"
CONFIG_MOUNT = "/etc/gatekeeper"
KEY_FILE = "api-key.map"
KEY_MOUNT = "/var/run/secrets/gatekeeper"
RUN_DIR = "/tmp"
#: Pod-template annotations that change when the key or the config changes, so `pulumi up`
#: rolls the leader pods and the old key stops working (vLLM and nginx read both only at start).
KEY_ANNOTATION = "gemma-graviton.dev/api-key-fingerprint"
CONFIG_ANNOTATION = "gemma-graviton.dev/gatekeeper-config-sha256"

#: (method, path) pairs that reach vLLM. /health answers without a key (the kubelet's probes).
ROUTES = (
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("GET", "/v1/models"),
    ("GET", "/health"),
)
OPEN_PATHS = ("/health",)

#: Characters of an acceptable key: RFC 6750's b64token. Anything else (quotes, spaces, `$`)
#: could change the meaning of the config line the key is written into.
_KEY_SHAPE = re.compile(r"[A-Za-z0-9._~+/=-]{16,512}")
#: Slow key derivation for the rotation fingerprint, so a weak user-chosen key cannot be found
#: by hashing a word list against the (plain) pod annotation.
_FINGERPRINT_ROUNDS = 200_000
_FINGERPRINT_SALT = b"gemma-graviton api-key fingerprint"


@dataclass(frozen=True)
class GatekeeperLimits:
    """What the gatekeeper enforces; the plan's `FrontDoorPlan` gives every figure."""

    max_request_bytes: int
    client_requests_per_minute: int
    client_burst: int
    client_concurrent_requests: int
    #: Longest wait for vLLM's answer (the longest planned reply), in seconds.
    reply_timeout_seconds: int
    #: A client must send its request line and headers within this.
    header_timeout_seconds: int = 10


def _error(status: int, kind: str, message: str) -> str:
    """An OpenAI-style error body, quoted for an nginx `return` line."""
    body = json.dumps({"error": {"message": message, "type": kind, "code": status}})
    return "'" + body.replace("'", "") + "\\n'"


def nginx_conf(
    limits: GatekeeperLimits,
    *,
    listen: str = str(PORT),
    upstream_port: int = 8000,
    key_dir: str = KEY_MOUNT,
    run_dir: str = RUN_DIR,
    access_log: str = "/dev/stdout",
    metrics_listen: str = str(METRICS_PORT),
    page_root: str | None = None,
) -> str:
    """The gatekeeper's whole nginx.conf. In the pod the defaults hold; the rehearsal passes its
    loopback ports and a scratch directory, nothing else. With `page_root` (where the chat
    page's files are: the config's own mount in the pod) it also serves the chat page."""
    not_found = _error(404, "not_found_error", "Not found: this endpoint serves only the API")
    unauthorized = _error(401, "authentication_error", "Missing or invalid API key")
    too_many = _error(429, "rate_limit_error", "Too many requests from this address; retry later")
    # A group that broke or is restarting: vLLM refuses or resets the connection (502) or, with
    # its engine dead, answers 500 (vLLM 0.31's EngineDeadError). Clients get a retryable 503.
    unavailable = _error(
        503, "service_unavailable_error", "The model is restarting or unavailable; retry later"
    )
    gave_up = _error(504, "timeout_error", "The model did not answer in time")
    too_large = _error(
        413, "invalid_request_error", f"Request body over {limits.max_request_bytes} bytes"
    )
    timeout = limits.reply_timeout_seconds
    locations = []
    for method, path in ROUTES:
        keyed = path not in OPEN_PATHS
        lines = [
            f"        location = {path} {{",
            f"            if ($request_method != {method}) {{ return 404 {not_found}; }}",
        ]
        if keyed:
            lines += [
                "            if ($gatekeeper_key_ok != 1) {",
                "                add_header WWW-Authenticate Bearer always;",
                f"                return 401 {unauthorized};",
                "            }",
                f"            limit_req zone=gatekeeper_rate burst={limits.client_burst} nodelay;",
                f"            limit_conn gatekeeper_conn {limits.client_concurrent_requests};",
                f"            proxy_read_timeout {timeout}s;",
            ]
        else:
            lines.append("            proxy_read_timeout 5s;")
        # A fixed upstream URI: vLLM sees exactly the allowed path, never the client's spelling
        # of it (`/v1//models`, `%2F`), whatever nginx normalised.
        lines += [f"            proxy_pass http://vllm{path}$is_args$args;", "        }"]
        locations.append("\n".join(lines))
    rate = limits.client_requests_per_minute
    return f"""# Generated by components/manifests/gatekeeper.py from the plan; do not edit.
# Works on nginx 1.22 (Debian 12, the rehearsal) and 1.30 (the pod's image).
worker_processes 1;
daemon off;
pid {run_dir}/nginx.pid;
error_log stderr warn;

events {{
    worker_connections 512;
}}

http {{
    server_tokens off;
    default_type application/json;
    client_body_temp_path {run_dir}/client_body;
    proxy_temp_path {run_dir}/proxy;
    fastcgi_temp_path {run_dir}/fastcgi;
    uwsgi_temp_path {run_dir}/uwsgi;
    scgi_temp_path {run_dir}/scgi;

    # No Authorization header in the log; "upstream" is "" when vLLM never saw the request.
    log_format gatekeeper escape=json '{{"time":"$time_iso8601","client":"$remote_addr",'
        '"method":"$request_method","uri":"$uri","status":$status,'
        '"bytes":$body_bytes_sent,"upstream":"$upstream_addr",'
        '"upstream_status":"$upstream_status","seconds":$request_time}}';
    access_log {access_log} gatekeeper;

    # The accepted Authorization header, from the API key's Secret. A string key would match
    # ignoring case (nginx map docs), so the snippet holds an anchored case-sensitive regex.
    # No snippet, no match: every keyed request gets 401.
    map $http_authorization $gatekeeper_key_ok {{
        default 0;
        include {key_dir}/*.map;
    }}

    limit_req_zone $binary_remote_addr zone=gatekeeper_rate:1m rate={rate}r/m;
    limit_conn_zone $binary_remote_addr zone=gatekeeper_conn:1m;
    limit_req_status 429;
    limit_conn_status 429;

    upstream vllm {{
        server 127.0.0.1:{upstream_port};
        keepalive 8;
    }}

    server {{
        listen {listen};

        client_max_body_size {limits.max_request_bytes};
        client_body_buffer_size {min(limits.max_request_bytes, 64 * 1024)};
        client_header_timeout {limits.header_timeout_seconds}s;
        client_body_timeout {limits.header_timeout_seconds * 3}s;
        keepalive_timeout 30s;
        send_timeout 60s;

        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $host;
        # Streams (server-sent events) pass through as vLLM writes them.
        proxy_buffering off;
        proxy_connect_timeout 5s;
        proxy_send_timeout 60s;

        # vLLM's own error statuses are its own (400, 404, ...), except those below: a dead
        # engine's 500 and an unreachable upstream become the OpenAI-style 503, a reply not
        # started within the reply timeout the 504, never nginx's HTML page or an open socket.
        proxy_intercept_errors on;
        error_page 500 502 503 =503 @unavailable;
        error_page 504 =504 @gave_up;
        location @unavailable {{
            add_header Retry-After 5 always;
            return 503 {unavailable};
        }}
        location @gave_up {{ return 504 {gave_up}; }}
        error_page 413 @too_large;
        error_page 429 @too_many;
        location @too_large {{ return 413 {too_large}; }}
        location @too_many {{
            add_header Retry-After 1 always;
            return 429 {too_many};
        }}

{chr(10).join(locations)}
{chat.locations(page_root, not_found) if page_root else ""}
        location / {{ return 404 {not_found}; }}
    }}

    # vLLM's Prometheus metrics for the in-cluster collector. Not in the access log: the
    # front-door answer counts are made from that log, and scrapes are not clients.
    server {{
        listen {metrics_listen};
        access_log off;

        location = /metrics {{
            if ($request_method != GET) {{ return 404 {not_found}; }}
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 10s;
            proxy_pass http://vllm/metrics;
        }}
        location / {{ return 404 {not_found}; }}
    }}
}}
"""


def key_map_entry(api_key: str) -> str:
    """The `map` snippet that accepts exactly `Authorization: Bearer <api_key>`.

    A missing, empty, placeholder or oddly shaped key gives a snippet that accepts nothing, so
    the gatekeeper refuses every keyed request rather than guess.
    """
    if not _KEY_SHAPE.fullmatch(api_key or ""):
        return "# no usable API key: every request that needs one is refused\n"
    # `.` and `+` are the only regex metacharacters a b64token can hold; nginx's parser keeps
    # the backslash (ngx_conf_file.c unescapes only quotes, backslash, t, r and n).
    pattern = "".join("\\" + c if c in ".+" else c for c in api_key)
    return f'"~^Bearer {pattern}$" 1;\n'


def key_fingerprint(api_key: str) -> str:
    """A short, slow-to-invert digest of the key for the pod template: it changes with the key,
    so a new key rolls the leader pods, and does not reveal the key."""
    digest = hashlib.pbkdf2_hmac(
        "sha256", api_key.encode("utf-8"), _FINGERPRINT_SALT, _FINGERPRINT_ROUNDS
    )
    return digest[:8].hex()


def config_digest(conf: str) -> str:
    return hashlib.sha256(conf.encode("utf-8")).hexdigest()[:16]


def container(millicpu: int, memory_mib: int) -> dict[str, Any]:
    """The gatekeeper container: nginx as the pod's non-root user, requests equal to limits."""
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
        ],
        "resources": {"requests": dict(amount), "limits": dict(amount)},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        # nginx itself: accepting connections. (vLLM's readiness, through it, is the engine
        # container's probe on /health.)
        "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 10, "timeoutSeconds": 5},
        "livenessProbe": {
            "tcpSocket": {"port": PORT},
            "periodSeconds": 20,
            "failureThreshold": 3,
            "timeoutSeconds": 5,
        },
        "volumeMounts": [
            {"name": "gatekeeper-config", "mountPath": CONFIG_MOUNT, "readOnly": True},
            {"name": "gatekeeper-key", "mountPath": KEY_MOUNT, "readOnly": True},
            {"name": "gatekeeper-run", "mountPath": RUN_DIR},
        ],
    }


def volumes(config_map: str, secret_name: str) -> list[dict[str, Any]]:
    """The config (a ConfigMap), the key snippet (only that item of the key's Secret) and a
    scratch directory for nginx's pid and temporary files."""
    return [
        {"name": "gatekeeper-config", "configMap": {"name": config_map}},
        {
            "name": "gatekeeper-key",
            "secret": {
                "secretName": secret_name,
                "items": [{"key": KEY_FILE, "path": KEY_FILE}],
                "defaultMode": 0o440,
            },
        },
        {"name": "gatekeeper-run", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
