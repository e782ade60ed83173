"""Who may do what from GitHub Actions: the environments, their roles, subjects and permissions.

Pure data and functions (no Pulumi import): the bootstrap program builds the roles from them, and
the workflow and docs tests hold the workflows and docs/deploying.md to the same names.

The split of trust:
- `preview` (GitHub environment, any branch, pull requests included) gets a read-only role and the
  dev stack's passphrase. It previews the dev stack only. Its role can read the dev stack's state
  and describe AWS resources; it can write nothing and assume no other role. Its role trusts the
  `preview` environment's subject alone, and no role trusts a pull request's bare subject.
- `dev` and `prod` (environments limited to `main`; `prod` also behind required reviewers) each get
  a deploy role that can change that stack's region and that stack's state only, never the CI
  roles or the GitHub OIDC provider themselves.

Names here are the contract with `.github/workflows/` and docs/deploying.md; the tests compare them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.bootstrap import permissions
from infra.plan.config import PROJECT

#: The GitHub environment of pull-request previews.
PREVIEW_ENVIRONMENT = "preview"
#: The only stack a pull request previews: prod's secrets never reach a pull request.
PREVIEW_STACK = "dev"
#: Stacks deployed from `main`, each through the GitHub environment of the same name.
DEPLOY_STACKS = ("dev", "prod")

#: GitHub's OIDC issuer and the audience `aws-actions/configure-aws-credentials` asks for.
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
GITHUB_OIDC_URL = f"https://{GITHUB_OIDC_HOST}"
OIDC_AUDIENCE = "sts.amazonaws.com"
#: IAM path of the CI roles; the deploy roles are denied every IAM action under it.
ROLE_PATH = "/github-ci/"

#: A deploy can outlast the one-hour default session: cluster (10-15 min), node group, then the
#: LeaderWorkerSet's wait of up to the plan's startup timeout (30 min or more). The deploy jobs
#: ask for the same duration (`role-duration-seconds`).
DEPLOY_SESSION_SECONDS = 7200
PREVIEW_SESSION_SECONDS = 3600

#: AWS-managed policies the main program attaches, and no others: the node role's
#: (components/cluster.py NODE_POLICIES), pulumi-eks 4.x's cluster service role
#: (nodejs/eks/cluster/cluster.ts: AmazonEKSClusterPolicy), and the add-on roles
#: (components/observability.py, components/storage.py). A deploy role that could attach any
#: policy could attach AdministratorAccess to a role it creates.
ATTACHABLE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy",
    "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy",
)

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

#: Managed-policy reads (pulumi-eks looks up the policies it attaches).
_POLICY_READS = frozenset({"iam:GetPolicy", "iam:GetPolicyVersion", "iam:ListPolicyVersions"})
#: IAM actions granted only under their own conditions below.
_CONDITIONED = frozenset({"iam:AttachRolePolicy", "iam:PassRole", "iam:CreateServiceLinkedRole"})


@dataclass(frozen=True)
class DeployActions:
    """The actions of `permissions.RESOURCE_ACTIONS`, split by the statement that grants them."""

    regional: tuple[str, ...]
    """Regional services (ec2, eks, logs, cloudwatch, sns), fenced to the stack's region."""
    roles: tuple[str, ...]
    """IAM actions on roles (the cluster's, the nodes' and the add-ons')."""
    oidc: tuple[str, ...]
    """IAM actions on the cluster's OIDC provider."""
    public_parameters: tuple[str, ...]
    """SSM reads of EKS's public AMI parameters."""


def deploy_actions() -> DeployActions:
    """The deploy role's actions, derived from the table of what each registered type needs."""
    actions = permissions.needed_actions()
    iam = [a for a in actions if a.startswith("iam:")]
    oidc = tuple(a for a in iam if "OpenIDConnectProvider" in a)
    return DeployActions(
        regional=tuple(a for a in actions if a.split(":")[0] not in ("iam", "ssm")),
        roles=tuple(a for a in iam if a not in (*oidc, *_POLICY_READS, *_CONDITIONED)),
        oidc=oidc,
        public_parameters=tuple(a for a in actions if a.startswith("ssm:")),
    )


@dataclass(frozen=True)
class CiRole:
    """One role GitHub Actions assumes, and where its ARN goes."""

    key: str
    """Logical name, also the Pulumi resource name's suffix (`preview`, `deploy-dev`)."""
    environment: str
    """The GitHub environment whose jobs assume it; its ARN is a variable there."""
    variable: str
    """The environment variable (GitHub Actions `vars.`) that holds the ARN."""
    subjects: tuple[str, ...]
    """The exact OIDC `sub` values the trust policy admits (StringEquals, no wildcard)."""
    description: str
    """What the role is for, shown in IAM."""
    policy: dict[str, Any]
    """The role's only permission policy (inline)."""
    max_session_seconds: int
    """The longest session a job may ask for."""
    creates_cluster_of: tuple[str, ...] = ()
    """Main-program stacks whose first `pulumi up` this role runs, so whose EKS cluster it
    creates. EKS makes the creator a cluster admin with an access entry of its own (pulumi-eks
    4.x hard-codes ``bootstrapClusterCreatorAdminPermissions: true``), so the stack must not list
    this role in `clusterAdminArns` or `clusterViewerArns`: a second entry for it is refused."""
    cluster_viewer_of: tuple[str, ...] = ()
    """Main-program stacks whose `clusterViewerArns` should list this role."""

    def __post_init__(self) -> None:
        listed = sorted(set(self.creates_cluster_of) & set(self.cluster_viewer_of))
        if listed:
            raise ValueError(
                f"role {self.key} creates the {listed[0]} cluster, so EKS gives it an admin "
                f"access entry; take {listed[0]} out of its `cluster_viewer_of`"
            )


def environment_subject(repository: str, environment: str) -> str:
    """The `sub` claim of a job that names a GitHub environment (whatever the event)."""
    return f"repo:{repository}:environment:{environment}"


def pull_request_subject(repository: str) -> str:
    """The `sub` claim of a pull-request job that names no environment. No role trusts it: a
    job without an environment passes no deployment-branch rule and no reviewer."""
    return f"repo:{repository}:pull_request"


def role_variable(environment: str) -> str:
    """The variable that holds an environment's role ARN: `AWS_<ENV>_ROLE_ARN`."""
    return f"AWS_{environment.upper()}_ROLE_ARN"


def runner_variable(environment: str) -> str:
    """The repository variable naming the `runs-on` label of an environment's Pulumi jobs:
    `<ENV>_RUNNER`. One label per environment, so that a pull request's preview never runs on a
    runner that a dev or prod deploy runs on. A repository (or organisation) variable, never an
    environment's: `runs-on` is evaluated before the job enters its environment, and an
    environment's variables are empty there (github/docs#33389, read 2026-12-03)."""
    return f"{environment.upper()}_RUNNER"


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


def _in_region(region: str) -> dict[str, Any]:
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


def preview_policy(region: str, state_bucket: str | None) -> dict[str, Any]:
    """Read-only: describe the preview stack's resources and read its state; nothing else.

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
                "Condition": _in_region(region),
            },
            {
                "Sid": "ReadEksPublicParameters",
                "Effect": "Allow",
                "Action": ["ssm:GetParameter", "ssm:GetParameters"],
                "Resource": [f"arn:aws:ssm:{region}::parameter/aws/service/*"],
            },
            {
                "Sid": "ReadRolesAndProviders",
                "Effect": "Allow",
                "Action": list(PREVIEW_IAM_ACTIONS),
                "Resource": ["*"],
            },
            *_state_statements(state_bucket, PREVIEW_STACK, ["s3:GetObject"]),
        ],
    }


def deploy_policy(stack: str, region: str, state_bucket: str | None) -> dict[str, Any]:
    """What `pulumi up` and `pulumi destroy` of one stack need, in that stack's region only:
    the actions of every resource type the program registers (`permissions`), nothing else."""
    needed = deploy_actions()
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ManageTheStackInItsRegion",
                "Effect": "Allow",
                "Action": list(needed.regional),
                "Resource": ["*"],
                "Condition": _in_region(region),
            },
            {
                "Sid": "ReadEksPublicParameters",
                "Effect": "Allow",
                "Action": list(needed.public_parameters),
                "Resource": [f"arn:aws:ssm:{region}::parameter/aws/service/*"],
            },
            {
                "Sid": "ManageTheStackRoles",
                "Effect": "Allow",
                "Action": list(needed.roles),
                "Resource": ["arn:aws:iam::*:role/*"],
            },
            {
                "Sid": "AttachOnlyThePoliciesTheProgramUses",
                "Effect": "Allow",
                "Action": ["iam:AttachRolePolicy"],
                "Resource": ["arn:aws:iam::*:role/*"],
                "Condition": {"ArnEquals": {"iam:PolicyARN": list(ATTACHABLE_POLICIES)}},
            },
            {
                "Sid": "ReadManagedPolicies",
                "Effect": "Allow",
                "Action": sorted(_POLICY_READS),
                "Resource": ["arn:aws:iam::aws:policy/*"],
            },
            {
                "Sid": "PassRolesToEksAndNodes",
                "Effect": "Allow",
                "Action": ["iam:PassRole"],
                "Resource": ["arn:aws:iam::*:role/*"],
                "Condition": {
                    "StringEquals": {
                        "iam:PassedToService": ["eks.amazonaws.com", "ec2.amazonaws.com"]
                    }
                },
            },
            {
                "Sid": "ManageTheClusterOidcProvider",
                "Effect": "Allow",
                "Action": list(needed.oidc),
                "Resource": ["arn:aws:iam::*:oidc-provider/oidc.eks.*"],
            },
            {
                "Sid": "CreateEksServiceLinkedRoles",
                "Effect": "Allow",
                "Action": ["iam:CreateServiceLinkedRole"],
                "Resource": ["*"],
                "Condition": {"StringEquals": {"iam:AWSServiceName": list(SERVICE_LINKED_ROLES)}},
            },
            *_state_statements(
                state_bucket, stack, ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
            ),
            {
                # Explicit deny wins over every allow above: a deploy can never edit the roles
                # it runs as, their policies, or the provider GitHub's tokens are checked by.
                "Sid": "NeverTouchTheCiItself",
                "Effect": "Deny",
                "Action": ["iam:*"],
                "Resource": [
                    f"arn:aws:iam::*:role{ROLE_PATH}*",
                    f"arn:aws:iam::*:policy{ROLE_PATH}*",
                    f"arn:aws:iam::*:oidc-provider/{GITHUB_OIDC_HOST}",
                ],
            },
        ],
    }


def ci_roles(
    repository: str, regions: Mapping[str, str], state_bucket: str | None
) -> tuple[CiRole, ...]:
    """The preview role and one deploy role per stack in `DEPLOY_STACKS`.

    `regions` maps each deployed stack to its `region` key (the stack files are the source).
    """
    preview = CiRole(
        key="preview",
        environment=PREVIEW_ENVIRONMENT,
        variable=role_variable(PREVIEW_ENVIRONMENT),
        # A job that names an environment gets the environment subject even on a pull request
        # (pr.yml's preview names `preview`). The bare pull_request subject is not trusted: a
        # job a branch adds without an environment gets no role at all.
        subjects=(environment_subject(repository, PREVIEW_ENVIRONMENT),),
        description=f"Read-only pull-request preview of {repository}'s {PREVIEW_STACK} stack",
        policy=preview_policy(regions[PREVIEW_STACK], state_bucket),
        max_session_seconds=PREVIEW_SESSION_SECONDS,
        # Viewer of the previewed stack only: AmazonEKSAdminViewPolicy reads Secrets, and prod's
        # hold the API key.
        cluster_viewer_of=(PREVIEW_STACK,),
    )
    deploys = tuple(
        CiRole(
            key=f"deploy-{stack}",
            environment=stack,
            variable=role_variable(stack),
            subjects=(environment_subject(repository, stack),),
            description=f"pulumi up of {repository}'s {stack} stack from main",
            policy=deploy_policy(stack, regions[stack], state_bucket),
            max_session_seconds=DEPLOY_SESSION_SECONDS,
            # deploy.yml's `pulumi up` of this stack runs as this role, the first one included:
            # it creates the cluster and is its admin without being listed.
            creates_cluster_of=(stack,),
        )
        for stack in DEPLOY_STACKS
    )
    return (preview, *deploys)
