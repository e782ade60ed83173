"""The container images the project ships, read from their one home, `images.json` beside this
module: each image's repository, tag and the digest of its multi-arch index, the platforms that
index lists and the ones it must list. The manifest builders take their references from here and
the stack config takes the vLLM image's default from here; `make pin-images`
(`tools.pins`) is the only writer, resolving each tag at its registry.

`GEMMA_GRAVITON_IMAGE_PINS` names another pin file (the pin command's tests write one against a
registry on loopback); it is read once, at import.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The shipped pin file.
PIN_FILE = Path(__file__).with_name("images.json")
#: The environment variable that names another pin file.
PIN_FILE_ENV = "GEMMA_GRAVITON_IMAGE_PINS"
#: What every index must list: every node the stacks create is Graviton (arm64).
ARM64 = "linux/arm64"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Pin:
    """One shipped image: where it comes from, what it is pinned to, what it must run on."""

    key: str
    repository: str
    """As written in a pod spec: `nginx`, `docker.io/amazon/aws-otel-collector`."""
    tag: str
    digest: str | None
    """`sha256:<64 hex>` of the tag's index (or single manifest); None until pinned."""
    platforms: tuple[str, ...] | None
    """`os/architecture[/variant]` of every image in the index, as read by `make pin-images`;
    None where the digest came from a public source and was not read from the registry."""
    needs: tuple[str, ...]
    pinned: str | None
    """The UTC date `make pin-images` read the registry, or None."""
    source: str

    @property
    def tagged(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def reference(self) -> str:
        """`repository:tag@sha256:...`, or `repository:tag` while no digest is pinned."""
        return f"{self.tagged}@{self.digest}" if self.digest else self.tagged

    def missing(self) -> tuple[str, ...]:
        """The needed platforms the recorded index does not list (none while not recorded)."""
        if self.platforms is None:
            return ()
        return tuple(n for n in self.needs if not any(provides(p, n) for p in self.platforms))


def provides(platform: str, needed: str) -> bool:
    """Whether an index entry's `os/arch[/variant]` serves a needed `os/arch`: an arm64 node
    pulls `linux/arm64/v8` as well as a bare `linux/arm64` (containerd/platforms v0.2.1
    `database.go` `normalizeArch`: arm64 with variant 8 or v8 is arm64)."""
    return platform == needed or platform.startswith(needed + "/")


def entry(key: str, raw: dict[str, Any]) -> Pin:
    """One image of a pin file, as its `images` object holds it under `key`."""
    digest = raw.get("digest")
    if digest is not None and not (isinstance(digest, str) and DIGEST.fullmatch(digest)):
        raise ValueError(f"{key}: digest {digest!r} is not sha256:<64 hex digits>")
    platforms = raw.get("platforms")
    return Pin(
        key=key,
        repository=str(raw["repository"]),
        tag=str(raw["tag"]),
        digest=digest,
        platforms=None if platforms is None else tuple(str(p) for p in platforms),
        needs=tuple(str(n) for n in raw.get("needs", [ARM64])),
        pinned=raw.get("pinned"),
        source=str(raw.get("source", "")),
    )


def load(path: Path | None = None) -> dict[str, Pin]:
    """The pins of a pin file (the shipped one, or the one `GEMMA_GRAVITON_IMAGE_PINS` names)."""
    path = path or Path(os.environ.get(PIN_FILE_ENV) or PIN_FILE)
    document = json.loads(path.read_text())
    return {key: entry(key, raw) for key, raw in document["images"].items()}


PINS = load()


def reference(key: str) -> str:
    """The pod spec's `image` for a shipped image."""
    return PINS[key].reference


def recorded(image: str, pins: dict[str, Pin] | None = None) -> Pin | None:
    """The pin whose repository and digest `image` (`repository:tag@sha256:...`) names, if any."""
    name, _, digest = image.partition("@")
    repository = name.rpartition(":")[0] or name
    for pin in (pins or PINS).values():
        if pin.digest == digest and pin.repository == repository:
            return pin
    return None
