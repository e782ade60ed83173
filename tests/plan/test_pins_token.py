"""The pin command's anonymous bearer-token flow, against Debian's docker-registry with token
auth on loopback, as Docker Hub and registry.k8s.io ask it: the registry answers 401 with
`WWW-Authenticate: Bearer realm=...,service=...,scope=...`, the command gets a token from the
realm and asks again.

The token service is this module's: a stdlib HTTP server that hands anyone a pull token, an RS256
JWT signed with `openssl dgst` by a throw-away key whose self-signed certificate is the registry's
`rootcertbundle` and rides in the token's `x5c` header. The registry checks it as it checks any
token (distribution/distribution v2.8 `registry/auth/token/token.go`: issuer, audience = service,
time window, the `x5c` chain against the bundle, the signature, then the `access` claim against
the asked scope). The images are pushed to a second, open registry on the same storage folder."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.manifests import images
from tests.plan.test_pins import REPO, push_image, push_index, require_binary, start_registry

ISSUER = "gemma-graviton-tests"
SERVICE = "loopback-registry"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenService:
    """Signs a pull token for whatever repository is asked; records what it was asked."""

    def __init__(self, key: Path, cert: Path) -> None:
        self.key = key
        der = subprocess.run(
            ["openssl", "x509", "-in", str(cert), "-outform", "DER"],
            capture_output=True,
            check=True,
        ).stdout
        self.x5c = base64.b64encode(der).decode()
        self.asked: list[dict[str, list[str]]] = []

    def token(self, query: dict[str, list[str]]) -> str:
        self.asked.append(query)
        access = []
        for scope in query.get("scope", []):
            kind, name, actions = scope.split(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}
        claims = {
            "iss": ISSUER,
            "sub": "",
            "aud": query.get("service", [""])[0],
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": hashlib.sha256(os.urandom(16)).hexdigest(),
            "access": access,
        }
        signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(self.key)],
            input=signing.encode(),
            capture_output=True,
            check=True,
        ).stdout
        return f"{signing}.{_b64(signature)}"


@pytest.fixture(scope="module")
def token_registry(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, TokenService]]:
    """(open registry URL, token-auth registry URL, token service) on one storage folder."""
    require_binary()
    if not shutil.which("openssl"):
        pytest.skip("openssl is absent: the test's token service signs with it")
    root = tmp_path_factory.mktemp("token-registry")
    key, cert = root / "key.pem", root / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=gemma-graviton-tests", "-keyout", str(key), "-out", str(cert)],
        capture_output=True, check=True,
    )  # fmt: skip
    service = TokenService(key, cert)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            body = json.dumps({"token": service.token(urllib.parse.parse_qs(url.query))})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    realm = f"http://127.0.0.1:{server.server_address[1]}/token"
    auth = (
        f"auth: {{token: {{realm: '{realm}', service: {SERVICE}, issuer: {ISSUER}, "
        f"rootcertbundle: '{cert}'}}}}\n"
    )
    try:
        with (
            start_registry(root / "open", root / "data") as open_url,
            start_registry(root / "token", root / "data", auth) as token_url,
        ):
            yield open_url, token_url, service
    finally:
        server.shutdown()
        server.server_close()


def test_pins_through_the_registrys_token_challenge(
    token_registry: tuple[str, str, TokenService], tmp_path: Path
) -> None:
    open_url, token_url, service = token_registry
    name = "vllm/vllm-openai-cpu"
    arm64 = push_image(open_url, name, "arm64", "v8")
    amd64 = push_image(open_url, name, "amd64", None)
    index = push_index(open_url, name, "v0.31.0-arm64", [amd64, arm64])
    # Without a token the registry refuses: the flow is the registry's, not a shortcut.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{token_url}/v2/{name}/manifests/v0.31.0-arm64", timeout=10)
    assert refused.value.code == 401
    assert refused.value.headers["WWW-Authenticate"].startswith('Bearer realm="')

    document = json.loads(images.PIN_FILE.read_text())
    document["images"] = {"vllm": document["images"]["vllm"]}
    path = tmp_path / "images.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "tools.pins", "--pins", str(path),
         "--registry-host-map", f"docker.io={token_url}"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert images.load(path)["vllm"].digest == "sha256:" + hashlib.sha256(index).hexdigest()
    assert service.asked == [{"service": [SERVICE], "scope": [f"repository:{name}:pull"]}], (
        service.asked
    )
