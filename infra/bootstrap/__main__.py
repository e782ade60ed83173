"""The bootstrap program: GitHub's OIDC provider, the CI roles and each deployed stack's own IAM
roles, with what to paste where.

Pulumi runs this file with `infra/bootstrap/` as the program directory, so the repository root is
put on the import path first. The stack's keys live under `gemma-graviton-ci:` in
`infra/bootstrap/Pulumi.<stack>.yaml`; the deployed stacks' regions come from `stacks/`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pulumi
import pulumi_aws as aws

from components.ci_stack_roles import StackRoles, StackRolesArgs
from components.github_ci import (
    BoundarySpec,
    GitHubActionsAccess,
    GitHubActionsAccessArgs,
)
from components.manifests.identity import stack_roles
from components.manifests.role_policies import policies
from infra.adapters.pulumi_config import raw_config
from infra.adapters.wiring import NAMESPACE
from infra.bootstrap.access import (
    DEPLOY_STACKS,
    ROLE_PATH,
    ci_roles,
    subject_template_command,
)
from infra.bootstrap.boundary import boundaries
from infra.bootstrap.config import (
    BOOTSTRAP_PROJECT,
    BootstrapConfig,
    load_bootstrap_config,
    other_viewer_counts,
    owner_view_command,
    refusal,
    stack_clusters,
    stack_regions,
)
from infra.plan import iam
from infra.plan.config import ConfigError
from infra.plan.stackfile import stack_names


def _read() -> tuple[BootstrapConfig, dict[str, str], dict[str, str | None]]:
    """The bootstrap keys and the region of every stack with a file in `stacks/` (CI deploys
    `DEPLOY_STACKS` of them; each gets its roles); a refusal is one line, no traceback, and comes
    before any resource, as does an update's refusal of a shipped placeholder."""
    raw, _ = raw_config(BOOTSTRAP_PROJECT)
    try:
        cfg = load_bootstrap_config(raw)
        regions = stack_regions(stack_names())
        clusters = stack_clusters(stack_names())
        missing = sorted(set(DEPLOY_STACKS) - set(regions))
        if missing:
            raise ConfigError(
                "stacks",
                f"has no stacks/Pulumi.{missing[0]}.yaml, which CI deploys",
                f"restore the {missing[0]} stack file",
            )
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    # A preview runs with the shipped example; an update would trust someone else's repository.
    refused = None if pulumi.runtime.is_dry_run() else refusal(cfg)
    if refused:
        raise pulumi.RunError(refused)
    return cfg, regions, clusters


cfg, regions, clusters = _read()
roles = ci_roles(cfg.repository, regions, cfg.state_bucket, cfg.subject_prefix, clusters)

aws_provider = aws.Provider(
    "aws",
    region=cfg.region,
    default_tags={"tags": {"project": BOOTSTRAP_PROJECT, "repository": cfg.repository}},
)
access = GitHubActionsAccess(
    "github",
    GitHubActionsAccessArgs(
        roles=roles,
        existing_provider_arn=cfg.github_oidc_provider_arn,
        role_path=ROLE_PATH,
        boundaries=[
            BoundarySpec(
                key=b.stack,
                name=b.name,
                document=b.document,
                description=f"Ceiling of every IAM role the {b.stack} stack creates",
            )
            for b in boundaries(regions)
        ],
    ),
    opts=pulumi.ResourceOptions(providers=[aws_provider]),
)

# Each stack's roles (every stack file's, whether CI deploys it or not), which its `pulumi up`
# reads and passes to EKS but never writes.
on_aws = pulumi.InvokeOutputOptions(provider=aws_provider)
account = aws.get_caller_identity_output(opts=on_aws).account_id
partition = aws.get_partition_output(opts=on_aws).partition
stack_role_arns = {
    stack: StackRoles(
        f"stack-{stack}",
        StackRolesArgs(
            stack=stack,
            roles=stack_roles(NAMESPACE, clusters[stack]),
            policies=policies(stack, regions[stack]),
            path=iam.role_path(stack),
            boundary_arn=access.boundary_arns[stack],
            account=account,
            partition=partition,
            region=regions[stack],
        ),
        opts=pulumi.ResourceOptions(providers=[aws_provider]),
    ).role_arns
    for stack in regions
}

arn = access.role_arns
pulumi.export("oidcProviderArn", access.provider_arn)
pulumi.export("roleArns", arn)
# Main-program stack -> the boundary its roles carry.
pulumi.export("permissionsBoundaryArns", access.boundary_arns)
# Main-program stack -> role key -> ARN: the roles its `pulumi up` reads by name.
pulumi.export("stackRoleArns", stack_role_arns)
# GitHub environment -> {variable: role ARN}: `vars.<variable>` in that environment's jobs.
pulumi.export("environmentVariables", {r.environment: {r.variable: arn[r.key]} for r in roles})
# Main-program stack -> the role whose first `pulumi up` creates its cluster. EKS gives that role
# an admin access entry itself, so it is listed in neither access key of the stack
# (docs/deploying.md, "Who can use kubectl").
pulumi.export(
    "clusterCreatorArns",
    {s: arn[r.key] for s in DEPLOY_STACKS for r in roles if s in r.creates_cluster_of},
)
# Main-program stack -> ARNs for its `clusterViewerArns` key (none for a stack with
# `existingCluster`, which refuses the key: its cluster's owner gets a line of `setupCommands`).
pulumi.export(
    "clusterViewerArns",
    {s: [arn[r.key] for r in roles if s in r.cluster_viewer_of] for s in DEPLOY_STACKS},
)
# Ready to paste, in the README's order: environment variables, then each stack's access entries
# (for a stack into a cluster it does not own, the line its owner runs).
# No `clusterAdminArns` line: the only CI role with admin rights is the one that creates the
# cluster, which EKS has made an admin already.
# The roles trust `sub` values that name the workflow file (`job_workflow_ref`), which GitHub
# issues only once the repository has this subject template (docs/deploying.md, step 4).
pulumi.export("oidcSubjectTemplateCommand", subject_template_command(cfg.repository))
commands: list[str | pulumi.Output[str]] = [subject_template_command(cfg.repository)]
commands += [
    pulumi.Output.concat(f"gh variable set {r.variable} --env {r.environment} --body ", arn[r.key])
    for r in roles
]
first_viewer = other_viewer_counts(DEPLOY_STACKS, ROLE_PATH)
for stack in DEPLOY_STACKS:
    viewers = [r for r in roles if stack in r.cluster_viewer_of]
    commands += [
        pulumi.Output.concat(
            f"pulumi -s {stack} config set --path 'clusterViewerArns[{index}]' ", arn[r.key]
        )
        for index, r in enumerate(viewers, start=first_viewer[stack])
    ]
    # Into a cluster it does not own, the stack lists no viewer: the cluster's owner adds each.
    cluster = clusters[stack]
    if cluster:
        commands += [
            arn[r.key].apply(lambda a, c=cluster, g=regions[stack]: owner_view_command(c, g, a))
            for r in roles
            if stack in r.owner_viewer_of
        ]
pulumi.export("setupCommands", pulumi.Output.all(*commands).apply("\n".join))
