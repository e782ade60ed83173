"""The door's answers while the model sleeps: the nginx pieces `gatekeeper_conf.nginx_conf` adds
when it builds the door of an elastic stack (`Asleep`), and nothing when it builds the gatekeeper
of a fixed stack, whose config stays as it was.

With no group the leaders' Service has no endpoints, so a connection to it is refused (kube-proxy
rejects a Service without endpoints) and nginx has a 502. A keyed model request then gets an
OpenAI-style 503 with `Retry-After` (the planned wake time, slow end) and the expected wake time
in its message; /health answers 503 with `"status": "asleep"` in its body and wakes nothing, so
probes and monitors never keep the model awake. The door's own
liveness (a TCP probe on nginx) does not depend on any of it.

The wake signal is a flag KEDA polls (a `metrics-api` trigger, `door.wake_trigger`): GET /wake on
the door's internal port answers `{"wake":1}` for `signal_seconds` after the last keyed model
request, answered or refused, else `{"wake":0}`. Raised by every such request, it also keeps a
group while requests come that never queue (the queue trigger alone would let KEDA's cooldown
drop a group that is serving). The flag is an nginx proxy-cache entry, written by a mirror
subrequest of each keyed request that reaches the API server (`wake_mirror`: nginx's mirror module
issues it in the background, and the request does not wait for it) and read with
`proxy_no_cache` (a miss is never stored): the one piece of state
nginx shares across requests on every njs version, where njs's shared dictionaries need njs 0.8
and the rehearsal runs Debian's njs 0.7.9. Cache entries live in the cache's shared zone and on
disk, so they outlast any one request and every worker sees them.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The internal page a refused connection to the leaders goes to (a model request).
ASLEEP_PAGE = "/.gatekeeper/asleep"
#: The same for /health: an asleep body, no wake.
ASLEEP_HEALTH_PAGE = "/.gatekeeper/asleep-health"
WAKE_MARK = "/.gatekeeper/wake-mark"
#: The path KEDA polls on the door's internal port.
WAKE_PATH = "/wake"
#: The JSON field that path answers (KEDA's `valueLocation`).
WAKE_FIELD = "wake"


@dataclass(frozen=True)
class Asleep:
    """What the door of an elastic stack says and does while no group runs."""

    #: The planned wake time from zero groups, the slow end (seconds): `Retry-After`.
    wake_seconds: int
    #: How long one refused request keeps the wake flag up: longer than KEDA's polling interval
    #: so a poll sees it (the safe end: a longer flag only keeps a group up a little longer).
    signal_seconds: int


def _socket(run_dir: str) -> str:
    return f"unix:{run_dir}/gatekeeper-wake.sock"


def http_pieces(asleep: Asleep, run_dir: str) -> str:
    """The `http` level: the flag's cache and the tiny server that answers its two values."""
    keep = asleep.signal_seconds + 60
    return f"""    # The wake flag (components/manifests/asleep.py), one cache entry.
    proxy_cache_path {run_dir}/wake-cache levels= keys_zone=gatekeeper_wake:1m max_size=1m
                     inactive={keep}s use_temp_path=off;
    js_var $gatekeeper_asleep 0;
    server {{
        listen {_socket(run_dir)};
        access_log off;
        location = /1 {{ return 200 '{{"{WAKE_FIELD}":1}}\\n'; }}
        location = /0 {{ return 200 '{{"{WAKE_FIELD}":0}}\\n'; }}
    }}
"""


def health_errors(page_503: str, page_504: str) -> str:
    """/health's own error pages at the door (a location with any `error_page` inherits none
    from the server, so the wrong-method refusal is listed again)."""
    return f"""            error_page 419 = @not_found;
            error_page 500 503 =503 {page_503};
            error_page 502 =503 {ASLEEP_HEALTH_PAGE};
            error_page 504 {page_504};"""


def server_pieces(asleep: Asleep, run_dir: str) -> str:
    """The main server's asleep pages and the subrequest that raises the flag."""
    return f"""
        location = {ASLEEP_PAGE} {{ internal; js_content gatekeeper.asleep; }}
        location = {ASLEEP_HEALTH_PAGE} {{ internal; js_content gatekeeper.asleepHealth; }}
        location = {WAKE_MARK} {{
            internal;
            # A mirror keeps the request's method (POST) and body: neither goes on, and POST is
            # cached (nginx 1.22 ngx_http_mirror_module.c; `proxy_cache_methods` adds to GET).
            proxy_method GET;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_cache_methods POST;
            proxy_buffering on;  # nginx caches only a buffered reply
            proxy_cache gatekeeper_wake;
            proxy_cache_key wake;
            proxy_cache_bypass 1;  # always written afresh, so the flag lasts from the last one
            proxy_cache_valid 200 {asleep.signal_seconds}s;
            # Not the server's 502 page (@vllm_unreachable): a quit deletes this socket too.
            error_page 502 =503 /.gatekeeper/e503;
            proxy_pass http://{_socket(run_dir)}:/1;
        }}"""


def wake_mirror() -> str:
    """What the API server's route adds at the door: the wake flag raised as the request comes."""
    return f"\n            mirror {WAKE_MARK};\n            mirror_request_body off;"


def wake_location(run_dir: str) -> str:
    """GET /wake on the internal port: the flag while its entry is fresh, else 0 (not stored)."""
    return f"""        location = {WAKE_PATH} {{
            proxy_buffering on;
            proxy_cache gatekeeper_wake;
            proxy_cache_key wake;
            proxy_no_cache 1;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://{_socket(run_dir)}:/0;
        }}
"""
