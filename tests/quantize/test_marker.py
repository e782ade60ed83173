"""quantized.json: what was made from what, and when a second run may skip."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from infra.quantize import marker


def _made(tmp_path: Path, source: Path) -> tuple[Path, dict[str, object]]:
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"q" * 50)
    (out / "config.json").write_text("{}")
    want = marker.wanted("int8", source, "google/x@" + "a" * 40, "0.14.0.1")
    marker.write(out, want, marker.file_digests(out, lambda _line: None))
    return out, want


def test_digests_list_every_file_but_the_marker(tmp_path: Path, source: Path) -> None:
    out, _ = _made(tmp_path, source)
    files = marker.read(out)["files"]
    assert sorted(files) == ["config.json", "model.safetensors"]
    assert files["model.safetensors"] == {
        "bytes": 50,
        "sha256": hashlib.sha256(b"q" * 50).hexdigest(),
    }


def test_marker_records_scheme_source_and_version(tmp_path: Path, source: Path) -> None:
    out, _ = _made(tmp_path, source)
    written = json.loads((out / "quantized.json").read_text())
    assert written["scheme"] == "int8"
    assert written["source"] == str(source)
    assert written["sourceRevision"] == "google/x@" + "a" * 40
    assert written["llmCompressorVersion"] == "0.14.0.1"


def test_only_the_same_inputs_with_whole_files_match(tmp_path: Path, source: Path) -> None:
    out, want = _made(tmp_path, source)
    made = marker.read(out)
    assert marker.mismatch(made, want, out) is None
    other = {**want, "scheme": "int4"}
    assert marker.mismatch(made, other, out) == "scheme was 'int8', now 'int4'"
    (out / "model.safetensors").write_bytes(b"q" * 10)
    assert marker.mismatch(made, want, out) == "model.safetensors is missing or not 50 bytes"
    (source / "model.safetensors").write_bytes(b"w" * 101)
    again = marker.wanted("int8", source, "google/x@" + "a" * 40, "0.14.0.1")
    assert marker.mismatch(made, again, out).startswith("sourceFingerprint was")


def test_no_marker_does_not_match(tmp_path: Path, source: Path) -> None:
    want = marker.wanted("int8", source, None, "0.14.0.1")
    assert marker.mismatch(marker.read(tmp_path), want, tmp_path) == "no marker"


def test_fingerprint_reads_json_text_not_weights(tmp_path: Path, source: Path) -> None:
    before = marker.source_fingerprint(source)
    (source / "model.safetensors").write_bytes(b"x" * 100)
    assert marker.source_fingerprint(source) == before
    (source / "config.json").write_text('{"architectures": ["Other"]}')
    assert marker.source_fingerprint(source) != before
