"""The tiny Gemma 4 text model's config: the 12B's layer pattern and ratios, deterministic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.rehearse.group.tiny_checkpoint import FULL, SLIDING, layer_types, tiny_text_config

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_default_layout_mirrors_the_12b_ratios() -> None:
    config = tiny_text_config()
    types = config["layer_types"]
    assert config["architectures"] == ["Gemma4ForCausalLM"]
    assert config["model_type"] == "gemma4_text"
    assert config["num_hidden_layers"] == len(types) == 12
    assert types.count(SLIDING) == 5 * types.count(FULL) == 10
    assert [index for index, kind in enumerate(types) if kind == FULL] == [5, 11]
    # Sliding KV heads : full KV heads = 8 : 1, full head_dim = 2 x sliding head_dim.
    assert config["num_key_value_heads"] == 8 * config["num_global_key_value_heads"]
    assert config["global_head_dim"] == 2 * config["head_dim"]
    # So a sliding layer's KV page is 4x a full layer's, as for the 12B (8 x 256 vs 1 x 512).
    sliding = config["num_key_value_heads"] * 2 * config["head_dim"]
    assert sliding == 4 * config["num_global_key_value_heads"] * 2 * config["global_head_dim"]
    assert (8 * 2 * 256) == 4 * (1 * 2 * 512)
    assert config["attention_k_eq_v"] is True
    assert config["sliding_window"] == 128
    assert config["hidden_size"] == 64
    assert config["hidden_size_per_layer_input"] == 0
    # Deterministic and JSON-serialisable.
    assert json.loads(json.dumps(config, sort_keys=True)) == tiny_text_config() == config


def test_twelve_b_layout_reproduced_at_full_depth() -> None:
    config = tiny_text_config(
        num_layers=48, sliding_head_dim=256, full_head_dim=512, sliding_window=1024
    )
    types = config["layer_types"]
    assert (types.count(SLIDING), types.count(FULL)) == (40, 8)
    # With pipeline parallel 2 each rank holds 24 layers: 20 sliding and 4 full.
    assert (types[:24].count(SLIDING), types[:24].count(FULL)) == (20, 4)
    assert types[-1] == FULL


def test_parameters_reach_the_config() -> None:
    config = tiny_text_config(
        num_layers=8,
        sliding_per_full=3,
        sliding_kv_heads=4,
        full_kv_heads=2,
        sliding_head_dim=16,
        full_head_dim=48,
        sliding_window=256,
        hidden_size=96,
        vocab_size=1024,
    )
    assert (
        config["layer_types"]
        == layer_types(8, 3)
        == [SLIDING] * 3 + [FULL] + [SLIDING] * 3 + [FULL]
    )
    assert (config["num_key_value_heads"], config["num_global_key_value_heads"]) == (4, 2)
    assert (config["head_dim"], config["global_head_dim"]) == (16, 48)
    assert (config["sliding_window"], config["hidden_size"]) == (256, 96)
    assert config["vocab_size"] == config["vocab_size_per_layer_input"] == 1024


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_layers": 10}, "num_layers 10 must be a multiple of sliding_per_full + 1 = 6"),
        ({"num_layers": 3}, "num_layers 3 must hold at least one period"),
        ({"sliding_kv_heads": 3}, "sliding_kv_heads 3 must divide num_attention_heads 8"),
        ({"full_kv_heads": 0}, "full_kv_heads 0 must divide num_attention_heads 8"),
        ({"attention_k_eq_v": False}, "full_kv_heads differs from sliding_kv_heads only with"),
    ],
)
def test_invalid_layouts_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("+", r"\+")):
        tiny_text_config(**kwargs)  # type: ignore[arg-type]


def test_importing_the_module_does_not_import_torch() -> None:
    """The project's own Python has no torch: the pure half must import without it."""
    probe = (
        "import sys, tools.rehearse.group.tiny_checkpoint; "
        "print({'torch', 'transformers'} & set(sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "set()"
