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


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_the_secret_commands_run_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--stack", "dev", "--render", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    note = (tmp_path / "r" / "SECRETS.txt").read_text()
    script = "\n".join(
        line[2:] for line in note.splitlines() if line.startswith("  ") and line.strip()
    )
    # A continued command keeps its line breaks, and printf is given `\n`, not a newline.
    assert "generic gemma-api-key \\\n    --from-literal=api-key=" in note
    assert '}]}\\n\' "$API_KEY"' in note
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
    calls = [c.strip("\n").split("\n") for c in record.read_text().split("call\n")[1:]]
    assert calls == [
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
    assert list(work.iterdir()) == []  # the key files are removed again
