"""The tree is the architecture: what Pulumi runs imports the planner and the components only."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT_ROOTS = ("infra", "components")
OFFLINE_TOOLS = ("infra.rehearse", "infra.bench")


def _module_file(name: str) -> Path | None:
    base = REPO.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(path: Path) -> set[str]:
    """Every project module `path` imports, at any depth of the file (functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from infra.plan import wiring` imports the package and, if it is one, the module.
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            if name.split(".")[0] in PROJECT_ROOTS and _module_file(name):
                parts = name.split(".")
                # Importing a.b.c imports a and a.b too.
                found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return found


def import_closure(entry: Path) -> set[str]:
    seen: set[str] = set()
    todo = list(_imported(entry))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        module_file = _module_file(name)
        if module_file is not None:
            todo.extend(_imported(module_file) - seen)
    return seen


def test_the_program_never_imports_the_offline_tools() -> None:
    closure = import_closure(REPO / "infra" / "__main__.py")
    leaked = sorted(m for m in closure if m.startswith(OFFLINE_TOOLS))
    assert not leaked, f"the Pulumi program imports offline tools: {leaked}"
    # The closure is real: it reaches the planner and the components it wires.
    assert {"infra.plan.sizing", "infra.plan.wiring", "components.model_server"} <= closure


def test_the_closure_follows_imports_inside_functions(tmp_path: Path) -> None:
    """A lazy import inside a function still counts: it runs on `pulumi up`."""
    entry = tmp_path / "entry.py"
    entry.write_text("def f():\n    from infra.bench import cli\n", encoding="utf-8")
    assert "infra.bench.cli" in import_closure(entry)
