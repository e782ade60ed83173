"""The quantize command line: refused input, and the skip that makes the Job safe to retry."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.quantize import cli, marker

VERSION = "0.14.0.1"


def _refused(source: Path, out: Path) -> str:
    with pytest.raises(cli.InputError) as caught:
        cli.check_paths(source, out)
    return str(caught.value)


def test_a_source_without_config_is_refused(tmp_path: Path) -> None:
    assert _refused(tmp_path, tmp_path / "out") == (
        f"`--source` {tmp_path} has no config.json; pass a Hugging Face checkpoint directory"
    )


def test_writing_over_the_source_is_refused(source: Path) -> None:
    assert (
        _refused(source, source) == "`--out` is the source directory; pass a directory of its own"
    )


def test_an_out_holding_other_files_is_refused(tmp_path: Path, source: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert _refused(source, out) == (
        f"`--out` {out} holds files that are not a checkpoint this command wrote; "
        "pass an empty or new directory"
    )


def test_an_unfinished_run_may_be_redone(tmp_path: Path, source: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / marker.IN_PROGRESS_NAME).write_text("")
    (out / "model-00001-of-00002.safetensors").write_bytes(b"half")
    cli.check_paths(source, out)


def _quantized(tmp_path: Path, source: Path) -> Path:
    """An out directory holding an int8 checkpoint of `source` and its marker."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"q" * 32)
    want = marker.wanted("int8", source.resolve(), None, VERSION)
    marker.write(out, want, marker.file_digests(out, lambda _line: None))
    return out


def test_a_matching_marker_skips_without_loading_anything(tmp_path: Path, source: Path) -> None:
    out = _quantized(tmp_path, source)
    # The project's Python has no torch: reaching the quantization would raise ImportError.
    line = cli.run(source, "int8", out, None, VERSION, cli.Progress())
    assert line == f"{out} already holds int8 of {source} (quantized.json matches); skipped"
    assert (out / "model.safetensors").read_bytes() == b"q" * 32


def test_a_new_llm_compressor_redoes_the_work(tmp_path: Path, source: Path) -> None:
    out = _quantized(tmp_path, source)
    with pytest.raises(ImportError):
        cli.run(source, "int8", out, None, "0.15.0", cli.Progress())
    # Emptied and flagged as a run in progress before the quantization began.
    assert sorted(path.name for path in out.iterdir()) == [marker.IN_PROGRESS_NAME]


def test_an_unknown_scheme_exits_2(capsys: pytest.CaptureFixture[str], source: Path) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["--source", str(source), "--scheme", "fp8", "--out", "x"])
    assert caught.value.code == 2
    assert "invalid choice: 'fp8'" in capsys.readouterr().err
