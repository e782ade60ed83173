"""The CI roles as pure data: exact subjects, read-only preview, deploys fenced off from the CI."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from components import github_ci
from components.manifests.identity import cluster_name
from infra.bootstrap import access, fences
from infra.bootstrap import config as bootstrap_config
from infra.bootstrap.access import ci_roles
from infra.bootstrap.config import load_bootstrap_config
from infra.plan import stackfile
from infra.plan.config import ConfigError
from tests.bootstrap import iam_eval

REPO = "acme/gemma-graviton"
REGIONS = {"dev": "us-west-2", "prod": "us-east-1"}
BUCKET = "acme-pulumi-state"
# Read verbs only; sts:GetCallerIdentity needs no grant and is not listed.
READ_ONLY = re.compile(r"^[a-z0-9-]+:(Describe|Get|List)[A-Za-z*]*$")


def _roles() -> dict[str, access.CiRole]:
    return {role.key: role for role in ci_roles(REPO, REGIONS, BUCKET)}


def _allowed(policy: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [
        (action, statement["Resource"])
        for statement in policy["Statement"]
        if statement["Effect"] == "Allow"
        for action in statement["Action"]
    ]


#: Each role's one subject: its environment and its workflow file, from `main` (a pull request's
#: merge ref for the preview), as GitHub issues it under the repository's subject template.
WORKFLOW = "acme/gemma-graviton/.github/workflows"
SUBJECTS = {
    "preview": (
        f"repo:{REPO}:environment:preview:job_workflow_ref:{WORKFLOW}/pr.yml@refs/pull/*/merge",
    ),
    "preview-prod": (
        f"repo:{REPO}:environment:preview-prod:job_workflow_ref:{WORKFLOW}/deploy-prod.yml"
        "@refs/heads/main",
    ),
    "deploy-dev": (
        f"repo:{REPO}:environment:dev:job_workflow_ref:{WORKFLOW}/deploy.yml@refs/heads/main",
    ),
    "deploy-prod": (
        f"repo:{REPO}:environment:prod:job_workflow_ref:{WORKFLOW}/deploy-prod.yml@refs/heads/main",
    ),
}


#: Each role's environment, the variable of its ARN, the repository variable of its runner label
#: (`runs-on`, tests/test_workflows.py) and the stack it reads or changes. Prod's preview has a
#: role and an environment of its own: a job in `prod` gets `environment:prod` whatever it runs,
#: so no preview may run there. It runs where prod's update runs: it must reach prod's cluster,
#: and it runs from the one workflow file prod's runner group admits.
ENVIRONMENTS = {
    "preview": ("preview", "AWS_PREVIEW_ROLE_ARN", "PREVIEW_RUNNER", "dev"),
    "preview-prod": ("preview-prod", "AWS_PREVIEW_PROD_ROLE_ARN", "PROD_RUNNER", "prod"),
    "deploy-dev": ("dev", "AWS_DEV_ROLE_ARN", "DEV_RUNNER", "dev"),
    "deploy-prod": ("prod", "AWS_PROD_ROLE_ARN", "PROD_RUNNER", "prod"),
}


def test_each_role_admits_exactly_its_environment_in_its_workflow_file() -> None:
    roles = _roles()
    assert {key: role.subjects for key, role in roles.items()} == SUBJECTS
    assert {
        key: (
            role.environment,
            role.variable,
            access.runner_variable(role.environment),
            access.STACK_OF_ENVIRONMENT[role.environment],
        )
        for key, role in roles.items()
    } == ENVIRONMENTS
    assert set(access.STACK_OF_ENVIRONMENT) == {role.environment for role in roles.values()}


def _trust_allows(subjects: tuple[str, ...], sub: str) -> bool:
    """The trust document as the IAM evaluator reads it: the statement without its principal,
    the token's claims as the request's keys."""
    (statement,) = github_ci.github_trust_policy(ARN, list(subjects))["Statement"]
    policy = {
        "Statement": [
            {
                "Effect": statement["Effect"],
                "Action": statement["Action"],
                "Resource": "*",
                "Condition": statement["Condition"],
            }
        ]
    }
    claims = {
        "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
        "token.actions.githubusercontent.com:sub": sub,
    }
    return iam_eval.allowed(policy, "sts:AssumeRoleWithWebIdentity", "*", claims)


ARN = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"


@pytest.mark.parametrize("key", sorted(SUBJECTS))
def test_a_role_opens_only_for_its_environments_own_workflow_file(key: str) -> None:
    """The default subject names the environment only, so any workflow file that names it (a
    branch's new file, should the environment's branch rule let it through) would get the role.
    Under the repository's subject template (`SUBJECT_CLAIM_KEYS`; github/docs
    about-security-hardening-with-openid-connect.md, "Example: Requiring a reusable workflow and
    other claims") the `sub` names the workflow file and its ref, and the trust requires both."""
    role = _roles()[key]
    environment = role.environment
    workflow, ref = access.WORKFLOW_OF_ENVIRONMENT[environment]
    ref = ref.replace("*", "12")
    prefix = f"repo:{REPO}:environment:{environment}:job_workflow_ref:{WORKFLOW}"
    assert _trust_allows(role.subjects, f"{prefix}/{workflow}@{ref}")
    refused = {
        "the default subject": access.environment_subject(REPO, environment),
        "another file naming the environment": f"{prefix}/exfiltrate.yml@{ref}",
        "its file from another branch": f"{prefix}/{workflow}@refs/heads/feature",
        "its file in another repository": (
            f"repo:evil/gemma-graviton:environment:{environment}:job_workflow_ref:"
            f"evil/gemma-graviton/.github/workflows/{workflow}@{ref}"
        ),
        "a reusable workflow elsewhere": (
            f"repo:{REPO}:environment:{environment}:job_workflow_ref:"
            f"evil/tools/.github/workflows/{workflow}@{ref}"
        ),
        "another environment": f"repo:{REPO}:environment:other:job_workflow_ref:"
        f"{WORKFLOW}/{workflow}@{ref}",
        # What a pull request's job gets when it names no environment: a job a branch adds
        # passes no deployment-branch rule then.
        "a job that names no environment": f"repo:{REPO}:pull_request",
    }
    for what, sub in refused.items():
        assert not _trust_allows(role.subjects, sub), (key, what)


def test_the_subject_template_command_sets_the_claims_the_trusts_expect() -> None:
    """`repo`, then `context`, then `job_workflow_ref`: the order of the `sub` parts."""
    assert access.SUBJECT_CLAIM_KEYS == ("repo", "context", "job_workflow_ref")
    assert access.subject_template_command(REPO) == (
        "gh api --method PUT repos/acme/gemma-graviton/actions/oidc/customization/sub "
        "-F use_default=false -f 'include_claim_keys[]=repo' "
        "-f 'include_claim_keys[]=context' -f 'include_claim_keys[]=job_workflow_ref'"
    )


def test_trust_is_exact_match_on_subject_and_audience() -> None:
    policy = github_ci.github_trust_policy(ARN, list(SUBJECTS["deploy-prod"]))
    (statement,) = policy["Statement"]
    assert statement["Principal"] == {"Federated": ARN}
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Condition"] == {
        "StringEquals": {
            "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
            "token.actions.githubusercontent.com:sub": list(SUBJECTS["deploy-prod"]),
        }
    }
    # The pull requests' preview alone is matched with a wildcard, over its ref's number.
    (preview,) = github_ci.github_trust_policy(ARN, list(SUBJECTS["preview"]))["Statement"]
    assert preview["Condition"] == {
        "StringEquals": {"token.actions.githubusercontent.com:aud": "sts.amazonaws.com"},
        "StringLike": {"token.actions.githubusercontent.com:sub": list(SUBJECTS["preview"])},
    }


@pytest.mark.parametrize(("key", "stack"), [("preview", "dev"), ("preview-prod", "prod")])
def test_a_preview_role_reads_its_stack_and_nothing_more(key: str, stack: str) -> None:
    """Both previews, the pull requests' of dev and deploy-prod.yml's of prod before its
    approval, run as read-only roles: only an update holds a deploy role."""
    preview = _roles()[key]
    other = "prod" if stack == "dev" else "dev"
    allowed = _allowed(preview.policy)
    writes = [action for action, _ in allowed if not READ_ONLY.match(action)]
    assert writes == [], f"the {key} role may {writes}"
    assert all(s["Effect"] == "Allow" for s in preview.policy["Statement"])
    # It cannot step into a deploy role: no sts grant, no PassRole, and the deploy roles trust
    # only GitHub tokens of their own environment (SUBJECTS, one for each role).
    assert not [a for a, _ in allowed if a.startswith("sts:") or a == "iam:PassRole"]
    # The state it reads is its stack's: the other stack is named nowhere.
    s3 = [resource for action, res in allowed if action.startswith("s3:") for resource in res]
    assert f"arn:aws:s3:::{BUCKET}/.pulumi/*/gemma-graviton/{stack}.json*" in s3
    assert f"/{other}" not in json.dumps(preview.policy)
    # Both previews read the same kinds of things.
    assert {a for a, _ in allowed} == {a for a, _ in _allowed(_roles()["preview"].policy)}
    regional = next(
        s for s in preview.policy["Statement"] if s["Sid"] == "DescribeTheStackInItsRegion"
    )
    assert regional["Condition"] == {"StringEquals": {"aws:RequestedRegion": [REGIONS[stack]]}}
    assert preview.cluster_viewer_of == (stack,) and preview.creates_cluster_of == ()
    assert preview.max_session_seconds == 3600


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_deploy_role_stays_in_its_stack_and_never_edits_the_ci(stack: str) -> None:
    role = _roles()[f"deploy-{stack}"]
    other = "prod" if stack == "dev" else "dev"
    statements = role.policy["Statement"]
    regional = next(s for s in statements if s["Sid"] == "ManageTheStackInItsRegion")
    assert regional["Condition"] == {"StringEquals": {"aws:RequestedRegion": [REGIONS[stack]]}}
    s3 = [r for a, res in _allowed(role.policy) if a.startswith("s3:") for r in res]
    assert not [r for r in s3 if f"/{other}" in r], s3
    deny = next(s for s in statements if s["Sid"] == "NeverTouchTheCiItself")
    assert deny["Effect"] == "Deny" and deny["Action"] == ["iam:*"]
    assert set(deny["Resource"]) == {
        "arn:aws:iam::*:role/github-ci/*",
        "arn:aws:iam::*:policy/github-ci/*",
        "arn:aws:iam::*:oidc-provider/token.actions.githubusercontent.com",
    }
    # Of IAM: reads, PassRole and EKS's service-linked roles, nothing else.
    iam_actions = {a for a, _ in _allowed(role.policy) if a.startswith("iam:")}
    assert iam_actions == {
        "iam:GetRole",
        "iam:GetRolePolicy",
        "iam:ListAttachedRolePolicies",
        "iam:ListRolePolicies",
        "iam:PassRole",
        "iam:CreateServiceLinkedRole",
    }
    # Every IAM statement on roles names this stack's path (or the service-linked roles'), and
    # no other stack's.
    iam_resources = {
        r for a, res in _allowed(role.policy) if a.startswith("iam:") and "Role" in a for r in res
    }
    assert iam_resources == {
        f"arn:aws:iam::*:role/gemma-graviton/{stack}/*",
        "arn:aws:iam::*:role/aws-service-role/*",
        # Read only (iam:GetRole): EKS checks its service-linked roles as the caller.
        *(
            f"arn:aws:iam::*:role/aws-service-role/{service}/*"
            for service in (
                "autoscaling.amazonaws.com",
                "eks.amazonaws.com",
                "elasticloadbalancing.amazonaws.com",
                "eks-nodegroup.amazonaws.com",
            )
        ),
    }
    reads = {a for a, res in _allowed(role.policy) for r in res if "aws-service-role/eks" in r}
    assert reads == {"iam:GetRole"}
    # It creates its stack's cluster, so EKS makes it an admin; no access key lists it.
    assert role.creates_cluster_of == (stack,) and role.cluster_viewer_of == ()
    assert role.max_session_seconds == 7200


def test_no_role_is_listed_in_a_stack_whose_cluster_it_creates() -> None:
    """EKS gives the creator an access entry; a second one for it fails the first `pulumi up`.
    Each role's clusters: the preview and deploy role tests'; a role built otherwise fails."""
    with pytest.raises(ValueError) as error:
        access.CiRole(
            key="deploy-dev",
            environment="dev",
            variable="AWS_DEV_ROLE_ARN",
            subjects=("repo:acme/gemma-graviton:environment:dev",),
            description="",
            policy={},
            max_session_seconds=3600,
            creates_cluster_of=("dev",),
            cluster_viewer_of=("dev",),
        )
    assert str(error.value) == (
        "role deploy-dev creates the dev cluster, so EKS gives it an admin access entry; take dev "
        "out of its `cluster_viewer_of`"
    )


def test_an_immutable_subject_prefix_is_what_every_role_trusts() -> None:
    """A repository created after 2026-07-15 gets `sub` values that begin
    `repo:<owner>@<id>/<name>@<id>` (GitHub docs, "OpenID Connect reference", "Immutable subject
    claims", read 2026-12-03): with `subjectPrefix` every role trusts those and no other; the
    workflow reference keeps the names (`job_workflow_ref` has no IDs)."""
    assert REPO == "acme/gemma-graviton"
    prefix = load_bootstrap_config({"repository": REPO, "subjectPrefix":
                                    "repo:acme@123/gemma-graviton@456"}).subject_prefix  # fmt: skip
    named = {r.key: r.subjects for r in ci_roles(REPO, REGIONS, None)}
    for role in ci_roles(REPO, REGIONS, None, prefix):
        (subject,) = role.subjects
        assert subject.startswith("repo:acme@123/gemma-graviton@456:environment:"), role.key
        assert subject.endswith(named[role.key][0].split(":job_workflow_ref:")[1]), role.key
        assert f"job_workflow_ref:{REPO}/.github/workflows/" in subject, role.key
        assert subject not in named[role.key]
    same = load_bootstrap_config({"repository": REPO, "subjectPrefix": f"repo:{REPO}"})
    assert ci_roles(REPO, REGIONS, None, same.subject_prefix) == ci_roles(REPO, REGIONS, None)


def test_without_a_state_bucket_no_role_touches_s3() -> None:
    for role in ci_roles(REPO, REGIONS, None):
        assert not [a for a, _ in _allowed(role.policy) if a.startswith("s3:")], role.key


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"repository": "gemma-graviton"},
            "`repository` has the wrong form (got 'gemma-graviton'); write the GitHub repository "
            "as <owner>/<name>, exactly as GitHub spells it",
        ),
        (
            {},
            "`repository` is required; write the GitHub repository as <owner>/<name>, exactly as "
            "GitHub spells it",
        ),
        (
            {"repository": REPO, "stateBucket": "s3://acme-pulumi-state"},
            "`stateBucket` has the wrong form (got 's3://acme-pulumi-state'); write the bucket "
            "name only (no s3://), or leave the key out for Pulumi Cloud",
        ),
        (
            {"repository": REPO, "roles": "all"},
            "`roles` is not a bootstrap key; use one of `repository`, `region`, `stateBucket`, "
            "`subjectPrefix`, `githubOidcProviderArn`",
        ),
        (
            {"repository": REPO, "subjectPrefix": "repo:acme@123/other@456"},
            "`subjectPrefix` repo:acme@123/other@456 names acme/other, not `repository` "
            f"{REPO}; {bootstrap_config._FIXES['subjectPrefix']}",
        ),
        (
            {"repository": REPO, "subjectPrefix": "acme@123/gemma-graviton@456"},
            "`subjectPrefix` has the wrong form (got 'acme@123/gemma-graviton@456'); "
            f"{bootstrap_config._FIXES['subjectPrefix']}",
        ),
    ],
)
def test_bad_bootstrap_config_is_one_line(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_bootstrap_config(raw)
    assert str(error.value) == message


PROVIDER_ARN = "arn:aws:iam::{}:oidc-provider/token.actions.githubusercontent.com"


@pytest.mark.parametrize(
    ("raw", "found"),
    [
        ({"repository": "example-org/gemma-graviton"}, ["repository"]),
        ({"repository": "Example-Org/other"}, ["repository"]),  # GitHub names ignore case
        ({"repository": "example-organisation/gemma-graviton"}, []),
        (
            {"repository": REPO, "subjectPrefix": "repo:acme@123456/gemma-graviton@789012"},
            ["subjectPrefix"],
        ),
        (
            {"repository": REPO, "subjectPrefix": "repo:acme@123/gemma-graviton@789012"},
            ["subjectPrefix"],
        ),
        ({"repository": REPO, "subjectPrefix": "repo:acme@1234567/gemma-graviton@78901"}, []),
        (
            {"repository": REPO, "githubOidcProviderArn": PROVIDER_ARN.format("111122223333")},
            ["githubOidcProviderArn"],
        ),
        (
            {"repository": REPO, "githubOidcProviderArn": PROVIDER_ARN.format("000000000000")},
            ["githubOidcProviderArn"],
        ),
        ({"repository": REPO, "githubOidcProviderArn": PROVIDER_ARN.format("210987654321")}, []),
    ],
)
def test_the_bootstraps_placeholders(raw: dict[str, Any], found: list[str]) -> None:
    """The shipped example's owner, the IDs of the `subjectPrefix` example its fix quotes, and an
    OIDC provider in a documentation account (or all zeros): each names someone else's."""
    keys = [p.key for p in bootstrap_config.find(load_bootstrap_config(raw))]
    assert keys == found


def test_a_stack_past_its_end_date_still_gets_its_role(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bootstrap reads only where each stack lives; the day's rules (an `endDate` in the
    past) refuse a deploy, not the role that must destroy it."""
    past = {**stackfile.stack_values("dev"), "endDate": "2020-01-01"}
    monkeypatch.setattr(bootstrap_config, "stack_values", lambda stack: past)
    assert bootstrap_config.stack_regions(["dev"]) == {"dev": past["region"]}
    # The deploy itself is still refused, in one line.
    with pytest.raises(ConfigError) as error:
        stackfile.load_stack("dev", {"endDate": "2020-01-01"})
    assert error.value.key == "endDate"


def service_table(prefix: str) -> dict[str, Any]:
    """A service's table in the Service Authorization Reference, as parliament 1.6.4 ships it
    (iam_definition.json)."""
    from parliament import iam_definition

    return next(s for s in iam_definition if s["prefix"] == prefix)


def _eks_table() -> dict[str, list[str]]:
    """EKS action -> its resource types (a trailing `*`: required), from `service_table`."""
    return {
        f"eks:{p['privilege']}": [
            r["resource_type"] for r in p["resource_types"] if r["resource_type"]
        ]
        for p in service_table("eks")["privileges"]
    }


def test_the_eks_writes_are_fenced_to_the_stacks_cluster_as_the_table_says() -> None:
    """The class: every EKS action the deploy role holds is either authorised on one cluster's
    own resources (and granted on the stack's cluster only), or has no resource type in the
    table, or is a read. A write the table scopes to a cluster but granted on `*` fails here,
    as does one fenced to the cluster that the table authorises on something else (which would
    fail `pulumi up` with AccessDenied)."""
    table = _eks_table()
    actions = access.deploy_actions()
    wrong = []
    ours = set(fences.CLUSTER_RESOURCE_TYPES)
    for action in actions.cluster_writes:
        types = table.get(action, ["unknown to the table*"])
        required = {t.rstrip("*") for t in types if t.endswith("*")}
        # Required types all the cluster's; with none required (tagging, which applies to
        # whatever it names), some of the types the cluster's.
        fenced = required <= ours if required else bool(ours & set(types))
        if not fenced:
            wrong.append(f"{action} is fenced to the cluster, but the table says {types}")
    for action in [a for a in actions.regional if a.startswith("eks:")]:
        name = action.split(":")[1]
        if name.startswith(("Describe", "List")):
            continue
        if table.get(action):
            wrong.append(f"{action} is granted on *, but the table scopes it to {table[action]}")
    assert wrong == []
    assert "eks:DeleteCluster" in actions.cluster_writes


#: The EKS writes a deploy makes on a cluster and what is in it.
CLUSTER_WRITES = (
    "eks:DeleteCluster",
    "eks:CreateNodegroup",
    "eks:DeleteNodegroup",
    "eks:CreateAddon",
    "eks:DeleteAddon",
    "eks:UpdateAccessEntry",
    "eks:CreatePodIdentityAssociation",
    "eks:DeletePodIdentityAssociation",
)


@pytest.mark.parametrize(
    ("stack", "existing"),
    [("dev", None), ("prod", None), ("dev", "platform-shared")],
    ids=["dev", "prod", "dev-existing-cluster"],
)
def test_a_deploy_role_changes_no_other_cluster_of_its_region(
    stack: str, existing: str | None
) -> None:
    """Another team's cluster beside the stack's, in the same region and account: none of its
    resources can be changed or deleted; the stack's own can. With `existingCluster` the stack's
    own is that cluster, and the name it would give a cluster of its own is another's."""
    region = REGIONS[stack]
    policy = access.deploy_policy(stack, region, BUCKET, existing)
    own = cluster_name(stack, existing)
    names = {own: True, "billing-api": False, f"{own}-x": False}
    if existing:
        names[cluster_name(stack)] = False
    for kind, tail in (
        ("cluster", ""),
        ("nodegroup", "/ng-1/uuid"),
        ("addon", "/coredns/uuid"),
        ("podidentityassociation", "/a-1"),
        ("access-entry", "/role/123456789012/x/uuid"),
    ):
        for name, allowed in names.items():
            arn = f"arn:aws:eks:{region}:123456789012:{kind}/{name}{tail}"
            for action in CLUSTER_WRITES:
                here = {"aws:RequestedRegion": region}
                assert iam_eval.allowed(policy, action, arn, here) is allowed, (action, arn)
