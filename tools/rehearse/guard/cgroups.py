"""Memory cgroups as a pod sees them: find a writable hierarchy, make groups, run a process in one.

vLLM's CPU worker sizes its KV budget against `cgroup limit - cgroup usage`, and a cgroup's usage
includes the page cache of the files its processes read. To show that on this machine,
`memory_guard` needs what a container runtime does for a pod: a writable memory controller
(`find_hierarchy`), groups with limits (`Cgroup`), a cold page cache (`evict_page_cache`), an
engine that reads in its own group and sees it at the hierarchy's root (`wrapped_engine`), and
the init container's read in a sibling group (`prefetch_in_sibling`).

Linux only, and root for anything beyond `find_hierarchy`'s answer.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tools.rehearse.group.workspace import RehearsalError


@dataclass(frozen=True)
class MemoryHierarchy:
    """A writable memory cgroup hierarchy and where vLLM looks for its files."""

    version: Literal[1, 2]
    #: Where the rehearsal's groups are created.
    root: Path
    #: The directory vLLM reads its limit and usage from; the engine's group is bound onto it.
    vllm_path: Path
    limit_file: str
    usage_file: str
    #: memory.stat key of the group's page cache, its children included.
    cache_key: str


def find_hierarchy() -> tuple[MemoryHierarchy | None, str]:
    """The memory cgroup hierarchy to use, or None and why the machine cannot run this."""
    uid = os.geteuid()
    if uid != 0:
        return None, f"not root (id -u is {uid}): memory cgroups and bind mounts need root"
    for tool in ("unshare", "mount"):
        if shutil.which(tool) is None:
            return None, f"no `{tool}` on PATH: the engine needs its own mount namespace"
    v2 = Path("/sys/fs/cgroup")
    v1 = v2 / "memory"
    controllers = v2 / "cgroup.controllers"
    if controllers.is_file() and "memory" in controllers.read_text().split():
        hierarchy = MemoryHierarchy(2, v2, v2, "memory.max", "memory.current", "file")
    elif (v1 / "memory.limit_in_bytes").is_file():
        hierarchy = MemoryHierarchy(
            1, v1, v1, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_cache"
        )
    else:
        return None, "no memory cgroup controller under /sys/fs/cgroup (neither v1 nor v2)"
    probe = hierarchy.root / f"gemma-guard-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as error:
        return None, f"cgroup v{hierarchy.version} at {hierarchy.root} is not writable: {error}"
    return hierarchy, (
        f"root (id -u 0); cgroup v{hierarchy.version} memory controller at {hierarchy.root}, "
        "writable; unshare and mount present"
    )


class Cgroup:
    """One memory cgroup this command created; `remove` deletes it."""

    def __init__(self, hierarchy: MemoryHierarchy, path: Path) -> None:
        self.hierarchy = hierarchy
        self.path = path

    @classmethod
    def create(
        cls, hierarchy: MemoryHierarchy, path: Path, limit_bytes: int | None = None
    ) -> Cgroup:
        path.mkdir()
        group = cls(hierarchy, path)
        if hierarchy.version == 2:
            # Children of a v2 group get a memory controller only if the group delegates it.
            (path / "cgroup.subtree_control").write_text("+memory")
        if limit_bytes is not None:
            (path / hierarchy.limit_file).write_text(str(limit_bytes))
        return group

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def usage(self) -> int:
        return int((self.path / self.hierarchy.usage_file).read_text())

    def cache(self) -> int:
        for line in (self.path / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == self.hierarchy.cache_key:
                return int(value)
        return 0

    def members(self) -> list[int]:
        try:
            return [int(pid) for pid in self.procs.read_text().split()]
        except OSError:
            return []

    def remove(self, wait_s: float = 10.0) -> None:
        """Delete the group once its processes are gone (they are stopped first)."""
        deadline = time.monotonic() + wait_s
        while self.path.exists():
            try:
                self.path.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def evict_page_cache(roots: Iterable[Path]) -> int:
    """Drop the page cache of every file under `roots`; return the bytes of files visited.

    Pages are charged to the cgroup that first reads them, so evicting first makes the next
    reader pay, as a new pod's containers do for their image and their weights.
    """
    visited = 0
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*"):
            if not path.is_file() or path.is_symlink():
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                visited += os.fstat(fd).st_size
            finally:
                os.close(fd)
    return visited


def wrapped_engine(
    hierarchy: MemoryHierarchy,
    engine: Cgroup,
    weights: Sequence[Path],
    read_first: bool,
    argv: Sequence[str],
) -> list[str]:
    """The engine's command: join the cgroup, optionally read the weights, bind, exec vLLM.

    `unshare -m` gives the engine a private mount namespace: the bind mount that shows vLLM its
    own cgroup at the hierarchy's root disappears with the engine's last process.
    """
    read = f"cat {shlex.join(str(w) for w in weights)} >/dev/null && " if read_first else ""
    script = (
        f"echo $$ > {shlex.quote(str(engine.procs))} && {read}"
        f"mount --bind {shlex.quote(str(engine.path))} {shlex.quote(str(hierarchy.vllm_path))} "
        '&& exec "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv]


def prefetch_in_sibling(
    hierarchy: MemoryHierarchy, base: Cgroup, weights: Sequence[Path], timeout_s: float
) -> int:
    """Read the weights in a sibling cgroup, wait for the reader, remove the group.

    Returns the bytes charged to that group, which stay off the engine's account.
    """
    sibling = Cgroup.create(hierarchy, base.path / "prefetch")
    try:
        script = (
            f"echo $$ > {shlex.quote(str(sibling.procs))} && "
            f"exec cat {shlex.join(str(w) for w in weights)} >/dev/null"
        )
        done = subprocess.run(["sh", "-c", script], timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise RehearsalError(f"the prefetch reader failed with exit {done.returncode}")
        return sibling.cache()
    finally:
        sibling.remove()
