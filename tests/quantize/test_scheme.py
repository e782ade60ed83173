"""The weight formats: what stays bf16, the int4 group size, the compressed-tensors groups."""

from __future__ import annotations

import pytest

from infra.quantize.scheme import (
    SCHEMES,
    SchemeError,
    config_groups,
    int4_group_size,
    is_ignored,
)


@pytest.mark.parametrize(
    ("name", "ignored"),
    [
        ("lm_head", True),
        ("model.vision_tower.encoder.layers.0.self_attn.q_proj.linear", True),
        ("model.audio_tower.layers.3.feed_forward1.ffw_layer_1", True),
        ("model.embed_vision.embedding_projection", True),
        ("model.embed_audio.embedding_projection", True),
        # A MoE layer's router: vLLM builds it unquantized.
        ("model.layers.3.router.proj", True),
        ("model.language_model.layers.29.router.proj", True),
        ("model.layers.0.self_attn.q_proj", False),
        ("model.language_model.layers.47.mlp.down_proj", False),
        ("model.layers.5.self_attn.o_proj", False),
        ("lm_head_extra", False),
        # The MoE experts, one Linear per expert and projection once llm-compressor unfuses them.
        ("model.layers.0.experts.5.gate_proj", False),
        ("model.layers.0.experts.127.down_proj", False),
    ],
)
def test_head_towers_and_routers_stay_bf16_and_decoder_linears_are_quantized(
    name: str, ignored: bool
) -> None:
    assert is_ignored(name) == ignored


def test_int4_group_is_128_for_the_12b_widths() -> None:
    # gemma-4-12B-it: hidden 3840, MLP 15360, sliding attention out 16 x 256, full 16 x 512.
    assert int4_group_size([3840, 15360, 4096, 8192]) == 128


def test_int4_group_falls_to_the_largest_that_divides_every_width() -> None:
    # The rehearsal's tiny model: hidden 64, MLP 256, attention out 256 and 512.
    assert int4_group_size([64, 256, 256, 512]) == 64
    assert int4_group_size([96, 256]) == 32


def test_int4_group_refuses_widths_no_group_divides() -> None:
    with pytest.raises(SchemeError) as caught:
        int4_group_size([64, 100])
    assert str(caught.value) == (
        "input widths [100] are not multiples of 32, the smallest int4 group size; "
        "quantize this model with --scheme int8"
    )


def test_int8_is_per_channel_weights_and_dynamic_per_token_activations() -> None:
    group = config_groups(SCHEMES["int8"])["group_0"]
    assert group["targets"] == ["Linear"]
    symmetric_int8 = {"num_bits": 8, "type": "int", "symmetric": True}
    assert group["weights"] == {**symmetric_int8, "dynamic": False, "strategy": "channel"}
    assert group["input_activations"] == {**symmetric_int8, "dynamic": True, "strategy": "token"}


def test_int4_is_grouped_weights_with_int8_activations() -> None:
    group = config_groups(SCHEMES["int4"], group_size=64)["group_0"]
    assert group["weights"]["num_bits"] == 4
    assert group["weights"]["strategy"] == "group"
    assert group["weights"]["group_size"] == 64
    assert group["input_activations"]["num_bits"] == 8
    assert group["input_activations"]["dynamic"] is True


def test_int4_without_a_group_size_is_refused() -> None:
    with pytest.raises(SchemeError):
        config_groups(SCHEMES["int4"])
