"""`make pin-images`: resolve every shipped image's tag to the digest of its multi-arch index at its
registry, check the index lists the platforms the image needs (linux/arm64 for every node), and
write digest, platforms and date into the pin file (`components/manifests/images.json`), the one
home the manifests and the stack config read.

Only the standard library speaks to the registries, over the OCI distribution API
(opencontainers/distribution-spec v1.1.0 `spec.md`, "Pulling manifests"): `GET
/v2/<name>/manifests/<tag>` with an `Accept` of the OCI index and the Docker manifest list (and the
single-image types, for a tag that names one image). A registry that wants a token answers 401
with `WWW-Authenticate: Bearer realm=...,service=...,scope=...`; the anonymous token comes from
`GET <realm>?service=...&scope=...` (distribution/distribution v2.8 `docs/spec/auth/token.md`), as
Docker Hub and registry.k8s.io do for public images. The digest written is the sha256 of the
manifest bytes served, checked against `Docker-Content-Digest` where the registry sends it.

`--registry-host-map` (or `GEMMA_GRAVITON_REGISTRY_HOST_MAP`), `docker.io=http://127.0.0.1:5000`,
sends a registry's requests elsewhere (a mirror, or the tests' registry on loopback).

Usage: python -m tools.pins [--pins FILE] [--registry-host-map HOST=URL,...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.manifests import images

HOST_MAP_ENV = "GEMMA_GRAVITON_REGISTRY_HOST_MAP"
#: Docker Hub's names are written without a host; its API is served from this host
#: (distribution/reference `normalize.go`, v0.6.0: `docker.io`, `library/` for official images).
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "https://registry-1.docker.io"
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
IMAGE_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
TIMEOUT_S = 30
#: A manifest or config larger than this is no manifest (the spec's registries cap them at 4 MiB).
MAX_BYTES = 4 * 1024 * 1024


class PinError(Exception):
    """One image that cannot be pinned: the rule broken and the fix, for one line."""

    def __init__(self, rule: str, fix: str) -> None:
        self.rule, self.fix = rule, fix
        super().__init__(f"{rule}; {fix}")


@dataclass(frozen=True)
class Name:
    """Where an image name lives: the registry host, the repository path at its API."""

    host: str
    path: str


def split_name(repository: str) -> Name:
    """`nginx` -> docker.io library/nginx; `registry.k8s.io/pause` -> registry.k8s.io pause. The
    first component is a host when it has a `.` or `:` or is `localhost` (distribution/reference
    v0.6.0 `normalize.go` `splitDockerDomain`)."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = DOCKER_HUB, repository
    if host in (DOCKER_HUB, "index.docker.io") and "/" not in path:
        path = f"library/{path}"
    return Name(DOCKER_HUB if host == "index.docker.io" else host, path)


def parse_host_map(text: str) -> dict[str, str]:
    """`docker.io=http://127.0.0.1:5000,registry.k8s.io=http://127.0.0.1:5000` -> host -> URL."""
    mapping = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, url = item.partition("=")
        if not sep or not host or not re.match(r"https?://[^/]+$", url.rstrip("/")):
            raise PinError(
                f"registry host map entry {item!r} is not HOST=http(s)://host[:port]",
                "write it as docker.io=http://127.0.0.1:5000",
            )
        mapping[host] = url.rstrip("/")
    return mapping


def parse_challenge(header: str) -> dict[str, str]:
    """The parameters of a `Bearer realm="...",service="...",scope="..."` challenge."""
    scheme, _, params = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return {}
    return {k.lower(): v for k, v in re.findall(r'(\w+)="([^"]*)"', params)}


@dataclass(frozen=True)
class Resolved:
    digest: str
    media_type: str
    platforms: tuple[str, ...]


class Registry:
    """Anonymous pulls of manifests and blobs from one registry's API."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.tokens: dict[str, str] = {}

    def _open(self, url: str, accept: Sequence[str], path: str) -> tuple[bytes, Any]:
        headers = {"Accept": ", ".join(accept)} if accept else {}
        request = urllib.request.Request(url, headers=headers)
        if path in self.tokens:
            # Not sent on to a redirect: a blob's storage URL is signed and refuses a second
            # credential.
            request.add_unredirected_header("Authorization", f"Bearer {self.tokens[path]}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return response.read(MAX_BYTES + 1), response.headers
        except urllib.error.HTTPError as error:
            challenge = parse_challenge(error.headers.get("WWW-Authenticate", ""))
            if error.code == 401 and challenge.get("realm") and path not in self.tokens:
                self.tokens[path] = self._token(challenge, path)
                return self._open(url, accept, path)
            raise

    def _token(self, challenge: dict[str, str], path: str) -> str:
        query = {"service": challenge.get("service", "")}
        query["scope"] = challenge.get("scope") or f"repository:{path}:pull"
        url = f"{challenge['realm']}?{urllib.parse.urlencode(query)}"
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            body = json.loads(response.read(MAX_BYTES))
        token = body.get("token") or body.get("access_token")
        if not token:
            raise PinError(f"the token service {challenge['realm']} gave no token", "retry later")
        return str(token)

    def manifest(self, path: str, reference: str) -> tuple[bytes, str, str | None]:
        url = f"{self.base}/v2/{path}/manifests/{urllib.parse.quote(reference)}"
        body, headers = self._open(url, (*INDEX_TYPES, *IMAGE_TYPES), path)
        if len(body) > MAX_BYTES:
            raise PinError(f"the manifest is larger than {MAX_BYTES} bytes", "check the name")
        media_type = (headers.get("Content-Type") or "").split(";")[0].strip()
        return body, media_type, headers.get("Docker-Content-Digest")

    def blob(self, path: str, digest: str) -> bytes:
        body, _ = self._open(f"{self.base}/v2/{path}/blobs/{digest}", (), path)
        return body


def _platform(entry: dict[str, Any]) -> str | None:
    platform = entry.get("platform") or {}
    os_, arch = platform.get("os"), platform.get("architecture")
    if not os_ or not arch or "unknown" in (os_, arch):
        return None  # an attestation manifest (buildx marks them unknown/unknown), no image
    variant = platform.get("variant")
    return f"{os_}/{arch}/{variant}" if variant else f"{os_}/{arch}"


def resolve(registry: Registry, name: Name, tag: str) -> Resolved:
    """The digest of the tag's manifest and the platforms it serves."""
    body, media_type, sent = registry.manifest(name.path, tag)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if sent and sent != digest:
        raise PinError(
            f"the registry names the manifest {sent} but its bytes hash to {digest}",
            "retry, or check --registry-host-map points at a registry",
        )
    document = json.loads(body)
    media_type = document.get("mediaType") or media_type
    if media_type in INDEX_TYPES or "manifests" in document:
        found = [_platform(m) for m in document.get("manifests", [])]
        platforms = tuple(sorted({p for p in found if p}))
    elif media_type in IMAGE_TYPES or "config" in document:
        # A tag that names one image: its config says what it runs on.
        config = json.loads(registry.blob(name.path, document["config"]["digest"]))
        variant = config.get("variant")
        one = f"{config.get('os')}/{config.get('architecture')}"
        platforms = (f"{one}/{variant}" if variant else one,)
    else:
        raise PinError(
            f"the registry answered a manifest of type {media_type or 'unknown'}",
            "the tag must name an OCI index, a Docker manifest list or an image",
        )
    return Resolved(digest, media_type, platforms)


def _base(host: str, host_map: dict[str, str]) -> str:
    if host in host_map:
        return host_map[host]
    return DOCKER_HUB_API if host == DOCKER_HUB else f"https://{host}"


def pin_all(path: Path, host_map: dict[str, str], today: dt.date, out: Any = sys.stdout) -> int:
    """Resolve every image of the pin file at `path`, print a line for each and rewrite the file
    with the ones resolved; 1 when any failed (its entry is left as it was), else 0."""
    document = json.loads(path.read_text())
    failures = pinned = 0
    registries: dict[str, Registry] = {}
    for key, raw in document["images"].items():
        pin = images.entry(key, raw)
        name = split_name(pin.repository)
        base = _base(name.host, host_map)
        registry = registries.setdefault(base, Registry(base))
        try:
            found = resolve(registry, name, pin.tag)
            missing = [
                n for n in pin.needs if not any(images.provides(p, n) for p in found.platforms)
            ]
            if missing:
                why = (
                    "every node is Graviton (arm64)"
                    if images.ARM64 in missing
                    else "the pin file's `needs` lists it (CI runs the image there)"
                )
                raise PinError(
                    f"the index has no {', '.join(missing)} (it lists "
                    f"{', '.join(found.platforms) or 'no platform'}); {why}",
                    f"choose a tag of {pin.repository} whose index lists {', '.join(missing)} and "
                    "set it as the image's tag in the pin file",
                )
        except PinError as error:
            failures += 1
            print(f"pin-images: {key} {pin.tagged}: {error}", file=sys.stderr)
            continue
        except urllib.error.HTTPError as error:
            failures += 1
            fix = (
                "check the repository and tag in the pin file"
                if error.code == 404
                else "retry, or point the host elsewhere with --registry-host-map"
            )
            print(
                f"pin-images: {key} {pin.tagged}: {base} answered {error.code} {error.reason}; "
                f"{fix}",
                file=sys.stderr,
            )
            continue
        except (urllib.error.URLError, OSError, ValueError) as error:
            failures += 1
            reason = getattr(error, "reason", error)
            print(
                f"pin-images: {key} {pin.tagged}: cannot read {base} ({reason}); run it where "
                "the registry is reachable, or map the host with --registry-host-map",
                file=sys.stderr,
            )
            continue
        was = "" if pin.digest in (None, found.digest) else f" (was {pin.digest})"
        print(
            f"pin-images: {key} {pin.tagged}@{found.digest} ({', '.join(found.platforms)}){was}",
            file=out,
        )
        raw.update(digest=found.digest, platforms=list(found.platforms), pinned=today.isoformat())
        pinned += 1
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"pin-images: {pinned} of {len(document['images'])} image(s) pinned in {path}", file=out)
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pins", description=__doc__)
    parser.add_argument("--pins", type=Path, default=images.PIN_FILE, help="the pin file")
    parser.add_argument(
        "--registry-host-map",
        default=os.environ.get(HOST_MAP_ENV, ""),
        help=f"HOST=URL,... registries to reach elsewhere (default: ${HOST_MAP_ENV})",
    )
    args = parser.parse_args(argv)
    try:
        host_map = parse_host_map(args.registry_host_map)
    except PinError as error:
        print(f"pin-images: `--registry-host-map` {error}", file=sys.stderr)
        return 2
    return pin_all(args.pins, host_map, dt.datetime.now(dt.UTC).date())


if __name__ == "__main__":
    sys.exit(main())
