"""Every generated text the repository commits, written again by one command:

    make regen                        (python -m tools.regen)
    python -m tools.regen --check     # exit 1 naming each stale file, write nothing

The artefacts: the dev and prod objects rendered as text (tests/fixtures/rendered, from
`tests.render_fixtures`) and the doc blocks the planner's figures fill (`tools.doctools`: the
README's scaling day and change table, docs/planning.md's node-size ranking and stack keys).
`tests/test_regen.py` runs the check. What needs the network or real vLLM to make (the image
pins, the vLLM recordings) has its own command and is not here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tests import render_fixtures
from tools.doctools import doc_blocks, docs_changes, docs_keys, docs_ranking, docs_scaling

REPO = doc_blocks.REPO
FIX = "make regen"
#: Each doc block with what renders it.
BLOCKS: tuple[tuple[doc_blocks.Block, Callable[[], str]], ...] = (
    (docs_scaling.BLOCK, docs_scaling.render),
    (docs_changes.BLOCK, docs_changes.render),
    (docs_ranking.BLOCK, lambda: docs_ranking.render(docs_ranking.comparison())),
    (docs_keys.BLOCK, docs_keys.render),
)


def stale() -> list[str]:
    """One line (a diff after it, for a rendered object) per artefact that differs from what its
    generator gives now; empty when every one is in step."""
    problems = []
    for block, render in BLOCKS:
        page = block.page()
        if block.quoted(page.read_text()) != render():
            problems.append(
                f"{page.relative_to(REPO)}: the {block.what} is stale; run `{FIX}` and commit it."
            )
    for stack in render_fixtures.STACKS:
        problem = render_fixtures.mismatch(stack)
        if problem is not None:
            problems.append(problem)
    return problems


def write() -> list[Path]:
    """Write every artefact again; the files written."""
    written = [block.write(render()) for block, render in BLOCKS]
    for stack in render_fixtures.STACKS:
        written += render_fixtures.write(stack)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.regen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="name each stale file, write none")
    if parser.parse_args(argv).check:
        problems = stale()
        print("\n".join(problems) or "every generated file is in step")
        return 1 if problems else 0
    written = write()
    print(f"wrote {len(written)} files; `git diff` shows what changed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
