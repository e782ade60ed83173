"""Quantized checkpoints: the one code path that turns the bf16 model into int8 or int4 weights.

`python -m infra.quantize --source DIR --scheme int8|int4 --out DIR` (see `cli`) writes a
compressed-tensors checkpoint that vLLM 0.31 serves on a CPU, and `OUT/quantized.json`. The
stack's quantize Job runs it on the model; the rehearsal runs it on its tiny model, so what the
rehearsal serves was made the way the Job makes it.

- `scheme`: the formats (W8A8, W4A8), what stays bf16, the int4 group size (pure);
- `marker`: the record of what was made from what, and the skip rule (files only);
- `run`: llm-compressor, torch and transformers (requirements-quantize.txt, imported when run);
- `cli`: the command line, its checks, the skip, the exit codes.
"""
