"""Checks on the GitHub Actions delivery pipeline in `.github/workflows/`.

The workflows are validated against GitHub's workflow schema and audited with zizmor; both CLIs
live in a separate tools virtualenv (`requirements-tools.txt`) so that this process needs only
pytest and PyYAML; zizmor runs with the auditor persona, and an inline `# zizmor: ignore[...]`
counts only with a written reason. The remaining tests pin down the pipeline's own rules: every
action is pinned to a commit, every job that holds a secret or an OIDC token names a GitHub
environment, a pull-request job can reach nothing of prod's, each environment uses its own role
and passphrase (the names `infra.bootstrap.access` gives them), prod is previewed and then applied
only by hand through its protected environment, no two runs update one stack at once, and the
workflows run `.ci/run`, as the README says CI does.
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

from infra.bootstrap.access import (
    DEPLOY_STACKS,
    PREVIEW_ENVIRONMENT,
    PREVIEW_STACK,
    passphrase_secret,
    role_variable,
)

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
AWS_CREDENTIALS_ACTION = "aws-actions/configure-aws-credentials"
CI_ENTRY = "bash .ci/run"
#: Events whose runs execute code a pull request controls.
PULL_REQUEST_EVENTS = {"pull_request", "pull_request_target", "pull_request_review"}
#: `# zizmor: ignore[audit]` must be followed by ` -- <reason>` of a few words on the same line.
ZIZMOR_IGNORE_RE = re.compile(r"#\s*zizmor:\s*ignore\[(?P<audits>[^\]]*)\](?P<rest>.*)$")
JUSTIFICATION_RE = re.compile(r"^\s*--\s*\S+(?:\s+\S+){3,}")
EXPRESSION_RE = re.compile(r"\b(?P<kind>secrets|vars)\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)")
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


def test_zizmor_auditor_reports_no_findings_at_low_severity_or_above() -> None:
    """The auditor persona, which also reports what the default hides (`secrets-outside-env`)."""
    zizmor = _tool("zizmor")
    result = _run(
        [
            zizmor,
            "--offline",
            "--persona=auditor",
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


def _pulumi_jobs(path: Path) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Job id -> (job, its pulumi/actions steps), for jobs that run pulumi through the action."""
    jobs = _load(path)["jobs"]
    return {job_id: (job, _pulumi_steps(job)) for job_id, job in jobs.items() if _pulumi_steps(job)}


def _references(job: dict[str, Any]) -> set[tuple[str, str]]:
    """Every `secrets.X` / `vars.X` the job's expressions read, as (kind, name)."""
    text = json.dumps(job)
    return {(m["kind"], m["name"]) for m in EXPRESSION_RE.finditer(text)}


def _aws_role_variables(job: dict[str, Any]) -> set[str]:
    roles: set[str] = set()
    for step in job.get("steps", []):
        if str(step.get("uses", "")).split("@")[0] == AWS_CREDENTIALS_ACTION:
            roles |= {m["name"] for m in EXPRESSION_RE.finditer(step["with"]["role-to-assume"])}
    return roles


def _passphrase_secrets(job: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for step in job.get("steps", []):
        value = str((step.get("env") or {}).get("PULUMI_CONFIG_PASSPHRASE", ""))
        found |= {m["name"] for m in EXPRESSION_RE.finditer(value) if m["kind"] == "secrets"}
    return found


def _holds_credentials(job: dict[str, Any]) -> list[str]:
    """What in a job needs an environment: a secret, a passphrase, or an OIDC token."""
    reasons = [f"secrets.{name}" for kind, name in _references(job) if kind == "secrets"]
    if "PULUMI_CONFIG_PASSPHRASE" in json.dumps(job):
        reasons.append("a Pulumi passphrase")
    if (job.get("permissions") or {}).get("id-token") == "write":
        reasons.append("id-token: write")
    return sorted(reasons)


@pytest.mark.parametrize("path", [PR_WORKFLOW, DEPLOY_WORKFLOW], ids=lambda path: path.name)
def test_every_job_holding_a_secret_or_an_oidc_token_names_an_environment(path: Path) -> None:
    problems = [
        f"{path.name} job {job_id} uses {', '.join(reasons)} but names no `environment:`"
        for job_id, job in _load(path)["jobs"].items()
        if (reasons := _holds_credentials(job)) and not _environment_name(job)
    ]
    assert not problems, "\n".join(problems)


def test_the_audit_rules_see_a_job_without_environment() -> None:
    """The rule above is not vacuous: the pre-split preview job would fail it."""
    job = {
        "permissions": {"id-token": "write"},
        "steps": [{"env": {"PULUMI_CONFIG_PASSPHRASE": "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"}}],
    }
    assert _holds_credentials(job) == [
        "a Pulumi passphrase",
        "id-token: write",
        "secrets.PULUMI_CONFIG_PASSPHRASE",
    ]
    assert not _environment_name(job)


def test_no_pull_request_job_can_reach_prod() -> None:
    """Pull requests run code they control: they get the preview environment and dev only."""
    allowed = {
        ("secrets", passphrase_secret(PREVIEW_STACK)),
        ("secrets", "PULUMI_ACCESS_TOKEN"),
        ("vars", role_variable(PREVIEW_ENVIRONMENT)),
        ("vars", "AWS_REGION"),
        ("vars", "PULUMI_BACKEND_URL"),
    }
    problems: list[str] = []
    pr_workflows = [p for p in _workflow_files() if PULL_REQUEST_EVENTS & set(_triggers(_load(p)))]
    assert PR_WORKFLOW in pr_workflows
    for path in pr_workflows:
        for job_id, job in _load(path)["jobs"].items():
            where = f"{path.name} job {job_id}"
            environment = _environment_name(job)
            if environment not in (None, PREVIEW_ENVIRONMENT):
                problems.append(f"{where} runs in environment {environment!r}")
            extra = _references(job) - allowed
            if extra:
                problems.append(f"{where} reads {sorted(f'{k}.{n}' for k, n in extra)}")
            for step in _pulumi_steps(job):
                stack = str(step["with"].get("stack-name"))
                if stack != PREVIEW_STACK:
                    problems.append(f"{where} runs pulumi on stack {stack!r}")
                if step["with"].get("command") != "preview":
                    problems.append(f"{where} runs `pulumi {step['with'].get('command')}`")
            for step in job.get("steps", []):
                if re.search(r"\bprod\b", str(step.get("run", ""))):
                    problems.append(f"{where} names prod in a run step")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", [PR_WORKFLOW, DEPLOY_WORKFLOW], ids=lambda path: path.name)
def test_each_environment_uses_its_own_role_and_its_stacks_passphrase(path: Path) -> None:
    """The names are `infra.bootstrap.access`'s: the bootstrap outputs exactly these."""
    for job_id, (job, steps) in _pulumi_jobs(path).items():
        environment = _environment_name(job)
        (stack,) = {str(step["with"]["stack-name"]) for step in steps}
        expected_env = PREVIEW_ENVIRONMENT if path == PR_WORKFLOW else stack
        assert environment == expected_env, f"{path.name} job {job_id} must run in {expected_env}"
        assert _aws_role_variables(job) == {role_variable(environment)}, (
            f"{path.name} job {job_id} must assume vars.{role_variable(environment)}"
        )
        assert _passphrase_secrets(job) == {passphrase_secret(stack)}, (
            f"{path.name} job {job_id} must decrypt with secrets.{passphrase_secret(stack)}"
        )


def test_the_workflows_environments_are_the_bootstraps() -> None:
    used = {
        _environment_name(job)
        for path in _workflow_files()
        for job in _load(path)["jobs"].values()
        if _environment_name(job)
    }
    assert used == {PREVIEW_ENVIRONMENT, *DEPLOY_STACKS}


def test_prod_is_previewed_then_applied_only_by_hand_through_its_protected_environment() -> None:
    deploy = _load(DEPLOY_WORKFLOW)
    triggers = _triggers(deploy)
    assert "workflow_dispatch" in triggers, "deploy.yml must offer a manual run for prod"
    assert triggers.get("push", {}).get("branches") == ["main"], (
        "deploy.yml must run on pushes to main"
    )
    jobs_by_command: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for job_id, (job, steps) in _pulumi_jobs(DEPLOY_WORKFLOW).items():
        for step in steps:
            key = (str(step["with"]["command"]), str(step["with"]["stack-name"]))
            jobs_by_command.setdefault(key, []).append((job_id, job))
    assert set(jobs_by_command) == {("up", "dev"), ("preview", "prod"), ("up", "prod")}, (
        f"deploy.yml runs {sorted(jobs_by_command)}"
    )
    ((prod_id, prod),) = jobs_by_command[("up", "prod")]
    ((preview_id, preview),) = jobs_by_command[("preview", "prod")]
    for job_id, job in ((prod_id, prod), (preview_id, preview)):
        assert _environment_name(job) == "prod", f"job {job_id} must use the `prod` environment"
        condition = str(job.get("if", ""))
        assert "github.event_name == 'workflow_dispatch'" in condition, (
            f"job {job_id} must run only on workflow_dispatch, its condition is {condition!r}"
        )
        assert "github.ref == 'refs/heads/main'" in condition, f"job {job_id} must need main"
        assert "||" not in condition, f"job {job_id} condition {condition!r} admits other events"
        assert "test" in job.get("needs", []), f"job {job_id} must wait for the tests"
    # The diff is shown before the approval of the update.
    assert preview_id in prod.get("needs", []), f"job {prod_id} must wait for {preview_id}"
    (preview_step,) = _pulumi_steps(preview)
    assert preview_step["with"].get("comment-on-summary") is True, f"{preview_id} must summarise"

    ((dev_id, dev),) = jobs_by_command[("up", "dev")]
    assert _environment_name(dev) == "dev", f"job {dev_id} must use the `dev` environment"
    assert "test" in dev.get("needs", []), f"job {dev_id} must wait for the tests"
    assert str(dev.get("if")) == "github.event_name == 'push'", f"{dev_id} runs on pushes only"


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


def test_every_stack_file_is_previewed_before_it_is_applied() -> None:
    """dev on every pull request; every other stack in deploy.yml, before its update."""
    stacks = _stack_files()
    pr = _load(PR_WORKFLOW)
    assert "pull_request" in _triggers(pr), "pr.yml must run on pull requests"
    previewed: set[str] = set()
    for job_id, (_, steps) in _pulumi_jobs(PR_WORKFLOW).items():
        for step in steps:
            inputs = step["with"]
            assert inputs["command"] == "preview", f"pr.yml job {job_id} must only preview"
            assert inputs.get("comment-on-pr") is True, f"pr.yml job {job_id} must comment"
            assert inputs.get("policyPacks"), f"pr.yml job {job_id} must run the policy pack"
            previewed.add(str(inputs["stack-name"]))
    assert previewed == {PREVIEW_STACK}, f"pr.yml previews {sorted(previewed)}"
    deploy_jobs = _pulumi_jobs(DEPLOY_WORKFLOW)
    for job_id, (job, steps) in deploy_jobs.items():
        for step in steps:
            stack = str(step["with"]["stack-name"])
            if step["with"]["command"] == "preview":
                assert step["with"].get("policyPacks"), f"deploy.yml {job_id}: policy pack"
                previewed.add(stack)
            elif stack != PREVIEW_STACK:
                before = {
                    str(s["with"]["stack-name"])
                    for needed in job.get("needs", [])
                    for s in deploy_jobs.get(needed, ({}, []))[1]
                    if s["with"]["command"] == "preview"
                }
                assert stack in before, f"deploy.yml {job_id} applies {stack} unpreviewed"
    assert stacks == previewed, f"stacks/ has {sorted(stacks)}, previewed {sorted(previewed)}"
    assert stacks <= {PREVIEW_STACK, *DEPLOY_STACKS}, "a stack without a CI environment"


@pytest.mark.parametrize("path", [PR_WORKFLOW, DEPLOY_WORKFLOW], ids=lambda path: path.name)
def test_the_workflow_runs_ci_entry_point_before_any_pulumi_job(path: Path) -> None:
    """The README says CI runs `.ci/run`; the workflows run exactly that, then Pulumi."""
    jobs = _load(path)["jobs"]
    runners = [
        job_id
        for job_id, job in jobs.items()
        if any(str(step.get("run", "")).strip() == CI_ENTRY for step in job.get("steps", []))
    ]
    assert runners, f"{path.name}: no job runs `{CI_ENTRY}`"
    for job_id, _ in _pulumi_jobs(path).items():
        needs = jobs[job_id].get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        assert set(runners) & set(needs), f"{path.name} job {job_id} must need {runners}"


def test_every_zizmor_ignore_carries_a_reason() -> None:
    """An inline `# zizmor: ignore[audit] -- <why this is safe>`; a bare ignore fails here."""
    problems: list[str] = []
    for path in _workflow_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = ZIZMOR_IGNORE_RE.search(line)
            if match and not JUSTIFICATION_RE.match(match["rest"]):
                problems.append(f"{path.name}:{number}: {line.strip()!r} gives no reason")
    assert not problems, "\n".join(problems)
    assert JUSTIFICATION_RE.match(" -- the token is read-only and scoped to one repository")
    assert not JUSTIFICATION_RE.match(" -- fine")


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
