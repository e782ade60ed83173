"""The gatekeeper's two files, generated purely from the plan's limits: `nginx.conf` and the njs
script it imports (`gatekeeper.js`, the checks a proxy can make only by reading the JSON body).

Layers, outermost first; each is cheaper than the one behind it:

1. `stream` (`gatekeeper_stream`): a client address holds at most `client_connections` TCP
   connections and all addresses `connection_capacity`, counted when a connection is accepted,
   before a byte is read (slow headers, slow bodies and idle keep-alives all count). The
   connection goes, with its address in a PROXY header, to the HTTP server on a Unix socket.
2. `http`: the whole header within `header_timeout_seconds` (nginx arms that timer once per
   request, ngx_http_request.c `ngx_http_read_request_header`: `if (!rev->timer_set)`), a body
   only on POST routes, at most `max_request_bytes`; four routes; the key; a rate per client for
   requests, one for large bodies (their parse cost) and a slower one for failures (wrong key,
   unknown path), all counted before the refusal is written.
3. njs (`gatekeeper.js`): refuses a body that asks for more than `max_sequences` sequences (`n`,
   `best_of`, a list of prompts), log-probabilities above `max_logprobs`, `echo`, and grammar
   input (schemas, tools) above `max_schema_bytes` or with a count above `max_schema_counts`; it
   sends the request to the location of its KV-cache tier (`token_tiers`), where a client address
   may have fewer requests in flight the more each may hold; grammar input also takes one of the
   client's `schema_concurrency` slots for the whole reply (nginx counts a request until it ends).
4. Upstream: only a short list of client headers reaches vLLM (`PASSED_HEADERS`; vLLM acts on
   others, `tests/fixtures/vllm/request-headers-v0.31.json`), `X-Forwarded-For` is the client's
   address, and every reply is cut at `reply_timeout_seconds` or `max_reply_bytes`, a stream with
   a final error event; at most `all_requests` in flight from all clients together, beyond that 503
   with Retry-After. `/health` is answered from a one-second cache, so vLLM sees at most about
   one call a second however many arrive.

The kubelet's probes and the group's workers do not use the public listener: a listener of their
own (`probe_listen`, `/health` and `/ready` only) never goes through the stream layer, and the
stream layer admits at most `connection_capacity` public connections in all, so however many
addresses fill the public side, nginx keeps what worker_connections holds beyond four per
public connection for the probes. (With no connection slot free nginx accepts a connection and
closes it at once, on every listener alike: nginx 1.30 src/event/ngx_event_accept.c
`ngx_event_accept` and src/core/ngx_connection.c `ngx_get_connection`, "worker_connections are
not enough"; before that it closes idle keep-alives, `ngx_drain_connections`.)

Every error the front door itself produces, and how it answers for vLLM's, is
`gatekeeper_answers`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from components.manifests import asleep as sleep
from components.manifests import chat
from components.manifests.asleep import Asleep
from components.manifests.gatekeeper_answers import (
    ERRORS,
    error_body,
    upstream_errors,
    vllm_failed,
    vllm_unreachable,
)
from components.manifests.gatekeeper_answers import page as _page
from components.manifests.gatekeeper_stream import main_context, stream_block

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
    gatekeeper enforces, what the load balancer listens on, and why. The plan's `--json` shows
    these fields in this order (`served_model` aside: the plan's `model` names it)."""

    #: HTTPS on 443 terminated by the load balancer (an ACM certificate), else HTTP on 80.
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
    #: nginx's connections in its one worker (a client connection takes up to four: the stream
    #: side, the Unix socket both ways, and vLLM's) and its file limit; beside the public
    #: listener's, two per probe connection.
    worker_connections: int
    #: Connections the probe listener (kubelet and workers) holds at once, all callers together,
    #: apart from the public ones.
    probe_connections: int
    #: Sequences one request may ask for (`n`, `best_of`, a list of prompts).
    max_sequences: int
    #: Largest `logprobs`, `top_logprobs` or `prompt_logprobs` served (0: none).
    max_logprobs: int
    #: Largest grammar input (schemas, tools) in bytes of JSON (0: structured outputs off).
    max_schema_bytes: int
    #: Largest count in grammar input (`maxLength`, `minItems`...) and a regex's `{n,m}` (unrolled).
    max_schema_counts: tuple[int, int]
    #: Requests with grammar input one client address may have in flight.
    schema_concurrency: int
    #: Largest reply in bytes; a longer one is cut.
    max_reply_bytes: int
    #: The reply cap vLLM applies to every request (`maxReplyTokens`), and so to one that sets
    #: no `max_tokens`.
    max_reply_tokens: int
    #: Longest wait for vLLM's answer (nginx `proxy_read_timeout`, so also the longest gap in a
    #: stream and the longest a reply may run), in seconds: the first-byte bound plus the longest
    #: reply's decode. (The plan gives whole seconds; the rehearsal's cut check a fraction.)
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

    @property
    def body_read_timeout_seconds(self) -> int:
        """nginx's body timeout is per read; the per-client connection cap bounds what slow
        bodies hold."""
        return self.header_timeout_seconds


#: A refused key or path: `Connection: close` and the connection ends at once (at most a
#: second to drain what already arrived, a total: ngx_http_discarded_request_body_handler,
#: nginx 1.22 and 1.30), so a keyless client cannot hold it by trickling a body.
REFUSAL_CLOSE = "keepalive_timeout 0; lingering_close off; lingering_time 1s; lingering_timeout 1s;"
#: The per-client rate on every route that takes no key.
OPEN_LIMIT = f"limit_req zone=gatekeeper_open burst={OPEN_BURST} nodelay;"


def _ms(seconds: float) -> str:
    """An nginx time in milliseconds."""
    return f"{round(seconds * 1000)}ms"


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
    if asleep is not None:
        figures["wakeSeconds"] = asleep.wake_seconds
    here = resources.files("components.manifests")
    source = here.joinpath("gatekeeper.js").read_text("utf-8")
    if asleep is not None:
        source = _door_script(source, here.joinpath("asleep.js").read_text("utf-8"))
    return f"var LIMITS = {json.dumps(figures, sort_keys=True)};\n{source}"


def _door_script(source: str, added: str) -> str:
    """gatekeeper.js at the door: the asleep answers before its export, and the wake flag raised
    before each checked request goes to vLLM."""
    export, forward = "export default {", "    r.internalRedirect(schema > 0"
    if source.count(export) != 1 or source.count(forward) != 1:
        raise ValueError("gatekeeper.js changed: the door's script no longer knows where to go")
    handlers = " asleep: asleep, asleepHealth: asleepHealth,"
    source = source.replace(forward, "    keepAwake(r);\n" + forward)
    return source.replace(export, added + export + handlers)


def _error_pages(limits: GatekeeperLimits) -> str:
    """An internal location per status answering its JSON body; 494 (header too large) as 431.
    URIs, not named locations: nginx cannot redirect a request whose request line it could not
    read (an empty URI) to a named location."""
    lines = []
    for status in ERRORS:
        if status in (408, 502):
            continue
        lines.append(f"        error_page {status} {_page(status)};")
        extra = {
            503: "add_header Retry-After 5 always; ",
            429: "add_header Retry-After 1 always; ",
            401: f"add_header WWW-Authenticate Bearer always; {REFUSAL_CLOSE} ",
            404: f"{REFUSAL_CLOSE} ",
        }
        message = f"Request body over {limits.max_request_bytes} bytes" if status == 413 else None
        body = error_body(status, message)
        lines.append(
            f"        location = {_page(status)} {{ internal; {extra.get(status, '')}"
            f"return {status} {body}; }}"
        )
    # `=431`: without it the reply keeps nginx's own status for 494, which it writes as 400.
    lines.append(f"        error_page 494 =431 {_page(431)};")
    lines.append(f"        error_page 502 =503 {_page(503)};")
    return "\n".join(lines)


def _api_locations(limits: GatekeeperLimits, asleep: Asleep | None = None) -> str:
    """The two POST routes: checks in the body (njs), then vLLM through a named location that
    bounds concurrency (and, for grammar input, the pod's compile queue) and the reply.

    Past admission vLLM serves first come, first served (its default `--scheduling-policy fcfs`),
    not `priority` with a per-client priority set here: njs 0.7.9, which the rehearsal runs, keeps
    nothing between requests (`js_shared_dict_zone` is njs 0.8.0 on) and nginx's counts
    (`limit_conn`) answer only pass or refuse, so the gatekeeper cannot read a client's requests
    in flight; and writing a priority into the body would re-serialize every body in njs, the
    CPU the large-body rate is sized against. What one client can take is bounded instead: its
    requests and KV tokens in flight (the tiers), and every client's together (`all_requests`,
    the API upstream's `max_conns`), so a newcomer waits behind at most `all_requests` others or
    gets a 503 at once. A client's own `priority` is refused (`gatekeeper.js` STEERING_FIELDS)."""
    rate = (
        f"limit_req zone=gatekeeper_rate burst={limits.client_burst} nodelay;\n"
        f"            limit_req zone=gatekeeper_large burst={LARGE_BODY_BURST} nodelay;"
    )
    blocks = []
    for path, name, handler in (
        ("/v1/chat/completions", "chat", "chat"),
        ("/v1/completions", "completions", "completions"),
    ):
        blocks.append(
            f"""        location = {path} {{
            if ($request_method != POST) {{ return 419; }}
            if ($gatekeeper_key_ok != 1) {{ return 418; }}
            {rate}
            js_content gatekeeper.{handler};
        }}"""
        )
        for tier in range(len(limits.token_tiers) + 1):
            tokens = "".join(
                f"\n            limit_conn gatekeeper_tokens{j + 1} {n};"
                for j, (_, n) in enumerate(limits.token_tiers[:tier])
            )
            suffix = f"_t{tier}" if tier else ""
            for schema, grammar in (
                ("", ""),
                (
                    "_schema",
                    f"\n            limit_conn gatekeeper_schema {limits.schema_concurrency};",
                ),
            ):
                blocks.append(
                    f"""        location @{name}{schema}{suffix} {{
            limit_conn gatekeeper_conn {limits.client_concurrent_requests};{tokens}{grammar}
            rewrite ^ {path} break;
            proxy_read_timeout {_ms(limits.reply_timeout_seconds)};
            js_body_filter gatekeeper.bound buffer_type=buffer;
{upstream_errors()}
            proxy_pass http://vllm_api;
        }}"""
                )
    return "\n".join(blocks)


def _get_locations(limits: GatekeeperLimits, asleep: Asleep | None = None) -> str:
    """/v1/models (answered here, keyed) and /health (from the one-second cache, open; at the
    door of an elastic stack, "asleep" while no group runs)."""
    errors = sleep.health_errors(_page(503), _page(504)) + "\n" if asleep else ""
    rate = f"limit_req zone=gatekeeper_rate burst={limits.client_burst} nodelay;"
    return f"""        location = /v1/models {{
            if ($request_method != GET) {{ return 419; }}
            if ($gatekeeper_has_body) {{ return 400 {error_body(400, "GET takes no body")}; }}
            if ($gatekeeper_key_ok != 1) {{ return 418; }}
            {rate}
            js_content gatekeeper.models;
        }}
{_health_location(OPEN_LIMIT, errors)}"""


def _health_location(rate: str, errors: str = "") -> str:
    """/health from the one-second cache, behind `rate` (the public listener's per-client
    limit; none on the probe listener)."""
    return f"""        location = /health {{
            if ($request_method != GET) {{ return 419; }}
            {rate}
            if ($gatekeeper_has_body) {{ return 400 {error_body(400, "GET takes no body")}; }}
            # At most one call a second reaches vLLM, however many arrive: one fills the cache,
            # the others wait for it (lock) or get the entry being refreshed (stale, updating).
            proxy_buffering on;  # nginx caches only a buffered reply
            proxy_cache gatekeeper_health;
            proxy_cache_key health;
            proxy_cache_valid any 1s;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 5s;
            proxy_cache_use_stale updating;
            proxy_ignore_headers Cache-Control Expires Set-Cookie Vary X-Accel-Expires;
            proxy_intercept_errors on;
{errors}            proxy_read_timeout 5s;
            proxy_pass http://vllm/health;
        }}"""


def _ready_location(run_dir: str, rate: str = OPEN_LIMIT) -> str:
    """/ready (open): 200 while the gatekeeper takes new requests, 503 once the drain marker
    exists (`components.manifests.drain`), so the kubelet takes the pod out of the Service."""
    return f"""        location = /ready {{
            if ($request_method != GET) {{ return 419; }}
            {rate}
            if (-f {run_dir}/draining) {{ return 503; }}
            return 200 '{{"status":"ready"}}\n';
        }}"""


#: A body of this many bytes or more (five digits), or one of unstated length (chunked), counts
#: against the client's `large_bodies_per_minute`, with this burst (nginx's `burst` admits that
#: many beyond the rate, so two at once).
LARGE_BODY_BYTES = 10_000
LARGE_BODY_BURST = 1


def _limits_and_failures(limits: GatekeeperLimits) -> str:
    """Zones, and the named locations failures go to, where their own rate applies first."""
    rate = limits.client_requests_per_minute
    return f"""    limit_req_zone $binary_remote_addr zone=gatekeeper_rate:1m rate={rate}r/m;
    # Large bodies per client (what parsing them costs): an empty key is not counted.
    map "$http_content_length:$http_transfer_encoding" $gatekeeper_large_body {{
        "~^[0-9]{{5,}}:" $binary_remote_addr;
        "~:." $binary_remote_addr;
        default "";
    }}
    limit_req_zone $gatekeeper_large_body zone=gatekeeper_large:1m
                   rate={limits.large_bodies_per_minute}r/m;
    limit_req_zone $binary_remote_addr zone=gatekeeper_failed:1m rate={FAILURES_PER_MINUTE}r/m;
    # The routes without a key; 1m holds about 16,000 addresses (nginx docs, limit_req_zone).
    limit_req_zone $binary_remote_addr zone=gatekeeper_open:1m rate={OPEN_PER_SECOND}r/s;
    limit_conn_zone $binary_remote_addr zone=gatekeeper_conn:1m;
    # Every caller of the probe listener together (one key: the listener's port).
    limit_conn_zone $server_port zone=gatekeeper_probes:1m;
    # Per client, so one client's structured replies never hold another's slot.
    limit_conn_zone $binary_remote_addr zone=gatekeeper_schema:1m;
{_token_zones(limits)}
    limit_req_status 429;
    limit_conn_status 429;
    limit_req_log_level info;
    limit_conn_log_level info;"""


def _token_zones(limits: GatekeeperLimits) -> str:
    """A zone per token tier, keyed by the client's address. nginx releases a request's count in
    each when the request ends, finished or aborted (nginx 1.22 and 1.30,
    src/http/modules/ngx_http_limit_conn_module.c: the handler adds `ngx_http_limit_conn_cleanup`
    to the request's pool, which nginx frees with the request however it ends)."""
    return "\n".join(
        f"    # Requests estimated above {tokens:,} tokens: at most {n} per client in flight."
        f"\n    limit_conn_zone $binary_remote_addr zone=gatekeeper_tokens{j + 1}:1m;"
        for j, (tokens, n) in enumerate(limits.token_tiers)
    )


def _probe_server(
    limits: GatekeeperLimits, probe_listen: str, run_dir: str, asleep: Asleep | None
) -> str:
    """The probe listener: /ready and (in a leader pod) /health, for the kubelet and the
    group's workers only. Plain HTTP straight to the http module, never through the stream
    layer, so no public connection counts against it; its own cap (`probe_connections` requests
    at once, all callers together: http limit_conn counts requests, not idle connections) keeps
    it inside the connections nginx holds back for it. No Service
    targets it and the NetworkPolicy admits it from the group's own pods only; the kubelet
    reaches it from the node's address, which the VPC CNI's policy agent admits to every pod a
    namespaced policy selects (aws/aws-network-policy-agent PR #65, v1.0.2 on; today
    pkg/fwruleprocessor/fw_rule_processor.go), as it did the public port's probes before. (An
    admin-tier ClusterNetworkPolicy deny covering the node drops probes to any port before
    PR #636.) At the door no probe asks /health, so only /ready is there."""
    health = "" if asleep else "\n" + _health_location("")
    # A refusal here is nginx's own page: only probes read it, and any status but 2xx fails.
    return f"""
    # The probes' own listener (kubelet and the group's workers); not in the access log.
    server {{
        listen {probe_listen};
        access_log off;
        limit_conn gatekeeper_probes {limits.probe_connections};
        client_header_timeout 5s;
        keepalive_timeout 0;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
{_ready_location(run_dir, "")}{health}
        location / {{ return 404 {error_body(404)}; }}
    }}"""


def _failure_locations() -> str:
    burst = f"limit_req zone=gatekeeper_failed burst={FAILURE_BURST} nodelay;"
    return f"""        # A wrong key, path or method: `return 418/419` (rewrite phase) jumps here,
        # where the per-client failure rate applies before njs writes the refusal.
        error_page 418 = @unauthorized;
        error_page 419 = @not_found;
        # Answered from the headers alone, never after the body: njs's js_content reads the
        # whole body before its handler runs (ngx_http_js_module.c, njs 0.7.9 and 1.0.1:
        # ngx_http_read_client_request_body in ngx_http_js_content_handler), so a trickled
        # body held a refusal open. `try_files` (after limit_req's phase) finalizes with the
        # status; nginx then only discards what has arrived (ngx_http_special_response_handler)
        # and the page closes the connection (`REFUSAL_CLOSE`).
        location @unauthorized {{ {burst} try_files /.gatekeeper-none =401; }}
        location @not_found {{ {burst} try_files /.gatekeeper-none =404; }}
        location / {{ return 419; }}"""


def _http_context(
    *,
    access_log: str,
    asleep: Asleep | None,
    asleep_field: str,
    config_dir: str,
    key_dir: str,
    limits: GatekeeperLimits,
    run_dir: str,
    upstream: str | None,
    upstream_port: int,
) -> str:
    """The http context's head: paths, the key and engine-key lookups, zones, vLLM upstreams."""
    server = upstream or f"127.0.0.1:{upstream_port}"
    return f"""\
http {{
    server_tokens off;
    default_type application/json;
    client_body_temp_path {run_dir}/client_body;
    proxy_temp_path {run_dir}/proxy;
    fastcgi_temp_path {run_dir}/fastcgi;
    uwsgi_temp_path {run_dir}/uwsgi;
    scgi_temp_path {run_dir}/scgi;
    proxy_cache_path {run_dir}/health-cache levels= keys_zone=gatekeeper_health:1m max_size=1m
                     inactive=1m use_temp_path=off;
    js_import gatekeeper from {config_dir}/gatekeeper.js;
    # Per-request state of the reply bound (bytes sent, cut or not).
    js_var $gatekeeper_sent 0;
    js_var $gatekeeper_cut 0;

    # No Authorization header in the log; "upstream" is "" when vLLM never saw the request.
    log_format gatekeeper escape=json '{{"time":"$time_iso8601","client":"$remote_addr",'
        '"method":"$gatekeeper_method","uri":"$gatekeeper_route","page":"$uri",'
        '"status":$status,"bytes":$body_bytes_sent,"upstream":"$upstream_addr",'
        '"upstream_status":"$upstream_status","seconds":$request_time{asleep_field}}}';
    access_log {access_log} gatekeeper;
    # The method and path the client sent, from its request line, which internal redirects leave
    # alone; an error page makes `$request_method` GET (ngx_http_special_response.c) and `$uri`
    # its own path, logged as "page".
    map $request $gatekeeper_method {{ "~^(?<m>[A-Z]+) " $m; default ""; }}
    map $request_uri $gatekeeper_route {{ "~^(?<p>[^?]*)" $p; default ""; }}
{sleep.http_pieces(asleep, run_dir) if asleep else ""}
    # Whether the Authorization header carries an accepted client key: the njs script compares
    # it with the key file of the API key's Secret, read on each keyed request, and each key's
    # end of acceptance with the time (`gatekeeper.key_file_text`).
    map "" $gatekeeper_keys_path {{
        default "{key_dir}/api-keys.json";
    }}
    js_set $gatekeeper_key_ok gatekeeper.keyOk;
    # What vLLM receives instead of the client's key: the engine key, read at start.
    # (No file: the map's own default, "", and vLLM refuses every request.)
    map "" $gatekeeper_engine_auth {{
        include {key_dir}/engine*.map;
    }}
    # Any body framing at all on a GET route is refused before the body is read.
    map "$http_content_length$http_transfer_encoding" $gatekeeper_has_body {{
        default 1;
        "" 0;
        "0" 0;
    }}

{_limits_and_failures(limits)}

    # Idle connections close before vLLM closes them (`UPSTREAM_KEEPALIVE_SECONDS`).
{_upstream("vllm", server)}
    # The API routes: at most `all_requests` in flight at vLLM from every client together. With
    # every one taken nginx tries no connection ("no live upstreams") and answers 502, which
    # @vllm_unreachable makes a 503 with Retry-After (ngx_http_upstream_round_robin.c: a single
    # server at `max_conns` fails the pick; idle kept-alive connections are not counted).
{_upstream("vllm_api", f"{server} max_conns={limits.all_requests}")}

"""


#: vLLM 0.31's keep-alive: uvicorn's `timeout_keep_alive`, vLLM's `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`
#: (default 5 s: vllm/envs.py; entrypoints/launcher.py `serve_http` passes it to uvicorn; read
#: 2026-12-06), which the engine's command line leaves alone.
VLLM_KEEPALIVE_SECONDS = 5
#: nginx's idle upstream connections close after this, a second before vLLM's, so nginx never
#: sends a request down a connection vLLM is closing (it does not retry a POST: the 503s
#: "upstream prematurely closed connection" seen while the gatekeeper stalled).
UPSTREAM_KEEPALIVE_SECONDS = VLLM_KEEPALIVE_SECONDS - 1


def _upstream(name: str, server: str) -> str:
    idle = f"keepalive 8;\n        keepalive_timeout {UPSTREAM_KEEPALIVE_SECONDS}s;"
    return f"    upstream {name} {{\n        server {server};\n        {idle}\n    }}"


def _public_server(
    *,
    asleep: Asleep | None,
    internal: str,
    limits: GatekeeperLimits,
    page_root: str | None,
    run_dir: str,
) -> str:
    """The public server (behind the stream layer, on the Unix socket): every route."""
    return f"""\
    server {{
        listen {internal} proxy_protocol;
        set_real_ip_from unix:;
        real_ip_header proxy_protocol;

        # Bodies stay in one memory buffer (njs reads them there); the header must arrive whole
        # within the header timeout, each body read within the body timeout.
        client_max_body_size {limits.max_request_bytes};
        client_body_buffer_size {limits.max_request_bytes};
        client_body_in_single_buffer on;
        # A key, a type and a few short headers are all the API needs: a client that shows no key
        # holds at most 3 KiB of header (nginx's 1 KiB, then two 1 KiB lines), which `frontdoor`
        # counts in what a connection costs.
        client_header_buffer_size 1k;
        large_client_header_buffers 2 1k;
        client_header_timeout {limits.header_timeout_seconds}s;
        client_body_timeout {limits.body_read_timeout_seconds}s;
        keepalive_timeout {KEEPALIVE_SECONDS}s;
        lingering_time {LINGERING_SECONDS}s;
        reset_timedout_connection on;
        send_timeout 60s;

        proxy_http_version 1.1;
        proxy_pass_request_headers off;
        proxy_set_header Host localhost;
        proxy_set_header Connection "";
        proxy_set_header Authorization $gatekeeper_engine_auth;
        proxy_set_header Content-Type $content_type;
        proxy_set_header Accept $http_accept;
        proxy_set_header X-Forwarded-For $remote_addr;
        # Streams (server-sent events) pass through as vLLM writes them.
        proxy_buffering off;
        proxy_connect_timeout 5s;
        proxy_send_timeout 60s;

        recursive_error_pages on;
{_ready_location(run_dir)}
{_error_pages(limits)}
{_failure_locations()}
{vllm_failed()}
{vllm_unreachable(asleep)}

{_api_locations(limits, asleep)}
{_get_locations(limits, asleep)}{sleep.server_pieces(asleep, run_dir) if asleep else ""}
{chat.locations(page_root, "return 419;", OPEN_LIMIT, STATIC_MAX_AGE_SECONDS) if page_root else ""}
    }}

"""


#: Where the metrics listener serves the leader's own record (its start-up measurement,
#: `components.manifests.probes.SELF_METRICS`), for the collector.
SELF_METRICS_ROUTE = "/metrics/self"
#: The Prometheus text exposition format's media type (prometheus/docs
#: content/docs/instrumenting/exposition_formats.md, "Text-based format": `text/plain;
#: version=0.0.4`, read 2026-12-03).
PROMETHEUS_TEXT = "text/plain; version=0.0.4"


def _self_location(self_metrics: str | None) -> str:
    """`/metrics/self`: the file the leader's startup probe writes, as it is (404 until it
    exists). An exact-match location whose `alias` is the file itself: nginx maps the URI to a
    path by putting the alias in place of the location's name (ngx_http_core_module docs,
    `alias`; nginx 1.30 src/http/ngx_http_core_module.c `ngx_http_map_uri_to_path`), which for
    `location =` is the whole URI. `default_type` names the response's type for a file whose
    extension `types` does not map (same docs, `default_type`; `.prom` is in no `types`
    here), in place of the http context's JSON."""
    if self_metrics is None:
        return ""
    return f"""        location = {SELF_METRICS_ROUTE} {{
            if ($request_method != GET) {{ return 404 {error_body(404)}; }}
            default_type "{PROMETHEUS_TEXT}";
            # 404 until the probe writes it: not an error worth a log line per scrape
            # (ngx_http_core_module docs, `log_not_found`).
            log_not_found off;
            alias {self_metrics};
        }}
"""


def _metrics_server(
    *, asleep: Asleep | None, metrics_listen: str, run_dir: str, self_metrics: str | None = None
) -> str:
    """The metrics listener: vLLM's /metrics for the collector, with the leader's own record
    (`self_metrics`, a leader's sidecar only), and nothing else."""
    return f"""\
    # vLLM's Prometheus metrics for the in-cluster collector. Not in the access log: the
    # front-door answer counts are made from that log, and scrapes are not clients.
    server {{
        listen {metrics_listen};
        access_log off;

{sleep.wake_location(run_dir) if asleep else ""}        location = /metrics {{
            if ($request_method != GET) {{ return 404 {error_body(404)}; }}
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 10s;
            proxy_pass http://vllm/metrics;
        }}
{_self_location(self_metrics)}        location / {{ return 404 {error_body(404)}; }}
    }}
"""


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
    listener at `SELF_METRICS_ROUTE`."""
    loads = "".join(f"load_module {module};\n" for module in modules)
    internal = f"unix:{run_dir}/gatekeeper-http.sock"
    # One file per connection (worker_connections counts client, Unix-socket and vLLM
    # connections alike), plus the logs, the cache and the module files.
    nofile = limits.worker_connections + 64
    # The door marks its asleep answers, so the 5xx alarm can leave a planned sleep out.
    asleep_field = ',"asleep":$gatekeeper_asleep' if asleep else ""
    return (
        main_context(limits=limits, loads=loads, nofile=nofile, run_dir=run_dir, user=user)
        + stream_block(internal=internal, limits=limits, listen=listen)
        + _http_context(
            access_log=access_log,
            asleep=asleep,
            asleep_field=asleep_field,
            config_dir=config_dir,
            key_dir=key_dir,
            limits=limits,
            run_dir=run_dir,
            upstream=upstream,
            upstream_port=upstream_port,
        )
        + _public_server(
            asleep=asleep, internal=internal, limits=limits, page_root=page_root, run_dir=run_dir
        )
        + _metrics_server(
            asleep=asleep, metrics_listen=metrics_listen, run_dir=run_dir, self_metrics=self_metrics
        )
        + f"""{_probe_server(limits, probe_listen, run_dir, asleep)}
}}
"""
    )
