"""One Ctrl-C or SIGTERM during `--keep` ends the whole rehearsal run, not only the keep loop
(`termination_unwinds` turns SIGTERM into KeyboardInterrupt)."""

from __future__ import annotations

import pytest

from tools.rehearse import cli


class _Group:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def progress(self, line: str) -> None:
        self.lines.append(line)

    def exited(self) -> bool:
        raise KeyboardInterrupt


def test_an_interrupt_in_the_keep_loop_reaches_the_run() -> None:
    group = _Group()
    with pytest.raises(KeyboardInterrupt):
        cli._keep_serving(group, "http://127.0.0.1:1", "k")  # type: ignore[arg-type]
    assert group.lines[-1] == "stopping the group and the run"
