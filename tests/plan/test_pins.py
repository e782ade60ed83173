"""`make pin-images` against a real OCI registry on loopback: Debian's `docker-registry`
(distribution 2.8, installed by `.ci/packages`), filesystem storage in a temporary folder, no
auth, read by Debian's skopeo as the command reads Docker Hub. The tests push, over plain HTTP,
two one-layer images (linux/arm64/v8, linux/amd64), an OCI index of both, an index of the amd64
one alone and a single arm64 image, under the shipped pin file's own names
(`--registry-host-map` sends docker.io and registry.k8s.io to loopback); then run the pin
command, the plan and the program on what it wrote.

The push follows the OCI distribution spec v1.1.0 `spec.md` ("Pushing blobs": POST then PUT
`?digest=`, "Pushing manifests": PUT with the manifest's media type); nothing reaches the
internet."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.manifests import gate, gatekeeper, images, metrics
from infra.plan.config import StackConfig
from tools import pins
from tools.rehearse.group.ranks import free_port

REPO = Path(__file__).resolve().parents[2]
BINARY = shutil.which("docker-registry") or "/usr/bin/docker-registry"
SKOPEO = shutil.which("skopeo") or "/usr/bin/skopeo"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def require_binary() -> None:
    """Skip where the registry or skopeo cannot be had; fail where `make packages` would have
    installed them."""
    for binary, package in ((BINARY, "docker-registry"), (SKOPEO, "skopeo")):
        if not os.access(binary, os.X_OK):
            if os.geteuid() != 0:
                pytest.skip(
                    f"{binary} is absent and this user cannot install it (not root): `make "
                    f"packages` as root installs Debian's {package}"
                )
            pytest.fail(f"{binary} is absent: `make packages` installs Debian's {package}")


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An open docker-registry on 127.0.0.1 storing in a temporary folder, its base URL; stopped
    at the end of the module."""
    require_binary()
    workdir = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = workdir / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: '{workdir / 'data'}'}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    log = (workdir / "registry.log").open("w")
    process = subprocess.Popen([BINARY, "serve", str(config)], stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):  # up to 20 s for it to listen
            try:
                with urllib.request.urlopen(f"{base}/v2/", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None:
                    pytest.fail(f"docker-registry exited: {(workdir / 'registry.log').read_text()}")
                time.sleep(0.1)
        else:
            pytest.fail("docker-registry did not answer /v2/ in 20 s")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def _request(method: str, url: str, body: bytes = b"", content_type: str = "") -> Any:
    headers = {"Content-Type": content_type} if content_type else {}
    request = urllib.request.Request(url, data=body or None, method=method, headers=headers)
    return urllib.request.urlopen(request, timeout=10)


def push_blob(base: str, name: str, data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with _request("POST", f"{base}/v2/{name}/blobs/uploads/") as response:
        assert response.status == 202
        location = urllib.parse.urljoin(base, response.headers["Location"])
    joiner = "&" if "?" in location else "?"
    url = f"{location}{joiner}digest={urllib.parse.quote(digest)}"
    with _request("PUT", url, data, "application/octet-stream") as response:
        assert response.status == 201
    return {"digest": digest, "size": len(data)}


def push_manifest(base: str, name: str, tag: str, document: dict[str, Any], media: str) -> bytes:
    body = json.dumps(document, indent=3).encode()  # not canonical: the served bytes count
    with _request("PUT", f"{base}/v2/{name}/manifests/{tag}", body, media) as response:
        assert response.status == 201
    return body


def push_image(base: str, name: str, arch: str, variant: str | None) -> dict[str, Any]:
    """A one-layer image for linux/<arch>[/<variant>]; its descriptor for an index."""
    config = {"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}
    if variant:
        config["variant"] = variant
    layer = push_blob(base, name, f"layer of {name} for {arch}".encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            **push_blob(base, name, json.dumps(config).encode()),
        },
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer}],
    }
    body = push_manifest(base, name, f"{arch}-only", manifest, OCI_MANIFEST)
    platform = {"os": "linux", "architecture": arch, **({"variant": variant} if variant else {})}
    return {
        "mediaType": OCI_MANIFEST,
        "digest": "sha256:" + hashlib.sha256(body).hexdigest(),
        "size": len(body),
        "platform": platform,
    }


def push_index(base: str, name: str, tag: str, manifests: list[dict[str, Any]]) -> bytes:
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    return push_manifest(base, name, tag, index, OCI_INDEX)


@pytest.fixture(scope="module")
def pushed(registry: str) -> dict[str, bytes]:
    """Every shipped image's tag as a two-platform index; under vLLM's name also `x86` (amd64
    alone) and `arm64-image` (one image, no index). The index bytes pushed, by key."""
    bodies = {}
    for key, pin in images.load(images.PIN_FILE).items():
        path = pins.split_name(pin.repository).path
        arm64 = push_image(registry, path, "arm64", "v8")
        amd64 = push_image(registry, path, "amd64", None)
        bodies[key] = push_index(registry, path, pin.tag, [amd64, arm64])
        if key == "vllm":
            bodies["x86"] = push_index(registry, path, "x86", [amd64])
    return bodies


def pin_file(tmp_path: Path, **changes: dict[str, Any]) -> Path:
    """A copy of the shipped pin file, with the given images' fields changed."""
    document = json.loads(images.PIN_FILE.read_text())
    for key, fields in changes.items():
        document["images"][key].update(fields)
    path = tmp_path / "images.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def _run(env: dict[str, str], module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run_pins(path: Path, registry: str) -> subprocess.CompletedProcess[str]:
    host_map = f"docker.io={registry},registry.k8s.io={registry}"
    return _run({pins.HOST_MAP_ENV: host_map}, "tools.pins", "--pins", str(path))


def run_plan(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run({images.PIN_FILE_ENV: str(path)}, "infra.plan", "--stack", "dev", *args)


def test_make_pin_images_calls_the_pin_command() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "\npin-images: $(VENV)/.installed\n\t$(PY) -m tools.pins $(ARGS)\n" in makefile


def test_every_shipped_image_is_read_from_the_pin_file() -> None:
    shipped = images.load(images.PIN_FILE)
    assert {
        gatekeeper.IMAGE: "gatekeeper",
        metrics.IMAGE: "metrics-collector",
        gate.KUBECTL_IMAGE: "kubectl",
        gate.PROBE_POD_IMAGE: "pause",
        StackConfig.model_fields["vllm_image"].default: "vllm",
    } == {pin.reference: key for key, pin in shipped.items()}


def test_pins_every_image_to_the_index_it_pushed(
    registry: str, pushed: dict[str, bytes], tmp_path: Path
) -> None:
    path = pin_file(tmp_path)
    result = run_pins(path, registry)
    assert result.returncode == 0, result.stderr
    written = images.load(path)
    for key, pin in written.items():
        assert pin.digest == "sha256:" + hashlib.sha256(pushed[key]).hexdigest(), key
        assert pin.platforms == ("linux/amd64", "linux/arm64/v8"), key
        assert pin.pinned is not None
    lines = result.stdout.splitlines()
    assert len(lines) == len(written) + 1
    assert lines[-1] == f"pin-images: {len(written)} of {len(written)} image(s) pinned in {path}"
    vllm = written["vllm"]
    assert f"pin-images: vllm {vllm.tagged}@{vllm.digest} (linux/amd64, linux/arm64/v8)" in lines
    # The shipped gatekeeper's digest is not the loopback index's: the line says what it was.
    shipped = images.load(images.PIN_FILE)["gatekeeper"].digest
    assert any(line.endswith(f"(was {shipped})") for line in lines if " gatekeeper " in line)
    # A second run reads the same indexes and writes the same pins.
    before = path.read_text()
    assert run_pins(path, registry).returncode == 0
    assert path.read_text() == before

    # The plan then takes the written vLLM digest as its default: no placeholder for it.
    plan = run_plan(path, "--json")
    assert plan.returncode == 0, plan.stderr
    data = json.loads(plan.stdout)
    assert "vllmImage" not in data["placeholders"], data["placeholders"]
    assert data["vllm_image"] == vllm.reference
    # And a stack that sets it explicitly is accepted too.
    assert run_plan(path, "--set", f"vllmImage={vllm.reference}").returncode == 0


def test_a_single_image_tag_is_pinned_to_its_config_platform_unless_amd64_is_needed(
    registry: str, pushed: dict[str, bytes], tmp_path: Path
) -> None:
    path = pin_file(tmp_path, vllm={"tag": "arm64-only"})
    result = run_pins(path, registry)
    assert result.returncode == 0, result.stderr
    assert images.load(path)["vllm"].platforms == ("linux/arm64/v8",)
    # An image CI runs needs amd64 too.
    needs = ["linux/arm64", "linux/amd64"]
    result = run_pins(pin_file(tmp_path, vllm={"tag": "arm64-only", "needs": needs}), registry)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "pin-images: vllm vllm/vllm-openai-cpu:arm64-only: the index has no linux/amd64 (it "
        "lists linux/arm64/v8); the pin file's `needs` lists it (CI runs the image there); choose "
        "a tag of vllm/vllm-openai-cpu whose index lists linux/amd64 and set it as the image's "
        "tag in the pin file"
    ]


def test_an_index_without_arm64_is_refused_and_left_unpinned(
    registry: str, pushed: dict[str, bytes], tmp_path: Path
) -> None:
    path = pin_file(tmp_path, vllm={"tag": "x86"})
    result = run_pins(path, registry)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "pin-images: vllm vllm/vllm-openai-cpu:x86: the index has no linux/arm64 (it lists "
        "linux/amd64); every node is Graviton (arm64); choose a tag of vllm/vllm-openai-cpu "
        "whose index lists linux/arm64 and set it as the image's tag in the pin file"
    ]
    written = images.load(path)
    assert written["vllm"].digest is None and written["vllm"].platforms is None
    assert written["gatekeeper"].platforms == ("linux/amd64", "linux/arm64/v8")


def test_a_missing_tag_names_the_image_and_the_fix(
    registry: str, pushed: dict[str, bytes], tmp_path: Path
) -> None:
    result = run_pins(pin_file(tmp_path, kubectl={"tag": "v9.9.9"}), registry)
    assert result.returncode == 1
    host = registry.removeprefix("http://")
    assert result.stderr.splitlines() == [
        f"pin-images: kubectl registry.k8s.io/kubectl:v9.9.9: skopeo: reading manifest v9.9.9 in "
        f"{host}/kubectl: manifest unknown; check the repository and tag in the pin file"
    ]


def test_an_unreachable_registry_names_the_image_and_the_fix(tmp_path: Path) -> None:
    require_binary()
    path, port = pin_file(tmp_path), free_port()
    before = path.read_text()
    result = run_pins(path, f"http://127.0.0.1:{port}")
    assert result.returncode == 1
    host = f"127.0.0.1:{port}"
    vllm = images.load(images.PIN_FILE)["vllm"]
    assert (
        f"pin-images: vllm {vllm.tagged}: skopeo: pinging container registry {host}: Get "
        f'"http://{host}/v2/": dial tcp {host}: connect: connection refused; retry where the '
        "registry is reachable, or map its host with --registry-host-map"
    ) in result.stderr.splitlines()
    assert len(result.stderr.splitlines()) == len(images.load(images.PIN_FILE))
    assert path.read_text() == before  # every entry left as it was


def _amd64_only_recorded(tmp_path: Path, pushed: dict[str, bytes]) -> tuple[Path, str]:
    """A pin file whose vLLM entry records the amd64-only index (written by hand, or by a pin
    file whose `needs` were edited): digest and platforms as the registry gave them."""
    digest = "sha256:" + hashlib.sha256(pushed["x86"]).hexdigest()
    entry = {"tag": "x86", "digest": digest, "platforms": ["linux/amd64"]}
    return pin_file(tmp_path, vllm=entry), f"vllm/vllm-openai-cpu:x86@{digest}"


REFUSED = (
    "`vllmImage` {ref} is an index without linux/arm64 (it lists linux/amd64, as `make "
    "pin-images` read it), and every node is Graviton (arm64); choose a tag whose index lists "
    "linux/arm64, set it in components/manifests/images.json and run `make pin-images`"
)


def test_the_plan_refuses_a_recorded_index_without_arm64(
    registry: str, pushed: dict[str, bytes], tmp_path: Path
) -> None:
    path, ref = _amd64_only_recorded(tmp_path, pushed)
    for args in ((), ("--set", f"vllmImage={ref}")):
        result = run_plan(path, *args)
        assert result.returncode == 2, result.stdout
        assert result.stderr.strip().splitlines()[-1].endswith(REFUSED.format(ref=ref)), args


@pytest.mark.parametrize(
    ("repository", "host", "path"),
    [
        ("nginx", "docker.io", "library/nginx"),
        ("vllm/vllm-openai-cpu", "docker.io", "vllm/vllm-openai-cpu"),
        ("docker.io/amazon/aws-otel-collector", "docker.io", "amazon/aws-otel-collector"),
        ("docker.io/nginx", "docker.io", "library/nginx"),
        ("registry.k8s.io/pause", "registry.k8s.io", "pause"),
        ("localhost:5000/team/app", "localhost:5000", "team/app"),
    ],
)
def test_names_split_as_docker_does(repository: str, host: str, path: str) -> None:
    assert pins.split_name(repository) == pins.Name(host, path)


def test_a_bad_host_map_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert pins.main(["--registry-host-map", "docker.io:5000"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "pin-images: `--registry-host-map` registry host map entry 'docker.io:5000' is not "
        "HOST=http(s)://host[:port]; write it as docker.io=http://127.0.0.1:5000"
    ]
