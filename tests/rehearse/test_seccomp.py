"""The rehearsal's seccomp filter (`tools.rehearse.group.seccomp`): the NUMA memory-policy calls
fail with EPERM as in the pod, everything else works, and every rank is started through it."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import builders
from tests.rehearse.support import until
from tools.rehearse.checks import seccomp_check, seccomp_status
from tools.rehearse.group import seccomp
from tools.rehearse.group.ranks import SECCOMP_WRAPPER, rank_launches

WRAPPER = [sys.executable, str(Path(seccomp.__file__)), "--"]

# Calls each syscall by number (as libnuma does) and prints "<name> <result> <errno>".
PROBE = """
import ctypes, ctypes.util, sys
lib = ctypes.CDLL(ctypes.util.find_library("seccomp"))
lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
libc = ctypes.CDLL(None, use_errno=True)
mode = ctypes.c_int(0)
calls = {
    "get_mempolicy": (ctypes.byref(mode), None, 0, None, 0),
    "set_mempolicy": (0, None, 0),
    "migrate_pages": (0, 0, None, None),
    "getpid": (),
}
for name, args in calls.items():
    ctypes.set_errno(0)
    result = libc.syscall(lib.seccomp_syscall_resolve_name(name.encode()), *args)
    print(name, result, ctypes.get_errno())
"""


def _probe(prefix: list[str]) -> dict[str, tuple[int, int]]:
    done = subprocess.run(
        [*prefix, sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    )
    rows = (line.split() for line in done.stdout.splitlines())
    return {name: (int(result), int(err)) for name, result, err in rows}


def test_the_numa_calls_fail_with_eperm_and_the_rest_works() -> None:
    plain, filtered = _probe([]), _probe(WRAPPER)
    assert plain["get_mempolicy"] == (0, 0)  # allowed without the filter
    for name in ("get_mempolicy", "set_mempolicy", "migrate_pages"):
        assert filtered[name] == (-1, 1), name  # EPERM, as RuntimeDefault without CAP_SYS_NICE
    assert filtered["getpid"][0] > 0
    assert set(seccomp.REFUSED) >= {"get_mempolicy", "set_mempolicy", "mbind", "migrate_pages"}


def test_bad_use_and_a_missing_command_are_one_line_errors() -> None:
    usage = subprocess.run([*WRAPPER[:2], "vllm"], capture_output=True, text=True, check=False)
    assert (usage.returncode, usage.stderr) == (2, "usage: seccomp.py -- COMMAND [ARG...]\n")
    missing = subprocess.run(
        [*WRAPPER, "/nonexistent/vllm"], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 127
    assert missing.stderr == "seccomp: cannot run /nonexistent/vllm: No such file or directory\n"


def test_every_rank_starts_through_the_filter() -> None:
    assert list(SECCOMP_WRAPPER) == WRAPPER
    engine = builders.planned_spec().engine()
    for launch in rank_launches(engine, "/venv/bin/vllm", "/models/m", (8000, 29500), "k"):
        assert list(launch.argv[:4]) == [*WRAPPER, "/venv/bin/vllm"]
        assert launch.argv[4] == "serve"


@dataclass
class _Rank:
    popen: subprocess.Popen[bytes]
    log: str

    def log_text(self) -> str:
        return self.log


def _started(prefix: list[str]) -> subprocess.Popen[bytes]:
    popen = subprocess.Popen([*prefix, sys.executable, "-c", "import time; time.sleep(30)"])
    cmdline = Path(f"/proc/{popen.pid}/cmdline")

    def running() -> bool:
        # The wrapper loads its filter, then execs: wait until the command itself runs.
        argv = cmdline.read_bytes()
        return argv.endswith(b"sleep(30)\0") and b"seccomp.py" not in argv

    until(running, 10)
    return popen


def test_the_verdict_row_sees_each_rank_s_filter() -> None:
    filtered, plain = _started(WRAPPER), _started([])
    try:
        assert seccomp_status(filtered.pid) == "2" and seccomp_status(plain.pid) == "0"
        warned = "[W utils.cpp:65] Warning: numa_set_membind failed. errno: 1"
        ok = seccomp_check(
            SimpleNamespace(processes=[_Rank(filtered, warned), _Rank(filtered, "")])
        )
        assert (ok.ok, ok.observed) == (True, "2 of 2 ranks filtered; 1 logged the refused binding")
        bad = seccomp_check(SimpleNamespace(processes=[_Rank(filtered, ""), _Rank(plain, "")]))
        assert (bad.ok, bad.observed) == (False, "seccomp modes ['2', '0']")
    finally:
        for popen in (filtered, plain):
            popen.kill()
            popen.wait()
    assert seccomp_status(filtered.pid) is None


@pytest.mark.parametrize("names", [("no_such_call_anywhere",), ()])
def test_unknown_names_are_skipped(names: tuple[str, ...]) -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import seccomp; "
        f"print(seccomp.refuse({names!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(Path(seccomp.__file__).parent)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"
