"""The command line's input errors: one line and exit 2 (`tools.rehearse.cli`)."""

from __future__ import annotations

import pytest

from infra.plan.stackfile import stack_names
from tools.rehearse import cli as rehearse
from tools.rehearse.front_door.gatekeeper_run import INSTALL_HINT
from tools.rehearse.group.workspace import RehearsalError


def test_timeout_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert rehearse.main(["--timeout", "0"]) == 2
    assert capsys.readouterr().err == (
        "error: `--timeout` must be positive (got 0); pass seconds such as 600\n"
    )


def test_bad_input_is_told_before_a_missing_nginx(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad input is one line and exit 2, even on a machine without nginx; only good input gets as
    far as the nginx the gatekeeper needs (exit 1, with the command that installs it)."""

    def no_nginx() -> str:
        raise RehearsalError("nginx is not installed; " + INSTALL_HINT)

    monkeypatch.setattr(rehearse.gatekeeper_run, "find_nginx", no_nginx)
    assert rehearse.main(["--stack", "nope"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: `--stack` 'nope' has no file stacks/Pulumi.nope.yaml; use one of: "
        + ", ".join(stack_names())
    ]
    assert rehearse.main(["--set", "kvCacheBytes=99999999999"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: `kvCacheBytes` 99999999999 (93.13 GiB) is more than")
    assert rehearse.main(["--stack", "dev"]) == 1
    assert (
        capsys.readouterr().err.splitlines()[-1] == f"error: nginx is not installed; {INSTALL_HINT}"
    )


def _options(**changes: object) -> rehearse.Options:
    base = {"stack": "dev", "overrides": {}, "timeout_s": 600.0, "keep": False, "extra_args": ()}
    return rehearse.Options(**{**base, **changes})  # type: ignore[arg-type]


def test_a_plain_rehearsal_probes_the_short_slice_and_prefill_the_whole_pattern() -> None:
    from tools.rehearse.measure.prefill_probe import QUICK_SLIDING

    assert rehearse.probe_sliding(_options()) == QUICK_SLIDING == 1
    # None: the model's own pattern (`prefill_probe.slice_config`).
    assert rehearse.probe_sliding(_options(prefill=True)) is None
    assert rehearse.probe_sliding(_options(prefill_sliding=3)) == 3
    assert rehearse.probe_sliding(_options(prefill=True, prefill_sliding=2)) == 2
