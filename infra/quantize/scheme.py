"""The two weight formats the stack can quantize to, as compressed-tensors describes them.

Both schemes need no calibration data: weights are rounded to the nearest step of a symmetric
grid whose scale comes from the weights themselves (llm-compressor's `QuantizationModifier`
with a memoryless min-max observer), and activations are quantized at run time, one scale per
token, by vLLM's kernel. So the Job reads only the bf16 checkpoint.

- `int8` is compressed-tensors' W8A8 preset: int8 weights with one scale per output channel,
  int8 activations with a dynamic per-token scale. vLLM 0.31 serves it on any CPU through
  `CPUInt8ScaledMMLinearKernel` (`model_executor/kernels/linear/scaled_mm/cpu.py`, read
  2026-12-02: oneDNN on Arm).
- `int4` is W4A8: int4 weights with one scale per group of input columns, int8 activations with
  a dynamic per-token scale. vLLM 0.31 serves it on CPU through `Dynamic4bitLinearKernel`
  (`kernels/linear/mixed_precision/dynamic_4bit.py`, read 2026-12-02), which packs the weights
  for `torch.ops.aten._dyn_quant_matmul_4bit` (KleidiAI on Arm) and needs the group size to
  divide every layer's input width.

Only `Linear` layers are quantized, so the token embeddings stay bf16; the output head (tied to
the embeddings in Gemma 4) and the vision and audio towers of the unified model are listed in
`IGNORE` and stay bf16 too: the head's rounding error lands directly on every logit, and the
towers are small next to the decoder (their share of the bytes streamed per token is nil).

Pure: no torch, so the project's own Python imports and tests it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: Modules kept in bf16, as llm-compressor's `ignore` takes them ("re:" marks a regex matched
#: against the full module name). Gemma 4's unified model names its towers `vision_tower` and
#: `audio_tower` and their projections `embed_vision` and `embed_audio` (transformers 5.17
#: `models/gemma4/modeling_gemma4.py`, read 2026-12-02).
IGNORE = (
    "lm_head",
    "re:.*vision_tower.*",
    "re:.*audio_tower.*",
    "re:.*embed_vision.*",
    "re:.*embed_audio.*",
    # A MoE layer's router (`router.proj`): vLLM 0.31 builds it as a `GateLinear` with no
    # quantization method (`model_executor/models/gemma4.py` `Gemma4Router`), so it must stay
    # bf16. The experts are quantized: llm-compressor 0.14 unfuses Gemma 4's 3-D experts into
    # one Linear per expert and projection (seen here: `experts.0.gate_proj.weight` int8).
    "re:.*\\.router\\..*",
)

#: int4 group sizes, preferred first: 128 is the usual compressed-tensors W4A8 group; a smaller
#: one is taken only when 128 does not divide some layer's input width (the rehearsal's tiny
#: model). gemma-4-12B-it's widths (3840, 15360, 4096, 8192) all take 128.
INT4_GROUP_SIZES = (128, 64, 32)


@dataclass(frozen=True)
class Scheme:
    """One weight format: its stack name, weight bits and compressed-tensors arguments."""

    #: The stack's `weights` value.
    name: str
    #: Bits per quantized weight.
    weight_bits: int
    #: What the format is, in one phrase (progress lines and the marker).
    label: str


SCHEMES = {
    "int8": Scheme("int8", 8, "W8A8 int8: per-channel weights, dynamic per-token activations"),
    "int4": Scheme("int4", 4, "W4A8 int4: grouped weights, dynamic per-token int8 activations"),
}


def is_ignored(module_name: str) -> bool:
    """Whether a module stays bf16: it is named in `IGNORE` (as a whole name or a dotted
    suffix) or matches one of its "re:" patterns, as llm-compressor matches them."""
    for pattern in IGNORE:
        if pattern.startswith("re:"):
            if re.fullmatch(pattern[3:], module_name):
                return True
        elif module_name == pattern or module_name.endswith("." + pattern):
            return True
    return False


class SchemeError(ValueError):
    """A scheme that cannot be applied to this model: one line with the reason and the fix."""


def int4_group_size(input_widths: Iterable[int]) -> int:
    """The largest of `INT4_GROUP_SIZES` that divides every quantized layer's input width.

    Raises SchemeError when none does (vLLM's kernel would refuse every such layer).
    """
    widths = sorted(set(input_widths))
    if not widths:
        raise SchemeError("the model has no Linear layer to quantize; pass a decoder checkpoint")
    for size in INT4_GROUP_SIZES:
        if all(width % size == 0 for width in widths):
            return size
    odd = [width for width in widths if width % INT4_GROUP_SIZES[-1] != 0]
    raise SchemeError(
        f"input widths {odd} are not multiples of {INT4_GROUP_SIZES[-1]}, the smallest int4 "
        "group size; quantize this model with --scheme int8"
    )


def config_groups(scheme: Scheme, group_size: int | None = None) -> dict[str, Any]:
    """The `config_groups` argument of llm-compressor's `QuantizationModifier` for `scheme`.

    Activations are symmetric, dynamic and per token in both formats, so no calibration pass
    is needed; weights are symmetric, per channel (int8) or per `group_size` columns (int4).
    """
    activations = {
        "num_bits": 8,
        "type": "int",
        "symmetric": True,
        "dynamic": True,
        "strategy": "token",
    }
    weights: dict[str, Any] = {
        "num_bits": scheme.weight_bits,
        "type": "int",
        "symmetric": True,
        "dynamic": False,
    }
    if scheme.weight_bits == 8:
        weights["strategy"] = "channel"
    else:
        if group_size is None:
            raise SchemeError("int4 needs a group size; take it from int4_group_size()")
        weights.update(strategy="group", group_size=group_size)
    return {
        "group_0": {"targets": ["Linear"], "weights": weights, "input_activations": activations}
    }
