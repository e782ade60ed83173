"""The bootstrap program, run the way Pulumi's Python host runs it, under the recording mocks.

`runpy.run_path` on `infra/bootstrap/` with that folder as the working directory and the
repository root not importable, with its stack file's keys as Pulumi would pass them.
"""

from __future__ import annotations

import importlib
import json
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.github_ci import github_trust_policy
from components.manifests import identity, role_policies
from infra.adapters.cli import main as plan_main
from infra.adapters.wiring import NAMESPACE
from infra.bootstrap import access
from infra.bootstrap import config as bootstrap_config
from infra.plan import iam, stackfile
from infra.plan.stackfile import load_stack, stack_names
from tests.bootstrap.test_access import BUCKET, SUBJECTS
from tests.bootstrap.test_access import REPO as REPOSITORY
from tests.fakes.pulumi_host import pulumi_host
from tests.fakes.pulumi_mocks import RecordingMocks, by_type, named, one, resolve, run
from tests.program.harness import NOT_WITH_EXISTING
from tests.program.test_layout import OFFLINE_TOOLS, import_closure

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "infra" / "bootstrap"
PROJECT = "gemma-graviton-ci"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
PROVIDER = "aws:iam/openIdConnectProvider:OpenIdConnectProvider"
POLICY = "aws:iam/policy:Policy"


@pytest.fixture
def as_pulumi_host() -> Iterator[None]:
    """The host's view: cwd is the program folder, the repository root is not importable."""
    with pulumi_host(PROGRAM):
        yield


def run_bootstrap(mocks: RecordingMocks, preview: bool = False, **overrides: Any) -> None:
    document = yaml.safe_load((PROGRAM / "Pulumi.ci.yaml").read_text())
    values = {**document["config"], **{f"{PROJECT}:{k}": v for k, v in overrides.items()}}
    text = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack="ci", preview=preview,
                             monitor=mocks.monitor)  # fmt: skip
    pulumi.runtime.set_all_config(text, [])
    run(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"))


def _ci(records: list[Any], type_: str) -> list[Any]:
    """The CI's own roles (or their policies), not the stacks' roles the bootstrap makes."""
    return [r for r in by_type(records, type_) if r.name.startswith("github-")]


@pytest.mark.parametrize(
    "existing",
    [None, "arn:aws:iam::210987654321:oidc-provider/token.actions.githubusercontent.com"],
    ids=["new-provider", "existing-provider-reused"],
)
@pytest.mark.usefixtures("as_pulumi_host")
def test_provider_and_roles_trust_exactly_the_repository_environments(
    mocks: RecordingMocks, exports: dict[str, Any], existing: str | None
) -> None:
    reuse = {"githubOidcProviderArn": existing} if existing else {}
    run_bootstrap(mocks, repository=REPOSITORY, stateBucket=BUCKET, **reuse)
    if existing:
        assert by_type(mocks.records, PROVIDER) == []
        provider_arn = existing
    else:
        provider = one(mocks.records, PROVIDER)
        assert provider.inputs["url"] == "https://token.actions.githubusercontent.com", provider.urn
        assert provider.inputs["clientIdLists"] == ["sts.amazonaws.com"], provider.urn
        provider_arn = provider.outputs["arn"]
    assert resolve(exports["oidcProviderArn"]) == provider_arn

    # The trust test_access.py holds the pure rules to, with the subjects it names.
    roles = {r.name.removeprefix("github-"): r for r in _ci(mocks.records, ROLE)}
    assert set(roles) == set(SUBJECTS)
    for key, record in roles.items():
        trust = json.loads(record.inputs["assumeRolePolicy"])
        assert trust == github_trust_policy(provider_arn, SUBJECTS[key]), record.urn
        assert record.inputs["path"] == "/github-ci/", record.urn
    # They exist only under the repository's subject template: the bootstrap says how to set it,
    # first of the setup commands (test_outputs_name_what_goes_where; the text: test_access.py).
    template = access.subject_template_command(REPOSITORY)
    assert resolve(exports["oidcSubjectTemplateCommand"]) == template
    deploy = named(mocks.records, ROLE, "github-deploy-prod")
    assert deploy.inputs["maxSessionDuration"] == 7200, deploy.urn


@pytest.mark.usefixtures("as_pulumi_host")
def test_each_ci_role_gets_the_policy_of_the_pure_rules(mocks: RecordingMocks) -> None:
    """Each role's one inline policy is `access.ci_roles`' (whose limits test_access.py and
    test_escalation.py hold: the previews read only, each deploy stays in its stack), for the
    regions and clusters of the stack files."""
    run_bootstrap(mocks, repository=REPOSITORY, stateBucket=BUCKET)
    configs = {stack: load_stack(stack) for stack in access.DEPLOY_STACKS}
    regions = {stack: cfg.region for stack, cfg in configs.items()}
    clusters = {stack: cfg.existing_cluster for stack, cfg in configs.items()}
    want = access.ci_roles(REPOSITORY, regions, BUCKET, clusters=clusters)
    policies = {r.name: r for r in _ci(mocks.records, ROLE_POLICY)}
    assert {name: json.loads(p.inputs["policy"]) for name, p in policies.items()} == {
        f"github-{r.key}-permissions": r.policy for r in want
    }
    roles = {r.name: r for r in _ci(mocks.records, ROLE)}
    for name, policy in policies.items():
        role = roles[name.removesuffix("-permissions")]
        assert policy.inputs["role"] == role.resource_id, policy.urn


@pytest.mark.usefixtures("as_pulumi_host")
def test_outputs_name_what_goes_where(mocks: RecordingMocks, exports: dict[str, Any]) -> None:
    run_bootstrap(mocks, repository=REPOSITORY)
    arns = {r.name.removeprefix("github-"): r.outputs["arn"] for r in _ci(mocks.records, ROLE)}
    assert resolve(exports["roleArns"]) == arns
    assert resolve(exports["environmentVariables"]) == {
        "preview": {"AWS_PREVIEW_ROLE_ARN": arns["preview"]},
        "preview-prod": {"AWS_PREVIEW_PROD_ROLE_ARN": arns["preview-prod"]},
        "dev": {"AWS_DEV_ROLE_ARN": arns["deploy-dev"]},
        "prod": {"AWS_PROD_ROLE_ARN": arns["deploy-prod"]},
    }
    # The deploy roles create their stacks' clusters, so EKS makes them admins: no access key
    # of the stack lists them, and no command adds them to `clusterAdminArns`.
    assert resolve(exports["clusterCreatorArns"]) == {
        "dev": arns["deploy-dev"],
        "prod": arns["deploy-prod"],
    }
    # They are the roles the deploy workflows give their `up` jobs (tests/test_workflows.py gives
    # each `up` its environment's role variable, test_access.py that variable's role). EKS
    # refuses a second access entry for a creator (ResourceInUseException): no command below
    # lists them, and the stack files' own lists, as committed, name no deploy role either.
    for stack in access.DEPLOY_STACKS:
        cfg = load_stack(stack)
        listed = [*cfg.cluster_admin_arns, *cfg.cluster_viewer_arns]
        assert not [arn for arn in listed if ":role/github-ci/" in arn and "deploy" in arn], stack
    assert "clusterAdminArns" not in exports
    # Each preview role views its own stack's cluster only: the pull requests' never prod's,
    # whose Secrets AmazonEKSAdminViewPolicy reads.
    assert resolve(exports["clusterViewerArns"]) == {
        "dev": [arns["preview"]],
        "prod": [arns["preview-prod"]],
    }
    boundaries = {
        r.name.removeprefix("github-boundary-"): r for r in by_type(mocks.records, POLICY)
    }
    assert resolve(exports["permissionsBoundaryArns"]) == {
        stack: boundaries[stack].outputs["arn"] for stack in stack_names()
    }
    commands = resolve(exports["setupCommands"]).splitlines()
    assert commands == [
        access.subject_template_command(REPOSITORY),
        f"gh variable set AWS_PREVIEW_ROLE_ARN --env preview --body {arns['preview']}",
        "gh variable set AWS_PREVIEW_PROD_ROLE_ARN --env preview-prod --body "
        f"{arns['preview-prod']}",
        f"gh variable set AWS_DEV_ROLE_ARN --env dev --body {arns['deploy-dev']}",
        f"gh variable set AWS_PROD_ROLE_ARN --env prod --body {arns['deploy-prod']}",
        f"pulumi -s dev config set --path 'clusterViewerArns[0]' {arns['preview']}",
        # After prod's own viewer (stacks/Pulumi.prod.yaml lists one), not over it.
        f"pulumi -s prod config set --path 'clusterViewerArns[1]' {arns['preview-prod']}",
    ]
    # Without `stateBucket` (Pulumi Cloud) no role is granted S3.
    for record in _ci(mocks.records, ROLE_POLICY):
        assert '"s3:' not in record.inputs["policy"], record.urn


@pytest.mark.usefixtures("as_pulumi_host")
def test_each_stack_gets_its_roles_under_its_path_with_its_boundary(
    mocks: RecordingMocks, exports: dict[str, Any]
) -> None:
    """Every role of `components.manifests.identity.stack_roles`, for each deployed stack: its
    name (what the program reads), its stack's path and boundary, its trust, and exactly its
    policies; the `stackRoleArns` output names them."""
    run_bootstrap(mocks, repository=REPOSITORY)
    boundaries = resolve(exports["permissionsBoundaryArns"])  # test_outputs_name_what_goes_where
    roles = {r.name: r for r in by_type(mocks.records, ROLE) if r.name.startswith("stack-")}
    attached = {
        (r.inputs["role"], r.inputs["policyArn"])
        for r in by_type(mocks.records, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    }
    inline = {r.inputs["role"]: r.inputs["policy"] for r in by_type(mocks.records, ROLE_POLICY)}
    want_arns = {}
    # Every stack file's: a stack CI does not deploy (minimal) is deployed by hand with them.
    for stack in stack_names():
        region = load_stack(stack).region
        specs = identity.stack_roles(NAMESPACE)
        held = role_policies.policies(stack, region)
        assert {f"stack-{stack}-{s.key}" for s in specs} == {
            n for n in roles if n.startswith(f"stack-{stack}-")
        }
        want_arns[stack] = {}
        for spec in specs:
            role = roles[f"stack-{stack}-{spec.key}"]
            name = identity.role_name(stack, spec.key)
            assert role.inputs["name"] == name and len(name) <= 64, role.urn
            assert role.inputs["path"] == iam.role_path(stack), role.urn
            assert role.inputs["permissionsBoundary"] == boundaries[stack], role.urn
            trust = json.loads(role.inputs["assumeRolePolicy"])
            assert trust == spec.trust("123456789012", "aws", region, stack), role.urn
            assert {p for r, p in attached if r == name} == {
                f"arn:aws:iam::aws:policy/{p}" for p in held[spec.key].managed_policies
            }, role.urn
            assert inline.get(name) == held[spec.key].inline_policy, role.urn
            want_arns[stack][spec.key] = role.outputs["arn"]
    assert resolve(exports["stackRoleArns"]) == want_arns


@pytest.mark.usefixtures("as_pulumi_host")
def test_each_stack_gets_a_boundary_where_no_deploy_role_writes(mocks: RecordingMocks) -> None:
    """The boundary sits under `/github-ci/`, where every deploy role is denied every IAM action
    (test_access.py), under the name the deploy roles' conditions and the program's
    `permissionsBoundaryArn` expect; it is regional like the stack and grants no IAM, STS, S3
    or secrets."""
    run_bootstrap(mocks, repository=REPOSITORY)
    for stack in ("dev", "prod"):
        boundary = named(mocks.records, POLICY, f"github-boundary-{stack}")
        assert boundary.inputs["path"] == "/github-ci/", boundary.urn
        assert boundary.inputs["name"] == f"gemma-graviton-{stack}-boundary", boundary.urn
        document = json.loads(boundary.inputs["policy"])
        allowed = [a for s in document["Statement"] if s["Effect"] == "Allow" for a in s["Action"]]
        assert not [a for a in allowed if a.split(":")[0] in ("sts", "s3", "secretsmanager")]
        assert [a for a in allowed if a.startswith("iam:")] == ["iam:CreateServiceLinkedRole"]
        regional = document["Statement"][0]
        assert regional["Condition"] == {
            "StringEquals": {"aws:RequestedRegion": [load_stack(stack).region]}
        }, boundary.urn


#: Where a refused placeholder goes, and what still runs with it.
UP_FIX = (
    "set it to your own value in infra/bootstrap/Pulumi.ci.yaml; a preview runs with it, "
    "`pulumi -C infra/bootstrap up` does not"
)
DOC_PROVIDER = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"repository": "acme"},
            "`repository` has the wrong form (got 'acme'); write the GitHub repository as "
            "<owner>/<name>, exactly as GitHub spells it",
        ),
        # Run as shipped, the roles would trust whoever owns `example-org/gemma-graviton` on
        # GitHub: that owner's workflows could deploy and destroy this account's stacks.
        (
            {},
            "`repository` still holds the placeholder example-org/gemma-graviton, the shipped "
            f"example: every CI role would trust its owner's workflows; {UP_FIX}",
        ),
        (
            {"repository": REPOSITORY, "githubOidcProviderArn": DOC_PROVIDER},
            f"`githubOidcProviderArn` still holds the placeholder {DOC_PROVIDER}, a principal in "
            f"AWS's documentation account 123456789012; {UP_FIX}",
        ),
    ],
    ids=["bad-key", "shipped-repository", "documentation-account-provider"],
)
@pytest.mark.usefixtures("as_pulumi_host")
def test_up_refuses_in_one_line_before_any_resource(
    mocks: RecordingMocks, overrides: dict[str, str], message: str
) -> None:
    with pytest.raises(pulumi.RunError) as error:
        run_bootstrap(mocks, **overrides)
    assert str(error.value) == message
    assert mocks.records == []


@pytest.mark.usefixtures("as_pulumi_host")
def test_a_preview_runs_with_the_shipped_repository(mocks: RecordingMocks) -> None:
    run_bootstrap(mocks, preview=True)
    assert _ci(mocks.records, ROLE), "the preview shows the roles it would make"


def test_make_plan_names_the_bootstraps_placeholders(tmp_path: Path) -> None:
    """As the shipped file's second line (tests/program/test_placeholders.py); gone once the
    file names a repository of one's own; a file the bootstrap would refuse is named too."""
    shipped = (PROGRAM / "Pulumi.ci.yaml").read_text()
    own = tmp_path / "Pulumi.ci.yaml"
    own.write_text(shipped.replace("example-org/gemma-graviton", REPOSITORY))
    assert bootstrap_config.notice(own) is None
    own.write_text(shipped.replace("example-org/gemma-graviton", "gemma-graviton"))
    assert bootstrap_config.notice(own) == (
        "BOOTSTRAP infra/bootstrap/Pulumi.ci.yaml, which `pulumi -C infra/bootstrap up` refuses: "
        "`repository` has the wrong form (got 'gemma-graviton'); write the GitHub repository as "
        "<owner>/<name>, exactly as GitHub spells it"
    )


def test_the_bootstrap_stack_is_not_a_stack_of_the_main_program(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its stack file sits beside its own Pulumi.yaml, so `stacks/`, the planner, `make plan`
    and every test parametrised over `stack_names()` see the same stacks as before."""
    bootstrap_stacks = {p.stem.removeprefix("Pulumi.") for p in PROGRAM.glob("Pulumi.*.yaml")}
    assert bootstrap_stacks == {"ci"}
    on_disk = sorted(p.stem.removeprefix("Pulumi.") for p in (REPO / "stacks").glob("Pulumi.*"))
    assert stack_names() == on_disk
    assert not bootstrap_stacks & set(stack_names())
    assert plan_main(["--stack", "ci"]) == 2
    assert "`--stack` 'ci' has no file stacks/Pulumi.ci.yaml" in capsys.readouterr().err
    main_project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert (main_project["main"], main_project["stackConfigDir"]) == ("infra/", "stacks")


def test_the_bootstrap_imports_no_offline_tool() -> None:
    closure = import_closure(PROGRAM / "__main__.py")
    assert not [m for m in closure if m.startswith(OFFLINE_TOOLS)], closure
    assert {"components.github_ci", "infra.bootstrap.access"} <= closure
    # And the main program knows nothing of it.
    main_closure = import_closure(REPO / "infra" / "__main__.py")
    assert not [m for m in main_closure if m.startswith(("infra.bootstrap", "components.github"))]


def _stacks_at(folder: Path, monkeypatch: pytest.MonkeyPatch, copies: dict[str, str]) -> None:
    """A `stacks/` of another checkout at `folder`, holding each stack file of `copies` (its
    name -> the committed stack it copies), which the host's own `infra.plan.stackfile`
    (imported anew inside it) reads."""
    folder.mkdir()
    for stack, source in copies.items():
        text = (stackfile.STACKS / f"Pulumi.{source}.yaml").read_text()
        (folder / f"Pulumi.{stack}.yaml").write_text(text)
    sys.path.insert(0, str(REPO))
    try:
        module = importlib.import_module("infra.plan.stackfile")
    finally:
        sys.path.remove(str(REPO))
    monkeypatch.setattr(module, "REPO", folder.parent)
    monkeypatch.setattr(module, "STACKS", folder)


@pytest.mark.usefixtures("as_pulumi_host")
def test_a_stack_ci_does_not_deploy_gets_its_roles_too(
    mocks: RecordingMocks,
    exports: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A third stack file (`staging`, deployed by hand): its `pulumi up` reads roles as dev's
    does, so the bootstrap makes them, with a boundary of its own; it gets no CI role."""
    copies = {"dev": "dev", "prod": "prod", "staging": "dev"}
    _stacks_at(tmp_path / "stacks", monkeypatch, copies)
    run_bootstrap(mocks, repository=REPOSITORY)
    assert set(resolve(exports["stackRoleArns"])) == {"dev", "prod", "staging"}
    assert set(resolve(exports["permissionsBoundaryArns"])) == {"dev", "prod", "staging"}
    staging_roles = resolve(exports["stackRoleArns"])["staging"]
    assert staging_roles["cluster"].endswith(
        ":role/gemma-graviton/staging/gemma-graviton-staging-cluster"
    )
    assert not [r for r in _ci(mocks.records, ROLE) if "staging" in r.name]


@pytest.mark.parametrize(("stack", "viewer"), [("dev", "preview"), ("prod", "preview-prod")])
@pytest.mark.usefixtures("as_pulumi_host")
def test_a_stack_into_an_existing_cluster_gets_its_owners_viewer_line(
    mocks: RecordingMocks,
    exports: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stack: str,
    viewer: str,
) -> None:
    """Such a stack refuses `clusterViewerArns`, so no command sets it (its `up` would fail):
    the cluster's owner gives the stack's preview role a viewer access entry, with the one line
    printed for it, or the previews fail Unauthorized at the cluster. The stack's file is dev's
    (an elastic stack is refused there) with the cluster's keys."""
    _stacks_at(tmp_path / "stacks", monkeypatch, {"dev": "dev", "prod": "prod", stack: "dev"})
    path = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
    document = yaml.safe_load(path.read_text())
    for key in NOT_WITH_EXISTING:
        document["config"].pop(f"gemma-graviton:{key}", None)
    document["config"] |= {
        "gemma-graviton:existingCluster": "platform-shared",
        "gemma-graviton:lwsInstalled": False,
    }
    path.write_text(yaml.safe_dump(document))
    run_bootstrap(mocks, repository=REPOSITORY)
    arns = {r.name.removeprefix("github-"): r.outputs["arn"] for r in _ci(mocks.records, ROLE)}
    assert resolve(exports["clusterViewerArns"])[stack] == []
    commands = resolve(exports["setupCommands"]).splitlines()
    assert not [c for c in commands if c.startswith(f"pulumi -s {stack} ")]
    entry = (
        f"--no-cli-pager --region {document['config']['gemma-graviton:region']} "
        f"--cluster-name platform-shared --principal-arn {arns[viewer]}"
    )
    # `;`: run again once the entry exists, the association is still made.
    assert (
        f"aws eks create-access-entry {entry}; aws eks associate-access-policy {entry} "
        "--policy-arn arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy "
        "--access-scope type=cluster"
    ) in commands
    # The other stack still lists its viewer itself.
    other, other_viewer = ("prod", "preview-prod") if stack == "dev" else ("dev", "preview")
    assert resolve(exports["clusterViewerArns"])[other] == [arns[other_viewer]]
    assert len([c for c in commands if c.startswith("aws eks create-access-entry")]) == 1


@pytest.mark.usefixtures("as_pulumi_host")
def test_a_missing_deployed_stack_file_is_one_line(
    mocks: RecordingMocks, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stacks_at(tmp_path / "stacks", monkeypatch, {"dev": "dev"})
    with pytest.raises(Exception, match=r"has no stacks/Pulumi\.prod\.yaml, which CI deploys"):
        run_bootstrap(mocks, repository=REPOSITORY)
    assert [r for r in mocks.records if r.custom] == []
