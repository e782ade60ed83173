"""The programs the engine containers run, as files: linted and tested as code, shipped in one
ConfigMap per group (`components.manifests.pods.programs_config`) and mounted read-only at
`MOUNT`. Standard library only (the prefetch's huggingface_hub aside): they run in the vLLM
image's Python. This package's own `__init__` is not shipped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: The files in the checkout, and where the pods mount them.
DIR = Path(__file__).resolve().parent
MOUNT = "/opt/gemma-graviton"
FILES = ("engine.sh", "liveness.py", "drain.py", "prefetch.py")


#: vLLM's key check on every route (`--middleware key_check.KeyCheck`), where vLLM listens on the
#: pod network: `vllm-key`, and an elastic stack's groups behind the door.
KEY_CHECK = "key_check.py"


def files(key_check: bool = False) -> dict[str, str]:
    """The ConfigMap's data: each file's text by name, the key check's where vLLM checks the key."""
    names = (*FILES, KEY_CHECK) if key_check else FILES
    return {name: (DIR / name).read_text() for name in names}


def local(argv: Sequence[str], python: str) -> list[str]:
    """A pod's command run on this machine: `python` for `python3`, the checkout's files for the
    mounted ones (the rehearsal and the tests run exactly what the pods run)."""
    return [python if arg == "python3" else arg.replace(MOUNT, str(DIR), 1) for arg in argv]
