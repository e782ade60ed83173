"""The gatekeeper's config: what it lets through, checked by real nginx where it is installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from components import watch
from components.manifests import gatekeeper, gatekeeper_answers, gatekeeper_conf, probes
from components.manifests.asleep import Asleep
from components.manifests.gatekeeper import key_file_text, nginx_conf
from components.manifests.gatekeeper_conf import ERRORS, PASSED_HEADERS, njs_script
from tests import door_harness
from tests.door_harness import block as _block
from tools.rehearse.front_door import gatekeeper_run as gate
from tools.rehearse.group.ranks import free_port

LIMITS = door_harness.PLAN_LIMITS


def _servers(conf: str) -> tuple[str, str]:
    """The public server block and the metrics listener's (the probe listener left out)."""
    public, metrics = conf.split("    # vLLM's Prometheus metrics for the in-cluster collector")
    return public, metrics.split("    # The probes' own listener")[0]


def _figures(limits: gatekeeper_conf.GatekeeperLimits) -> dict[str, object]:
    """The plan's figures the njs script's first line holds."""
    first = njs_script(limits).split("\n", 1)[0]
    return json.loads(first.removeprefix("var LIMITS = ").rstrip(";"))


def test_only_two_routes_reach_vllm_and_health_comes_from_a_cache() -> None:
    conf, _ = _servers(nginx_conf(LIMITS))
    conf = conf[conf.index("http {") :]
    exact = [p for p in re.findall(r"location = (\S+) \{", conf) if "/.gatekeeper/" not in p]
    # /ready is the gatekeeper's own readiness (the drain), answered without vLLM; the API
    # routes again in the API server, behind the public one's key and counts, and in the check
    # server, which the API server asks.
    routes = ["/v1/chat/completions", "/v1/completions"]
    assert exact == ["/ready", *routes, "/v1/models", "/health", *routes, *routes]
    # vLLM sees the chat and completion routes only through the API server's named locations,
    # and /health: from the cache, or uncached when a 500 asks whether the engine lives (in a
    # slot of `all_requests`).
    assert re.findall(r"proxy_pass (\S+);", conf) == [
        *["http://$gatekeeper_keyed_pool"] * 2,
        "http://vllm/health",
        "http://vllm_api/health",
        "http://gatekeeper_check",
        *["http://vllm_api"] * 2,
        "http://gatekeeper_check",
        *["http://vllm_api"] * 2,
    ]
    engine = _block(conf, "location = /.gatekeeper/engine-health")
    assert "internal;" in engine and "proxy_cache" not in engine
    assert "proxy_read_timeout 2s;" in engine and "proxy_connect_timeout 2s;" in engine
    each_twice = [route for route in routes for _ in range(2)]
    assert re.findall(r"rewrite \^ (\S+) break;", conf) == each_twice
    assert "js_content gatekeeper.models;" in _block(conf, "location = /v1/models")
    health = _block(conf, "location = /health")
    assert "$gatekeeper_key_ok" not in health
    for line in (
        "proxy_cache gatekeeper_health;",
        "proxy_cache_valid any 1s;",
        "proxy_cache_lock on;",
        "proxy_cache_use_stale updating;",
    ):
        assert line in health
    assert conf.count("if ($gatekeeper_key_ok != 1) { return 418; }") == 3
    assert "location / { return 419; }" in conf


def test_connections_are_capped_per_client_before_a_request_is_read() -> None:
    conf = nginx_conf(
        replace(LIMITS, client_connections=12, worker_connections=900, connection_capacity=20_000)
    )
    stream = conf[conf.index("stream {") : conf.index("http {")]
    # An address for every connection of the pool: 20,000 x 128 bytes.
    assert "limit_conn_zone $binary_remote_addr zone=gatekeeper_clients:3m;" in stream
    assert "limit_conn gatekeeper_clients 12;" in stream
    assert "limit_conn gatekeeper_public 20000;" in stream
    # Refusals logged: at the error log's level, never below it.
    assert "limit_conn_log_level warn;" in stream and "error_log stderr warn;" in conf
    # A connection that shows no key holds 1.5 KiB of header buffers, at most 32 header lines
    # (the pod's nginx; 1.22 knows no `max_headers`), 256-byte pools and a 2 KiB stream buffer
    # each way (`doorcost.KEYLESS_CONNECTION_BYTES`, measured so).
    assert "proxy_buffer_size 2k;" in stream
    heads = ("client_header_buffer_size 512;", "large_client_header_buffers 1 1k;")
    assert "\n        ".join((*heads, "max_headers 32;")) in conf
    assert "max_headers" not in nginx_conf(LIMITS, max_headers=None)
    assert "connection_pool_size 256;" in conf and "request_pool_size 256;" in conf
    assert f"listen 8080 {gatekeeper_conf.KEEPALIVE};" in stream
    assert "proxy_protocol on;" in stream
    # The HTTP side takes the client's address from the PROXY header, on a Unix socket only.
    assert "listen unix:/tmp/gatekeeper-http.sock proxy_protocol;" in conf
    assert "real_ip_header proxy_protocol;" in conf and "set_real_ip_from unix:;" in conf
    assert "worker_connections 900;" in conf and "worker_rlimit_nofile 964;" in conf
    # Header time is a total; bodies only on POST routes.
    assert "client_header_timeout 10s;" in conf and "lingering_time 5s;" in conf
    assert "limit_conn_zone $binary_remote_addr zone=gatekeeper_clients:1m;" in nginx_conf(LIMITS)
    for route in ("location = /v1/models", "location = /health"):
        assert "if ($gatekeeper_has_body) { return 400 " in _block(conf, route)


def test_work_per_request_is_bounded_in_sequences_schemas_and_reply() -> None:
    limits = replace(LIMITS, max_schema_bytes=4000, schema_concurrency=2, max_reply_bytes=9999)
    conf = nginx_conf(limits)
    for name in ("chat", "completions"):
        plain = _block(conf, f"location @{name} {{")
        schema = _block(conf, f"location @{name}_schema {{")
        for block in (plain, schema):
            assert "limit_conn gatekeeper_conn 3;" in block
            assert "js_body_filter gatekeeper.bound buffer_type=buffer;" in block
            assert "proxy_read_timeout 2366000ms;" in block
            # vLLM's own 400s pass through; its 500 is judged by its body and the engine's own
            # /health (`@vllm_500`), an unreachable or full vLLM is a 503.
            assert "error_page 500 = @vllm_500;" in block
            assert "error_page 502 = @vllm_unreachable;" in block
            assert "error_page 503 =503 /.gatekeeper/e503;" in block
            assert "error_page 400" not in block
        assert "gatekeeper_schema" not in plain
        assert "limit_conn gatekeeper_schema 2;" in schema
    # Per client address, not one key for the pod: one client's structured reply, held until it
    # ends, never refuses another client's.
    assert "limit_conn_zone $binary_remote_addr zone=gatekeeper_schema:1m;" in conf
    assert "$gatekeeper_pod" not in conf
    assert _figures(limits) == {
        "maxJsonDepth": 30,
        "maxLogprobs": 0,
        "maxReplyBytes": 9999,
        "maxSchemaBytes": 4000,
        "maxSchemaCounts": [10, 100],
        "maxSequences": 1,
        "model": "model",
        "replySeconds": 2366,
        "tokenTiers": [],
        "maxModelLen": 0,
        "maxReplyTokens": 1024,
    }


def test_a_client_s_tokens_in_flight_are_bounded_by_tiers() -> None:
    limits = replace(
        LIMITS,
        token_tiers=((1024, 3), (2048, 2), (4096, 1)),
        max_model_len=8192,
        max_reply_tokens=1024,
    )
    conf = nginx_conf(limits)
    for j in (1, 2, 3):
        assert f"limit_conn_zone $binary_remote_addr zone=gatekeeper_tokens{j}:1m;" in conf
    for name in ("chat", "completions"):
        for schema in ("", "_schema"):
            # Tier k counts in every tier up to its own, and in the client's sequences.
            tiers = [
                _block(conf, f"location @{name}{schema}{s} {{") for s in ("", "_t1", "_t2", "_t3")
            ]
            for k, block in enumerate(tiers):
                assert "limit_conn gatekeeper_conn 3;" in block
                counted = re.findall(r"limit_conn gatekeeper_tokens(\d) (\d);", block)
                assert counted == [("1", "3"), ("2", "2"), ("3", "1")][:k]
                assert ("limit_conn gatekeeper_schema 1;" in block) == bool(schema)
    figures = _figures(limits)
    assert figures["tokenTiers"] == [1024, 2048, 4096]
    assert (figures["maxModelLen"], figures["maxReplyTokens"]) == (8192, 1024)
    # Without tiers (limits not from a plan) requests are counted, not tokens.
    assert "gatekeeper_tokens" not in nginx_conf(LIMITS)


def test_only_reviewed_headers_reach_vllm_and_the_address_is_nginx_s() -> None:
    conf, _ = _servers(nginx_conf(LIMITS))
    assert "proxy_pass_request_headers off;" in conf
    set_headers = dict(re.findall(r"proxy_set_header (\S+) (\S+);", conf))
    assert set_headers == {
        "Host": "localhost",
        "Connection": '""',
        # vLLM gets the engine key, never the client's (which rotates without restarting it).
        "Authorization": "$gatekeeper_engine_auth",
        "Content-Type": "$content_type",
        "Accept": "$http_accept",
        "X-Forwarded-For": "$remote_addr",
        # The engine's /health, asked when it answers 500, gets none of the request's length.
        "Content-Length": '""',
        # The client's address for the API server, from the public one only (`api_route`).
        "X-Gatekeeper-Client": "$remote_addr",
    }
    inner = {"Host", "Connection", "X-Forwarded-For", "Content-Length", "X-Gatekeeper-Client"}
    assert set(set_headers) - inner == set(PASSED_HEADERS)
    api = conf[conf.index("listen unix:/tmp/gatekeeper-api.sock;") :]
    assert "X-Gatekeeper-Client $" not in api and "real_ip_header X-Gatekeeper-Client;" in api


def test_failures_are_rate_limited_before_they_are_answered() -> None:
    conf, _ = _servers(nginx_conf(LIMITS))
    assert "limit_req_zone $binary_remote_addr zone=gatekeeper_failed:1m rate=30r/m;" in conf
    # `try_files` (after limit_req's phase), not js_content, which would read the body first.
    for name, status in (("@unauthorized", 401), ("@not_found", 404)):
        assert (
            f"location {name} {{ limit_req zone=gatekeeper_failed burst=10 nodelay; "
            f"try_files /.gatekeeper-none ={status}; }}"
        ) in conf
    assert "error_page 418 = @unauthorized;" in conf and "error_page 419 = @not_found;" in conf
    assert "recursive_error_pages on;" in conf
    # A refused key's connection closes without lingering, telling the client the scheme.
    line = next(x for x in conf.splitlines() if "location = /.gatekeeper/e401" in x)
    no_linger = "keepalive_timeout 0; lingering_close off; lingering_time 1s; lingering_timeout 1s;"
    assert no_linger in line and "add_header WWW-Authenticate Bearer always;" in line


def test_every_status_the_gatekeeper_produces_has_a_json_page() -> None:
    conf, _ = _servers(nginx_conf(LIMITS))
    pages = dict(re.findall(r"error_page (\d{3}) (?:=\d{3} )?(/\.gatekeeper/e\d{3});", conf))
    # @vllm_unreachable's own: 598 the busy page, 599 and 596 (the API server outside a drain)
    # the restart's 503, 595 (the check server) the gatekeeper's 500.
    assert pages.pop("599") == pages.pop("596") == "/.gatekeeper/e503"
    assert pages.pop("595") == "/.gatekeeper/e500"  # the check server unreachable
    # 408 is never written (nginx closes the connection); 502 is answered as 503 (the busy page
    # when a count is full, `@vllm_unreachable`), in all three servers; 494 as 431.
    assert {int(status) for status in pages} == set(ERRORS) - {408, 502} | {494}
    assert pages["494"] == "/.gatekeeper/e431"
    assert conf.count("\n        error_page 502 = @vllm_unreachable;") == 3
    opening = r"location = /\.gatekeeper/([\w-]+) \{ internal; (?:[a-z_]+ [^;]+; )*"
    answers = {
        name: (int(status), json.loads(body)["error"])
        for name, status, body in re.findall(opening + r"return (\d{3}) '(.*?)\\n'", conf)
    }
    for status in set(ERRORS) - {408, 502}:
        kind, message = ERRORS[status]
        message = "Request body over 327680 bytes" if status == 413 else message
        assert answers[f"e{status}"] == (status, {"message": message, "type": kind, "code": status})
    # OpenAI's error types, and the busy pages' own messages.
    assert [ERRORS[status][0] for status in (429, 503, 504)] == [
        "rate_limit_error",
        "service_unavailable_error",
        "timeout_error",
    ]
    assert answers["busy"][1]["message"] == gatekeeper_answers.BUSY_MESSAGE


def test_the_metrics_listener_passes_metrics_only_and_logs_no_scrape() -> None:
    public, metrics = _servers(nginx_conf(LIMITS))
    assert f"listen {gatekeeper.METRICS_PORT};" in metrics
    assert f"listen {gatekeeper.METRICS_PORT}" not in public
    assert re.findall(r"location = (\S+) \{", metrics) == ["/metrics"]
    assert re.findall(r"proxy_pass (\S+);", metrics) == ["http://vllm/metrics"]
    assert "location / { return 404" in metrics
    # The answer counts come from the access log: scrapes are not clients.
    assert "access_log off;" in metrics
    # The container's ports, by name and number: test_manifest_fields.py.


def test_a_leader_s_metrics_listener_serves_the_engine_s_record_read_only() -> None:
    conf = nginx_conf(LIMITS, self_metrics=gatekeeper.SELF_METRICS_PATH)
    _, metrics = _servers(conf)
    assert re.findall(r"location = (\S+) \{", metrics) == [
        "/metrics",
        gatekeeper_conf.SELF_METRICS_ROUTE,
    ]
    record = _block(metrics, f"location = {gatekeeper_conf.SELF_METRICS_ROUTE} {{")
    assert f"alias {gatekeeper.SELF_METRICS_PATH};" in record
    assert 'default_type "text/plain; version=0.0.4";' in record
    assert "if ($request_method != GET) { return 404" in record
    # The path nginx reads is the probe's file, seen through the engine's /tmp.
    record_file = probes.SELF_METRICS_FILE.removeprefix("/tmp/")
    assert f"{gatekeeper.ENGINE_MOUNT}/{record_file}" == gatekeeper.SELF_METRICS_PATH
    mounts = gatekeeper.container(30, 64, engine_tmp=True)["volumeMounts"]
    assert {"name": "tmp", "mountPath": gatekeeper.ENGINE_MOUNT, "readOnly": True} in mounts
    # Not at the door, whose pod has no engine.
    assert "tmp" not in {m["name"] for m in gatekeeper.container(30, 64)["volumeMounts"]}


@door_harness.needs_nginx
@pytest.mark.parametrize("key", ["k" * 48, "abc.def+ghi/jkl_mno~pqr=-0123456789", ""])
def test_real_nginx_accepts_the_config_and_the_key_snippet(tmp_path: Path, key: str) -> None:
    """`nginx -t` on the pod's config with each key's file and engine map: no port is bound."""
    nginx, keys, run = gate.find_nginx(), tmp_path / "key", tmp_path / "run"
    keys.mkdir()
    run.mkdir()
    (keys / gatekeeper.KEY_FILE).write_text(key_file_text(key))
    (keys / gatekeeper.ENGINE_FILE).write_text(gatekeeper.engine_map_entry(key))
    files = gatekeeper.config_files(
        LIMITS,
        listen="127.0.0.1:1",
        key_dir=str(keys),
        config_dir=str(tmp_path),
        run_dir=str(run),
        access_log=str(run / "access.log"),
        modules=gate.nginx_modules(nginx),
    )
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    argv = [nginx, "-e", "stderr", "-t", "-c", str(tmp_path / gatekeeper.CONFIG_FILE)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_template_has_no_fragment_the_renderer_leaves_out_and_no_note_reaches_nginx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    filled: set[str] = set()
    fill = gatekeeper_conf._fill

    def recorded(section: str, **values: object) -> str:
        filled.add(section)
        return fill(section, **values)

    monkeypatch.setattr(gatekeeper_conf, "_fill", recorded)
    tiered = replace(LIMITS, connection_capacity=100, token_tiers=((1024, 2),))
    confs = [
        nginx_conf(tiered, user="root", self_metrics=gatekeeper.SELF_METRICS_PATH),
        nginx_conf(LIMITS, upstream="leaders:8000", asleep=Asleep(300, 30), page_root="/p"),
    ]
    assert filled == set(gatekeeper_conf._sections())
    for conf in confs:
        assert not re.search(r"^\s*##|%\{", conf, re.MULTILINE), conf


@pytest.mark.parametrize("asleep", [None, Asleep(wake_seconds=300, signal_seconds=30)])
def test_every_njs_handler_the_config_names_is_exported_and_every_export_is_named(
    asleep: Asleep | None,
) -> None:
    """nginx refuses to start on a handler the script does not export (ngx_http_js_module.c:
    "js function not found"), and a handler nothing names is dead code that drifts."""
    conf = nginx_conf(LIMITS, page_root="/etc/gatekeeper", asleep=asleep)
    named = set(re.findall(r"\bjs_\w+ (?:\$\w+ )?gatekeeper\.(\w+)", conf))
    script = njs_script(LIMITS, asleep)
    (exported,) = re.findall(r"export default \{([^}]*)\}", script)
    exports = {entry.split(":")[0].strip() for entry in exported.split(",") if entry.strip()}
    assert named == exports


@door_harness.needs_nginx
def test_real_nginx_serves_the_engine_s_record_once_it_exists(tmp_path: Path) -> None:
    """The metrics listener answers 404 before the startup probe wrote the record, then the
    file as it is, as Prometheus text; nothing but GET."""
    engine_dir = Path(tempfile.mkdtemp(prefix="gatekeeper-engine-"))
    engine_dir.chmod(0o755)  # nginx's worker may read as `nobody`, through pytest's 0700 dirs
    record = engine_dir / "gemma-self.prom"
    try:
        with door_harness.door(
            LIMITS, "k" * 40, free_port(), tmp_path, self_metrics=record
        ) as running:
            route = gatekeeper_conf.SELF_METRICS_ROUTE
            assert gate.request(running.metrics_url, "GET", route).status == 404
            text = (
                f"# TYPE {watch.MEASURED_STEP} gauge\n{watch.MEASURED_STEP} 1.25\n"
                f"# TYPE {watch.STALL_BOUND} gauge\n{watch.STALL_BOUND} 12\n"
            )
            record.write_text(text)
            reply = gate.request(running.metrics_url, "GET", route)
            assert reply.status == 200
            assert reply.body.decode() == text
            assert reply.headers["Content-Type"] == "text/plain; version=0.0.4"
            assert gate.request(running.metrics_url, "POST", route, b"{}").status == 404
            assert gate.request(running.metrics_url, "GET", route + "/x").status == 404
    finally:
        shutil.rmtree(engine_dir, ignore_errors=True)
