"""No container image is pinned by a tag alone, in the offline render or in what the program
registers under the mocks: a registry can move a tag under the same name, never a digest. Every
reference keeps its tag beside the digest, for readers."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.manifests import gate, gatekeeper, metrics
from components.manifests import images as pins
from infra.adapters.render import render_stack
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests.fakes.pulumi_mocks import RecordingMocks
from tests.program.harness import OWN_VALUES, run_program, shared_run

#: repository:tag@sha256:<64 hex>, the tag kept for readers.
PINNED = re.compile(r"[a-z0-9.\-/:]+:[A-Za-z0-9._\-]+@sha256:[0-9a-f]{64}")


def images(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """(path, reference) of every `image` field anywhere in a nested object."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "image" and isinstance(item, str):
                yield f"{where}.{key}", item
            else:
                yield from images(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from images(item, f"{where}[{index}]")


@pytest.mark.parametrize("reference", [gatekeeper.IMAGE, metrics.IMAGE, gate.KUBECTL_IMAGE,
                                       gate.PROBE_POD_IMAGE])  # fmt: skip
def test_every_image_the_project_ships_is_pinned_by_digest(reference: str) -> None:
    assert PINNED.fullmatch(reference), reference


@pytest.mark.parametrize(
    "reference",
    ["nginx:1.30.5", "nginx@sha256:" + "0" * 64, "nginx:1.30@sha256:abc", "nginx"],
)
def test_the_pattern_refuses_what_is_not_tag_and_digest(reference: str) -> None:
    assert not PINNED.fullmatch(reference)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_tag_only_image_in_the_render(stack: str, tmp_path: Path) -> None:
    cfg = load_stack(stack, OWN_VALUES[stack])
    found = []
    for path in render_stack(cfg, plan(cfg, stack), tmp_path):
        for document in yaml.safe_load_all(path.read_text()):
            found += [(f"{path.name}{at}", ref) for at, ref in images(document)]
    assert len(found) >= 4, found  # vLLM, the gatekeeper, the collector, kubectl
    assert [f for f in found if not PINNED.fullmatch(f[1])] == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_tag_only_image_under_the_mocks(stack: str) -> None:
    mocks, _ = shared_run(stack)
    found = [(f"{r.urn}{at}", ref) for r in mocks.records for at, ref in images(r.inputs)]
    assert {ref for _, ref in found} >= {gatekeeper.IMAGE, OWN_VALUES[stack]["vllmImage"]}
    assert [f for f in found if not PINNED.fullmatch(f[1])] == []


def _pin_file(tmp_path: Path, platforms: list[str]) -> tuple[Path, str]:
    """The shipped pin file with the vLLM image recorded at an index of these platforms."""
    document = json.loads(pins.PIN_FILE.read_text())
    digest = "sha256:" + hashlib.sha256(json.dumps(platforms).encode()).hexdigest()
    document["images"]["vllm"].update(tag="x86", digest=digest, platforms=platforms)
    path = tmp_path / f"images-{len(platforms)}.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path, f"vllm/vllm-openai-cpu:x86@{digest}"


@pytest.mark.usefixtures("as_pulumi_host")
def test_up_refuses_a_recorded_index_without_arm64_in_one_line(
    mocks: RecordingMocks, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The pin file records the platforms `make pin-images` read; a vLLM index without arm64
    never starts on the Graviton nodes, so `pulumi up` stops before any resource
    (tests/plan/test_pins.py writes such pins from a registry on loopback). The host imports the
    project anew, so the pin file is named the way the program reads it, by its variable."""
    path, ref = _pin_file(tmp_path, ["linux/amd64"])
    monkeypatch.setenv(pins.PIN_FILE_ENV, str(path))
    with pytest.raises(pulumi.RunError) as error:
        run_program(mocks, "dev", {"vllmImage": ref})
    assert str(error.value) == (
        f"`vllmImage` {ref} is an index without linux/arm64 (it lists linux/amd64, as `make "
        "pin-images` read it), and every node is Graviton (arm64); choose a tag whose index lists "
        "linux/arm64, set it in components/manifests/images.json and run `make pin-images`"
    )
    assert mocks.records == []


@pytest.mark.usefixtures("as_pulumi_host")
def test_up_takes_a_recorded_arm64_index_as_the_default(
    mocks: RecordingMocks, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Once `make pin-images` has written the vLLM digest, the stack needs no `vllmImage`."""
    path, ref = _pin_file(tmp_path, ["linux/amd64", "linux/arm64/v8"])
    monkeypatch.setenv(pins.PIN_FILE_ENV, str(path))
    own = {k: v for k, v in OWN_VALUES["dev"].items() if k != "vllmImage"}
    run_program(mocks, "dev", own, as_shipped=True)
    found = {item for r in mocks.records for _, item in images(r.inputs)}
    assert ref in found
