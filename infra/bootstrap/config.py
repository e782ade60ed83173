"""The bootstrap stack's config: one validated, frozen view of its `gemma-graviton-ci:` keys.

The regions of the deployed stacks are not repeated here: they are read from the main program's
stack files (`stacks/Pulumi.<stack>.yaml`, key `region`), so a stack that moves region moves its
deploy role's region with it after the next bootstrap `pulumi up`.

The shipped stack file holds an example repository. GitHub accepts any name, so a bootstrap run
with it would make deploy roles that trust the OIDC tokens of whoever owns that name: they could
deploy and destroy this account's stacks. Like the main stack's placeholders
(`infra.plan.placeholders`), `find` names them, `make plan` lists them in its first lines and the
program refuses them at `pulumi up` (a preview runs), in one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infra.plan import placeholders
from infra.plan.config import ConfigError
from infra.plan.loading import load_config
from infra.plan.stackfile import REPO, read_yaml_text, stack_values

#: The bootstrap project's name (`infra/bootstrap/Pulumi.yaml`), its config namespace.
BOOTSTRAP_PROJECT = "gemma-graviton-ci"
#: The bootstrap's stack file, as the README and docs/deploying.md name it.
STACK_FILE = Path("infra/bootstrap/Pulumi.ci.yaml")
#: The command that refuses the placeholders, as a refusal and `make plan` name it.
UP = "`pulumi -C infra/bootstrap up`"
#: The owner of the shipped `repository` and the IDs of `subjectPrefix`'s example in `_FIXES`:
#: nobody's repository here.
EXAMPLE_OWNER = "example-org"
EXAMPLE_IDS = ("123456", "789012")

_FIXES = {
    "repository": "write the GitHub repository as <owner>/<name>, exactly as GitHub spells it",
    "region": "use a region name such as us-west-2",
    "stateBucket": "write the bucket name only (no s3://), or leave the key out for Pulumi Cloud",
    "subjectPrefix": (
        "paste what `gh api repos/<owner>/<name>/actions/oidc/customization/sub --jq "
        ".sub_claim_prefix` prints for `repository`, such as "
        "repo:example-org@123456/gemma-graviton@789012, or leave the key out"
    ),
    "githubOidcProviderArn": (
        "use the ARN of the account's existing provider for "
        "token.actions.githubusercontent.com, or leave the key out to create it"
    ),
}


class BootstrapConfig(BaseModel):
    """What the bootstrap needs to know about the repository and the state backend."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    repository: Annotated[
        str,
        Field(
            description="`<owner>/<name>` of the GitHub repository; every trust policy names it.",
            pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$",
        ),
    ]
    subject_prefix: Annotated[
        str | None,
        Field(
            alias="subjectPrefix",
            description=(
                "The repository part of the `sub` GitHub issues, when it is the immutable "
                "`repo:<owner>@<owner id>/<name>@<repository id>` (repositories created after "
                "2026-07-15): every trust policy names it. Unset: `repo:<repository>`."
            ),
            pattern=(
                r"^repo:(?:[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}"
                r"|[A-Za-z0-9][A-Za-z0-9-]{0,38}@\d+/[A-Za-z0-9._-]{1,100}@\d+)$"
            ),
        ),
    ] = None
    region: Annotated[
        str,
        Field(
            description="Region of the bootstrap's own API calls (IAM itself is global).",
            pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$",
        ),
    ] = "us-west-2"
    state_bucket: Annotated[
        str | None,
        Field(
            alias="stateBucket",
            description=(
                "The S3 bucket of a self-managed Pulumi backend; each role may then read (preview)"
                " or write (deploy) its own stack's state there and nothing else. Unset for"
                " Pulumi Cloud."
            ),
            pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        ),
    ] = None
    github_oidc_provider_arn: Annotated[
        str | None,
        Field(
            alias="githubOidcProviderArn",
            description=(
                "An account holds one OIDC provider per issuer: set this to reuse one that exists."
            ),
            pattern=r"^arn:aws[a-z-]*:iam::\d{12}:oidc-provider/token\.actions\.githubusercontent\.com$",
        ),
    ] = None


def load_bootstrap_config(raw: Mapping[str, Any]) -> BootstrapConfig:
    """Validate the bootstrap stack's keys (namespace stripped); one `ConfigError` line if bad."""
    try:
        cfg = BootstrapConfig.model_validate(dict(raw))
    except ValidationError as error:
        first = error.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "?"
        if first["type"] == "extra_forbidden":
            known = ", ".join(f"`{k}`" for k in _FIXES)
            raise ConfigError(key, "is not a bootstrap key", f"use one of {known}") from None
        if first["type"] == "missing":
            raise ConfigError(key, "is required", _FIXES[key]) from None
        raise ConfigError(key, f"has the wrong form (got {raw.get(key)!r})", _FIXES[key]) from None
    if cfg.subject_prefix is not None:
        owner, name = (part.split("@")[0] for part in cfg.subject_prefix[5:].split("/"))
        if f"{owner}/{name}" != cfg.repository:
            raise ConfigError(
                "subjectPrefix",
                f"{cfg.subject_prefix} names {owner}/{name}, not `repository` {cfg.repository}",
                _FIXES["subjectPrefix"],
            )
    return cfg


def find(cfg: BootstrapConfig) -> list[placeholders.Placeholder]:
    """Every key that still holds the shipped example or a documentation account, in key order:
    the example owner's repository, the example's IDs in `subjectPrefix`, and an OIDC provider
    ARN in a documentation account or all zeros."""
    found = []
    if cfg.repository.split("/")[0].lower() == EXAMPLE_OWNER:
        found.append(
            placeholders.Placeholder(
                "repository",
                cfg.repository,
                "the shipped example: every CI role would trust its owner's workflows",
            )
        )
    ids = re.findall(r"@(\d+)", cfg.subject_prefix or "")
    if set(ids) & set(EXAMPLE_IDS):
        found.append(
            placeholders.Placeholder(
                "subjectPrefix",
                cfg.subject_prefix or "",
                "the example's IDs, not your repository's",
            )
        )
    arn = cfg.github_oidc_provider_arn
    if arn:
        what = "an all-zero ARN" if placeholders.ZERO_ARN.fullmatch(arn) else None
        what = what or placeholders.documentation_account(arn)
        if what:
            found.append(placeholders.Placeholder("githubOidcProviderArn", arn, what))
    return found


def refusal(cfg: BootstrapConfig) -> str | None:
    """The one line the bootstrap's `pulumi up` ends with while a key holds a placeholder."""
    return placeholders.refusal(find(cfg), UP, f"set it to your own value in {STACK_FILE}")


def notice(path: Path = REPO / STACK_FILE) -> str | None:
    """`make plan`'s line on the bootstrap's stack file: its placeholders, or why the bootstrap
    would refuse the file; None when it is filled in (or gone)."""
    if not path.is_file():
        return None
    prefix = f"{BOOTSTRAP_PROJECT}:"
    try:
        document = read_yaml_text(path.read_text(encoding="utf-8"), str(STACK_FILE)) or {}
        config = document.get("config") if isinstance(document, Mapping) else None
        config = config if isinstance(config, Mapping) else {}
        raw = {
            str(k).removeprefix(prefix): v for k, v in config.items() if str(k).startswith(prefix)
        }
        cfg = load_bootstrap_config(raw)
    except ConfigError as error:
        return f"BOOTSTRAP {STACK_FILE}, which {UP} refuses: {error}"
    return placeholders.notice(find(cfg), UP, f" in {STACK_FILE}")


def stack_regions(stacks: Sequence[str]) -> dict[str, str]:
    """Each deployed stack's `region`, from its stack file through the one config path, but
    without the rules that depend on the day: a stack past its `endDate` (or on a Kubernetes
    version that has left support) still needs its CI role, if only to be destroyed."""
    return {stack: load_config(stack_values(stack)).region for stack in stacks}


def stack_clusters(stacks: Sequence[str]) -> dict[str, str | None]:
    """Each stack's `existingCluster` (None: the stack creates its own cluster), which its
    roles' trust and its deploy role's EKS fence name."""
    return {stack: load_config(stack_values(stack)).existing_cluster for stack in stacks}


def other_viewer_counts(stacks: Sequence[str], ci_path: str) -> dict[str, int]:
    """How many of each stack file's `clusterViewerArns` are not CI roles (not under
    `ci_path`): the bootstrap's `clusterViewerArns[<n>]` commands start after them, so they add
    the CI's viewers without overwriting an operator's, and rewrite the same entries when run
    again."""
    return {
        stack: len(
            [
                arn
                for arn in load_config(stack_values(stack)).cluster_viewer_arns
                if f":role{ci_path}" not in arn
            ]
        )
        for stack in stacks
    }


def owner_view_command(cluster: str, region: str, principal_arn: str) -> str:
    """The one line the owner of `cluster` (a stack's `existingCluster`) runs to let a preview
    role view it as a created cluster's `clusterViewerArns` would: an access entry for the role
    and AmazonEKSAdminViewPolicy on the whole cluster (AWS CLI, `aws eks create-access-entry`,
    `aws eks associate-access-policy`). Without it EKS authenticates none of the role's
    requests, and the stack's previews fail Unauthorized at the cluster. Run again, the entry
    exists (ResourceInUseException) and the association is still made; no pager holds either."""
    entry = (
        f"--no-cli-pager --region {region} --cluster-name {cluster} --principal-arn {principal_arn}"
    )
    return (
        f"aws eks create-access-entry {entry}; aws eks associate-access-policy {entry} "
        "--policy-arn arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy "
        "--access-scope type=cluster"
    )
