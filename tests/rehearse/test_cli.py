"""The command line (`tools.rehearse.cli`): input errors are one line and exit 2, and an
interrupt during `--keep` ends the run."""

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


class _Group:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def progress(self, line: str) -> None:
        self.lines.append(line)

    def exited(self) -> bool:
        raise KeyboardInterrupt


def test_an_interrupt_in_the_keep_loop_reaches_the_run() -> None:
    """One Ctrl-C or SIGTERM during `--keep` ends the whole rehearsal run, not only the keep loop
    (`termination_unwinds` turns SIGTERM into KeyboardInterrupt)."""
    group = _Group()
    with pytest.raises(KeyboardInterrupt):
        rehearse._keep_serving(group, "http://127.0.0.1:1", "k")  # type: ignore[arg-type]
    assert group.lines[-1] == "stopping the group and the run"
