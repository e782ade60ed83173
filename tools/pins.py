"""`make pin-images`: resolve every shipped image's tag to the digest of its multi-arch index at its
registry, check the index lists the platforms the image needs (linux/arm64 for every node), and
write digest, platforms and date into the pin file (`components/manifests/images.json`), the one
home the manifests and the stack config read.

skopeo (Debian's `skopeo`, installed by `.ci/packages`) speaks to the registries, with whatever
token dance they ask (Docker Hub and registry.k8s.io give public images an anonymous token):
`skopeo inspect --raw docker://<name>:<tag>` prints the manifest the tag names, byte for byte, and
the digest written is the sha256 of those bytes (what `skopeo manifest-digest` computes). An
index lists its platforms in `manifests[].platform`; a tag that names one image has its platform
in the image's config (`skopeo inspect --config --raw`).

`--registry-host-map` (or `GEMMA_GRAVITON_REGISTRY_HOST_MAP`), `docker.io=http://127.0.0.1:5000`,
reads a registry's names elsewhere (a mirror, or the tests' registry on loopback); an `http://`
one is read with `--tls-verify=false`.

Usage: python -m tools.pins [--pins FILE] [--registry-host-map HOST=URL,...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.manifests import images

HOST_MAP_ENV = "GEMMA_GRAVITON_REGISTRY_HOST_MAP"
#: Docker Hub's names are written without a host (distribution/reference `normalize.go`, v0.6.0:
#: `docker.io`, `library/` for official images).
DOCKER_HUB = "docker.io"
TIMEOUT_S = 60
#: skopeo's own words on a tag or repository the registry does not have (containers/image v5
#: `docker_image_src.go`, distribution's error codes MANIFEST_UNKNOWN and NAME_UNKNOWN).
NOT_THERE = re.compile(r"manifest unknown|name unknown|not found", re.I)


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


def skopeo_args(repository: str, tag: str, host_map: dict[str, str]) -> list[str]:
    """skopeo's reference (and TLS flag) for `repository:tag`, at its mapped host if it has one."""
    name = split_name(repository)
    if name.host not in host_map:
        return [f"docker://{repository}:{tag}"]
    scheme, _, host = host_map[name.host].partition("://")
    return [f"--tls-verify={scheme == 'https'}".lower(), f"docker://{host}/{name.path}:{tag}"]


def skopeo(*args: str) -> bytes:
    """What `skopeo inspect --raw <args>` prints; its failure as a PinError."""
    command = ["skopeo", "--command-timeout", f"{TIMEOUT_S}s", "inspect", "--raw", *args]
    result = subprocess.run(command, capture_output=True, check=False)
    if result.returncode == 0:
        return result.stdout
    # skopeo's last line is `time=... level=fatal msg="Error parsing image name \"<ref>\": <why>"`
    # (whatever failed); `<why>` alone, with distribution's `code: message` pair said once.
    last = (result.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
    found = re.search(r'msg="((?:[^"\\]|\\.)*)"', last)
    message = found.group(1).replace('\\"', '"') if found else last
    message = re.sub(r'^Error parsing image name "[^"]*": ', "", message)
    message = re.sub(r"(: [^:]+)\1$", r"\1", message)
    fix = (
        "check the repository and tag in the pin file"
        if NOT_THERE.search(message)
        else "retry where the registry is reachable, or map its host with --registry-host-map"
    )
    raise PinError(f"skopeo: {message}", fix)


def _platform(entry: dict[str, Any]) -> str | None:
    platform = entry.get("platform", entry)
    os_, arch = platform.get("os"), platform.get("architecture")
    if not os_ or not arch or "unknown" in (os_, arch):
        return None  # an attestation manifest (buildx marks them unknown/unknown), no image
    variant = platform.get("variant")
    return f"{os_}/{arch}/{variant}" if variant else f"{os_}/{arch}"


def resolve(args: list[str]) -> tuple[str, tuple[str, ...]]:
    """The digest of the manifest a skopeo reference names and the platforms it serves."""
    body = skopeo(*args)
    document = json.loads(body)
    if "manifests" in document:  # an OCI index or a Docker manifest list
        found = [_platform(m) for m in document["manifests"]]
    elif "config" in document:  # a tag that names one image: its config says what it runs on
        found = [_platform(json.loads(skopeo("--config", *args)))]
    else:
        raise PinError(
            f"the registry answered a manifest of type {document.get('mediaType', 'unknown')}",
            "the tag must name an OCI index, a Docker manifest list or an image",
        )
    return "sha256:" + hashlib.sha256(body).hexdigest(), tuple(sorted({p for p in found if p}))


def pin_one(pin: images.Pin, host_map: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """The image's digest and platforms, once its index lists every platform it needs."""
    digest, platforms = resolve(skopeo_args(pin.repository, pin.tag, host_map))
    missing = [n for n in pin.needs if not any(images.provides(p, n) for p in platforms)]
    if missing:
        why = (
            "every node is Graviton (arm64)"
            if images.ARM64 in missing
            else "the pin file's `needs` lists it (CI runs the image there)"
        )
        raise PinError(
            f"the index has no {', '.join(missing)} (it lists "
            f"{', '.join(platforms) or 'no platform'}); {why}",
            f"choose a tag of {pin.repository} whose index lists {', '.join(missing)} and "
            "set it as the image's tag in the pin file",
        )
    return digest, platforms


def pin_all(path: Path, host_map: dict[str, str], today: dt.date, out: Any = sys.stdout) -> int:
    """Resolve every image of the pin file at `path`, print a line for each and rewrite the file
    with the ones resolved; 1 when any failed (its entry is left as it was), else 0."""
    document = json.loads(path.read_text())
    failures = pinned = 0
    for key, raw in document["images"].items():
        pin = images.entry(key, raw)
        try:
            digest, platforms = pin_one(pin, host_map)
        except (PinError, ValueError) as error:
            failures += 1
            print(f"pin-images: {key} {pin.tagged}: {error}", file=sys.stderr)
            continue
        was = "" if pin.digest in (None, digest) else f" (was {pin.digest})"
        print(f"pin-images: {key} {pin.tagged}@{digest} ({', '.join(platforms)}){was}", file=out)
        raw.update(digest=digest, platforms=list(platforms), pinned=today.isoformat())
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
    if not shutil.which("skopeo"):
        print(
            "pin-images: skopeo is absent; install it (`make packages`, or Debian's "
            "`apt-get install skopeo`)",
            file=sys.stderr,
        )
        return 2
    try:
        host_map = parse_host_map(args.registry_host_map)
    except PinError as error:
        print(f"pin-images: `--registry-host-map` {error}", file=sys.stderr)
        return 2
    return pin_all(args.pins, host_map, dt.datetime.now(dt.UTC).date())


if __name__ == "__main__":
    sys.exit(main())
