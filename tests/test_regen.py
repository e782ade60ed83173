"""Every committed generated file is what its generator gives now (`make regen` writes them all;
`python -m tools.regen --check` names each stale one). This one check stands for the rendered
dev and prod objects and the four generated doc blocks; what each generator computes is tested
beside it (tests/program/test_rendered_fixtures.py, tests/plan/test_docs_changes.py,
tests/plan/test_scaling_sim.py, tests/test_docs.py, tests/test_readme.py)."""

from __future__ import annotations

import pytest

from tools import regen
from tools.doctools import docs_changes


def test_every_generated_file_is_in_step(capsys: pytest.CaptureFixture[str]) -> None:
    code = regen.main(["--check"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out == "every generated file is in step\n"
    # Each block sits in the page that quotes it.
    pages = {block.what: str(block.page().relative_to(regen.REPO)) for block, _ in regen.BLOCKS}
    assert pages == {
        "scaling table": "README.md",
        "change table": "README.md",
        "ranking": "docs/planning.md",
        "stack-keys table": "docs/planning.md",
    }


def test_a_stale_block_is_named_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = tuple(
        (block, (lambda: "changed") if block is docs_changes.BLOCK else render)
        for block, render in regen.BLOCKS
    )
    monkeypatch.setattr(regen, "BLOCKS", blocks)
    monkeypatch.setattr(regen.render_fixtures, "STACKS", ())
    assert regen.main(["--check"]) == 1
    assert capsys.readouterr().out == (
        "README.md: the change table is stale; run `make regen` and commit it.\n"
    )
