"""Mutation testing of the pure core: `make mutants [FILES="infra/plan/kv_cache.py ..."]`.

Runs mutmut (pinned in `requirements-mutants.txt`) over the planner, the config model and its
rules, the manifest builders (the gatekeeper's nginx config included) and the policy rules, each
group against its own fast unit tests, then prints every surviving mutant with its file and line.
A survivor is either killed by a test of the rule it breaks, or listed with a one-line reason in
`tests/mutants-equivalent.txt`; the run fails while one is neither, or when the score is below
`--min-score`.

Each group runs in its own scratch copy of the repository under `.mutants/<group>/` (mutmut works
in a `mutants/` folder beside the `pyproject.toml` it reads, and the group's test selection is part
of that file). Nothing in the working tree is changed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.mutation.report import Outcome, collect, load_equivalent, render

REPO = Path(__file__).resolve().parents[2]
SCRATCH = REPO / ".mutants"
EQUIVALENT = REPO / "tests" / "mutants-equivalent.txt"
#: What a scratch copy needs: the packages, the tests and the data the tests read.
COPIED = (
    "infra", "components", "tools", "policies", "tests", "stacks", "docs", "README.md",
    "Pulumi.yaml",
)  # fmt: skip
#: Tests that are not about the pure core's rules and would only slow every mutant down: the
#: checkov scan (a linter over the rendered objects, minutes per run) and the CRD copy's hash.
DESELECTED = "not checkov and not committed_structure_copy"


@dataclass(frozen=True)
class Group:
    """Source files mutated together, and the fast tests that must catch every mutant."""

    name: str
    files: tuple[str, ...]
    tests: tuple[str, ...]


GROUPS = (
    Group(
        "planner",
        (
            "infra/plan/kv_cache.py",
            "infra/plan/budget.py",
            "infra/plan/sizing.py",
            "infra/plan/catalog.py",
            "infra/plan/frontdoor.py",
            "infra/plan/liveness.py",
            "infra/plan/monitoring.py",
        ),
        (
            "tests/plan/test_budget.py",
            "tests/plan/test_frontdoor.py",
            "tests/plan/test_liveness.py",
            "tests/plan/test_monitoring_plan.py",
            "tests/plan/test_rules.py",
            "tests/plan/test_sizing.py",
            "tests/plan/test_config.py",
            "tests/plan/test_buying_guide.py",
        ),
    ),
    Group(
        "config",
        ("infra/plan/config.py", "infra/plan/rules.py", "infra/plan/config_fixes.py"),
        (
            "tests/plan/test_rules.py",
            "tests/plan/test_config.py",
            "tests/plan/test_bad_input.py",
        ),
    ),
    Group(
        "manifests",
        (
            "components/manifests/engine.py",
            "components/manifests/gatekeeper.py",
            "components/manifests/pods.py",
            "components/manifests/lws.py",
            "components/manifests/access.py",
            "components/manifests/spec.py",
            "components/manifests/probes.py",
            "components/manifests/metrics.py",
            "components/manifests/gate.py",
        ),
        (
            "tests/components/test_manifest_fields.py",
            "tests/components/test_gatekeeper.py",
            "tests/components/test_manifests.py",
            "tests/components/test_probes.py",
            "tests/components/test_monitoring.py",
            "tests/components/test_gate.py",
            "tests/components/test_metrics_collector.py",
            "tests/components/test_pod_security.py",
        ),
    ),
    Group(
        "dashboard",
        ("components/watch.py",),
        ("tests/components/test_monitoring.py", "tests/components/test_watch.py"),
    ),
    Group("policies", ("policies/rules.py",), ("tests/policies",)),
)
CORE = tuple(f for g in GROUPS for f in g.files)


def _mutmut_config(group: Group, files: list[str]) -> str:
    """The `[tool.mutmut]` table for one group (TOML, appended to the project's own file; a JSON
    list of strings is a TOML array)."""
    return (
        "\n[tool.mutmut]\n"
        f"source_paths = {json.dumps(['infra', 'components', 'policies'])}\n"
        f"only_mutate = {json.dumps(files)}\n"
        f"also_copy = {json.dumps(['stacks', 'docs', 'README.md', 'Pulumi.yaml'])}\n"
        f"pytest_add_cli_args = {json.dumps(['-p', 'no:cacheprovider', '-k', DESELECTED])}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(list(group.tests))}\n"
        # A mutant that loops forever (a binary search that never narrows) is a kill; give up
        # on it after a few times the tests' own run time instead of mutmut's 30.
        "timeout_multiplier = 2.0\n"
        "timeout_constant = 2.0\n"
    )


def _prepare(group: Group, files: list[str], fresh: bool) -> Path:
    work = SCRATCH / group.name
    if fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    for name in COPIED:
        source, target = REPO / name, work / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
    project = (REPO / "pyproject.toml").read_text()
    if "mutmut" in tomllib.loads(project).get("tool", {}):
        raise SystemExit("pyproject.toml has its own [tool.mutmut]; the groups here set it")
    (work / "pyproject.toml").write_text(project + _mutmut_config(group, files))
    return work


def _run_group(group: Group, files: list[str], jobs: int, fresh: bool) -> float:
    work = _prepare(group, files, fresh)
    mutmut = Path(sys.executable).parent / "mutmut"
    log = work / "mutmut.log"
    start = time.monotonic()
    print(f"::: mutants of {group.name} ({len(files)} file(s)), log in {log.relative_to(REPO)}")
    with log.open("w") as out:
        done = subprocess.run(
            [str(mutmut), "run", "--max-children", str(jobs)],
            cwd=work,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            check=False,
        )
    seconds = time.monotonic() - start
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"mutmut failed for {group.name} (exit {done.returncode}):\n{tail}")
    print(f"::: mutants of {group.name} took {seconds:.0f} s")
    return seconds


def _changed_since(ref: str) -> set[str]:
    done = subprocess.run(
        ["git", "diff", "--name-only", f"{ref}...HEAD", "--"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"git diff against {ref} failed: {done.stderr.strip()}")
    return set(done.stdout.split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make mutants", description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="pure-core files to mutate (default: all)")
    parser.add_argument(
        "--since",
        metavar="REF",
        help="only the pure-core files changed since the merge base with REF (a pull request)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--min-score", type=float, default=90.0)
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the last run's results that mutmut still trusts (it reruns what a change to "
        "the code or the tests may have changed)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="report the last run without running"
    )
    args = parser.parse_args(argv)
    wanted = [str(Path(f)) for f in args.files] or list(CORE)
    if args.since:
        changed = _changed_since(args.since)
        wanted = [f for f in wanted if f in changed]
        if not wanted:
            print(f"no pure-core file changed since {args.since}: nothing to mutate")
            return 0
        print(f"pure-core files changed since {args.since}: {', '.join(wanted)}")
    unknown = [f for f in wanted if f not in CORE]
    if unknown:
        parser.error(f"not in the pure core: {', '.join(unknown)} (choose from {', '.join(CORE)})")

    timings: dict[str, float] = {}
    outcomes: list[Outcome] = []
    for group in GROUPS:
        files = [f for f in group.files if f in wanted]
        if not files:
            continue
        if not args.report_only:
            timings[group.name] = _run_group(group, files, args.jobs, fresh=not args.keep)
        outcomes += collect(SCRATCH / group.name, REPO, files)

    equivalent = load_equivalent(EQUIVALENT)
    whole = not args.files and not args.since
    text, ok = render(outcomes, equivalent, timings, args.min_score, whole_core=whole)
    print(text)
    SCRATCH.mkdir(exist_ok=True)
    (SCRATCH / "report.txt").write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
