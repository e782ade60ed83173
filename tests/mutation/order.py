"""The order tests run in under mutation testing: direct tests of a rule first, the command line
and the whole-catalogue comparisons (each plans dozens of stacks) last. `-x` stops at the first
failure, so a caught mutant costs only the tests before the one that catches it."""

from __future__ import annotations

import pytest

FIRST = (
    "tests/plan/test_budget.py",
    "tests/plan/test_frontdoor.py",
    "tests/plan/test_rules.py",
    "tests/policies/test_policy_edges.py",
    "tests/policies/test_policies.py",
    "tests/components/test_manifest_fields.py",
    "tests/components/test_gatekeeper.py",
    "tests/plan/test_config.py",
    "tests/plan/test_sizing.py",
    "tests/components/test_manifests.py",
)
LAST = (
    "tests/plan/test_plan_cli.py",
    "tests/plan/test_buying_guide.py",
    "tests/plan/test_bad_input.py",
)


def mutation_rank(item: pytest.Item) -> tuple[int, int]:
    """(module rank, slow marker): hypothesis tests and command-line runs after plain ones."""
    path = item.nodeid.split("::", 1)[0]
    if path in FIRST:
        rank = FIRST.index(path)
    elif path in LAST:
        rank = len(FIRST) + 1 + LAST.index(path)
    else:
        rank = len(FIRST)
    function = getattr(item, "function", None)
    slow = bool(getattr(function, "is_hypothesis_test", False)) or "cli" in item.name
    return rank, int(slow)
