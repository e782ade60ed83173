"""The weight prefetch (the ranks' init container; `components.manifests.pods` says why it reads
every file). Runs in the vLLM image's Python, from the group's programs ConfigMap; its inputs
come from the environment.

    prefetch.py download   MODEL_REPO, MODEL_REVISION, MODEL_DIR, DOWNLOAD_ATTEMPTS
    prefetch.py produced   MODEL_DIR, CHECKPOINT_MARKER (the quantize Job's checkpoint)

A failed download is retried with back-off (huggingface_hub resumes the files it has): exiting
would fail the pod, and LWS would recreate the whole group. What no retry can fix (a repository,
commit or gated access the token does not have: the hub's 401/403/404, raised as these errors by
huggingface_hub 0.2x-1.x `errors.py`) ends the container at once.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

#: The files of a checkpoint the download takes.
PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "tokenizer*"]


def backoff(attempt: int) -> int:
    """Seconds before the next attempt: 15 doubling, at most 300."""
    return min(300, 15 * 2 ** (attempt - 1))


def download(
    repo: str,
    revision: str | None,
    target: Path,
    attempts: int,
) -> None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    name = f"{repo}@{revision or 'main'}"
    start = time.time()
    for attempt in range(1, attempts + 1):
        try:
            snapshot_download(repo, revision=revision, local_dir=target, allow_patterns=PATTERNS)
            break
        except (RepositoryNotFoundError, RevisionNotFoundError) as error:
            sys.exit(
                f"{name} cannot be downloaded: {error!r}; check the stack's `model` and "
                "`modelRevision` and that the HF token may read the repository (a gated "
                "model's licence accepted)"
            )
        except Exception as error:  # network, throttling, hub errors: all worth another try
            if attempt == attempts:
                sys.exit(f"download of {name} failed {attempts} times, last: {error!r}")
            pause = backoff(attempt)
            print(
                f"download attempt {attempt}/{attempts} failed ({error!r}); retrying in {pause} s",
                flush=True,
            )
            time.sleep(pause)
    print(f"downloaded {name} in {time.time() - start:.0f} s", flush=True)


def read_all(target: Path) -> int:
    """Read every file once (huggingface_hub's `.cache` left out), so the page cache is charged
    to this container; the bytes read."""
    start, total = time.time(), 0
    for path in sorted(p for p in target.rglob("*") if p.is_file() and ".cache" not in p.parts):
        with open(path, "rb") as handle:
            while chunk := handle.read(64 << 20):
                total += len(chunk)
    print(
        f"read {total / 2**30:.1f} GiB through the page cache in {time.time() - start:.0f} s",
        flush=True,
    )
    return total


def main(mode: str) -> int:
    target = Path(os.environ["MODEL_DIR"])
    if mode == "produced":
        marker = os.environ["CHECKPOINT_MARKER"]
        if not (target / marker).is_file():
            sys.exit(
                f"{target}/{marker} is missing: the quantize Job has not written this volume's "
                "checkpoint; see its log (kubectl logs job/<name> in the model's namespace)"
            )
    else:
        revision = os.environ.get("MODEL_REVISION") or None
        download(os.environ["MODEL_REPO"], revision, target, int(os.environ["DOWNLOAD_ATTEMPTS"]))
    read_all(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
