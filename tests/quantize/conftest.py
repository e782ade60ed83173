"""The checkpoint the quantize tests start from: a config and one weights file."""

from pathlib import Path

import pytest


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text('{"architectures": ["Gemma4ForCausalLM"]}')
    (src / "model.safetensors").write_bytes(b"w" * 100)
    return src
