"""The optional layers: each is selected by one stack key and lives in its own files, so deleting
those files leaves the minimal stack (every key off) planning and running, and setting its key
off on dev removes that layer's part of the render and nothing else (issue 44)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.pulumi_mocks import RecordingMocks
from tests.program.harness import run_program
from tests.program.test_minimal_stack import _render

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Layer:
    """An optional layer: the key that selects it, the value that turns it off, its product
    files (folders end in /) and the test files that are its own."""

    key: str
    off: Any
    product: tuple[str, ...]
    tests: tuple[str, ...]


LAYERS: dict[str, Layer] = {
    "gatekeeper": Layer(
        "frontDoor",
        "vllm-key",
        (
            "infra/plan/frontdoor.py",
            "components/manifests/gatekeeper.py",
            "components/manifests/gatekeeper_conf.py",
            "components/manifests/gatekeeper_answers.py",
            "components/manifests/gatekeeper.conf.tmpl",
            "components/manifests/gatekeeper.js",
        ),
        (
            "tests/plan/test_frontdoor.py",
            "tests/components/test_gatekeeper.py",
            "tests/components/test_gatekeeper_carriage.py",
            "tests/components/test_gatekeeper_crowd.py",
            "tests/components/test_gatekeeper_open_routes.py",
        ),
    ),
    "chat page": Layer(
        "chatPage",
        False,
        ("components/manifests/chat/",),
        ("tests/components/test_chat_page.py", "tests/rehearse/test_chat_page.py"),
    ),
    "elastic": Layer(
        # The elasticity keys turn it on; the fixed stack sets `replicas` instead.
        "minGroups",
        None,
        (
            "infra/adapters/elastic_layer.py",
            "infra/plan/elastic.py",
            "infra/plan/sleep.py",
            "components/autoscaling.py",
            "components/manifests/door.py",
            "components/manifests/asleep.py",
            "components/manifests/asleep.js",
            "components/manifests/scaling.py",
        ),
        (
            "tests/plan/test_elastic.py",
            "tests/components/test_door.py",
            "tests/components/test_scaling.py",
            "tests/program/test_elastic_program.py",
        ),
    ),
    "monitoring": Layer(
        "monitoring",
        False,
        (
            "infra/adapters/monitoring_layer.py",
            "infra/plan/monitoring.py",
            "infra/plan/watching.py",
            "components/monitoring.py",
            "components/watch.py",
            "components/manifests/metrics.py",
        ),
        (
            "tests/plan/test_monitoring_plan.py",
            "tests/components/test_monitoring.py",
            "tests/components/test_metrics_collector.py",
            "tests/components/test_watch.py",
            "tests/program/test_monitoring_program.py",
        ),
    ),
    "quantize": Layer(
        "weightsSource",
        "hub",
        ("infra/quantize/", "infra/plan/quantize.py", "components/manifests/quantize.py"),
        ("tests/quantize/", "tests/components/test_quantize_job.py"),
    ),
    "existing cluster": Layer(
        "existingCluster",
        None,
        (
            "infra/adapters/existing_cluster.py",
            "infra/plan/existing.py",
            "components/existing_cluster.py",
        ),
        ("tests/program/test_existing_cluster.py",),
    ),
    "moe": Layer(
        "model",
        "google/gemma-4-12B-it",
        ("infra/plan/moe.py", "infra/plan/moe_measured.py"),
        ("tests/plan/test_moe.py", "tests/plan/test_moe_measured.py"),
    ),
}

#: What the copy needs to plan and to run the program under the mocks.
TREE = ("infra", "components", "policies", "stacks", "Pulumi.yaml")
HARNESS = (
    "tests/__init__.py",
    "tests/fakes/__init__.py",
    "tests/fakes/pulumi_mocks.py",
    "tests/program/__init__.py",
    "tests/program/harness.py",
)
_RUN = """
from tests.fakes.pulumi_mocks import RecordingMocks
from tests.program.harness import run_program
run_program(RecordingMocks(), "minimal")
"""


def test_every_layer_file_exists() -> None:
    """The registry names real files: a renamed file must be renamed here too."""
    for layer in LAYERS.values():
        for path in (*layer.product, *layer.tests):
            assert (REPO / path).exists(), path


def _without(layer: Layer, root: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__")
    for name in TREE:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        else:
            shutil.copy2(source, root / name)
    for name in HARNESS:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    for name in layer.product:
        path = root / name
        shutil.rmtree(path) if name.endswith("/") else path.unlink()
    return root


#: Layers whose deletion still breaks the minimal stack, with the imports that break it.
ENTANGLED = {
    "gatekeeper": (
        "the core imports the gatekeeper: infra.plan.sizing -> infra.plan.frontdoor and "
        "components.manifests.gatekeeper_conf (every plan carries `front_door`, a "
        "GatekeeperLimits, whose reply caps vLLM's flags and the waits read); infra.plan.catalog, "
        "infra.plan.loading, infra.plan.pods, components.manifests.spec, pods, access and "
        "components.model_server -> components.manifests.gatekeeper (ports, container size, key "
        "files)"
    ),
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=ENTANGLED[n]))
        if n in ENTANGLED
        else n
        for n in LAYERS
    ],
)
def test_deleting_a_layer_leaves_the_minimal_stack_planning_and_running(
    name: str, tmp_path: Path
) -> None:
    root = _without(LAYERS[name], tmp_path)
    for command in (["-m", "infra.plan", "--stack", "minimal"], ["-c", _RUN]):
        result = subprocess.run(
            [sys.executable, "-B", *command], cwd=root, capture_output=True, text=True
        )
        assert result.returncode == 0, f"{name} deleted, {command[:2]}: {result.stderr[-3000:]}"


def test_a_deletion_that_breaks_the_minimal_stack_fails(tmp_path: Path) -> None:
    """The deletion test can fail: without the core's sizing, the minimal stack cannot plan."""
    root = _without(Layer("", None, ("infra/plan/sizing.py",), ()), tmp_path)
    result = subprocess.run(
        [sys.executable, "-B", "-m", "infra.plan", "--stack", "minimal"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "infra.plan.sizing" in result.stderr


def _by_name(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_chat_page_off_on_dev_removes_exactly_the_page_as_minimal_has_none(tmp_path: Path) -> None:
    dev = _by_name(_render("dev", {}, tmp_path / "dev"))
    off = _by_name(_render("dev", {"chatPage": False}, tmp_path / "off"))
    minimal = _render("minimal", {}, tmp_path / "minimal")
    assert dev.keys() == off.keys()
    config = ("ConfigMap", "gemma-gatekeeper")
    page = set(dev[config]["data"]) - set(off[config]["data"])
    assert page == {"chat-index.html", "chat-app.js", "chat-app.css"}
    assert not set(off[config]["data"]) - set(dev[config]["data"])
    assert "chat-index.html" in dev[config]["data"]["nginx.conf"]
    assert "chat-index.html" not in off[config]["data"]["nginx.conf"]
    # Nothing else changes but the digest that restarts the leaders on a new config.
    assert [k for k in dev if dev[k] != off[k]] == [config, ("LeaderWorkerSet", "gemma-vllm")]
    digest = "gemma-graviton.dev/gatekeeper-config-sha256"
    lws = [dev[("LeaderWorkerSet", "gemma-vllm")], off[("LeaderWorkerSet", "gemma-vllm")]]
    for one in lws:
        one["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["annotations"].pop(digest)
    assert lws[0] == lws[1]
    # minimal, which runs no gatekeeper, holds none of the page either.
    assert not [o for o in minimal if page & set(o.get("data", {}))]


def _resources(stack: str, overrides: dict[str, Any] | None = None) -> set[tuple[str, str]]:
    mocks = RecordingMocks()
    run_program(mocks, stack, overrides)
    return {(r.type_, r.name) for r in mocks.records}


def test_monitoring_off_on_dev_creates_none_of_the_monitoring_as_minimal() -> None:
    dev, off = _resources("dev"), _resources("dev", {"monitoring": False})
    minimal = _resources("minimal")
    layer = dev - off
    assert not off - dev
    # Exactly the Monitoring component and its children (named after it), and minimal has none.
    assert ("gemma-graviton:monitoring:Monitoring", "watch") in layer
    assert layer == {(t, n) for t, n in dev if n.startswith("watch")}
    assert not [n for _, n in minimal if n.startswith("watch")]
