"""Checks on the GitHub Actions delivery pipeline in `.github/workflows/`.

The workflows are validated against GitHub's workflow schema and audited with zizmor; both CLIs
live in a separate tools virtualenv (`requirements-tools.txt`) so that this process needs only
pytest and PyYAML. The remaining tests pin down the pipeline's own rules: every action is pinned
to a commit, prod is applied only by hand through its protected environment, no two runs update
one stack at once, and the PR preview covers every stack file in `stacks/`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS_DIR = REPO / ".github" / "workflows"
PR_WORKFLOW = WORKFLOWS_DIR / "pr.yml"
DEPLOY_WORKFLOW = WORKFLOWS_DIR / "deploy.yml"
STACKS_DIR = REPO / "stacks"
TOOLS_BIN = REPO / ".venv-tools" / "bin"
INSTALL_HINT = (
    "install the workflow linters with `python3 -m venv .venv-tools && "
    ".venv-tools/bin/pip install -r requirements-tools.txt` (run from the repository root)"
)

PULUMI_ACTION = "pulumi/actions"
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
VERSION_COMMENT_RE = re.compile(r"^v\d+\.\d+\.\d+$")
USES_LINE_RE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)\s*(?:#\s*(?P<comment>.*?))?\s*$")
MATRIX_STACK = "matrix.stack"
# zizmor's exit codes: 0 without findings, 10-14 by the highest severity found, else an error.
ZIZMOR_FINDING_EXIT_CODES = {0, 10, 11, 12, 13, 14}
SEVERITIES_AT_OR_ABOVE_LOW = {"low", "medium", "high"}


def _workflow_files() -> list[Path]:
    files = sorted([*WORKFLOWS_DIR.glob("*.yml"), *WORKFLOWS_DIR.glob("*.yaml")])
    assert files, f"no workflow files found in {WORKFLOWS_DIR}"
    return files


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name}: a workflow must be a YAML mapping"
    return data


def _triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    """The `on:` block; PyYAML reads the bare key `on` as the boolean True (YAML 1.1)."""
    on = workflow.get("on", workflow.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    assert isinstance(on, dict), f"unexpected `on:` block {on!r}"
    return on


def _tool(name: str) -> str:
    """The CLI from the tools virtualenv, else from PATH; fails (never skips) when missing."""
    local = TOOLS_BIN / name
    if local.is_file():
        return str(local)
    found = shutil.which(name)
    if found:
        return found
    pytest.fail(f"`{name}` is neither in {TOOLS_BIN} nor on PATH; {INSTALL_HINT}")


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def _pulumi_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        step
        for step in job.get("steps", [])
        if str(step.get("uses", "")).split("@")[0] == PULUMI_ACTION
    ]


def _runs_pulumi(job: dict[str, Any]) -> bool:
    if _pulumi_steps(job):
        return True
    return any(re.search(r"\bpulumi\s", str(step.get("run", ""))) for step in job.get("steps", []))


def _group_tokens(concurrency: Any) -> set[str]:
    group = concurrency.get("group", "") if isinstance(concurrency, dict) else concurrency
    return set(re.findall(r"[A-Za-z0-9_.]+", str(group or "")))


def _environment_name(job: dict[str, Any]) -> str | None:
    environment = job.get("environment")
    if isinstance(environment, dict):
        return environment.get("name")
    return environment


def _stack_files() -> set[str]:
    assert STACKS_DIR.is_dir(), f"{STACKS_DIR} is missing; the PR preview has nothing to cover"
    stacks = {
        path.name[len("Pulumi.") : -len(path.suffix)]
        for path in [*STACKS_DIR.glob("Pulumi.*.yaml"), *STACKS_DIR.glob("Pulumi.*.yml")]
    }
    assert stacks, f"no Pulumi.<stack>.yaml files in {STACKS_DIR}"
    return stacks


def test_workflows_match_the_github_workflow_schema() -> None:
    check_jsonschema = _tool("check-jsonschema")
    files = [str(path) for path in _workflow_files()]
    result = _run([check_jsonschema, "--builtin-schema", "vendor.github-workflows", *files])
    assert result.returncode == 0, (
        f"check-jsonschema rejected the workflows:\n{result.stdout}\n{result.stderr}"
    )


def test_zizmor_reports_no_findings_at_low_severity_or_above() -> None:
    zizmor = _tool("zizmor")
    result = _run(
        [
            zizmor,
            "--offline",
            "--strict-collection",
            "--min-severity",
            "low",
            "--format",
            "json",
            str(WORKFLOWS_DIR),
        ]
    )
    assert result.returncode in ZIZMOR_FINDING_EXIT_CODES, (
        f"zizmor failed (exit {result.returncode}):\n{result.stderr}"
    )
    try:
        findings = json.loads(result.stdout)
    except json.JSONDecodeError as error:
        pytest.fail(f"zizmor printed no JSON ({error}):\n{result.stdout}\n{result.stderr}")
    audited = {line for line in result.stderr.splitlines() if "completed" in line}
    assert len(audited) == len(_workflow_files()), (
        f"zizmor audited {len(audited)} workflow(s), expected every file:\n{result.stderr}"
    )
    blocking = [
        finding
        for finding in findings
        if str(finding["determinations"]["severity"]).lower() in SEVERITIES_AT_OR_ABOVE_LOW
    ]
    summary = "\n".join(
        f"{finding['ident']} ({finding['determinations']['severity']}): {finding['desc']} "
        f"at {finding['locations'][0]['symbolic']['key']}"
        for finding in blocking
    )
    assert not blocking, f"zizmor findings:\n{summary}"


def test_every_action_is_pinned_to_a_commit_with_its_version_noted() -> None:
    problems: list[str] = []
    versions_by_pin: dict[str, set[str]] = {}
    for path in _workflow_files():
        workflow = _load(path)
        for job_id, job in workflow.get("jobs", {}).items():
            refs = [job["uses"]] if "uses" in job else []
            refs += [step["uses"] for step in job.get("steps", []) if "uses" in step]
            for ref in refs:
                if ref.startswith("./"):
                    continue
                pin = ref.partition("@")[2]
                if not SHA_RE.match(pin):
                    problems.append(f"{path.name} job {job_id}: {ref} is not pinned to a commit")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = USES_LINE_RE.match(line)
            if not match or match["ref"].startswith("./"):
                continue
            comment = (match["comment"] or "").strip()
            if not VERSION_COMMENT_RE.match(comment):
                problems.append(
                    f"{path.name}:{number}: {match['ref']} needs a `# vX.Y.Z` comment naming "
                    f"the release the commit belongs to (found {comment!r})"
                )
            versions_by_pin.setdefault(match["ref"], set()).add(comment)
    problems += [
        f"{pin} is labelled with different versions {sorted(versions)}"
        for pin, versions in versions_by_pin.items()
        if len(versions) > 1
    ]
    assert not problems, "\n".join(problems)


def test_prod_is_applied_only_by_hand_through_its_protected_environment() -> None:
    deploy = _load(DEPLOY_WORKFLOW)
    triggers = _triggers(deploy)
    assert "workflow_dispatch" in triggers, "deploy.yml must offer a manual run for prod"
    assert triggers.get("push", {}).get("branches") == ["main"], (
        "deploy.yml must run on pushes to main"
    )
    jobs_by_stack: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for job_id, job in deploy["jobs"].items():
        for step in _pulumi_steps(job):
            jobs_by_stack.setdefault(step["with"]["stack-name"], []).append((job_id, job))
    assert set(jobs_by_stack) == {"dev", "prod"}, f"stacks deployed: {sorted(jobs_by_stack)}"

    (prod_id, prod), *others = jobs_by_stack["prod"]
    assert not others, "prod must be applied by exactly one job"
    assert _environment_name(prod) == "prod", f"job {prod_id} must use the `prod` environment"
    condition = str(prod.get("if", ""))
    assert "github.event_name == 'workflow_dispatch'" in condition, (
        f"job {prod_id} must run only on workflow_dispatch, its condition is {condition!r}"
    )
    assert "||" not in condition, f"job {prod_id} condition {condition!r} admits other events"
    assert "test" in prod.get("needs", []), f"job {prod_id} must wait for the tests"

    (dev_id, dev), *others = jobs_by_stack["dev"]
    assert not others, "dev must be applied by exactly one job"
    assert _environment_name(dev) == "dev", f"job {dev_id} must use the `dev` environment"
    assert "test" in dev.get("needs", []), f"job {dev_id} must wait for the tests"


@pytest.mark.parametrize("path", [PR_WORKFLOW, DEPLOY_WORKFLOW], ids=lambda path: path.name)
def test_every_pulumi_job_holds_a_concurrency_group_named_after_its_stack(path: Path) -> None:
    workflow = _load(path)
    pulumi_jobs = {job_id: job for job_id, job in workflow["jobs"].items() if _runs_pulumi(job)}
    assert pulumi_jobs, f"{path.name} runs no pulumi job"
    for job_id, job in pulumi_jobs.items():
        tokens = _group_tokens(job.get("concurrency"))
        steps = _pulumi_steps(job)
        assert steps, f"{path.name} job {job_id} must run pulumi through {PULUMI_ACTION}"
        for step in steps:
            stack = str(step["with"]["stack-name"])
            expected = MATRIX_STACK if MATRIX_STACK in stack else stack
            assert expected in tokens, (
                f"{path.name} job {job_id}: concurrency group {job.get('concurrency')!r} "
                f"does not name its stack {stack!r}"
            )
            if step["with"]["command"] == "up":
                assert job["concurrency"].get("cancel-in-progress") is False, (
                    f"{path.name} job {job_id}: an update must never be cancelled midway"
                )


def test_pr_preview_covers_every_stack_file() -> None:
    stacks = _stack_files()
    pr = _load(PR_WORKFLOW)
    assert "pull_request" in _triggers(pr), "pr.yml must run on pull requests"
    previewed: set[str] = set()
    for job_id, job in pr["jobs"].items():
        for step in _pulumi_steps(job):
            inputs = step["with"]
            assert inputs["command"] == "preview", f"pr.yml job {job_id} must only preview"
            assert inputs.get("comment-on-pr") is True, f"pr.yml job {job_id} must comment"
            assert inputs.get("policyPacks"), f"pr.yml job {job_id} must run the policy pack"
            stack = str(inputs["stack-name"])
            if MATRIX_STACK in stack:
                previewed |= {str(entry) for entry in job["strategy"]["matrix"]["stack"]}
            else:
                previewed.add(stack)
    missing = stacks - previewed
    unknown = previewed - stacks
    assert not missing, f"stacks/ has {sorted(missing)} but pr.yml does not preview them"
    assert not unknown, f"pr.yml previews {sorted(unknown)} but stacks/ has no such file"


def test_pulumi_cli_version_matches_the_pinned_sdk() -> None:
    requirements = (REPO / "requirements.txt").read_text(encoding="utf-8")
    match = re.search(r"^pulumi==(\S+)", requirements, flags=re.MULTILINE)
    assert match, "requirements.txt must pin `pulumi==<version>`"
    for path in (PR_WORKFLOW, DEPLOY_WORKFLOW):
        for job_id, job in _load(path)["jobs"].items():
            for step in _pulumi_steps(job):
                assert str(step["with"].get("pulumi-version")) == match[1], (
                    f"{path.name} job {job_id}: pulumi-version must be {match[1]}, the SDK pin"
                )
