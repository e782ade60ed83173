"""The mutation report honours the equivalent list, locates each survivor and fails on the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mutation.report import collect, load_equivalent, render

SOURCE = '''"""A module."""


def double(x: int) -> int:
    """Twice x."""
    y = x * 2
    return y


class Box:
    def size(self) -> int:
        return 3
'''

MUTATED = '''"""A module."""


def x_double__mutmut_orig(x: int) -> int:
    """Twice x."""
    y = x * 2
    return y


def x_double__mutmut_1(x: int) -> int:
    """Twice x."""
    y = x / 2
    return y


def x_double__mutmut_2(x: int) -> int:
    """Twice x."""
    y = x * 3
    return y


class Box:
    def xǁBoxǁsize__mutmut_orig(self) -> int:
        return 3

    def xǁBoxǁsize__mutmut_1(self) -> int:
        return 4
'''


@pytest.fixture
def run(tmp_path: Path) -> tuple[Path, Path]:
    repo, work = tmp_path / "repo", tmp_path / "work"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "mod.py").write_text(SOURCE)
    (work / "mutants" / "pkg").mkdir(parents=True)
    (work / "mutants" / "pkg" / "mod.py").write_text(MUTATED)
    codes = {
        "pkg.mod.x_double__mutmut_1": 1,
        "pkg.mod.x_double__mutmut_2": 0,
        "pkg.mod.xǁBoxǁsize__mutmut_1": 0,
    }
    (work / "mutants" / "pkg" / "mod.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    return repo, work


def test_survivors_are_located_on_their_source_line(run: tuple[Path, Path]) -> None:
    repo, work = run
    outcomes = {o.name: o for o in collect(work, repo, ["pkg/mod.py"])}
    double = outcomes["pkg.mod.x_double__mutmut_2"]
    assert (double.file, double.line, double.status) == ("pkg/mod.py", 6, "survived")
    assert (double.original, double.mutated) == ("y = x * 2", "y = x * 3")
    size = outcomes["pkg.mod.xǁBoxǁsize__mutmut_1"]
    assert (size.line, size.mutated) == (12, "return 4")
    assert outcomes["pkg.mod.x_double__mutmut_1"].status == "killed"


def test_an_unlisted_survivor_fails_the_run(run: tuple[Path, Path]) -> None:
    repo, work = run
    text, ok = render(collect(work, repo, ["pkg/mod.py"]), {}, {"g": 12.0}, 0.0)
    assert not ok
    assert "pkg/mod.py:6: survived: pkg.mod.x_double__mutmut_2" in text
    assert "pkg/mod.py:12: survived: pkg.mod.xǁBoxǁsize__mutmut_1" in text
    assert "run time 12 s" in text


def test_listed_equivalents_pass_and_leave_the_score(run: tuple[Path, Path], tmp_path) -> None:
    repo, work = run
    listing = tmp_path / "equivalent.txt"
    listing.write_text(
        "# name reason\n"
        "pkg.mod.x_double__mutmut_2 the example's factor is free\n"
        "pkg.mod.xǁBoxǁsize__mutmut_1 any size will do\n"
    )
    outcomes = collect(work, repo, ["pkg/mod.py"])
    text, ok = render(outcomes, load_equivalent(listing), {}, 90.0)
    assert ok, text
    assert "pkg/mod.py:6: pkg.mod.x_double__mutmut_2: the example's factor is free" in text
    assert "100.0%" in text
    _, partial = render(outcomes, {"pkg.mod.x_double__mutmut_2": "free"}, {}, 0.0)
    assert not partial


def test_an_entry_without_a_reason_is_refused(tmp_path: Path) -> None:
    listing = tmp_path / "equivalent.txt"
    listing.write_text("pkg.mod.x_double__mutmut_2\n")
    with pytest.raises(SystemExit, match="has no reason"):
        load_equivalent(listing)


def test_an_entry_that_names_no_survivor_is_shown_as_stale(run: tuple[Path, Path]) -> None:
    repo, work = run
    equivalent = {
        "pkg.mod.x_double__mutmut_2": "free",
        "pkg.mod.xǁBoxǁsize__mutmut_1": "any",
        "pkg.mod.x_double__mutmut_1": "killed by a test now",
        "pkg.mod.x_gone__mutmut_9": "its function changed",
        "other.mod.x_f__mutmut_1": "not run this time",
    }
    text, ok = render(collect(work, repo, ["pkg/mod.py"]), equivalent, {}, 90.0)
    assert ok
    stale = text.split("not a survivor of this run (drop or renumber them):\n")[1]
    assert "pkg.mod.x_double__mutmut_1" in stale and "pkg.mod.x_gone__mutmut_9" in stale
    assert "other.mod" not in stale
