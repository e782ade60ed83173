"""The mutation report: every mutant's outcome read from mutmut's results, each survivor with its
file, line and change, the equivalent ones set apart with their reasons, and the score.

mutmut keeps, for each mutated file, `mutants/<file>.meta` (JSON: the exit code of the tests per
mutant) and `mutants/<file>` (the original and every mutant of each function, side by side). The
line of a mutant is where its function differs from the original, mapped back onto the source.
"""

from __future__ import annotations

import ast
import difflib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

#: mutmut 3's reading of the tests' exit code for a mutant (`mutmut.stats.status_by_exit_code`).
_STATUS = {
    0: "survived",
    1: "killed",
    3: "killed",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
    37: "killed",
    24: "timeout",
    -24: "timeout",
    152: "timeout",
    255: "timeout",
    -9: "timeout",
    -11: "segfault",
    None: "not checked",
}
#: Outcomes where the tests noticed the change (a mutant that never finishes is noticed too).
DETECTED = frozenset({"killed", "timeout", "segfault"})
#: Outcomes that must be killed or listed as equivalent.
UNDETECTED = frozenset({"survived", "no tests", "suspicious"})


@dataclass(frozen=True)
class Outcome:
    """One mutant: where it is, what it changed, and what the tests made of it."""

    name: str
    file: str
    line: int
    status: str
    original: str
    mutated: str


def load_equivalent(path: Path) -> dict[str, str]:
    """`mutant-name reason` per line (`#` starts a comment); every entry needs its reason."""
    entries: dict[str, str] = {}
    if not path.exists():
        return entries
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        if not reason.strip():
            raise SystemExit(f"{path}:{number}: {name} has no reason; say why it is equivalent")
        entries[name] = reason.strip()
    return entries


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions by mutmut's key: `x_name` for a module function, `xǁClassǁname` for a method."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[f"x_{node.name}"] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[f"xǁ{node.name}ǁ{item.name}"] = item
    return found


def _mutated_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """mutmut's copies (`<key>__mutmut_orig`, `<key>__mutmut_<n>`) by their own names."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and "__mutmut_" in node.name:
            found[node.name] = node
    return found


def _lines(source: list[str], node: ast.AST) -> list[str]:
    return source[node.lineno - 1 : node.end_lineno]  # type: ignore[attr-defined]


def collect(work: Path, repo: Path, files: list[str]) -> list[Outcome]:
    """Every mutant of `files` from the mutmut run in `work`, located in the sources in `repo`."""
    outcomes = []
    for file in files:
        meta_path = work / "mutants" / f"{file}.meta"
        if not meta_path.exists():
            raise SystemExit(f"no mutmut results for {file} in {work}: run `make mutants` first")
        codes = json.loads(meta_path.read_text())["exit_code_by_key"]
        original_text = (repo / file).read_text()
        original = original_text.splitlines()
        mutated_text = (work / "mutants" / file).read_text()
        mutated = mutated_text.splitlines()
        sources = _functions(ast.parse(original_text))
        copies = _mutated_functions(ast.parse(mutated_text))
        module = file.removesuffix(".py").replace("/", ".")
        for name, code in codes.items():
            local = name.removeprefix(module + ".")
            key = local.rpartition("__mutmut_")[0]
            line, before, after = _locate_in(original, mutated, sources.get(key), copies, local)
            outcomes.append(
                Outcome(name, file, line, _STATUS.get(code, "suspicious"), before, after)
            )
    return outcomes


def _locate_in(
    original: list[str],
    mutated: list[str],
    source: ast.FunctionDef | ast.AsyncFunctionDef | None,
    copies: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    local: str,
) -> tuple[int, str, str]:
    """(line in the source, original text, mutated text) of the first change of a mutant."""
    key = local.rpartition("__mutmut_")[0]
    orig, mutant = copies.get(f"{key}__mutmut_orig"), copies.get(local)
    if source is None or orig is None or mutant is None:
        return 0, "", ""
    # The first line is the `def` with mutmut's name; compare the rest.
    before, after = _lines(mutated, orig)[1:], _lines(mutated, mutant)[1:]
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            return (
                source.lineno + 1 + i1,
                " ".join(s.strip() for s in before[i1:i2]),
                " ".join(s.strip() for s in after[j1:j2]),
            )
    return source.lineno, original[source.lineno - 1].strip(), "(signature)"


def render(
    outcomes: list[Outcome],
    equivalent: dict[str, str],
    timings: dict[str, float],
    min_score: float,
    whole_core: bool = True,
) -> tuple[str, bool]:
    """The report's text, and whether the run passes (no unlisted survivor, score reached)."""
    out: list[str] = []
    by_file: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_file.setdefault(outcome.file, []).append(outcome)
    unchecked = [o for o in outcomes if o.status == "not checked"]
    survivors = [o for o in outcomes if o.status in UNDETECTED and o.name not in equivalent]
    listed = [o for o in outcomes if o.status in UNDETECTED and o.name in equivalent]
    # An entry is stale when its file was mutated but it names no surviving mutant: a test
    # kills it now, or the function changed and its mutants were numbered anew.
    modules = {o.file.removesuffix(".py").replace("/", ".") for o in outcomes}
    survivors_listed = {o.name for o in listed}
    stale = sorted(
        name
        for name in equivalent
        if name.rpartition(".x")[0] in modules and name not in survivors_listed
    )

    out.append("mutation score of the pure core (killed / (all - equivalent - skipped))")
    out.append(f"{'file':44} {'mutants':>7} {'killed':>7} {'equiv':>6} {'left':>5} {'score':>7}")
    totals: Counter[str] = Counter()
    for file, items in by_file.items():
        counts = Counter(o.status for o in items)
        equiv = sum(1 for o in items if o.name in equivalent and o.status in UNDETECTED)
        left = sum(1 for o in items if o.name not in equivalent and o.status in UNDETECTED)
        detected = sum(counts[s] for s in DETECTED)
        scored = len(items) - equiv - counts["skipped"]
        totals.update(
            {"all": len(items), "detected": detected, "equiv": equiv, "left": left,
             "scored": scored}
        )  # fmt: skip
        score = 100.0 * detected / scored if scored else 100.0
        out.append(f"{file:44} {len(items):7} {detected:7} {equiv:6} {left:5} {score:6.1f}%")
    total_score = 100.0 * totals["detected"] / totals["scored"] if totals["scored"] else 100.0
    out.append(
        f"{'all' if whole_core else 'these files':44} {totals['all']:7} {totals['detected']:7} "
        f"{totals['equiv']:6} {totals['left']:5} {total_score:6.1f}%"
    )
    if timings:
        parts = ", ".join(f"{g} {s:.0f} s" for g, s in timings.items())
        out.append(f"run time {sum(timings.values()):.0f} s ({parts})")

    if survivors:
        out.append("")
        out.append(f"{len(survivors)} surviving mutant(s): kill each with a test of the rule it")
        out.append("breaks, or list it in tests/mutants-equivalent.txt with the reason")
        for o in sorted(survivors, key=lambda o: (o.file, o.line, o.name)):
            out.append(f"{o.file}:{o.line}: {o.status}: {o.name}")
            out.append(f"    - {o.original}")
            out.append(f"    + {o.mutated}")
    if listed:
        out += ["", f"{len(listed)} equivalent mutant(s), as listed:"]
        for o in sorted(listed, key=lambda o: (o.file, o.line, o.name)):
            out.append(f"{o.file}:{o.line}: {o.name}: {equivalent[o.name]}")
    if stale:
        out += ["", "listed as equivalent but not a survivor of this run (drop or renumber them):"]
        out += [f"    {name}" for name in stale]
    if unchecked:
        out += ["", f"{len(unchecked)} mutant(s) were not checked: the run did not finish"]

    ok = not survivors and not unchecked and total_score >= min_score
    out += ["", "PASS" if ok else "FAIL"]
    return "\n".join(out), ok
