"""Where a stack's IAM lives, for the bootstrap that creates it and the deploy roles that read it.

Pure data (no Pulumi import): the bootstrap puts every role of a stack under `role_path(stack)`
with the stack's permissions boundary (`components/stack_roles.py`), and the boundary itself
under `CI_PATH`, where no deploy role may write; `infra/bootstrap/access.py` lets a stack's
deploy role read the roles under its path and pass them to EKS, nothing else.
"""

from __future__ import annotations

from infra.plan.config_parts import PROJECT

#: IAM path of the CI's own roles and of the boundaries: the deploy roles are denied every IAM
#: action under it, so none can edit the role it runs as or widen a boundary.
CI_PATH = "/github-ci/"

#: The one prefix of every IAM path the program uses: `/<project>/<stack>/`.
PROGRAM_PATH_ROOT = f"/{PROJECT}/"


def role_path(stack: str) -> str:
    """The IAM path of every role the program creates for `stack`.

    One path per stack: a role ARN carries its path (`role/gemma-graviton/dev/<name>`), so dev's
    deploy role, fenced to `role/gemma-graviton/dev/*`, can reach none of prod's roles.
    """
    return f"{PROGRAM_PATH_ROOT}{stack}/"


def boundary_name(stack: str) -> str:
    """The name of the managed policy the bootstrap creates as `stack`'s permissions boundary."""
    return f"{PROJECT}-{stack}-boundary"


def boundary_arn(stack: str, account: str = "*", partition: str = "aws") -> str:
    """The ARN of `stack`'s boundary; `account` `*` in the deploy roles' conditions (a boundary
    is a managed policy of the role's own account, and no one else writes under `CI_PATH`)."""
    return f"arn:{partition}:iam::{account}:policy{CI_PATH}{boundary_name(stack)}"
