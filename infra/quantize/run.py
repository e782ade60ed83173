"""The quantization itself: load the bf16 checkpoint, apply a scheme with llm-compressor, save.

Needs torch, transformers and llm-compressor (requirements-quantize.txt), which it imports when
called; the CLI (`infra.quantize.cli`) owns the skip, the marker and the exit codes.

Memory: the whole bf16 model is loaded on the CPU (gemma-4-12B-it: ~24 GB of weights, modelled
from its checkpoint size), and each Linear layer's weight is replaced by its quantized form one
layer at a time, so the peak is about the bf16 model plus one layer. The data-free schemes run no
forward pass.

The output directory gets, in order: the source's non-weight files (tokenizer, chat template,
processor and generation configs) copied as they are; the compressed-tensors weights as
llm-compressor saves them; and the source's own `config.json` with the `quantization_config`
llm-compressor wrote added (`merged_config`), so vLLM reads the same architecture keys it reads
for the bf16 checkpoint.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.quantize.scheme import IGNORE, Scheme, config_groups, int4_group_size, is_ignored

#: Source files the save writes anew (weights and the configs transformers regenerates).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
REGENERATED = ("config.json", "model.safetensors.index.json", "pytorch_model.bin.index.json")


def merged_config(source_config: dict[str, Any], saved_config: dict[str, Any]) -> dict[str, Any]:
    """The source's `config.json` with the saved model's `quantization_config` added.

    Raises ValueError when the save wrote no `quantization_config` (vLLM would load the
    quantized tensors as bf16 weights of the wrong shape).
    """
    if "quantization_config" not in saved_config:
        raise ValueError("the saved config has no quantization_config")
    return {**source_config, "quantization_config": saved_config["quantization_config"]}


def copied_files(source: Path) -> list[Path]:
    """The source's files copied verbatim: everything but the weights and regenerated configs."""
    return sorted(
        path
        for path in source.iterdir()
        if path.is_file() and path.suffix not in WEIGHT_SUFFIXES and path.name not in REGENERATED
    )


def quantize(source: Path, scheme: Scheme, out: Path, progress: Callable[[str], None]) -> None:
    """Write the compressed-tensors checkpoint of `source` in `scheme` into `out`."""
    import torch
    import transformers
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier

    source_config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    architecture = source_config["architectures"][0]
    progress(f"loading {architecture} from {source} in bf16")
    model = getattr(transformers, architecture).from_pretrained(source, dtype=torch.bfloat16)
    widths = [
        module.in_features
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and not is_ignored(name)
    ]
    group_size = int4_group_size(widths) if scheme.weight_bits == 4 else None
    progress(
        f"quantizing {len(widths)} Linear layers to {scheme.label}"
        + (f", group size {group_size}" if group_size else "")
    )
    recipe = QuantizationModifier(config_groups=config_groups(scheme, group_size), ignore=IGNORE)
    oneshot(model=model, recipe=recipe)
    out.mkdir(parents=True, exist_ok=True)
    for path in copied_files(source):
        shutil.copy2(path, out / path.name)
    progress(f"saving the compressed checkpoint to {out}")
    model.save_pretrained(out, save_compressed=True)
    saved_config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    (out / "config.json").write_text(
        json.dumps(merged_config(source_config, saved_config), indent=2) + "\n", encoding="utf-8"
    )
