"""The rendered SECRETS.txt: its commands, pasted into a shell as written, create both Secrets
with every flag and with the files the gatekeeper reads (a stand-in `kubectl` on PATH records
what it is given). `--from-file=PATH` takes the file's name as the Secret's key (kubectl's
`staging/src/k8s.io/kubectl/pkg/cmd/create/create_secret.go`, the flag's help: "a default name
will be given to them"), which is why the files carry the names the gatekeeper reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infra.adapters.cli import main

FAKE_KUBECTL = """#!/bin/sh
# Records each call's arguments one to a line, and the files it is asked to read.
{ printf 'call\\n'; for a in "$@"; do printf '%s\\n' "$a"; done; } >> "$RECORD"
for a in "$@"; do
  case "$a" in --from-file=*) f="${a#--from-file=}"; cp "$f" "$RECORD.$f" ;; esac
done
"""


def _note(stack: str, tmp_path: Path) -> tuple[str, str]:
    """A stack's rendered SECRETS.txt, and its indented lines: the commands, as a script."""
    assert main(["--stack", stack, "--render", str(tmp_path / "r")]) == 0
    note = (tmp_path / "r" / "SECRETS.txt").read_text()
    script = "\n".join(
        line[2:] for line in note.splitlines() if line.startswith("  ") and line.strip()
    )
    return note, script


def _run(script: str, tmp_path: Path) -> list[list[str]]:
    """The script run with a stand-in kubectl on PATH; the calls it made."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text(FAKE_KUBECTL)
    (bin_dir / "kubectl").chmod(0o755)
    record = tmp_path / "record"
    work = tmp_path / "work"
    work.mkdir()
    env = os.environ | {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RECORD": str(record),
        "HF_TOKEN": "hf_token_value",
        "API_KEY": "k" * 48,
        "ENGINE_KEY": "e" * 48,
    }
    subprocess.run(["sh", "-eu", "-c", script], cwd=work, env=env, check=True)
    assert list(work.iterdir()) == []  # the key files, if any, are removed again
    return [c.strip("\n").split("\n") for c in record.read_text().split("call\n")[1:]]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_the_secret_commands_run_as_written(tmp_path: Path) -> None:
    note, script = _note("dev", tmp_path)
    # A continued command keeps its line breaks, and printf is given `\n`, not a newline.
    assert "generic gemma-api-key \\\n    --from-literal=api-key=" in note
    assert '}]}\\n\' "$API_KEY"' in note
    record = tmp_path / "record"
    assert _run(script, tmp_path) == [
        [
            "-n", "gemma-graviton", "create", "secret", "generic", "gemma-hf-token",
            "--from-literal=token=hf_token_value",
        ],
        [
            "-n", "gemma-graviton", "create", "secret", "generic", "gemma-api-key",
            f"--from-literal=api-key={'k' * 48}", f"--from-literal=engine-key={'e' * 48}",
            "--from-file=api-keys.json", "--from-file=engine.map",
        ],
    ]  # fmt: skip
    keys = Path(f"{record}.api-keys.json").read_text()
    assert keys.endswith("}\n") and keys.count("\n") == 1
    assert json.loads(keys) == {"keys": [{"key": "k" * 48, "until": None}]}
    assert Path(f"{record}.engine.map").read_text() == f'default "Bearer {"e" * 48}";\n'


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_with_vllm_key_the_one_key_is_the_secret_and_a_new_one_restarts_the_group(
    tmp_path: Path,
) -> None:
    note, script = _note("minimal", tmp_path)
    assert "gatekeeper" not in note and "without restarting" not in note
    assert _run(script, tmp_path) == [
        [
            "-n", "gemma-graviton", "create", "secret", "generic", "gemma-hf-token",
            "--from-literal=token=hf_token_value",
        ],
        [
            "-n", "gemma-graviton", "create", "secret", "generic", "gemma-api-key",
            f"--from-literal=api-key={'k' * 48}",
        ],
        [
            "-n", "gemma-graviton", "delete", "pods", "-l",
            "leaderworkerset.sigs.k8s.io/name=gemma-vllm",
        ],
    ]  # fmt: skip
