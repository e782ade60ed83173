"""Checks on the GitHub Actions delivery pipeline in `.github/workflows/`: GitHub's workflow
schema and zizmor (auditor persona; an inline ignore counts only with a reason) from the tools
virtualenv, then the pipeline's own rules, one test each, with the environment, role, passphrase
and runner names `infra.bootstrap.access` gives the bootstrap."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.bootstrap.access import (
    DEPLOY_STACKS,
    PREVIEW_ENVIRONMENT,
    PREVIEW_STACK,
    PROD_PREVIEW_ENVIRONMENT,
    PROD_UNPLANNED_ENVIRONMENT,
    STACK_OF_ENVIRONMENT,
    passphrase_secret,
    role_variable,
    runner_variable,
)
from infra.bootstrap.access import WORKFLOW_OF_ENVIRONMENT as TRUSTED_WORKFLOW
from infra.plan.stackfile import stack_names
from tools.venvs import pinned

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS_DIR = REPO / ".github" / "workflows"
PR_WORKFLOW = WORKFLOWS_DIR / "pr.yml"
DEPLOY_WORKFLOW = WORKFLOWS_DIR / "deploy.yml"
PROD_WORKFLOW = WORKFLOWS_DIR / "deploy-prod.yml"
#: dev's update and prod's preview and update, each environment in a file of its own (why: the
#: runner groups' section below).
DEPLOY_WORKFLOWS = (DEPLOY_WORKFLOW, PROD_WORKFLOW)
#: The files that run Pulumi: the pull requests' preview and the deploys.
PIPELINE = (PR_WORKFLOW, *DEPLOY_WORKFLOWS)
MAIN_REF_CONDITION = "github.ref == 'refs/heads/main'"
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
VERSION_COMMENT_RE = re.compile(r"^v\d+\.\d+\.\d+$")
USES_LINE_RE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)\s*(?:#\s*(?P<comment>.*?))?\s*$")
#: The repository variable naming each environment's runner label (why one each: the runner test).
RUNNER_VARIABLES = {env: runner_variable(env) for env in STACK_OF_ENVIRONMENT}
#: Environments that are an approval and nothing else (no role, secret or runner of theirs), each
#: with the stack whose file runs it.
APPROVAL_ENVIRONMENTS = {PROD_UNPLANNED_ENVIRONMENT: "prod"}


def _expected_environment(path: Path, command: str, stack: str) -> str:
    """Where a Pulumi job must run: the pull requests' preview in `preview`, prod's preview in
    `preview-prod` (a read-only role of its own), every update in its stack's environment."""
    if path == PR_WORKFLOW:
        return PREVIEW_ENVIRONMENT
    if command == "preview" and stack == "prod":
        return PROD_PREVIEW_ENVIRONMENT
    return stack


UPLOAD_ACTION = "actions/upload-artifact"
DOWNLOAD_ACTION = "actions/download-artifact"
CHECKOUT_ACTION = "actions/checkout"
#: The update plan prod's preview saves and prod's update applies, and its digest file.
PLAN_FILE = "plan.json"
DIGEST_FILE = "plan.json.sha256"
#: The preview's script that hashes the plan, and the update's that checks it.
DIGEST_RUN = f"sha256sum {PLAN_FILE} > {DIGEST_FILE}"
VERIFY_RUN = "sha256sum --check"
NEEDS_OUTPUT_RE = re.compile(r"needs\.(?P<job>[A-Za-z0-9_-]+)\.outputs\.(?P<name>[A-Za-z0-9_-]+)")
STEP_OUTPUT_RE = re.compile(r"steps\.(?P<step>[A-Za-z0-9_-]+)\.outputs\.(?P<name>[A-Za-z0-9_-]+)")
ARN_RE = re.compile(r"arn:aws:iam::")
# zizmor's exit codes: 0 without findings, 10-14 by the highest severity found, else an error.
ZIZMOR_FINDING_EXIT_CODES = {0, 10, 11, 12, 13, 14}


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
    assert isinstance(on, dict), f"write the `on:` block as a mapping of events, not {on!r}"
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


def _uses(step: dict[str, Any]) -> str:
    return str(step.get("uses", "")).split("@")[0]


def _pulumi_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for step in job.get("steps", []) if _uses(step) == PULUMI_ACTION]


def _commands(job: dict[str, Any]) -> set[str]:
    return {str(step["with"].get("command")) for step in _pulumi_steps(job)}


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


#: Stack files shipped as a starting point, not as one of this project's environments: the
#: bootstrap makes their stack roles (for a `pulumi up` by hand) but no CI role, environment or
#: passphrase, so CI cannot preview them against AWS; .ci/run plans and renders each and runs its
#: program under mocks (tests/program/test_minimal_stack.py).
#: An adopter who deploys one adds its environment as dev's is (docs/deploying.md).
TEMPLATE_STACKS = {"minimal"}


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
            "--min-severity=low",
            "--format=json",
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
    # `--min-severity=low` leaves out what is below low: every finding printed blocks.
    summary = "\n".join(
        f"{finding['ident']} ({finding['determinations']['severity']}): {finding['desc']} "
        f"at {finding['locations'][0]['symbolic']['key']}"
        for finding in findings
    )
    assert not findings, f"zizmor findings:\n{summary}"


def test_every_action_pin_notes_its_release() -> None:
    """Each `uses:` is pinned to a commit (zizmor's `unpinned-uses`, run above, refuses anything
    else) and says in a comment which release that commit is, the same release wherever it
    appears."""
    problems: list[str] = []
    versions_by_pin: dict[str, set[str]] = {}
    for path in _workflow_files():
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


def _jobs_by_command(path: Path) -> dict[tuple[str, str], list[tuple[str, dict[str, Any]]]]:
    """(command, stack) -> the jobs of `path` that run it through pulumi/actions."""
    found: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for job_id, job in _load(path)["jobs"].items():
        for step in _pulumi_steps(job):
            key = (str(step["with"]["command"]), str(step["with"]["stack-name"]))
            found.setdefault(key, []).append((job_id, job))
    return found


def _references(job: dict[str, Any]) -> set[tuple[str, str]]:
    """Every `secrets.X` / `vars.X` the job's expressions read, as (kind, name)."""
    text = json.dumps(job)
    return {(m["kind"], m["name"]) for m in EXPRESSION_RE.finditer(text)}


def _aws_role_variables(job: dict[str, Any]) -> set[str]:
    roles: set[str] = set()
    for step in job.get("steps", []):
        if _uses(step) == AWS_CREDENTIALS_ACTION:
            roles |= {m["name"] for m in EXPRESSION_RE.finditer(step["with"]["role-to-assume"])}
    return roles


def _passphrase_secrets(job: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for step in job.get("steps", []):
        value = str((step.get("env") or {}).get("PULUMI_CONFIG_PASSPHRASE", ""))
        found |= {m["name"] for m in EXPRESSION_RE.finditer(value) if m["kind"] == "secrets"}
    return found


def _runner_variables(text: str) -> set[str]:
    """The `vars.<ENV>_RUNNER` names an expression reads."""
    return {
        m["name"]
        for m in EXPRESSION_RE.finditer(text)
        if m["kind"] == "vars" and m["name"].endswith("_RUNNER")
    }


def _holds_credentials(job: dict[str, Any]) -> list[str]:
    """What in a job needs an environment: a secret, a passphrase, or an OIDC token."""
    reasons = [f"secrets.{name}" for kind, name in _references(job) if kind == "secrets"]
    if "PULUMI_CONFIG_PASSPHRASE" in json.dumps(job):
        reasons.append("a Pulumi passphrase")
    if (job.get("permissions") or {}).get("id-token") == "write":
        reasons.append("id-token: write")
    return sorted(reasons)


@pytest.mark.parametrize("path", PIPELINE, ids=lambda path: path.name)
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


# -- Each Pulumi job: its environment, role, passphrase, runner, lock and CLI -----------------

#: (file, job id) of every job that runs pulumi, in any workflow file.
PULUMI_JOBS = [
    pytest.param(path, job_id, id=f"{path.name}:{job_id}")
    for path in _workflow_files()
    for job_id, job in _load(path)["jobs"].items()
    if _runs_pulumi(job)
]


@pytest.mark.parametrize("path", _workflow_files(), ids=lambda path: path.name)
def test_every_workflow_runs_the_ci_entry_point(path: Path) -> None:
    """The README and docs/deploying.md's CI section say CI runs `.ci/run`: every file runs
    exactly that (the pipeline's files, then Pulumi). A job that runs no pulumi needs no
    cluster, so no runner label of an environment's."""
    jobs = _load(path)["jobs"]
    assert _ci_jobs(jobs), f"{path.name}: no job runs `{CI_ENTRY}`"
    if path in PIPELINE:
        assert any(_runs_pulumi(job) for job in jobs.values()), f"{path.name} runs no pulumi job"
    for job_id, job in jobs.items():
        if not _runs_pulumi(job):
            runs_on = str(job.get("runs-on"))
            assert not _runner_variables(runs_on), f"{path.name} job {job_id} needs no cluster"


def _ci_jobs(jobs: dict[str, dict[str, Any]]) -> set[str]:
    return {
        job_id
        for job_id, job in jobs.items()
        if any(str(step.get("run", "")).strip() == CI_ENTRY for step in job.get("steps", []))
    }


@pytest.mark.parametrize(("path", "job_id"), PULUMI_JOBS)
def test_each_environment_uses_its_own_role_and_its_stacks_passphrase(
    path: Path, job_id: str
) -> None:
    """The names are `infra.bootstrap.access`'s: the bootstrap outputs exactly these."""
    job = _load(path)["jobs"][job_id]
    steps = _pulumi_steps(job)
    assert steps, f"{path.name} job {job_id} must run pulumi through {PULUMI_ACTION}"
    (stack,) = {str(step["with"]["stack-name"]) for step in steps}
    (command,) = {str(step["with"]["command"]) for step in steps}
    environment = _environment_name(job)
    expected = _expected_environment(path, command, stack)
    assert environment == expected, f"{path.name} job {job_id} must run in {expected}"
    assert _aws_role_variables(job) == {role_variable(environment)}, (
        f"{path.name} job {job_id} must assume vars.{role_variable(environment)}"
    )
    assert _passphrase_secrets(job) == {passphrase_secret(stack)}, (
        f"{path.name} job {job_id} must decrypt with secrets.{passphrase_secret(stack)}"
    )


@pytest.mark.parametrize(("path", "job_id"), PULUMI_JOBS)
def test_every_pulumi_job_holds_a_concurrency_group_named_after_its_stack(
    path: Path, job_id: str
) -> None:
    job = _load(path)["jobs"][job_id]
    tokens = _group_tokens(job.get("concurrency"))
    for step in _pulumi_steps(job):
        stack = str(step["with"]["stack-name"])
        assert stack in tokens, (
            f"{path.name} job {job_id}: concurrency group {job.get('concurrency')!r} "
            f"does not name its stack {stack!r}"
        )
        if step["with"]["command"] == "up":
            assert job["concurrency"].get("cancel-in-progress") is False, (
                f"{path.name} job {job_id}: an update must never be cancelled midway"
            )


@pytest.mark.parametrize(("path", "job_id"), PULUMI_JOBS)
def test_every_pulumi_job_needs_the_ci_entry_point_and_runs_the_pinned_cli(
    path: Path, job_id: str
) -> None:
    """After `.ci/run`, and the CLI at the `pulumi` SDK's pin in requirements.txt."""
    jobs = _load(path)["jobs"]
    needs = jobs[job_id].get("needs", [])
    needs = [needs] if isinstance(needs, str) else needs
    assert _ci_jobs(jobs) & set(needs), f"{path.name} job {job_id} must need {_ci_jobs(jobs)}"
    pin = pinned(REPO / "requirements.txt", "pulumi")
    for step in _pulumi_steps(jobs[job_id]):
        assert str(step["with"].get("pulumi-version")) == pin, (
            f"{path.name} job {job_id}: pulumi-version must be {pin}, the SDK pin"
        )


@pytest.mark.parametrize(("path", "job_id"), PULUMI_JOBS)
def test_every_pulumi_job_runs_on_its_environments_own_runner(path: Path, job_id: str) -> None:
    """`endpointPublicAccessCidrs` admits listed ranges only; hosted runners have no fixed one.
    And one label per environment: a job runs on its environment's variable and no other's, and
    no two runner groups share a label (prod's preview shares prod's: it runs from prod's file on
    `main` and must reach prod's cluster), tests/bootstrap/test_access.py's names.
    On a hosted runner an update would create the cluster, then fail on every Kubernetes
    object: a deploy job stops first instead. A pull-request preview may run there, since the
    dev stack has no cluster before its first deploy."""
    job = _load(path)["jobs"][job_id]
    runs_on, environment = str(job.get("runs-on")), _environment_name(job)
    assert environment in RUNNER_VARIABLES, f"{path.name} job {job_id}: no environment"
    variable = RUNNER_VARIABLES[environment]
    assert _runner_variables(runs_on) == {variable}, (
        f"{path.name} job {job_id} runs in {environment} on {runs_on!r}, not on vars.{variable}"
    )
    if path not in DEPLOY_WORKFLOWS:
        return
    first = job["steps"][0]
    assert first.get("env", {}).get(variable) == f"${{{{ vars.{variable} }}}}", (
        f"{path.name} job {job_id} must check {variable} in its first step"
    )
    script = first["run"]
    assert f'[ -z "${variable}" ]' in script and "exit 1" in script, script
    assert variable in script.split("::error::", 1)[1], script


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


# -- Environments: the bootstrap's, each in the file its role trusts -------------------------


def test_the_workflows_environments_are_the_bootstraps_each_in_the_file_its_role_trusts() -> None:
    """The roles trust `sub` values that name the workflow file (`job_workflow_ref`, under the
    repository's subject template, infra/bootstrap/access.py): a job in an environment from any
    other file would get no role, so each environment's jobs must be in its trusted file (the
    triggers' tests below hold the deploy files to `main`, the ref the trusts name). With each
    Pulumi job on its own environment's runner label and no other job on one (the tests above),
    each file so runs one runner group's jobs (prod's preview and approval are prod's), and each
    deploy group's jobs run from one file: the one file that group admits."""
    found: dict[str, set[str]] = {}
    for path in _workflow_files():
        for job in _load(path)["jobs"].values():
            if _environment_name(job):
                found.setdefault(str(_environment_name(job)), set()).add(path.name)
    trusted = {env: {workflow} for env, (workflow, _) in TRUSTED_WORKFLOW.items()}
    approvals = {env: {TRUSTED_WORKFLOW[stack][0]} for env, stack in APPROVAL_ENVIRONMENTS.items()}
    assert found == trusted | approvals, found
    assert set(found) - set(APPROVAL_ENVIRONMENTS) == set(STACK_OF_ENVIRONMENT)
    # That each is a CI role's: tests/bootstrap/test_access.py.
    # An approval-only environment is no role's: its jobs hold nothing (see the routing test).
    assert not set(APPROVAL_ENVIRONMENTS) & set(STACK_OF_ENVIRONMENT)


def test_every_stack_file_is_previewed_before_it_is_applied() -> None:
    """dev on every pull request; every other stack in its deploy workflow, before its update."""
    stacks = set(stack_names())
    pr = _load(PR_WORKFLOW)
    assert "pull_request" in _triggers(pr), "pr.yml must run on pull requests"
    previewed: set[str] = set()
    for job_id, job in pr["jobs"].items():
        for step in _pulumi_steps(job):
            inputs = step["with"]
            assert inputs.get("comment-on-pr") is True, f"pr.yml job {job_id} must comment"
            assert inputs.get("policyPacks"), f"pr.yml job {job_id} must run the policy pack"
            previewed.add(str(inputs["stack-name"]))
    assert previewed == {PREVIEW_STACK}, f"pr.yml previews {sorted(previewed)}"
    for path in DEPLOY_WORKFLOWS:
        jobs = _load(path)["jobs"]
        for job_id, job in jobs.items():
            for step in _pulumi_steps(job):
                stack = str(step["with"]["stack-name"])
                if step["with"]["command"] == "preview":
                    assert step["with"].get("policyPacks"), f"{path.name} {job_id}: policy pack"
                    previewed.add(stack)
                elif stack != PREVIEW_STACK:
                    before = {
                        str(s["with"]["stack-name"])
                        for needed in job.get("needs", [])
                        for s in _pulumi_steps(jobs.get(needed, {}))
                        if s["with"]["command"] == "preview"
                    }
                    assert stack in before, f"{path.name} {job_id} applies {stack} unpreviewed"
    environments = stacks - TEMPLATE_STACKS
    assert environments == previewed, f"stacks/ has {sorted(stacks)}, previewed {sorted(previewed)}"
    assert environments <= {PREVIEW_STACK, *DEPLOY_STACKS}, "a stack without a CI environment"


# -- Pull requests reach no deploy role, environment or runner --------------------------------

#: All a pull request's jobs may read: the preview's role and runner, dev's passphrase. A deploy
#: role's variable or a deploy runner's label is outside it.
PULL_REQUEST_READS = {
    ("secrets", passphrase_secret(PREVIEW_STACK)),
    ("secrets", "PULUMI_ACCESS_TOKEN"),
    ("vars", role_variable(PREVIEW_ENVIRONMENT)),
    ("vars", "AWS_REGION"),
    ("vars", "PULUMI_BACKEND_URL"),
    ("vars", runner_variable(PREVIEW_ENVIRONMENT)),
}


def _pull_request_problems(job: dict[str, Any]) -> list[str]:
    """What in a job of a pull request's workflow (or above its jobs) reaches past dev's
    preview: another environment, anything read outside `PULL_REQUEST_READS`, an IAM ARN
    written out (which would bypass the variables), pulumi on another stack or command, or prod
    named in a run step."""
    problems = []
    environment = _environment_name(job)
    if environment not in (None, PREVIEW_ENVIRONMENT):
        problems.append(f"runs in environment {environment!r}")
    extra = _references(job) - PULL_REQUEST_READS
    if extra:
        problems.append(f"reads {sorted(f'{k}.{n}' for k, n in extra)}")
    if ARN_RE.search(json.dumps(job)):
        problems.append("names an IAM ARN")
    for step in _pulumi_steps(job):
        stack = str(step["with"].get("stack-name"))
        if stack != PREVIEW_STACK:
            problems.append(f"runs pulumi on stack {stack!r}")
        if step["with"].get("command") != "preview":
            problems.append(f"runs `pulumi {step['with'].get('command')}`")
    for step in job.get("steps", []):
        if re.search(r"\bprod\b", str(step.get("run", ""))):
            problems.append("names prod in a run step")
    return problems


def test_no_pull_request_job_can_reach_prod_or_a_deploy_role_or_runner() -> None:
    """Pull requests run code they control: they get the preview environment and dev only, in
    each job and in what the workflow sets above its jobs (a workflow-wide `env:`, `runs-on`)."""
    pr_workflows = [p for p in _workflow_files() if PULL_REQUEST_EVENTS & set(_triggers(_load(p)))]
    assert PR_WORKFLOW in pr_workflows
    problems = [
        f"{path.name} job {job_id} {problem}"
        for path in pr_workflows
        for job_id, job in {"(workflow)": _load(path), **_load(path)["jobs"]}.items()
        for problem in _pull_request_problems({k: v for k, v in job.items() if k != "jobs"})
    ]
    assert not problems, "\n".join(problems)


#: A job with each way into a deploy, each of which the rule above must see.
REACHING_JOBS = {
    "prod role": {
        "steps": [
            {
                "uses": f"{AWS_CREDENTIALS_ACTION}@{'0' * 40}",
                "with": {"role-to-assume": "${{ vars.AWS_PROD_ROLE_ARN }}"},
            }
        ]
    },
    "dev role in an env": {"env": {"ROLE": "${{ vars.AWS_DEV_ROLE_ARN }}"}},
    "literal ARN": {"steps": [{"with": {"role-to-assume": "arn:aws:iam::123456789012:role/x"}}]},
    "prod runner": {"runs-on": "${{ vars.PROD_RUNNER }}"},
    "prod environment": {"environment": {"name": "prod"}},
    "dev environment": {"environment": "dev"},
    "prod preview environment": {"environment": PROD_PREVIEW_ENVIRONMENT},
    "prod's unplanned approval": {"environment": PROD_UNPLANNED_ENVIRONMENT},
    "prod preview role": {"env": {"ROLE": "${{ vars.AWS_PREVIEW_PROD_ROLE_ARN }}"}},
}


@pytest.mark.parametrize("job", REACHING_JOBS.values(), ids=list(REACHING_JOBS))
def test_the_pull_request_rule_sees_each_way_into_a_deploy(job: dict[str, Any]) -> None:
    """The rule above is not vacuous: each seeded job is caught (the real preview is not)."""
    assert _pull_request_problems(job)


# -- Prod by hand, dev on every push; one environment per workflow file ------------------------
#
# A runner group admits workflow files (`<owner>/<repo>/.github/workflows/<file>@<ref>`, GitHub
# docs "Managing access to self-hosted runners using groups", read 2026-12-03): prod's group can
# admit prod's file only if that file runs nothing but prod's jobs, and a pull request's file must
# name nothing a deploy group serves.


def test_prod_is_previewed_then_applied_only_by_hand_through_its_protected_environment() -> None:
    """Prod's file previews and updates prod, each job on `workflow_dispatch`; dev's file updates
    dev on pushes to main. Each job's environment, role and wait for the tests are the per-job
    tests' above, its wait for the preview the stack files' test's; prod's trigger, branch,
    runners and roles are `_prod_file_problems`' (below)."""
    problems = _prod_file_problems(_load(PROD_WORKFLOW))
    assert not problems, "\n".join(f"{PROD_WORKFLOW.name} {problem}" for problem in problems)
    jobs_by_command = _jobs_by_command(PROD_WORKFLOW)
    assert set(jobs_by_command) == {("preview", "prod"), ("up", "prod")}, (
        f"{PROD_WORKFLOW.name} runs {sorted(jobs_by_command)}"
    )
    ((preview_id, preview),) = jobs_by_command[("preview", "prod")]
    for job_id, job in (*jobs_by_command[("up", "prod")], (preview_id, preview)):
        condition = str(job.get("if", ""))
        assert "github.event_name == 'workflow_dispatch'" in condition, (
            f"job {job_id} must run only on workflow_dispatch, its condition is {condition!r}"
        )
    (credentials,) = [s for s in preview["steps"] if _uses(s) == AWS_CREDENTIALS_ACTION]
    assert int(credentials["with"].get("role-duration-seconds", 3600)) <= 3600, preview_id
    (preview_step,) = _pulumi_steps(preview)
    assert preview_step["with"].get("comment-on-summary") is True, f"{preview_id} must summarise"

    assert _triggers(_load(DEPLOY_WORKFLOW)) == {"push": {"branches": ["main"]}}, (
        f"{DEPLOY_WORKFLOW.name} must run on pushes to main and nothing else"
    )
    jobs_by_command = _jobs_by_command(DEPLOY_WORKFLOW)
    assert set(jobs_by_command) == {("up", "dev")}, (
        f"{DEPLOY_WORKFLOW.name} runs {sorted(jobs_by_command)}"
    )
    ((dev_id, dev),) = jobs_by_command[("up", "dev")]
    assert str(dev.get("if")) == "github.event_name == 'push'", f"{dev_id} runs on pushes only"


def _prod_file_problems(workflow: dict[str, Any]) -> list[str]:
    """Prod's file: run by hand only, every job on main only, on prod's runners and roles alone
    (which environments its jobs run in: the environments' test above)."""
    problems = []
    triggers = set(_triggers(workflow))
    if triggers != {"workflow_dispatch"}:
        problems.append(f"is triggered by {sorted(triggers)}, not workflow_dispatch alone")
    prod_roles = {role_variable("prod"), role_variable(PROD_PREVIEW_ENVIRONMENT)}
    for job_id, job in workflow.get("jobs", {}).items():
        condition = str(job.get("if", ""))
        if MAIN_REF_CONDITION not in condition or "||" in condition:
            problems.append(f"job {job_id} runs off main (its condition is {condition!r})")
        runners = _runner_variables(json.dumps(job)) - {RUNNER_VARIABLES["prod"]}
        if runners:
            problems.append(f"job {job_id} names the runner label(s) {sorted(runners)}")
        roles = _aws_role_variables(job) - prod_roles
        if roles:
            problems.append(f"job {job_id} assumes {sorted(roles)}")
        # Only the updates hold prod's deploy role: the preview runs in an environment of its
        # own, whose role reads (infra/bootstrap/access.py), so a preview job's token, whatever
        # the job runs, is no key to the deploy role.
        commands = _commands(job)
        if role_variable("prod") in _aws_role_variables(job) and commands != {"up"}:
            problems.append(f"job {job_id} holds prod's deploy role to run {sorted(commands)}")
    return problems


def test_the_file_rules_catch_a_dev_job_in_prods_file() -> None:
    """`_prod_file_problems` is not vacuous: each seeded workflow is caught."""
    dev_jobs = _load(DEPLOY_WORKFLOW)["jobs"]
    prod = _load(PROD_WORKFLOW)

    with_dev = {**prod, "jobs": {**prod["jobs"], "up-dev": dev_jobs["up-dev"]}}
    assert {
        f"job up-dev names the runner label(s) ['{runner_variable('dev')}']",
        f"job up-dev assumes ['{role_variable('dev')}']",
    } <= set(_prod_file_problems(with_dev))

    # The preview as it was: in `prod`, as prod's deploy role, for two hours.
    old_preview = json.loads(
        json.dumps(prod["jobs"]["preview-prod"]).replace(
            "AWS_PREVIEW_PROD_ROLE_ARN", "AWS_PROD_ROLE_ARN"
        )
    )
    deploy_role_preview = {**prod, "jobs": {**prod["jobs"], "preview-prod": old_preview}}
    assert any("holds prod's deploy role" in p for p in _prod_file_problems(deploy_role_preview))

    pushed = {**prod, "on": {"workflow_dispatch": None, "push": {"branches": ["main"]}}}
    pushed.pop(True, None)
    assert _prod_file_problems(pushed), "a push trigger on prod's file must be caught"

    unguarded = {
        **prod,
        "jobs": {
            job_id: {key: value for key, value in job.items() if key != "if"}
            for job_id, job in prod["jobs"].items()
        },
    }
    assert _prod_file_problems(unguarded), "a prod job without the main condition must be caught"


# -- Prod applies the plan that was previewed and approved ------------------------------------


def _prod_jobs() -> tuple[str, str, str, str]:
    """The ids of prod's preview, its update with the plan, the approval-only job and the update
    without the plan."""
    jobs = _load(PROD_WORKFLOW)["jobs"]
    by_command = _jobs_by_command(PROD_WORKFLOW)
    ((preview, _),) = by_command.get(("preview", "prod"), [])
    (planned,) = [
        job_id for job_id, job in by_command.get(("up", "prod"), []) if _applies_plan(job)
    ]
    (approval,) = [
        job_id
        for job_id, job in jobs.items()
        if _environment_name(job) == PROD_UNPLANNED_ENVIRONMENT
    ]
    (unplanned,) = [job_id for job_id, job in jobs.items() if approval in job.get("needs", [])]
    return preview, planned, approval, unplanned


def _applies_plan(job: dict[str, Any]) -> bool:
    return any(step["with"].get("plan") == PLAN_FILE for step in _pulumi_steps(job))


def _step(job: dict[str, Any], uses: str = "", runs: str = "") -> tuple[int, dict[str, Any]]:
    """The index of the one step of `job` that uses the action `uses` or whose script runs
    `runs`, and the step."""
    matches = [
        (i, step)
        for i, step in enumerate(job["steps"])
        if (uses and _uses(step) == uses) or (runs and runs in str(step.get("run", "")))
    ]
    assert len(matches) == 1, f"expected one step that {uses or runs}, found {len(matches)}"
    return matches[0]


def test_prod_applies_the_plan_its_approved_preview_saved_and_checks_its_digest() -> None:
    """preview-prod saves `plan.json` (`--save-plan`), reports its SHA-256 as a job output and
    uploads both under this commit's name; up-prod, behind the prod approval, downloads that
    artifact of the same run, checks it against the reported digest, then `up --plan` it."""
    preview_id, update_id, _, _ = _prod_jobs()  # the update: the one that applies `plan.json`
    preview, update = (_load(PROD_WORKFLOW)["jobs"][i] for i in (preview_id, update_id))
    # That it needs preview-prod and waits in `prod` for its reviewers: the tests above.

    # The preview saves the plan (pulumi/actions v7.0.0: `plan` on `preview` is --save-plan).
    pulumi_at, pulumi = _step(preview, uses=PULUMI_ACTION)
    assert pulumi["with"].get("plan") == PLAN_FILE, f"{preview_id} must save the plan"
    digest_at, digest = _step(preview, runs=DIGEST_RUN)
    assert digest_at > pulumi_at, f"{preview_id} hashes the plan before it exists"
    outputs = {
        name: STEP_OUTPUT_RE.search(str(value)) for name, value in preview["outputs"].items()
    }
    reported = [
        name for name, m in outputs.items() if m and m["step"] == digest["id"] and m["name"]
    ]
    assert len(reported) == 1, f"{preview_id} must report the digest step's output: {outputs}"
    upload_at, upload = _step(preview, uses=UPLOAD_ACTION)
    upload = upload["with"]
    assert upload_at > digest_at, f"{preview_id} uploads before it hashes"
    paths = {line.strip() for line in str(upload["path"]).splitlines()} - {""}
    assert paths == {PLAN_FILE, DIGEST_FILE}, upload
    assert upload.get("if-no-files-found") == "error", f"{preview_id}: a missing plan must fail"
    assert "${{ github.sha }}" in str(upload["name"]), "the artifact must name its commit"

    # The update downloads that artifact from this run, checks it, applies it.
    download_at, download = _step(update, uses=DOWNLOAD_ACTION)
    download = download["with"]
    assert download["name"] == upload["name"], f"{update_id} must download {upload['name']}"
    assert not {"run-id", "github-token", "repository"} & set(download), (
        f"{update_id} must take the plan from this run, not another's: {download}"
    )
    verify_at, verify = _step(update, runs=VERIFY_RUN)
    expected = [
        m
        for value in (verify.get("env") or {}).values()
        if (m := NEEDS_OUTPUT_RE.search(str(value)))
    ]
    assert [(m["job"], m["name"]) for m in expected] == [(preview_id, reported[0])], (
        f"{update_id} must check against needs.{preview_id}.outputs.{reported[0]}"
    )
    assert "${{" not in str(verify["run"]), "the digest reaches the script through env only"
    credentials_at, _ = _step(update, uses=AWS_CREDENTIALS_ACTION)
    pulumi_at, _ = _step(update, uses=PULUMI_ACTION)
    assert download_at < verify_at < credentials_at < pulumi_at, (
        f"{update_id} must download, check, then assume the role and apply"
    )
    # Both jobs build the run's own commit, the one the artifact is named after.
    for job_id, job in ((preview_id, preview), (update_id, update)):
        for step in job["steps"]:
            if _uses(step) == CHECKOUT_ACTION:
                assert "ref" not in (step.get("with") or {}), f"{job_id} checks out another ref"


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_digest_check_applies_only_the_plan_the_preview_reported(tmp_path: Path) -> None:
    """The two shell steps, run as GitHub runs them (`bash -e -o pipefail`): the preview's
    digest reaches the update, and a changed plan, a digest file rewritten to match it, or no
    reported digest stops the update."""
    preview_id, update_id, _, _ = _prod_jobs()
    jobs = _load(PROD_WORKFLOW)["jobs"]
    digest_script = _step(jobs[preview_id], runs=DIGEST_RUN)[1]["run"]
    verify = _step(jobs[update_id], runs=VERIFY_RUN)[1]
    (variable,) = verify["env"]
    plan = tmp_path / PLAN_FILE
    plan.write_text('{"resourcePlans": {}}\n')
    output, summary = tmp_path / "output", tmp_path / "summary"
    made = _bash(
        digest_script,
        tmp_path,
        {"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_SHA": "abc"},
    )
    assert made.returncode == 0, made.stderr
    sha = hashlib.sha256(plan.read_bytes()).hexdigest()
    assert output.read_text() == f"sha256={sha}\n"
    assert sha in summary.read_text()

    def check(expected: str) -> subprocess.CompletedProcess[str]:
        return _bash(verify["run"], tmp_path, {variable: expected})

    assert check(sha).returncode == 0, check(sha).stdout + check(sha).stderr
    assert check("").returncode != 0, "no reported digest must stop the update"
    assert check("0" * 64).returncode != 0, "another digest must stop the update"
    plan.write_text('{"resourcePlans": {"urn": "delete"}}\n')
    assert check(sha).returncode != 0, "a changed plan must stop the update"
    digest_file = tmp_path / DIGEST_FILE
    digest_file.write_text(f"{hashlib.sha256(plan.read_bytes()).hexdigest()}  {PLAN_FILE}\n")
    tampered = check(sha)
    assert tampered.returncode != 0, "a digest file rewritten to match must not pass"
    assert "not applying it" in tampered.stdout + tampered.stderr


# -- A plan that up --plan cannot apply: the first deploy, a replaced Kubernetes provider ------
#
# With no cluster (or a new one) the Kubernetes provider's configuration is unknown at preview,
# the plan holds the Helm charts without their objects, and `up --plan` stops at the first one
# (infra/saved_plan.py). preview-prod's check routes the run: up-prod applies a plan it can; a
# plan it cannot goes to an update without the plan, only after its own approval.

PLAN_CHECK = "python -m infra.saved_plan plan.json"
ROUTE_RE = re.compile(r"needs\.(?P<job>[A-Za-z0-9_-]+)\.outputs\.plan-applies == '(?P<value>\w+)'")
FIRST_DEPLOY_PLAN = REPO / "tests" / "fixtures" / "plans" / "prod-first-deploy.json"


def _route(job: dict[str, Any]) -> tuple[str, str] | None:
    """(job, value) of the one `needs.<job>.outputs.plan-applies == '<value>'` in the job's `if`."""
    found = [(m["job"], m["value"]) for m in ROUTE_RE.finditer(str(job.get("if", "")))]
    return found[0] if len(found) == 1 else None


def _routing_problems(workflow: dict[str, Any]) -> list[str]:
    """Prod's updates, routed by the plan check: the plan applied only where it can be, and an
    update without it only after an approval-only job in `prod-unplanned` on the same route."""
    jobs = workflow["jobs"]
    previews = [job_id for job_id, job in jobs.items() if "preview" in _commands(job)]
    if len(previews) != 1:
        return [f"has {len(previews)} preview jobs"]
    preview_id = previews[0]
    preview = jobs[preview_id]
    steps = preview["steps"]
    problems = []
    checks = [i for i, step in enumerate(steps) if str(step.get("run", "")).strip() == PLAN_CHECK]
    pulumi_at = next(i for i, step in enumerate(steps) if _uses(step) == PULUMI_ACTION)
    if len(checks) != 1 or checks[0] < pulumi_at:
        problems.append(f"{preview_id} must run `{PLAN_CHECK}` once, after the preview")
    else:
        output = STEP_OUTPUT_RE.search(str((preview.get("outputs") or {}).get("plan-applies")))
        check_id = steps[checks[0]].get("id")
        if not output or (output["step"], output["name"]) != (check_id, "applies"):
            problems.append(f"{preview_id} must report the check's `applies` as `plan-applies`")
    updates = {job_id: job for job_id, job in jobs.items() if "up" in _commands(job)}
    planned = [job_id for job_id, job in updates.items() if _applies_plan(job)]
    unplanned = [job_id for job_id in updates if job_id not in planned]
    if len(planned) != 1 or len(unplanned) != 1:
        return [*problems, f"needs one update with the plan and one without: {sorted(updates)}"]
    if _route(updates[planned[0]]) != (preview_id, "true"):
        problems.append(f"{planned[0]} must run only when {preview_id}'s plan-applies is 'true'")
    update = updates[unplanned[0]]
    if _route(update) != (preview_id, "false"):
        problems.append(f"{unplanned[0]} must run only when {preview_id}'s plan-applies is 'false'")
    approvals = [
        needed
        for needed in update.get("needs", [])
        if _environment_name(jobs.get(needed, {})) == PROD_UNPLANNED_ENVIRONMENT
    ]
    if len(approvals) != 1:
        problems.append(f"{unplanned[0]} must need a job in `{PROD_UNPLANNED_ENVIRONMENT}`")
        return problems
    approval_id = approvals[0]
    approval = jobs[approval_id]
    if _route(approval) != (preview_id, "false"):
        problems.append(f"{approval_id} must run only when {preview_id}'s plan-applies is 'false'")
    if _holds_credentials(approval) or _runs_pulumi(approval) or approval.get("permissions") != {}:
        problems.append(f"{approval_id} must be an approval only: no secret, token or pulumi")
    if _runner_variables(json.dumps(approval)):
        problems.append(f"{approval_id} must not run on a deploy runner")
    return problems


def test_prods_updates_are_routed_by_whether_the_saved_plan_can_be_applied() -> None:
    problems = _routing_problems(_load(PROD_WORKFLOW))
    assert not problems, "\n".join(problems)


def test_the_routing_rule_catches_an_unplanned_update_without_its_own_approval() -> None:
    prod = _load(PROD_WORKFLOW)
    _, planned_id, approval_id, unplanned_id = _prod_jobs()

    def seeded(job_id: str, **changes: Any) -> dict[str, Any]:
        job = {**copy.deepcopy(prod["jobs"][job_id]), **changes}
        return {**prod, "jobs": {**prod["jobs"], job_id: job}}

    unplanned = prod["jobs"][unplanned_id]
    no_approval = [n for n in unplanned["needs"] if n != approval_id]
    assert _routing_problems(seeded(unplanned_id, needs=no_approval))
    assert _routing_problems(
        seeded(unplanned_id, **{"if": unplanned["if"].replace("'false'", "'true'")})
    )
    approval = prod["jobs"][approval_id]
    assert _routing_problems(seeded(approval_id, environment="prod"))
    assert _routing_problems(seeded(approval_id, permissions={"id-token": "write"}))
    assert _routing_problems(seeded(approval_id, **{"if": approval["if"].split(" &&")[0]}))
    planned = prod["jobs"][planned_id]
    assert _routing_problems(seeded(planned_id, **{"if": planned["if"].split(" &&")[0]}))


def _routed_jobs(plan: dict[str, Any], tmp_path: Path) -> set[str]:
    """The jobs of prod's file that run after preview-prod's own check step read `plan`."""
    prod = _load(PROD_WORKFLOW)
    preview_id = _prod_jobs()[0]
    _, check = _step(prod["jobs"][preview_id], runs=PLAN_CHECK)
    (tmp_path / PLAN_FILE).write_text(json.dumps(plan), encoding="utf-8")
    output = tmp_path / "output"
    output.unlink(missing_ok=True)
    ran = _bash(
        check["run"],
        tmp_path,
        {
            # The step's `python`: this interpreter's, whose virtualenv has the program's packages.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        },
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (value,) = re.findall(r"^applies=(\w+)$", output.read_text(), flags=re.MULTILINE)
    return {
        job_id
        for job_id, job in prod["jobs"].items()
        if (route := _route(job)) and route == (preview_id, value)
    }


def test_a_first_deploy_and_a_replaced_provider_take_the_approved_update_without_the_plan(
    tmp_path: Path,
) -> None:
    """The first deploy's saved plan (tests/fixtures/plans), run through preview-prod's own step:
    up-prod does not run, the approval in `prod-unplanned` and the update without the plan do.
    The same for a later plan whose provider is replaced; a later plan that holds the charts'
    objects goes to up-prod alone."""
    _, planned_id, approval_id, unplanned_id = _prod_jobs()
    first = json.loads(FIRST_DEPLOY_PLAN.read_text(encoding="utf-8"))
    assert _routed_jobs(first, tmp_path) == {approval_id, unplanned_id}

    later = copy.deepcopy(first)
    for urn, entry in later["resourcePlans"].items():
        entry["steps"] = ["same"]
        if urn.endswith("kubernetes:helm.sh/v4:Chart::lws-chart"):
            chart = urn
    later["resourcePlans"][chart.replace("::lws-chart", "$kubernetes:apps/v1:Deployment::lws")] = {
        "goal": {
            "type": "kubernetes:apps/v1:Deployment",
            "name": "lws",
            "custom": True,
            "parent": chart,
        },
        "steps": ["update"],
    }
    assert _routed_jobs(later, tmp_path) == {planned_id}

    replaced = copy.deepcopy(later)
    for urn, entry in replaced["resourcePlans"].items():
        if "$pulumi:providers:kubernetes::" in urn:
            entry["steps"] = ["create-replacement", "replace", "delete-replaced"]
    assert _routed_jobs(replaced, tmp_path) == {approval_id, unplanned_id}
