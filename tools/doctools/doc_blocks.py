"""Generated blocks in the docs: a page holds each between a BEGIN and an END marker, a module
renders it from the planner, `make regen` (`tools.regen`) writes it and checks it. The shared
part: find the block in a page and write a new one in its place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Block:
    """A block between `begin` and `end`, in whichever page under the repository holds it."""

    begin: str
    end: str
    what: str

    def page(self) -> Path:
        """The one page (README.md or one under docs/) that holds the block."""
        pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
        holding = [p for p in pages if p.is_file() and self.begin in p.read_text()]
        if len(holding) != 1:
            names = [str(p.relative_to(REPO)) for p in holding]
            raise SystemExit(f"expected one page holding the {self.what} block, found {names}")
        return holding[0]

    def quoted(self, text: str) -> str:
        """The block as `text` holds it, markers included."""
        start = text.index(self.begin)
        return text[start : text.index(self.end, start) + len(self.end)]

    def write(self, block: str) -> Path:
        """Replace the block in its page with `block`; the page."""
        path = self.page()
        text = path.read_text()
        path.write_text(text.replace(self.quoted(text), block))
        return path
