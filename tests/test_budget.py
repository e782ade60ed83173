"""The size of the house: every line of code the repository tracks (source and tests in Python,
JS, HTML, CSS, shell and templates; docs/, tests/fixtures/ and rendered/ left out), printed by
area and held under a ceiling that only comes down (issue 44: 56,000 lines is the target)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: What counts as code, by how a tracked file's name ends; the CI scripts are shell without one.
CODE_SUFFIXES = (".py", ".js", ".html", ".css", ".sh", ".j2", ".jinja", ".tmpl", ".tpl")
SHELL_SCRIPTS = (".ci/run", ".ci/packages")
LEFT_OUT = ("docs/", "tests/fixtures/", "rendered/")
AREAS = {
    "product": ("infra/", "components/", "policies/"),
    "tools": ("tools/",),
    "tests": ("tests/",),
}
#: Today's count rounded up to the next 500. The target is 56,000 lines (issue 44); this ceiling
#: may only go down: lower it when the count falls, never raise it to fit a new capability. It
#: rose three times for fixes to what deploys: from 70,000 for the security and first-deploy
#: faults of vllm-key, the existing cluster, the load balancer and `vllmExtraArgs` (730 lines,
#: after five passes of cuts took 331 elsewhere); to 71,000 for the existing cluster's
#: authentication mode, stable node subnet, room for a running stack's own addresses, YAML add-on
#: values and subnets EC2 no longer finds (216 lines); and to 71,500 for the load balancer EKS's
#: cloud controller refused on every stack (the drain's target-group attributes, set by `pulumi
#: up` and tested against the real AWS CLI) and for an existing cluster's LWS check before
#: anything is made and its preview roles (about 300 lines, after the tests' merges took 115);
#: and to 72,000 for four hostile readings' fixes (vLLM's key check behind an elastic door, the
#: gatekeeper's logprob ids and slow uploads, the group held while it serves, the no-metrics
#: alarm and the alarms' prices: about 280 lines) and the round's one new capability, llama.cpp
#: beside vLLM (`make rehearse-peer`, about 250), for which no cut the rules allow was found. It
#: came down to 70,500 when the memory-guard experiment (its finding kept in the docs), the
#: hand-written mutation harness (mutmut's own config instead) and the rehearsal's front-door
#: rows that only nginx decides (asserted by unit tests under real nginx) left.
CODE_CEILING = 70_500


def is_code(path: str) -> bool:
    if path.startswith(LEFT_OUT):
        return False
    return path in SHELL_SCRIPTS or path.endswith(CODE_SUFFIXES)


def area_of(path: str) -> str:
    return next((area for area, roots in AREAS.items() if path.startswith(roots)), "other")


def code_lines() -> dict[str, int]:
    """Lines of tracked code by area (files as the work tree holds them; a tracked file deleted
    but not yet committed counts nothing)."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, text=True
    ).stdout.split("\0")
    counts = dict.fromkeys([*AREAS, "other"], 0)
    for path in filter(is_code, tracked):
        file = REPO / path
        if file.is_file():
            counts[area_of(path)] += len(file.read_bytes().splitlines())
    return counts


def test_the_code_stays_under_its_ceiling(capsys: pytest.CaptureFixture[str]) -> None:
    counts = code_lines()
    total = sum(counts.values())
    with capsys.disabled():
        areas = ", ".join(f"{area} {n:,}" for area, n in counts.items())
        print(f"\ncode lines: {total:,} ({areas}); ceiling {CODE_CEILING:,}, target 56,000")
    assert total <= CODE_CEILING, (
        f"{total:,} lines of code is over the ceiling of {CODE_CEILING:,} ({areas}); cut code "
        "(remove what a tool does, merge what is duplicated), never raise the ceiling"
    )
    # The walk saw the tree: each area holds code, the product and the tests the most.
    assert counts["product"] > 10_000 and counts["tests"] > 10_000 and counts["tools"] > 1_000


def test_what_counts_as_code() -> None:
    assert is_code("infra/plan/sizing.py") and is_code("components/manifests/chat/app.css")
    assert is_code(".ci/run") and is_code("components/manifests/gatekeeper.js")
    assert not is_code("docs/planning.md") and not is_code("tests/fixtures/rendered/dev/x.py")
    assert not is_code("README.md") and not is_code("stacks/Pulumi.dev.yaml")
    assert [
        area_of(p) for p in ("policies/rules.py", "tools/regen.py", "tests/x.py", ".ci/run")
    ] == [
        "product",
        "tools",
        "tests",
        "other",
    ]
