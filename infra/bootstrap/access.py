"""Who may do what from GitHub Actions: the environments, their roles, subjects and permissions.

Pure data and functions (no Pulumi import): the bootstrap program builds the roles from them, and
the workflow and docs tests hold the workflows and docs/deploying.md to the same names.

The split of trust:
- `preview` (GitHub environment, any branch, pull requests included) gets a read-only role and the
  dev stack's passphrase. It previews the dev stack only. Its role can read the dev stack's state
  and describe AWS resources; it can write nothing and assume no other role. Its role trusts the
  `preview` environment's subject alone, and no role trusts a pull request's bare subject.
- `preview-prod` (limited to `main`, behind prod's reviewers) gets a read-only role of the same
  kind for prod: deploy-prod.yml's preview, so that only prod's update holds prod's deploy role.
- `dev` and `prod` (environments limited to `main`; `prod` also behind required reviewers) each get
  a deploy role that can change that stack's region and that stack's state only, never the CI
  roles or the GitHub OIDC provider themselves.

A deploy role writes no IAM. Each stack's roles (the cluster's, the nodes' and the pods') are
the bootstrap's (`components.manifests.identity.stack_roles`), under the stack's path
(`infra.plan.iam.role_path`) with the stack's permissions boundary (`infra.bootstrap.boundary`,
created under `/github-ci/`); the pods get theirs through EKS Pod Identity, whose trust needs
no issuer of the cluster, so the roles exist before it. Of IAM a deploy role may read the roles
under its own stack's path, pass them to EKS and EKS Pod Identity only, and have EKS create
its service-linked roles: it can create, change or delete no role, policy, provider or user,
rewrite no trust and attach no policy, so no deploy can grant itself or anyone anything.
tests/program/test_iam_scope.py holds the program to creating no IAM resource.

Names here are the contract with `.github/workflows/` and docs/deploying.md; the tests compare them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.github_ci import GITHUB_OIDC_HOST, GitHubRoleSpec
from infra.bootstrap import permissions
from infra.bootstrap.fences import (
    EKS_OF_ANY_CLUSTER,
    GUARDDUTY_ENDPOINT_WRITES,
    LAUNCH_TEMPLATE_WRITES,
    TARGET_GROUP_WRITES,
    cluster_arns,
    guardduty_endpoint_statements,
    launch_statements,
    launch_template_fence,
    launch_template_tags,
    on_a_cluster,
    target_group_statement,
)
from infra.plan import iam
from infra.plan.config_parts import PROJECT

#: The GitHub environment of pull-request previews.
PREVIEW_ENVIRONMENT = "preview"
#: The only stack a pull request previews: prod's secrets never reach a pull request.
PREVIEW_STACK = "dev"
#: Stacks deployed from `main`, each through the GitHub environment of the same name.
DEPLOY_STACKS = ("dev", "prod")
#: The GitHub environment of prod's preview in deploy-prod.yml, before its approval gate: a
#: read-only role of its own, so that no job but prod's update holds the prod deploy role. An
#: environment of its own because a role can tell jobs apart only by their `sub`, and every job
#: in the `prod` environment gets the same one (GitHub docs, "OpenID Connect reference",
#: example subject claims, filtering for a specific environment, read 2026-12-03).
PROD_PREVIEW_ENVIRONMENT = "preview-prod"
#: The GitHub environment whose reviewers approve a prod update without the saved plan (a first
#: deploy, a replaced Kubernetes provider: `infra.saved_plan`). An approval and nothing else: its
#: job holds no secret and no token, no role trusts it, and the update itself still runs in
#: `prod`, behind prod's reviewers, as prod's deploy role.
PROD_UNPLANNED_ENVIRONMENT = "prod-unplanned"
#: Each environment's stack: what its role reads or changes.
STACK_OF_ENVIRONMENT = {
    PREVIEW_ENVIRONMENT: PREVIEW_STACK,
    **{stack: stack for stack in DEPLOY_STACKS},
    PROD_PREVIEW_ENVIRONMENT: "prod",
}

#: IAM path of the CI roles and the boundaries; the deploy roles are denied every IAM action
#: under it.
ROLE_PATH = iam.CI_PATH

#: A deploy can outlast the one-hour default session: cluster (10-15 min), node group, then the
#: LeaderWorkerSet's wait of up to the plan's startup timeout (30 min or more). The deploy jobs
#: ask for the same duration (`role-duration-seconds`).
DEPLOY_SESSION_SECONDS = 7200
PREVIEW_SESSION_SECONDS = 3600

#: Service-linked roles EKS needs the caller to be able to create on first use in an account.
SERVICE_LINKED_ROLES = (
    "eks.amazonaws.com",
    "eks-nodegroup.amazonaws.com",
    "autoscaling.amazonaws.com",
    "elasticloadbalancing.amazonaws.com",
)

#: What a preview reads: the provider checks of every resource type the program declares, its
#: invokes (availability zones, add-on versions) and EKS's public AMI parameters. Read verbs only.
PREVIEW_REGIONAL_ACTIONS = (
    "ec2:Describe*",
    "eks:Describe*",
    "eks:List*",
    "logs:Describe*",
    "logs:ListTagsForResource",
    "logs:ListTagsLogGroup",
)
PREVIEW_IAM_ACTIONS = (
    "iam:GetRole",
    "iam:GetRolePolicy",
    "iam:ListAttachedRolePolicies",
    "iam:ListRolePolicies",
    "iam:ListRoleTags",
    "iam:GetOpenIDConnectProvider",
    "iam:GetPolicy",
    "iam:GetPolicyVersion",
)

#: The launch CreateNodegroup checks that its caller could make from the node group's template.
_LAUNCHES = frozenset({"ec2:RunInstances"})
#: IAM actions granted only under their own conditions below.
_CONDITIONED = frozenset({"iam:PassRole", "iam:CreateServiceLinkedRole"})

#: The services the stack's roles are passed to: EKS takes the cluster's service role
#: (CreateCluster) and the node role (CreateNodegroup), EKS Pod Identity the pods' roles
#: (CreatePodIdentityAssociation: `pods.eks.amazonaws.com`, the value AWS's own policies for it
#: name, EMR on EKS Developer Guide, "Enable EKS Pod Identity", read 2026-12-03). EC2 gets the
#: node role from EKS's own service-linked role, never from the deploy role: the role may call
#: ec2:RunInstances (CreateNodegroup checks that its caller could launch from the template),
#: but with no role it may pass to EC2, no instance it launches has one. `iam:PassedToService`
#: is the service principal the role is passed to (IAM User Guide, "IAM and AWS STS condition
#: context keys", iam:PassedToService, docs.aws.amazon.com/IAM/latest/UserGuide/
#: reference_policies_iam-condition-keys.html#ck_PassedToService, read 2026-12-03).
PASSED_TO = ("eks.amazonaws.com", "pods.eks.amazonaws.com")


@dataclass(frozen=True)
class DeployActions:
    """The actions of `permissions.RESOURCE_ACTIONS`, split by the statement that grants them."""

    regional: tuple[str, ...]
    """Regional services (ec2, eks reads and CreateCluster, logs, cloudwatch, sns), fenced to
    the stack's region."""
    cluster_writes: tuple[str, ...]
    """EKS writes on a cluster and what is in it, fenced to the stack's cluster by name."""
    launch_template_writes: tuple[str, ...]
    """Writes on an existing launch template (`LAUNCH_TEMPLATE_WRITES`), fenced to the stack's
    tagged templates in its region."""
    target_group_writes: tuple[str, ...]
    """The drain's attributes on the model Service's NLB target groups (`TARGET_GROUP_WRITES`),
    fenced to the stack's tagged target groups in its region."""
    guardduty_endpoint_writes: tuple[str, ...]
    """GuardDuty's VPC endpoint taken off the stack's subnets (`GUARDDUTY_ENDPOINT_WRITES`),
    fenced to GuardDuty's tagged endpoints and the stack's subnets."""
    launches: tuple[str, ...]
    """ec2:RunInstances, which CreateNodegroup checks its caller for: from the stack's template
    only."""
    role_reads: tuple[str, ...]
    """IAM reads of the stack's roles (the bootstrap's: the cluster's, the nodes', the pods')."""
    public_parameters: tuple[str, ...]
    """SSM reads of EKS's public AMI parameters."""


def deploy_actions() -> DeployActions:
    """The deploy role's actions, derived from the table of what each registered type needs.
    Its IAM is reads, PassRole and EKS's service-linked roles: any other IAM action in the table
    (a write the program would make) is refused here, since the stacks' roles are the
    bootstrap's (components/stack_roles.py)."""
    actions = permissions.needed_actions()
    iam_actions = [a for a in actions if a.startswith("iam:")]
    reads = tuple(a for a in iam_actions if a.split(":")[1].startswith(("Get", "List")))
    writes = sorted(set(iam_actions) - set(reads) - _CONDITIONED)
    if writes:
        raise ValueError(
            f"the program's resources need {', '.join(writes)}, but a deploy role writes no IAM: "
            "create the role or policy in the bootstrap (components/stack_roles.py) instead"
        )
    return DeployActions(
        regional=tuple(
            a
            for a in actions
            if a.split(":")[0] not in ("iam", "ssm")
            and a not in LAUNCH_TEMPLATE_WRITES
            and a not in TARGET_GROUP_WRITES
            and a not in GUARDDUTY_ENDPOINT_WRITES
            and a not in _LAUNCHES
            and not on_a_cluster(a)
        ),
        cluster_writes=tuple(a for a in actions if on_a_cluster(a)),
        launch_template_writes=tuple(a for a in actions if a in LAUNCH_TEMPLATE_WRITES),
        target_group_writes=tuple(a for a in actions if a in TARGET_GROUP_WRITES),
        guardduty_endpoint_writes=tuple(a for a in actions if a in GUARDDUTY_ENDPOINT_WRITES),
        launches=tuple(a for a in actions if a in _LAUNCHES),
        role_reads=reads,
        public_parameters=tuple(a for a in actions if a.startswith("ssm:")),
    )


@dataclass(frozen=True, kw_only=True)
class CiRole(GitHubRoleSpec):
    """One role GitHub Actions assumes (`key`: `preview`, `deploy-dev`; `subjects` from
    `workflow_subject`), and where its ARN goes."""

    environment: str
    """The GitHub environment whose jobs assume it; its ARN is a variable there."""
    variable: str
    """The environment variable (GitHub Actions `vars.`) that holds the ARN."""
    creates_cluster_of: tuple[str, ...] = ()
    """Main-program stacks whose first `pulumi up` this role runs, so whose EKS cluster it
    creates. EKS makes the creator a cluster admin with an access entry of its own (pulumi-eks
    4.x hard-codes ``bootstrapClusterCreatorAdminPermissions: true``), so the stack must not list
    this role in `clusterAdminArns` or `clusterViewerArns`: a second entry for it is refused."""
    cluster_viewer_of: tuple[str, ...] = ()
    """Main-program stacks whose `clusterViewerArns` should list this role."""
    owner_viewer_of: tuple[str, ...] = ()
    """Stacks with `existingCluster`, which refuses `clusterViewerArns`, whose cluster this role
    views by the owner's access entry (`infra.bootstrap.config.owner_view_command`)."""

    def __post_init__(self) -> None:
        listed = sorted(set(self.creates_cluster_of) & set(self.cluster_viewer_of))
        if listed:
            raise ValueError(
                f"role {self.key} creates the {listed[0]} cluster, so EKS gives it an admin "
                f"access entry; take {listed[0]} out of its `cluster_viewer_of`"
            )


def subject_prefix(repository: str, prefix: str | None = None) -> str:
    """The repository part of every `sub` GitHub issues for it: `repo:<owner>/<name>`, or for a
    repository created (or renamed, or moved) after 2026-07-15, and any that opted in, the
    immutable `repo:<owner>@<owner id>/<name>@<repository id>` (GitHub docs, "OpenID Connect
    reference", "Immutable subject claims", github/docs content/actions/reference/security/
    oidc.md at 051718f, read 2026-12-03). GitHub's API says which:
    `gh api repos/<owner>/<name>/actions/oidc/customization/sub --jq .sub_claim_prefix`."""
    return prefix or f"repo:{repository}"


def environment_subject(repository: str, environment: str, prefix: str | None = None) -> str:
    """The default `sub` claim of a job that names a GitHub environment (whatever the event).
    Any workflow file that names the environment gets it; no role trusts it alone."""
    return f"{subject_prefix(repository, prefix)}:environment:{environment}"


#: The claims of the repository's OIDC subject template (GitHub REST API, "Set the
#: customization template for an OIDC subject claim for a repository", PUT
#: /repos/{owner}/{repo}/actions/oidc/customization/sub). With it the `sub` of a job in an
#: environment is `repo:<owner>/<repo>:environment:<env>:job_workflow_ref:<workflow path>@<ref>`
#: (github/docs content/actions/security-for-github-actions/security-hardening-your-deployments/
#: about-security-hardening-with-openid-connect.md, "Example: Requiring a reusable workflow and
#: other claims", at 1c6fbe3, read 2026-12-03). IAM has no condition key for
#: `job_workflow_ref` itself, so the workflow file reaches the trust through `sub` alone.
SUBJECT_CLAIM_KEYS = ("repo", "context", "job_workflow_ref")
#: The workflow file whose jobs each environment's role admits, and the ref they run from. The
#: pull requests' preview runs from `refs/pull/<number>/merge`, which changes with each pull
#: request: the one wildcard of any trust, over the number only.
WORKFLOW_OF_ENVIRONMENT = {
    PREVIEW_ENVIRONMENT: ("pr.yml", "refs/pull/*/merge"),
    "dev": ("deploy.yml", "refs/heads/main"),
    PROD_PREVIEW_ENVIRONMENT: ("deploy-prod.yml", "refs/heads/main"),
    "prod": ("deploy-prod.yml", "refs/heads/main"),
}


def workflow_subject(repository: str, environment: str, prefix: str | None = None) -> str:
    """The `sub` of `environment`'s jobs in its own workflow file, under `SUBJECT_CLAIM_KEYS`:
    the only subject its role trusts. A job of another workflow file that names the
    environment (a branch's new file, if the environment's branch rule ever let it through) gets
    another `sub` and no role."""
    workflow, ref = WORKFLOW_OF_ENVIRONMENT[environment]
    return (
        f"{environment_subject(repository, environment, prefix)}:job_workflow_ref:"
        f"{repository}/.github/workflows/{workflow}@{ref}"
    )


def subject_template_command(repository: str) -> str:
    """The one command that gives the repository the subject template the trusts expect
    (`gh api`: `-F` sends `false` as a boolean, `key[]=value` builds an array; gh manual,
    "gh api", read 2026-12-03). Run it after the bootstrap's `pulumi up`: until then the roles
    trust no token, after it the old default subjects are no longer issued."""
    keys = " ".join(f"-f 'include_claim_keys[]={key}'" for key in SUBJECT_CLAIM_KEYS)
    return (
        f"gh api --method PUT repos/{repository}/actions/oidc/customization/sub "
        f"-F use_default=false {keys}"
    )


def _upper(environment: str) -> str:
    """An environment's name as variable names spell it (letters, digits, underscores)."""
    return environment.upper().replace("-", "_")


def role_variable(environment: str) -> str:
    """The variable that holds an environment's role ARN: `AWS_<ENV>_ROLE_ARN`."""
    return f"AWS_{_upper(environment)}_ROLE_ARN"


def runner_variable(environment: str) -> str:
    """The repository variable naming the `runs-on` label of an environment's Pulumi jobs:
    `<ENV>_RUNNER`. One label per environment, so that a pull request's preview never runs on a
    runner that a dev or prod deploy runs on. A repository (or organisation) variable, never an
    environment's: `runs-on` is evaluated before the job enters its environment, and an
    environment's variables are empty there (github/docs#33389, read 2026-12-03).

    Prod's preview runs on prod's runners (`PROD_RUNNER`): it must reach prod's cluster, and it
    runs from prod's own workflow file on `main`, the one file prod's runner group admits."""
    if environment == PROD_PREVIEW_ENVIRONMENT:
        environment = STACK_OF_ENVIRONMENT[environment]
    return f"{_upper(environment)}_RUNNER"


def passphrase_secret(stack: str) -> str:
    """The secret that holds a stack's passphrase: `<STACK>_PULUMI_CONFIG_PASSPHRASE`."""
    return f"{stack.upper()}_PULUMI_CONFIG_PASSPHRASE"


def state_object_arns(bucket: str, stack: str) -> list[str]:
    """The S3 objects of one main-program stack in Pulumi's self-managed (DIY) backend.

    Project-scoped layout: `.pulumi/stacks/<project>/<stack>.json` (with `.bak`/`.gz`
    variants) and the folders `.pulumi/{history,backups,locks}/<project>/<stack>/`.
    """
    return [
        f"arn:aws:s3:::{bucket}/.pulumi/*/{PROJECT}/{stack}.json*",
        f"arn:aws:s3:::{bucket}/.pulumi/*/{PROJECT}/{stack}/*",
    ]


def _public_parameters(region: str) -> list[str]:
    """EKS's public AMI parameters. Their ARNs have an empty account
    (`arn:aws:ssm:<region>::parameter/aws/service/...`), which `*` matches (it matches zero or
    more characters); names under `/aws/` are AWS's, no account can create one."""
    return [f"arn:aws:ssm:{region}:*:parameter/aws/service/*"]


def in_region(region: str) -> dict[str, Any]:
    """The condition that holds a statement to `region`."""
    return {"StringEquals": {"aws:RequestedRegion": [region]}}


def _state_statements(bucket: str | None, stack: str, actions: list[str]) -> list[dict[str, Any]]:
    if not bucket:
        return []
    return [
        {
            "Sid": "ListTheStateBucket",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
            "Resource": [f"arn:aws:s3:::{bucket}"],
        },
        {
            "Sid": "ReadTheBackendMetadata",
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": [f"arn:aws:s3:::{bucket}/.pulumi/meta.yaml"],
        },
        {
            "Sid": f"UseTheStateOf{stack.capitalize()}",
            "Effect": "Allow",
            "Action": actions,
            "Resource": state_object_arns(bucket, stack),
        },
    ]


def preview_policy(
    region: str, state_bucket: str | None, stack: str = PREVIEW_STACK
) -> dict[str, Any]:
    """Read-only: describe `stack`'s resources and read its state; nothing else.

    What `pulumi preview` reads of the self-managed backend: the bucket's listing, its
    `meta.yaml` and the stack's checkpoint. A preview takes no lock and writes no history or
    backup (pulumi/pulumi pkg/backend/diy/backend.go: `Preview` calls `apply` with `DryRun`
    and no `Lock`; `apply` makes a snapshot manager, `addToHistory` and `backupStack` only when
    not `DryRun`; read 2026-12-03). No KMS: the stacks' secrets provider is the passphrase.

    Not AWS's `ReadOnlyAccess`: that includes `s3:GetObject` on every bucket, prod's state too.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DescribeTheStackInItsRegion",
                "Effect": "Allow",
                "Action": list(PREVIEW_REGIONAL_ACTIONS),
                "Resource": ["*"],
                "Condition": in_region(region),
            },
            {
                "Sid": "ReadEksPublicParameters",
                "Effect": "Allow",
                "Action": ["ssm:GetParameter", "ssm:GetParameters"],
                "Resource": _public_parameters(region),
            },
            {
                "Sid": "ReadRolesAndProviders",
                "Effect": "Allow",
                "Action": list(PREVIEW_IAM_ACTIONS),
                "Resource": ["*"],
            },
            *_state_statements(state_bucket, stack, ["s3:GetObject"]),
        ],
    }


def _stack_roles(stack: str) -> list[str]:
    """The roles the bootstrap creates for `stack`: everything under its path, nothing else."""
    return [f"arn:aws:iam::*:role{iam.role_path(stack)}*"]


def deploy_policy(
    stack: str, region: str, state_bucket: str | None, existing_cluster: str | None = None
) -> dict[str, Any]:
    """What `pulumi up` and `pulumi destroy` of one stack need, in that stack's region only:
    the actions of every resource type the program registers (`permissions`), nothing else; of
    IAM, reads of the stack's own roles, passing them to EKS, and EKS's service-linked roles
    (see the module's docstring).

    With `existing_cluster` (the stack's `existingCluster`) its EKS writes reach that cluster
    and what is in it only: no eks:CreateCluster, the one EKS write no cluster name fences."""
    needed = deploy_actions()
    regional = [
        a for a in needed.regional if existing_cluster is None or a not in EKS_OF_ANY_CLUSTER
    ]
    roles = _stack_roles(stack)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ManageTheStackInItsRegion",
                "Effect": "Allow",
                "Action": regional,
                "Resource": ["*"],
                "Condition": in_region(region),
            },
            {
                "Sid": "ChangeOnlyTheStacksCluster",
                "Effect": "Allow",
                "Action": list(needed.cluster_writes),
                "Resource": cluster_arns(stack, region, existing_cluster),
            },
            {
                # The stack's own templates only: not another team's, whose instance profile a
                # new version would run as. The tag is the template's own
                # (`aws:ResourceTag/${TagKey}` on launch-template, Service Authorization
                # Reference, Amazon EC2, as shipped in parliament 1.6.4's iam_definition.json).
                "Sid": "ChangeOnlyTheStackLaunchTemplates",
                "Effect": "Allow",
                "Action": list(needed.launch_template_writes),
                "Resource": [f"arn:aws:ec2:{region}:*:launch-template/*"],
                # Keys of one operator are ANDed (IAM User Guide, "Conditions with multiple
                # context keys or values", docs.aws.amazon.com/IAM/latest/UserGuide/
                # reference_policies_multi-value-conditions.html, read 2026-12-03): both tags,
                # the project's and the stack's.
                "Condition": {
                    "StringEquals": {
                        f"aws:ResourceTag/{key}": value
                        for key, value in launch_template_tags(stack).items()
                    }
                },
            },
            target_group_statement(
                stack, region, list(needed.target_group_writes), existing_cluster
            ),
            *launch_statements(stack, region, list(needed.launches)),
            *guardduty_endpoint_statements(stack, region, list(needed.guardduty_endpoint_writes)),
            {
                "Sid": "ReadEksPublicParameters",
                "Effect": "Allow",
                "Action": list(needed.public_parameters),
                "Resource": _public_parameters(region),
            },
            {
                "Sid": "ReadTheStackRoles",
                "Effect": "Allow",
                "Action": list(needed.role_reads),
                "Resource": roles,
            },
            {
                "Sid": "PassTheStackRolesToEks",
                "Effect": "Allow",
                "Action": ["iam:PassRole"],
                "Resource": roles,
                "Condition": {"StringEquals": {"iam:PassedToService": list(PASSED_TO)}},
            },
            {
                # EKS checks that its service-linked roles exist with the caller's own
                # iam:GetRole before it creates a cluster or a node group ("Failed to validate
                # if SLR: AWSServiceRoleForAmazonEKSNodegroup already exists due to missing
                # permissions for 'iam:GetRole'", terraform-aws-modules/terraform-aws-eks issues
                # #823 and #2018, read 2026-12-03). Reads of those roles only.
                "Sid": "ReadTheServiceLinkedRoles",
                "Effect": "Allow",
                "Action": ["iam:GetRole"],
                "Resource": [
                    f"arn:aws:iam::*:role/aws-service-role/{service}/*"
                    for service in SERVICE_LINKED_ROLES
                ],
            },
            {
                "Sid": "CreateEksServiceLinkedRoles",
                "Effect": "Allow",
                "Action": ["iam:CreateServiceLinkedRole"],
                "Resource": ["arn:aws:iam::*:role/aws-service-role/*"],
                "Condition": {"StringEquals": {"iam:AWSServiceName": list(SERVICE_LINKED_ROLES)}},
            },
            *_state_statements(
                state_bucket, stack, ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
            ),
            {
                # Explicit deny wins over every allow above: a deploy can never edit the roles
                # it runs as, their policies, the boundaries, or the provider GitHub's tokens
                # are checked by.
                "Sid": "NeverTouchTheCiItself",
                "Effect": "Deny",
                "Action": ["iam:*"],
                "Resource": [
                    f"arn:aws:iam::*:role{ROLE_PATH}*",
                    f"arn:aws:iam::*:policy{ROLE_PATH}*",
                    f"arn:aws:iam::*:oidc-provider/{GITHUB_OIDC_HOST}",
                ],
            },
            *launch_template_fence(stack),
        ],
    }


def ci_roles(
    repository: str,
    regions: Mapping[str, str],
    state_bucket: str | None,
    prefix: str | None = None,
    clusters: Mapping[str, str | None] | None = None,
) -> tuple[CiRole, ...]:
    """The preview roles (pull requests' of dev, prod's before its approval) and one deploy
    role per stack in `DEPLOY_STACKS`.

    `regions` maps each deployed stack to its `region` key, `clusters` to its
    `existingCluster` (None or absent: the stack creates its own); the stack files are the
    source.
    """
    clusters = clusters or {}
    # A stack into a cluster it does not own refuses `clusterViewerArns`: the owner lets it in.
    foreign = {stack for stack in regions if clusters.get(stack)}
    preview = CiRole(
        key="preview",
        environment=PREVIEW_ENVIRONMENT,
        variable=role_variable(PREVIEW_ENVIRONMENT),
        # A job that names an environment gets the environment subject even on a pull request
        # (pr.yml's preview names `preview`). The bare pull_request subject is not trusted: a
        # job a branch adds without an environment gets no role at all.
        subjects=(workflow_subject(repository, PREVIEW_ENVIRONMENT, prefix),),
        description=f"Read-only pull-request preview of {repository}'s {PREVIEW_STACK} stack",
        policy=preview_policy(regions[PREVIEW_STACK], state_bucket),
        max_session_seconds=PREVIEW_SESSION_SECONDS,
        # Viewer of the previewed stack only: AmazonEKSAdminViewPolicy reads Secrets, and prod's
        # hold the API key.
        cluster_viewer_of=tuple({PREVIEW_STACK} - foreign),
        owner_viewer_of=tuple({PREVIEW_STACK} & foreign),
    )
    prod_preview = CiRole(
        key=PROD_PREVIEW_ENVIRONMENT,
        environment=PROD_PREVIEW_ENVIRONMENT,
        variable=role_variable(PROD_PREVIEW_ENVIRONMENT),
        subjects=(workflow_subject(repository, PROD_PREVIEW_ENVIRONMENT, prefix),),
        description=f"Read-only preview of {repository}'s prod stack before its approval",
        policy=preview_policy(regions["prod"], state_bucket, "prod"),
        max_session_seconds=PREVIEW_SESSION_SECONDS,
        # A viewer of prod's cluster: without an access entry EKS authenticates no request of
        # it, and the LWS chart's server-side render fails the preview. AmazonEKSAdminViewPolicy
        # reads Secrets, prod's API key among them, which this job can read anyway: it holds
        # prod's passphrase and reads prod's state, where the key is (random.RandomPassword).
        cluster_viewer_of=tuple({"prod"} - foreign),
        owner_viewer_of=tuple({"prod"} & foreign),
    )
    deploys = tuple(
        CiRole(
            key=f"deploy-{stack}",
            environment=stack,
            variable=role_variable(stack),
            subjects=(workflow_subject(repository, stack, prefix),),
            description=f"pulumi up of {repository}'s {stack} stack from main",
            policy=deploy_policy(stack, regions[stack], state_bucket, clusters.get(stack)),
            max_session_seconds=DEPLOY_SESSION_SECONDS,
            # The deploy workflow's `pulumi up` of this stack runs as this role, the first one
            # included: it creates the cluster and is its admin without being listed. Into an
            # existing cluster it creates none: the cluster's owner gives it an access entry.
            creates_cluster_of=() if clusters.get(stack) else (stack,),
        )
        for stack in DEPLOY_STACKS
    )
    return (preview, prod_preview, *deploys)
