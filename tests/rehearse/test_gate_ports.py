"""The rehearsal's gatekeeper never listens on a port it was given for something else."""

from __future__ import annotations

import pytest

from tools.rehearse.front_door import gatekeeper_run


def test_a_free_port_is_never_one_already_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    ports = iter([5001, 5002, 5001, 5003])
    monkeypatch.setattr(gatekeeper_run, "free_port", lambda: next(ports))
    # The first two candidates are the gate's own and its "dead" upstream's: skipped.
    assert gatekeeper_run._free_port_but({5001, 5002}) == 5003
