"""The chat page in the gatekeeper's config: exactly its files, each with the CSP, every other
path still 404 and the API still keyed; checked on the text and by real nginx where installed."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from components.manifests import chat, gatekeeper, gatekeeper_conf
from components.manifests.gatekeeper import key_file_text, nginx_conf
from infra.adapters.render import render_stack
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests import door_harness
from tests.fakes.openai_stub import StubConfig
from tools.rehearse.front_door import gatekeeper_run as gate
from tools.rehearse.group.ranks import free_port

LIMITS = door_harness.SMALL_LIMITS
PAGE = chat.ChatPage(model='org/model-"1"<x>', max_reply_tokens=256, max_model_len=2048)


def test_the_page_is_served_only_when_asked_for_under_a_same_origin_csp() -> None:
    without = nginx_conf(LIMITS)
    assert "location = / {" not in without and chat.CSP not in without
    conf = nginx_conf(LIMITS, page_root="/etc/gatekeeper")
    public = conf.split("listen unix:/tmp/gatekeeper-api.sock;")[0]
    paths = re.findall(r"location = (\S+) \{", public)
    # The error pages' own locations are `internal`: no client reaches them.
    paths = [path for path in paths if not path.startswith("/.gatekeeper/")]
    assert paths == [
        "/ready", "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/",
        "/app.js", "/app.css",
    ]  # fmt: skip
    assert conf.count(f'add_header Content-Security-Policy "{chat.CSP}";') == 3
    assert conf.count("root /etc/gatekeeper;") == 3
    # Only the page's own files, whatever else the directory holds (nginx.conf does).
    # (The unknown-path refusal's `try_files` names a file that never exists.)
    assert re.findall(r"try_files (\S+) =404;", public) == [
        "/.gatekeeper-none", "/chat-index.html", "/chat-app.js", "/chat-app.css",
    ]  # fmt: skip
    assert conf.index("location / { return 404") > conf.index("location = /app.css")
    # The CSP allows this origin only and nothing inline.
    directives = dict(d.split(" ", 1) for d in chat.CSP.split("; "))
    assert directives["default-src"] == "'self'"
    assert all("unsafe" not in v and "http" not in v and "*" not in v for v in directives.values())
    assert directives["frame-ancestors"] == directives["object-src"] == "'none'"


def test_the_page_has_its_figures_no_inline_code_no_third_party_and_keeps_the_key_close() -> None:
    files = chat.files(PAGE)
    index = files["chat-index.html"]
    assert re.findall(r"<script[^>]*>", index) == ['<script src="/app.js" defer>']
    assert "<style" not in index and " style=" not in index and " on" not in index.lower()
    for text in files.values():
        assert "http://" not in text and "https://" not in text and "//cdn" not in text
    assert "innerHTML" not in files["chat-app.js"] and "eval(" not in files["chat-app.js"]
    # The plan's figures are written into the page, escaped.
    assert 'data-max-reply-tokens="256"' in index and 'data-max-model-len="2048"' in index
    assert 'max="256" value="256"' in index
    assert 'data-model="org/model-&quot;1&quot;&lt;x&gt;"' in index
    assert "{{" not in index
    # The key lives in session storage and the header only.
    script = chat.source("app.js")
    assert "localStorage" not in script and "document.cookie" not in script
    assert "sessionStorage.setItem(KEY_STORE" in script
    assert "Authorization: `Bearer ${key}`" in script
    assert 'credentials: "omit"' in script


@door_harness.needs_nginx
def test_real_nginx_serves_exactly_the_page_and_still_keys_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every refusal below comes from one client; the per-client failure rate (tested with the
    # gatekeeper) would turn the later ones into 429s, so this config allows a larger burst.
    monkeypatch.setattr(gatekeeper_conf, "FAILURE_BURST", 100)
    key = "k" * 32
    files = chat.files(PAGE)
    with door_harness.stub_door(
        LIMITS, key, StubConfig(api_key=key, model="m"), tmp_path, page_files=files
    ) as door:
        get = lambda path, api_key=None: gate.request(  # noqa: E731
            door.base_url, "GET", path, api_key=api_key
        )
        for path, (name, content_type) in chat.ROUTES.items():
            reply = get(path)
            assert reply.status == 200, path
            assert reply.body.decode() == files[name], path
            assert reply.headers["Content-Type"] == content_type, path
            assert reply.headers["Content-Security-Policy"] == chat.CSP, path
            # Kept by browsers and proxies for a while, then revalidated by its ETag.
            assert reply.headers["Cache-Control"] == "public, max-age=300", path
            assert reply.headers["ETag"], path
            assert gate.request(door.base_url, "POST", path, b"{}").status == 404, path
        for other in (
            "/index.html", "/chat-index.html", "/nginx.conf", "/app.js/", "/app.jsx",
            "/favicon.ico", "/page/chat-app.js", "/v1/", "/x/../nginx.conf",
        ):  # fmt: skip
            reply = get(other)
            assert reply.status == 404, other
            assert "Content-Security-Policy" not in reply.headers, other
        assert get("/v1/models").status == 401
        assert get("/v1/models", "wrong-" + key).status == 401
        assert get("/v1/models", key).status == 200


@door_harness.needs_nginx
def test_the_rendered_config_map_serves_the_page_and_nothing_more(tmp_path: Path) -> None:
    """`make plan`'s rendered ConfigMap, run by real nginx: only its paths moved to scratch."""
    cfg = load_stack("dev")
    written = render_stack(cfg, plan(cfg, "dev"), tmp_path / "rendered")
    (config,) = [
        yaml.safe_load(p.read_text())
        for p in written
        if p.name.endswith("-configmap-gemma-gatekeeper.yaml")
    ]
    data = config["data"]
    assert sorted(data) == sorted(
        ["nginx.conf", "gatekeeper.js", *(name for name, _ in chat.ROUTES.values())]
    )
    key = "k" * 32
    # Started as root, nginx reads as `nobody`, who cannot pass pytest's 0700 directories.
    scratch = Path(tempfile.mkdtemp(prefix="gatekeeper-render-"))
    scratch.chmod(0o755)
    mount, keys, run = scratch / "mount", scratch / "keys", scratch / "run"
    for directory in (mount, keys, run):
        directory.mkdir()
    for name, text in data.items():
        (mount / name).write_text(text)
    (keys / gatekeeper.KEY_FILE).write_text(key_file_text(key))
    (keys / gatekeeper.ENGINE_FILE).write_text(gatekeeper.engine_map_entry(key))
    port = free_port()
    conf = (
        data["nginx.conf"]
        .replace(f"listen {gatekeeper.PORT} ", f"listen 127.0.0.1:{port} ")
        .replace(f"listen {gatekeeper.METRICS_PORT};", f"listen 127.0.0.1:{free_port()};")
        .replace(f"{gatekeeper.RUN_DIR}/", f"{run}/")
        .replace(gatekeeper.CONFIG_MOUNT, str(mount))
        .replace(gatekeeper.KEY_MOUNT, str(keys))
    )
    # This machine's nginx loads its own module files (the image has stream built in), and as
    # root its worker must reach the stream side's Unix socket: as the rehearsal runs it.
    nginx = gate.find_nginx()
    loads = "".join(f"load_module {module};\n" for module in gate.nginx_modules(nginx))
    conf = loads + "user root;\n" + re.sub(r"load_module \S+;\n", "", conf)
    (run / "nginx.conf").write_text(conf)
    try:
        with door_harness.nginx_running(run / "nginx.conf", port):
            base = f"http://127.0.0.1:{port}"
            for path, (name, _type) in chat.ROUTES.items():
                reply = gate.request(base, "GET", path)
                assert (reply.status, reply.body.decode()) == (200, data[name]), path
                assert reply.headers["Content-Security-Policy"] == chat.CSP, path
            for other in ("/nginx.conf", "/chat-app.js", "/index.html", "/v1"):
                assert gate.request(base, "GET", other).status == 404, other
            # No vLLM behind it: a keyed chat passes the key check and finds the group gone.
            chat_body = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'
            assert gate.request(base, "POST", "/v1/chat/completions", chat_body).status == 401
            reply = gate.request(base, "POST", "/v1/chat/completions", chat_body, api_key=key)
            assert reply.status == 503
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
