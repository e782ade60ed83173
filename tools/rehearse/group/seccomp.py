"""Run a command with the NUMA memory-policy calls refused, as the engine's seccomp profile does.

The engine containers run with seccomp `RuntimeDefault`, non-root and with every capability
dropped. The runtime's default profile (containerd `contrib/seccomp/seccomp_default.go`, moby's
`profiles/seccomp/default.json`) admits `get_mempolicy`, `set_mempolicy`, `mbind` and
`set_mempolicy_home_node` only to a process holding CAP_SYS_NICE and has no rule admitting
`migrate_pages` or `move_pages`: in the pod each of them fails with EPERM. vLLM's CPU backend
calls them to bind its memory to its threads' NUMA node (`csrc/cpu/utils.cpp`,
`init_cpu_memory_env`); vLLM 0.31 logs "numa_migrate_pages failed" and "numa_set_membind failed"
as warnings and goes on (earlier releases stopped the engine there). The rehearsal starts every
rank through this module, so each `make rehearse` shows the pinned vLLM starting and serving
without them. The other calls the default profile refuses (io_uring, clone3) were refused to a
rehearsal group under the whole profile once, with the same result; this filter keeps only the
ones the engine is known to make.

Usage: python3 tools/rehearse/group/seccomp.py -- COMMAND [ARG...]   (stdlib only: it runs before,
and outside, the project's virtual environments; Linux with libseccomp 2.x).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys
from collections.abc import Sequence

#: Refused with EPERM, as the runtime's default profile refuses them to the engine.
REFUSED = (
    "get_mempolicy",
    "set_mempolicy",
    "set_mempolicy_home_node",
    "mbind",
    "migrate_pages",
    "move_pages",
)
#: libseccomp's action values (seccomp.h).
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000


class SeccompError(RuntimeError):
    """The filter could not be built or loaded; the command was not started."""


def _library() -> ctypes.CDLL:
    found = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(found, use_errno=True)
    except OSError as error:
        raise SeccompError(
            f"libseccomp is not installed ({error}); install it (Debian: apt-get install "
            "libseccomp2)"
        ) from error
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.restype = ctypes.c_int
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.restype = ctypes.c_int
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def refuse(names: Sequence[str] = REFUSED) -> list[str]:
    """Load a filter on this process (and what it executes) that fails `names` with EPERM and
    allows everything else. Returns the names refused; a name this architecture or libseccomp
    does not know is skipped (a kernel without the call refuses it anyway)."""
    lib = _library()
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise SeccompError("seccomp_init failed")
    refused = []
    try:
        for name in names:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue
            rc = lib.seccomp_rule_add(ctx, _ERRNO | errno.EPERM, number, 0)
            if rc < 0:
                raise SeccompError(f"seccomp_rule_add({name}) failed: {os.strerror(-rc)}")
            refused.append(name)
        # libseccomp sets no_new_privs first, so an unprivileged process may load the filter.
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise SeccompError(f"seccomp_load failed: {os.strerror(-rc)}")
    finally:
        lib.seccomp_release(ctx)
    return refused


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2 or argv[0] != "--":
        print("usage: seccomp.py -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        refuse()
    except SeccompError as error:
        print(f"seccomp: {error}", file=sys.stderr)
        return 1
    command = list(argv[1:])
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"seccomp: cannot run {command[0]}: {error.strerror}", file=sys.stderr)
        return 127
    return 0  # unreachable: execvp replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
