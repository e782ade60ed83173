"""The gatekeeper's two files, generated purely from the plan's limits: `nginx.conf` and the njs
script it imports (`gatekeeper.js`, the checks a proxy can make only by reading the JSON body).

Layers, outermost first, each cheaper than the one behind it, each explained where the template
(`gatekeeper.conf.tmpl` beside this file, `TEMPLATE`, readable as the nginx.conf it renders)
writes it: the stream layer counts a client's connections, and all of them, before a byte is
read; the public HTTP server wants the whole header within `header_timeout_seconds` (a timer
nginx arms once per request, ngx_http_request.c `ngx_http_read_request_header`), then the route,
the key and the rates, and counts a keyed POST before its body; the API server reads the body
and has the check server judge it in njs (whose request, and VM, end with the verdict) before the
client's tiers and vLLM, which sees only `PASSED_HEADERS` (it acts on others:
`tests/fixtures/vllm/request-headers-v0.31.json`); every reply is bounded in time and bytes.

The kubelet's probes and the group's workers have a listener of their own (`probe_listen`) that
never goes through the stream layer, which admits at most `connection_capacity` public
connections, so nginx keeps what worker_connections holds beyond them for the probes (with no
slot free nginx closes a new connection on every listener alike: nginx 1.30
src/event/ngx_event_accept.c `ngx_event_accept`, src/core/ngx_connection.c `ngx_get_connection`).

Every error the front door itself produces, and how it answers for vLLM's, is
`gatekeeper_answers`; this module computes the values and fragments the template takes.
"""

from __future__ import annotations

import functools
import json
import math
import re
import string
from dataclasses import asdict, dataclass
from importlib import resources
from typing import TYPE_CHECKING

from components.manifests import gatekeeper_answers as answers
from components.manifests.gatekeeper_answers import ERRORS, error_body

if TYPE_CHECKING:
    from components.manifests.asleep import Asleep

#: (method, path) pairs a client may use. /health answers without a key (the kubelet's probes);
#: /v1/models is answered by the gatekeeper itself (the served name, nothing of vLLM's disk).
ROUTES = (
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("GET", "/v1/models"),
    ("GET", "/health"),
    ("GET", "/ready"),
)
#: /ready is the gatekeeper's own readiness: 200, or 503 once the pod drains
#: (`components.manifests.drain`).
OPEN_PATHS = ("/health", "/ready")
#: The only client headers vLLM receives: the body's type and what the client accepts, and
#: `Authorization`, set to the engine key in place of the client's (vLLM's own second lock,
#: `gatekeeper.ENGINE_FILE`). Everything else, `X-Request-Id`, `X-Forwarded-For` as the client
#: wrote it, priority and session headers included, is dropped (`proxy_pass_request_headers off`).
PASSED_HEADERS = ("Authorization", "Content-Type", "Accept")
#: Failed requests (wrong key, unknown path or method) per minute per client, with this burst.
FAILURES_PER_MINUTE = 30
FAILURE_BURST = 10
#: How long a refused connection may linger to drain what the client still sends.
LINGERING_SECONDS = 5
#: Deepest nesting of arrays and objects njs's JSON.parse reads (31 levels are refused: njs
#: njs_json.c NJS_JSON_MAX_DEPTH); deeper bodies get their own message naming it.
MAX_JSON_DEPTH = 30
#: Requests a second per client address on the routes that take no key (/health, /ready, the
#: chat page's files), with this burst. Each costs nginx 50-100 us of CPU, so one address at this
#: rate uses at most 2 millicores of the gatekeeper's 120; a page load is three files, a probe one
#: call every few seconds.
OPEN_PER_SECOND = 20
OPEN_BURST = 40
#: How long browsers and proxies keep the chat page's files before they revalidate (ETag).
STATIC_MAX_AGE_SECONDS = 300
#: Idle keep-alive connections close after this (they count against `client_connections`).
KEEPALIVE_SECONDS = 15


@dataclass(frozen=True)
class GatekeeperLimits:
    """The front door as the planner sets it (`infra.plan.frontdoor.plan_front_door`): what the
    gatekeeper enforces and why, beside the five fields of `spec.EndpointLimits`. The plan's
    `--json` shows them in this order (`served_model` aside: the plan's `model` names it)."""

    tls: bool
    listener_port: int
    max_request_bytes: int
    client_requests_per_minute: int
    client_burst: int
    #: Requests (each one sequence) one client may have in flight at vLLM.
    client_concurrent_requests: int
    #: Requests in flight at vLLM from every client together (the API upstream's `max_conns`);
    #: beyond it 503 with Retry-After.
    all_requests: int
    #: Bodies over `LARGE_BODY_BYTES` (or of unstated length) one client address may send a
    #: minute, with a burst of `LARGE_BODY_BURST`: what parsing them costs the gatekeeper's CPU.
    large_bodies_per_minute: int
    #: TCP connections one client address may hold, counted before a request is read.
    client_connections: int
    #: Public connections in all, from every address (the stream layer's count); 0: no cap
    #: beyond worker_connections.
    connection_capacity: int
    #: Keyed requests in progress (body being read, checked or at vLLM) from every client
    #: together, small bodies and large apart, counted before a byte of the body; beyond, 503.
    keyed_requests: int
    keyed_large: int
    #: nginx's connections in its one worker (a client connection takes up to six: the stream
    #: side, the Unix socket both ways, the hop to the API server both ways, and vLLM's) and its
    #: file limit; beside the public listener's, two per probe connection.
    worker_connections: int
    #: Connections the probe listener (kubelet and workers) holds at once, all callers together,
    #: apart from the public ones.
    probe_connections: int
    #: Sequences one request may ask for (`n`, `best_of`, a list of prompts).
    max_sequences: int
    max_logprobs: int
    #: Largest grammar input (schemas, tools) in bytes of JSON (0: structured outputs off).
    max_schema_bytes: int
    #: Largest count in grammar input (`maxLength`, `minItems`...) and a regex's `{n,m}` (unrolled).
    max_schema_counts: tuple[int, int]
    #: Requests with grammar input one client address may have in flight.
    schema_concurrency: int
    #: Largest reply in bytes; a longer one is cut.
    max_reply_bytes: int
    max_reply_tokens: int
    #: nginx's `proxy_read_timeout`, so also the longest gap in a stream. (The plan gives whole
    #: seconds; the rehearsal's cut check a fraction.)
    reply_timeout_seconds: float
    #: A client must send its request line and headers within this (a total, not per read).
    header_timeout_seconds: int
    #: Why each limit is what it is, one line each (the plan prints them).
    reasons: tuple[str, ...]
    #: The gatekeeper serves the chat page at the endpoint's root (`chatPage`).
    chat_page: bool
    #: KV-cache tokens one client address may hold (`clientTokensInFlight`), and what the tiers
    #: below admit at most (never more than the budget).
    client_tokens: int
    client_tokens_bound: int
    #: (tokens, requests), ascending: a client may have at most `requests` in flight whose
    #: estimate (body bytes plus the longest reply it may ask for, at most `max_model_len`) is
    #: above `tokens`. Empty: requests are counted, not tokens.
    token_tiers: tuple[tuple[int, int], ...]
    #: The context, the most any one request can hold.
    max_model_len: int
    #: The model's name in the API (the gatekeeper's own /v1/models answer).
    served_model: str

    def to_json(self) -> dict[str, object]:
        """The limits as the plan's `--json` shows them (`Plan.to_json`): lists for tuples, and
        no `served_model`, since the plan's own `model` names the served model once."""
        data = asdict(self)
        data["reasons"] = list(self.reasons)
        data["token_tiers"] = [list(t) for t in self.token_tiers]
        data["max_schema_counts"] = list(self.max_schema_counts)
        del data["served_model"]
        return data


#: TCP keepalives on every public connection: the first after this many seconds without a byte,
#: then every `KEEPALIVE_INTERVAL_S`, the connection dropped after `KEEPALIVE_PROBES` unanswered.
#: A stream sends nothing before its first token and a reply without `stream` nothing before its
#: end, so without them the load balancer's idle timeout (350 s for TCP flows and, fixed, for
#: TLS listeners: Elastic Load Balancing docs, "Update the TCP idle timeout for your Network
#: Load Balancer listener", read 2026-12-03) would cut a long prompt's connection. The NLB
#: counts keepalives: "Clients or targets can use TCP keepalive packets to restart the idle
#: timeout", and "When a TLS listener receives a TCP keepalive packet from either a client or a
#: target, the load balancer generates TCP keepalive packets and sends them to both the
#: front-end and back-end connections every 20 seconds" (User Guide for Network Load Balancers,
#: "Network Load Balancers", section "Connection idle timeout", read 2026-12-03). So on a TLS
#: listener the client's side, which the load balancer holds, is kept too.
#: nginx's stream `listen ... so_keepalive=idle:interval:count` sets TCP_KEEPIDLE, TCP_KEEPINTVL
#: and TCP_KEEPCNT on the listening socket, which accepted sockets inherit (nginx
#: src/event/ngx_event_connect.c and ngx_stream_core_module docs, `listen`).
KEEPALIVE_IDLE_S = 60
KEEPALIVE_INTERVAL_S = 20
KEEPALIVE_PROBES = 5
KEEPALIVE = f"so_keepalive={KEEPALIVE_IDLE_S}s:{KEEPALIVE_INTERVAL_S}s:{KEEPALIVE_PROBES}"

#: The stream proxy's buffer, each way (nginx's default is 16 KiB): allocated for every public
#: connection when it opens (`doorcost` counts it); a 327 KB body passes in ~160 reads, not the
#: ~640 of a 512-byte buffer, and a reply chunk whole.
STREAM_BUFFER = "2k"
#: Header lines nginx 1.29.8 on reads before it refuses a head (`max_headers`, default 1000;
#: src/http/ngx_http_core_module.c, ngx_http_request.c): each costs a list entry and a copy of
#: its name, so 361 one-character lines cost 2.4x what 32 do (`doorcost`). The OpenAI SDK sends
#: 19 (openai 3.57.0, organization and project set), Chromium's fetch ~18. nginx 1.22, the
#: rehearsal's, has no such directive: it renders with None.
MAX_HEADERS = 32
#: Bytes of a `limit_conn` zone per address it counts (a slab node: the red-black tree node, the
#: count and the key, rounded up to nginx's slab size; ngx_stream_limit_conn_module.c), so the
#: zone holds an address for every connection of the pool.
ZONE_BYTES_PER_ADDRESS = 128
#: A body of this many bytes or more (five digits), or one of unstated length (chunked), counts
#: against the client's `large_bodies_per_minute`, with this burst (nginx's `burst` admits that
#: many beyond the rate, so two at once).
LARGE_BODY_BYTES = 10_000
LARGE_BODY_BURST = 1

#: vLLM 0.31's keep-alive: uvicorn's `timeout_keep_alive`, vLLM's `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`
#: (default 5 s: vllm/envs.py; entrypoints/launcher.py `serve_http` passes it to uvicorn; read
#: 2026-12-06), which the engine's command line leaves alone.
VLLM_KEEPALIVE_SECONDS = 5
#: nginx's idle upstream connections close after this, a second before vLLM's, so nginx never
#: sends a request down a connection vLLM is closing (it does not retry a POST: the 503s
#: "upstream prematurely closed connection" seen while the gatekeeper stalled).
UPSTREAM_KEEPALIVE_SECONDS = VLLM_KEEPALIVE_SECONDS - 1
#: The longest an upstream connection is reused (`keepalive_time`, nginx 1.19.10 on): behind an
#: elastic stack's door the pool reaches the leaders through their Service, and kube-proxy keeps
#: an open connection on the leader it chose, leaving or not. nginx checks the age when a
#: connection returns to the pool, which may then keep it idle `UPSTREAM_KEEPALIVE_SECONDS` more
#: (ngx_http_upstream_keepalive_module.c, 1.22.1 and 1.30); so within 5 s of the endpoint
#: change, this, and that idle time, the pool has left a stopping leader, inside the load
#: balancer's window (`infra.plan.rollout.plan_drain`: 35 s), before its idle check begins
#: (`drain.engine_pre_stop`).
UPSTREAM_LIFETIME_S = 20

#: Where the metrics listener serves the leader's own record (its start-up measurement,
#: `programs/liveness.py` `GAUGES`), for the collector.
SELF_METRICS_ROUTE = "/metrics/self"
#: The Prometheus text exposition format's media type (prometheus/docs
#: content/docs/instrumenting/exposition_formats.md, "Text-based format": `text/plain;
#: version=0.0.4`, read 2026-12-03).
PROMETHEUS_TEXT = "text/plain; version=0.0.4"


def njs_script(limits: GatekeeperLimits, asleep: Asleep | None = None) -> str:
    """`gatekeeper.js` with the plan's figures written into its first line."""
    figures: dict[str, object] = {
        "maxSequences": limits.max_sequences,
        "maxLogprobs": limits.max_logprobs,
        "maxSchemaBytes": limits.max_schema_bytes,
        "maxSchemaCounts": list(limits.max_schema_counts),
        "maxReplyBytes": limits.max_reply_bytes,
        "replySeconds": limits.reply_timeout_seconds,
        "model": limits.served_model,
        "maxJsonDepth": MAX_JSON_DEPTH,
        "tokenTiers": [tokens for tokens, _ in limits.token_tiers],
        "maxModelLen": limits.max_model_len,
        "maxReplyTokens": limits.max_reply_tokens,
    }
    here = resources.files("components.manifests")
    source = here.joinpath("gatekeeper.js").read_text("utf-8")
    if asleep is not None:
        figures["wakeSeconds"] = asleep.wake_seconds
        source = _door_script(source, here.joinpath("asleep.js").read_text("utf-8"))
    return f"var LIMITS = {json.dumps(figures, sort_keys=True)};\n{source}"


def _door_script(source: str, added: str) -> str:
    """gatekeeper.js at the door: the asleep answers before its export."""
    export = "export default {"
    if source.count(export) != 1:
        raise ValueError("gatekeeper.js changed: the door's script no longer has one export")
    return source.replace(export, added + export + " asleep: asleep, asleepHealth: asleepHealth,")


#: nginx.conf with `%{name}` for the values below, and its fragments (`_sections`).
TEMPLATE = "gatekeeper.conf.tmpl"


class _Conf(string.Template):
    """A template whose placeholders are `%{name}`: nginx's own variables keep their `$`."""

    delimiter = "%"


@functools.cache
def _sections() -> dict[str, _Conf]:
    """The template file: the whole config under "nginx.conf", then each fragment that a
    `## [name]` line opens; lines starting with `##` are notes and are left out."""
    text = resources.files("components.manifests").joinpath(TEMPLATE).read_text("utf-8")
    sections: dict[str, list[str]] = {"nginx.conf": []}
    lines = sections["nginx.conf"]
    for line in text.splitlines():
        if opened := re.fullmatch(r"## \[(\w+)\]", line):
            lines = sections.setdefault(opened[1], [])
        elif not line.lstrip().startswith("##"):
            lines.append(line)
    return {name: _Conf("\n".join(body).strip("\n")) for name, body in sections.items()}


def _fill(section: str, **values: object) -> str:
    """One section with its values; a missing value is an error, not a blank."""
    return _sections()[section].substitute(values)


def _ms(seconds: float) -> str:
    """An nginx time in milliseconds."""
    return f"{round(seconds * 1000)}ms"


def _error_pages(limits: GatekeeperLimits) -> str:
    """A page per status the front door answers itself (408 has none: nginx writes nothing;
    502 is answered as 503)."""
    close = _fill("refusal_close")
    extras = {
        503: _fill("retry_after", seconds=5),
        429: _fill("retry_after", seconds=1),
        401: f"{_fill('bearer')} {close}",
        404: close,
    }
    return "\n".join(
        _fill(
            "error_page",
            status=status,
            page=answers.page(status),
            extra=f"{extras[status]} " if status in extras else "",
            body=error_body(
                status,
                f"Request body over {limits.max_request_bytes} bytes" if status == 413 else None,
            ),
        )
        for status in ERRORS
        if status not in (408, 502)
    )


API_ROUTES = (("/v1/chat/completions", "chat"), ("/v1/completions", "completions"))


def _api_locations(limits: GatekeeperLimits, wake: str) -> str:
    """The API server's side of each POST route, then its named locations: one per token tier,
    with and without grammar input, each holding a count in every tier below it. At the door each
    keyed request that reaches the API server raises the wake flag (`wake`)."""
    fields, blocks = vars(limits), []
    for path, name in API_ROUTES:
        blocks.append(_fill("api_check", path=path, wake=wake))
        for tier in range(len(limits.token_tiers) + 1):
            counts = [
                (f"gatekeeper_tokens{j + 1}", n) for j, (_, n) in enumerate(limits.token_tiers)
            ][:tier]
            for schema in ("", "_schema"):
                grammar = [("gatekeeper_schema", limits.schema_concurrency)] if schema else []
                blocks.append(
                    _fill(
                        "api_tier",
                        name=f"{name}{schema}{f'_t{tier}' if tier else ''}",
                        path=path,
                        counts="".join(
                            "\n" + _fill("limit_conn", zone=zone, count=count)
                            for zone, count in counts + grammar
                        ),
                        reply_timeout=_ms(limits.reply_timeout_seconds),
                        **fields,
                    )
                )
    return "\n".join(blocks)


def nginx_conf(
    limits: GatekeeperLimits,
    *,
    listen: str = "8080",
    upstream_port: int = 8000,
    key_dir: str = "/var/run/secrets/gatekeeper",
    config_dir: str = "/etc/gatekeeper",
    run_dir: str = "/tmp",
    access_log: str = "/dev/stdout",
    metrics_listen: str = "9090",
    probe_listen: str = "8081",
    modules: tuple[str, ...] = ("/usr/lib/nginx/modules/ngx_http_js_module.so",),
    user: str | None = None,
    page_root: str | None = None,
    upstream: str | None = None,
    asleep: Asleep | None = None,
    self_metrics: str | None = None,
    max_headers: int | None = MAX_HEADERS,
) -> str:
    """The gatekeeper's whole nginx.conf. In the pod the defaults hold (the official image has
    the stream module built in and njs as a dynamic module); the rehearsal passes its loopback
    ports, a scratch directory and Debian's module files (stream is a module there too), and, run
    as root, `user` root, so the worker can reach the Unix socket in its private directory (the
    pod runs nginx as a non-root user, which has no `user` to switch to). With `page_root` (where
    the chat page's files are: the config's own mount in the pod) it also serves the chat page;
    a wrong method there is refused like any unknown route (`return 419`).

    The door of an elastic stack (`components.manifests.door`) passes `upstream`, the leaders'
    Service as host:port, instead of vLLM on loopback, and `asleep`, what to answer while that
    Service has no endpoints (`components.manifests.asleep`); without them the config is the
    leader pod's sidecar's, unchanged. A leader's sidecar passes `self_metrics`, the engine's
    record file as the gatekeeper sees it (`gatekeeper.SELF_METRICS_PATH`), served on the metrics
    listener at `SELF_METRICS_ROUTE`. `max_headers` None leaves out the directive nginx before
    1.29.8 does not know."""
    capacity = limits.connection_capacity
    open_limit = _fill("open_limit", open_burst=OPEN_BURST)
    not_found = error_body(404)
    health = {"no_body": error_body(400, "GET takes no body"), "run_dir": run_dir}
    # The door's answers (the elastic layer) and the chat page, imported only when asked for.
    if asleep:
        from components.manifests import asleep as sleep
    if page_root:
        from components.manifests import chat
    door_errors = sleep.health_errors(answers.page(503), answers.page(504)) + "\n" if asleep else ""
    record = {"route": SELF_METRICS_ROUTE, "media_type": PROMETHEUS_TEXT, "path": self_metrics}
    values = {
        **vars(limits),
        **health,
        "load_modules": "".join(_fill("load_module", module=m) + "\n" for m in modules),
        "user": _fill("user", user=user) + "\n" if user else "",
        "nofile": limits.worker_connections + 64,
        "shutdown_timeout": _ms(limits.reply_timeout_seconds + 30),
        "api_socket": f"unix:{run_dir}/gatekeeper-api.sock",
        "check_socket": f"unix:{run_dir}/gatekeeper-check.sock",
        # A `limit_conn` zone that holds an address for every connection of the pool.
        "clients_zone": f"{max(1, math.ceil(capacity * ZONE_BYTES_PER_ADDRESS / 2**20))}m",
        "public_pool": "\n" + _fill("public_pool") if capacity else "",
        "public_cap": "\n" + _fill("public_cap", connection_capacity=capacity) if capacity else "",
        "listen": listen,
        "max_headers": "" if max_headers is None else f"\n        max_headers {max_headers};",
        "keepalive": KEEPALIVE,
        "stream_buffer": STREAM_BUFFER,
        "internal": f"unix:{run_dir}/gatekeeper-http.sock",
        "config_dir": config_dir,
        "asleep_log_field": _fill("asleep_log_field") if asleep else "",
        "access_log": access_log,
        "asleep_http": sleep.http_pieces(asleep, run_dir) if asleep else "",
        "key_dir": key_dir,
        "failures_per_minute": FAILURES_PER_MINUTE,
        "open_per_second": OPEN_PER_SECOND,
        "token_zones": "\n".join(
            _fill("token_zone", tokens=f"{tokens:,}", requests=n, tier=j + 1)
            for j, (tokens, n) in enumerate(limits.token_tiers)
        ),
        "upstream": upstream or f"127.0.0.1:{upstream_port}",
        "upstream_keepalive": UPSTREAM_KEEPALIVE_SECONDS,
        "upstream_lifetime": UPSTREAM_LIFETIME_S,
        # nginx's body timeout is per read; the per-client connection cap bounds what slow
        # bodies hold.
        "body_read_timeout_seconds": limits.header_timeout_seconds,
        "inner_body_timeout": limits.header_timeout_seconds + 2,
        "keepalive_timeout": KEEPALIVE_SECONDS,
        "lingering_time": LINGERING_SECONDS,
        "public_ready": _fill("ready", rate=open_limit, run_dir=run_dir),
        "error_pages": _error_pages(limits),
        "failure_burst": FAILURE_BURST,
        "vllm_failed_body": error_body(400, answers.VLLM_FAILED_MESSAGE),
        "busy_page": answers.BUSY_PAGE,
        "unreachable_page": sleep.ASLEEP_PAGE if asleep else answers.page(503),
        "busy_retry": answers.BUSY_RETRY_SECONDS,
        "busy_body": error_body(503, answers.BUSY_MESSAGE),
        "keyed_busy_body": error_body(503, answers.KEYED_BUSY_MESSAGE),
        "close": _fill("refusal_close"),
        "large_body_burst": LARGE_BODY_BURST,
        "large_at_once": LARGE_BODY_BURST + 1,
        "api_locations": _api_locations(limits, sleep.wake_mirror() if asleep else ""),
        "check_locations": "\n".join(
            _fill("check_route", path=path, handler=name) for path, name in API_ROUTES
        ),
        "public_health": _fill("health", rate=open_limit, errors=door_errors, **health),
        "asleep_server": sleep.server_pieces(asleep, run_dir) if asleep else "",
        "chat_page": chat.locations(page_root, "return 419;", open_limit, STATIC_MAX_AGE_SECONDS)
        if page_root
        else "",
        "metrics_listen": metrics_listen,
        "wake_location": sleep.wake_location(run_dir) if asleep else "",
        "not_found_body": not_found,
        "self_metrics": ""
        if self_metrics is None
        else _fill("self_metrics", not_found_body=not_found, **record) + "\n",
        "probe_listen": probe_listen,
        "probe_ready": _fill("ready", rate="", run_dir=run_dir),
        # At the door no probe asks /health.
        "probe_health": "" if asleep else "\n" + _fill("health", rate="", errors="", **health),
    }
    # The pieces both HTTP servers hold (`answers`) and the public one's side of the API routes.
    for section in ("vllm_headers", "answers", "vllm_verdict"):
        values[section] = _fill(section, **values)
    values["api_routes"] = "\n".join(_fill("api_route", path=p, **values) for p, _ in API_ROUTES)
    return _fill("nginx.conf", **values) + "\n"
