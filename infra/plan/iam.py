"""Where the program's IAM lives, for the program that creates it and the bootstrap that fences it.

Pure data (no Pulumi import): `infra/__main__.py` puts every role it creates under
`role_path(stack)` and gives it the stack's permissions boundary; `infra/bootstrap/access.py`
lets a stack's deploy role create, change, pass and delete roles under that path only, and
create or change one only while it carries that boundary, which the bootstrap itself creates
under `CI_PATH`, where no deploy role may write.
"""

from __future__ import annotations

from infra.plan.config import PROJECT, ConfigError

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


def check_boundary(stack: str, arn: str | None) -> None:
    """A `permissionsBoundaryArn` that is not `stack`'s own bootstrap boundary would make the
    deploy role refuse every role at `pulumi up`: refused here, in one line, at preview."""
    if arn is None:
        return
    wanted = f":policy{CI_PATH}{boundary_name(stack)}"
    if not arn.endswith(wanted):
        raise ConfigError(
            "permissionsBoundaryArn",
            f"{arn} is not the {stack} stack's boundary, which its deploy role requires",
            f"use arn:aws:iam::<account>{wanted}, the bootstrap's `permissionsBoundaryArns` "
            f"output for {stack}",
        )
