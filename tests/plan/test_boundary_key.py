"""`permissionsBoundaryArn`: the stack's own bootstrap boundary, or nothing. Any other would make
the deploy role refuse every role at `pulumi up` (its CreateRole condition names the stack's
boundary, infra/bootstrap/access.py); `make plan` and the program refuse it first, in one line."""

from __future__ import annotations

import pytest

from infra.adapters.cli import main

ACCOUNT = "123456789012"


def _plan(stack: str, arn: str) -> int:
    return main(["--stack", stack, "--set", f"permissionsBoundaryArn={arn}"])


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_stacks_own_boundary_is_accepted(stack: str) -> None:
    arn = f"arn:aws:iam::{ACCOUNT}:policy/github-ci/gemma-graviton-{stack}-boundary"
    assert _plan(stack, arn) == 0


def test_another_stacks_boundary_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    prod = f"arn:aws:iam::{ACCOUNT}:policy/github-ci/gemma-graviton-prod-boundary"
    capsys.readouterr()
    assert _plan("dev", prod) == 2
    assert capsys.readouterr().err == (
        f"error: `permissionsBoundaryArn` {prod} is not the dev stack's boundary, which its "
        "deploy role requires; use arn:aws:iam::<account>:policy/github-ci/"
        "gemma-graviton-dev-boundary, the bootstrap's `permissionsBoundaryArns` output for dev\n"
    )


def test_what_is_no_policy_arn_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert _plan("dev", "gemma-graviton-dev-boundary") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: `permissionsBoundaryArn` "), err
    assert err.endswith(
        "; use the ARN the bootstrap prints, "
        "arn:aws:iam::<account>:policy/github-ci/gemma-graviton-<stack>-boundary\n"
    ), err
