"""`OUT/quantized.json`: what a quantized checkpoint was made from, and proof it is whole.

The marker is written last, after every checkpoint file, so its presence says the run finished.
It records the scheme, the source (its directory, the revision the caller names and a
fingerprint of its files), the llm-compressor version, and the size and sha256 of every file
beside it. A later run with the same scheme, source and llm-compressor version whose files still
have their recorded sizes skips the work; anything else is redone.

The source fingerprint hashes each source file's name and size and the full text of its small
JSON files (config, tokenizer, index): it tells a different checkpoint from the same one without
reading tens of GB of weights on every retry of the Job.

Pure apart from reading and writing files; no torch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

MARKER_NAME = "quantized.json"
#: Written first and removed with the marker's writing: a directory holding it was left by a run
#: that did not finish, and may be emptied.
IN_PROGRESS_NAME = ".quantize-in-progress"
MARKER_FORMAT = 1
_CHUNK = 8 * 1024 * 1024
#: A hashing progress line every this many bytes (the 12B's int8 checkpoint is ~13 GB).
_PROGRESS_EVERY = 2 * 1024**3


def source_fingerprint(source: Path) -> str:
    """sha256 over every source file's relative name and size, and the bytes of its JSON files."""
    digest = hashlib.sha256()
    for path in _files(source):
        name = path.relative_to(source).as_posix()
        digest.update(f"{name}\0{path.stat().st_size}\0".encode())
        if path.suffix == ".json":
            digest.update(path.read_bytes())
    return digest.hexdigest()


def file_digests(out: Path, progress: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Size and sha256 of every file under `out` but the marker and the in-progress flag."""
    digests: dict[str, dict[str, Any]] = {}
    hashed = reported = 0
    for path in _files(out):
        if path.name in (MARKER_NAME, IN_PROGRESS_NAME) and path.parent == out:
            continue
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
                hashed += len(chunk)
                if hashed - reported >= _PROGRESS_EVERY:
                    reported = hashed
                    progress(f"hashing: {hashed / 1024**3:.1f} GiB")
        digests[path.relative_to(out).as_posix()] = {
            "bytes": path.stat().st_size,
            "sha256": digest.hexdigest(),
        }
    return digests


def wanted(
    scheme: str, source: Path, source_revision: str | None, compressor_version: str
) -> dict[str, Any]:
    """The marker fields a run with these inputs produces (everything but the files)."""
    return {
        "format": MARKER_FORMAT,
        "scheme": scheme,
        "source": str(source),
        "sourceRevision": source_revision,
        "sourceFingerprint": source_fingerprint(source),
        "llmCompressorVersion": compressor_version,
    }


def read(out: Path) -> dict[str, Any] | None:
    """The marker in `out`, or None when there is none or it is not a JSON object."""
    try:
        data = json.loads((out / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def mismatch(existing: Mapping[str, Any] | None, want: Mapping[str, Any], out: Path) -> str | None:
    """Why the checkpoint in `out` cannot be reused, or None when it can.

    It can when the marker holds every field of `want` with the same value and every file it
    lists exists with its recorded size (a truncated copy fails this; the sha256s are for a
    reader who wants to verify the bytes).
    """
    if existing is None:
        return "no marker"
    for key, value in want.items():
        if existing.get(key) != value:
            return f"{key} was {existing.get(key)!r}, now {value!r}"
    files = existing.get("files")
    if not isinstance(files, dict) or not files:
        return "the marker lists no files"
    for name, entry in sorted(files.items()):
        path = out / name
        size = entry.get("bytes") if isinstance(entry, dict) else None
        if not path.is_file() or path.stat().st_size != size:
            return f"{name} is missing or not {size} bytes"
    return None


def write(out: Path, want: Mapping[str, Any], files: Mapping[str, Any]) -> dict[str, Any]:
    """Write the marker (the run's fields and its files' digests); return what was written."""
    marker = {**want, "files": dict(files)}
    scratch = out / f"{MARKER_NAME}.tmp"
    scratch.write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    scratch.replace(out / MARKER_NAME)
    return marker


def _files(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())
