"""The command line's input errors: one line and exit 2 (`infra.rehearse.cli`)."""

from __future__ import annotations

import pytest

from infra.plan.stackfile import stack_names
from infra.rehearse import cli as rehearse


def test_bad_input_exits_2_with_the_one_line_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert rehearse.main(["--stack", "nope"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: `--stack` 'nope' has no file stacks/Pulumi.nope.yaml; use one of: "
        + ", ".join(stack_names())
    ]
    assert rehearse.main(["--set", "kvCacheBytes=99999999999"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: `kvCacheBytes` 99999999999 (93.13 GiB) is more than")


def test_timeout_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert rehearse.main(["--timeout", "0"]) == 2
    assert capsys.readouterr().err == (
        "error: `--timeout` must be positive (got 0); pass seconds such as 600\n"
    )
