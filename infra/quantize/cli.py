"""`python -m infra.quantize`: a bf16 checkpoint in, a compressed-tensors checkpoint out, once.

    python -m infra.quantize --source DIR --scheme int8|int4 --out DIR [--source-revision REV]

The stack's quantize Job runs exactly this; the rehearsal runs it on its tiny model. It owns
what makes the Job safe to retry:

- bad input is refused before anything is read or written (exit 2, one line naming the option,
  the rule and the fix);
- an `--out` whose `quantized.json` matches this scheme, source and llm-compressor version, and
  whose files are all there, is left alone: one line, exit 0;
- otherwise `--out` is emptied (only when it is empty, ours, or a run of ours that did not
  finish), an in-progress flag is written, the checkpoint is made, every file is hashed, the
  flag is removed and the marker written last.

Progress lines go to stderr with seconds since the start; the last line on stdout says what was
written. Exit codes: 0 written or already there, 1 the quantization failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from infra.quantize import marker
from infra.quantize.scheme import SCHEMES, SchemeError


class InputError(ValueError):
    """A command-line value that cannot be used: `--option rule; fix` in one line."""

    def __init__(self, option: str, rule: str, fix: str) -> None:
        super().__init__(f"`{option}` {rule}; {fix}")


class Progress:
    """One line per step on stderr, with seconds since the start."""

    def __init__(self) -> None:
        self.began = time.monotonic()

    def __call__(self, line: str) -> None:
        print(
            f"[{time.monotonic() - self.began:7.1f} s] quantize: {line}",
            file=sys.stderr,
            flush=True,
        )


def check_paths(source: Path, out: Path) -> None:
    """Raise InputError unless `source` is a checkpoint and `out` may be (re)written."""
    if not (source / "config.json").is_file():
        raise InputError(
            "--source", f"{source} has no config.json", "pass a Hugging Face checkpoint directory"
        )
    if out.resolve() == source.resolve():
        raise InputError("--out", "is the source directory", "pass a directory of its own")
    if out.exists() and not out.is_dir():
        raise InputError("--out", f"{out} is a file", "pass a directory")
    if out.is_dir() and any(out.iterdir()) and not _ours(out):
        raise InputError(
            "--out",
            f"{out} holds files that are not a checkpoint this command wrote",
            "pass an empty or new directory",
        )


def _ours(out: Path) -> bool:
    return (out / marker.MARKER_NAME).is_file() or (out / marker.IN_PROGRESS_NAME).is_file()


def _empty(out: Path) -> None:
    """Remove what `out` holds, not `out` itself (it may be a volume's mount point)."""
    for child in out.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def run(
    source: Path,
    scheme_name: str,
    out: Path,
    revision: str | None,
    version: str,
    progress: Progress,
) -> str:
    """Quantize unless the marker matches; return the stdout line saying which happened.

    `version` is the installed llm-compressor's, recorded in and compared with the marker.
    """
    check_paths(source, out)
    scheme = SCHEMES[scheme_name]
    want = marker.wanted(scheme.name, source.resolve(), revision, version)
    reason = marker.mismatch(marker.read(out), want, out)
    if reason is None:
        return f"{out} already holds {scheme.name} of {source} (quantized.json matches); skipped"
    progress(f"writing {scheme.name} to {out}: {reason}")
    if out.is_dir():
        _empty(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / marker.IN_PROGRESS_NAME).write_text("", encoding="utf-8")
    from infra.quantize.run import quantize

    quantize(source, scheme, out, progress)
    progress("hashing every file")
    files = marker.file_digests(out, progress)
    (out / marker.IN_PROGRESS_NAME).unlink()
    marker.write(out, want, files)
    total = sum(entry["bytes"] for entry in files.values())
    return f"wrote {scheme.name} of {source} to {out}: {len(files)} files, {total:,} bytes"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infra.quantize",
        description="Quantize a bf16 checkpoint to compressed-tensors W8A8 (int8) or W4A8 (int4) "
        "with llm-compressor, without calibration data; skip when OUT already holds it.",
    )
    parser.add_argument("--source", type=Path, required=True, help="bf16 checkpoint directory")
    parser.add_argument("--scheme", choices=sorted(SCHEMES), required=True, help="weight format")
    parser.add_argument("--out", type=Path, required=True, help="checkpoint directory to write")
    parser.add_argument(
        "--source-revision",
        default=None,
        metavar="REV",
        help="the source's repository and revision, recorded in quantized.json (and compared)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    progress = Progress()
    try:
        version = importlib.metadata.version("llmcompressor")
    except importlib.metadata.PackageNotFoundError:
        print(
            "error: llmcompressor is not installed; pip install -r requirements-quantize.txt",
            file=sys.stderr,
        )
        return 1
    try:
        line = run(args.source, args.scheme, args.out, args.source_revision, version, progress)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SchemeError as error:
        print(f"error: `--scheme` {args.scheme}: {error}", file=sys.stderr)
        return 2
    print(line, flush=True)
    return 0
