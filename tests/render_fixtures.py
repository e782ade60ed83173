"""The rendered dev and prod objects, committed as text under tests/fixtures/rendered/<stack>/.

    make regen        (python -m tools.regen, with the docs' generated blocks)

One YAML file per object, named as `python -m infra.plan --render DIR` names them, from the same
`rendered_objects`, so a pull request shows the effective vLLM flags, limits, nginx.conf and the
njs script as a diff. Multi-line strings (the ConfigMap's files) are written in literal block
style so they read as the files they are; `--render` keeps PyYAML's default style. The stacks
are loaded on a fixed day, so a date rule does not make the text depend on when it is written.

`tests/test_regen.py` holds the committed files to a fresh render. Only tests and `tools.regen`
import this module; the Pulumi program never does.
"""

from __future__ import annotations

import datetime as dt
import difflib
from pathlib import Path
from typing import Any

import yaml

from infra.adapters.render import file_name, rendered_objects
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack

ROOT = Path(__file__).resolve().parent / "fixtures" / "rendered"
STACKS = ("dev", "prod")
#: The day the stacks are validated on (as tests/program/test_elastic_program.py does).
TODAY = dt.date(2026, 12, 2)
FIX = "make regen"


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal blocks.

    PyYAML refuses a block for text with a space before a line break (nginx.conf has lines of
    indentation only), though YAML keeps such spaces in a literal block as they are (YAML 1.2.2
    section 8.1.2, `l-nb-literal-text`); `dump` proves each text loads back to its object."""

    def analyze_scalar(self, scalar: str) -> yaml.emitter.ScalarAnalysis:
        analysis = super().analyze_scalar(scalar)
        if "\n" in scalar and not analysis.allow_block:
            unspaced = "\n".join(line.rstrip(" ") for line in scalar.split("\n"))
            analysis.allow_block = super().analyze_scalar(unspaced).allow_block
        return analysis


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(obj: Any) -> str:
    """One object as committed text; raises if the text does not load back to the object."""
    text = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
    if yaml.safe_load(text) != obj:
        raise ValueError(f"{obj['kind']}/{obj['metadata']['name']} does not round-trip as YAML")
    return text


def render(stack: str) -> dict[str, str]:
    """A stack's objects as {file name: YAML text}, in the order the program applies them."""
    cfg = load_stack(stack, today=TODAY)
    objects = rendered_objects(cfg, plan(cfg, stack))
    return {file_name(i, obj): dump(obj) for i, obj in enumerate(objects)}


def committed(stack: str, root: Path = ROOT) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((root / stack).glob("*.yaml"))}


def mismatch(stack: str, root: Path = ROOT) -> str | None:
    """None when the committed files are a fresh render; else a unified diff of the first file
    that differs (or the names missing and left over) and the command that fixes it."""
    fresh, kept = render(stack), committed(stack, root)
    for name in sorted(fresh.keys() | kept.keys()):
        if fresh.get(name) == kept.get(name):
            continue
        diff = difflib.unified_diff(
            kept.get(name, "").splitlines(keepends=True),
            fresh.get(name, "").splitlines(keepends=True),
            fromfile=f"committed {stack}/{name}" + ("" if name in kept else " (missing)"),
            tofile=f"rendered {stack}/{name}" + ("" if name in fresh else " (not rendered)"),
        )
        return (
            f"tests/fixtures/rendered/{stack}/{name} is not what {stack} renders;"
            f" if the change is meant, run `{FIX}` and commit the files.\n" + "".join(diff)
        )
    return None


def write(stack: str, root: Path = ROOT) -> list[Path]:
    """Replace the stack's committed files with a fresh render; return the files written."""
    out = root / stack
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.yaml"):
        stale.unlink()
    written = []
    for name, text in render(stack).items():
        (out / name).write_text(text)
        written.append(out / name)
    return written
