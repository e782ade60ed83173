"""The README's promises: its commands run, its figures and keys are the code's."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from infra.plan.cli import main
from infra.plan.config import SECRET_KEYS, StackConfig
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def _section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_exactly_two_newcomer_commands_and_both_are_make_targets() -> None:
    block = re.search(r"```sh\n(.*?)```", _section("Two commands"), re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make plan", "make test"]
    makefile = (REPO / "Makefile").read_text()
    for target in ("plan", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), target


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (REPO / ".ci" / "run").read_text()


@pytest.mark.parametrize(
    "line",
    [line for line in README.splitlines() if line.startswith(".venv/bin/python -m infra.plan")],
)
def test_plan_examples_run(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = shlex.split(line)[3:]
    assert main(args) == 0, line
    capsys.readouterr()


def test_quoted_figures_are_the_planners() -> None:
    dev = plan(load_stack("dev"), "dev")
    quoted = _section("What the plan says")
    assert f"{dev.pod_memory_gib:g} GiB pods with {dev.pod_cpu} CPUs" in quoted
    assert f"{dev.kv_cache_bytes / 1024**3:.2f} GiB KV cache per rank" in quoted
    assert f"{dev.max_model_len:,}-token context at {dev.max_concurrency:.2f}x" in quoted
    assert f"{dev.kv_cache_tokens:,} tokens of KV" in quoted
    assert f"sees {dev.guard_available_gib:.2f} GiB" in quoted
    no_prefetch = plan(load_stack("dev", {"weightPrefetch": False}), "dev")
    assert f"{no_prefetch.max_model_len:,} tokens at {no_prefetch.max_concurrency:.2f}x" in quoted
    assert f"`max_num_batched_tokens` to {no_prefetch.max_num_batched_tokens}" in quoted


def test_every_stack_key_is_documented() -> None:
    table = _section("Stack keys")
    documented = set(re.findall(r"`([a-zA-Z]+)`", table))
    keys = {f.alias or n for n, f in StackConfig.model_fields.items()} | set(SECRET_KEYS)
    assert keys - documented == set()


def test_how_it_fits_together_names_real_places() -> None:
    """Every file, folder and catalogue name the map points a reader to exists."""
    section = _section("How it fits together")
    paths = set(re.findall(r"`((?:infra|components|policies|tests|stacks)/[\w/.]*?)`", section))
    assert len(paths) >= 8, paths
    for path in paths:
        assert (REPO / path).exists(), path
    catalog = (REPO / "infra/plan/catalog.py").read_text()
    for name in ("INSTANCE_TYPES", "MODELS"):
        assert f"`{name}` in `infra/plan/catalog.py`" in section
        assert re.search(rf"^{name}\b", catalog, re.M), name
    modules = re.findall(r"\(`(\w+)`\)", section)
    assert len(modules) >= 7, modules
    for module in modules:
        homes = [
            REPO / d / m for d in ("infra/plan", "components") for m in (f"{module}.py", module)
        ]
        assert any(home.exists() for home in homes), module
