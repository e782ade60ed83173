"""A tiny random-weight Gemma 4 text model for rehearsing vLLM command lines on a CPU.

The deployed model, gemma-4-12B-it, is a Gemma4UnifiedForConditionalGeneration with vision and
audio parts. The rehearsal serves `Gemma4ForCausalLM` instead: the text-only architecture of the
same family, whose attention layout (sliding and full layers, KV heads, head dims, window) drives
vLLM's KV cache accounting in exactly the same code. The default layout keeps the 12B's ratios:

- 12 layers in the pattern 5 sliding : 1 full (the 12B: 48 layers, 40 + 8);
- sliding layers 8 KV heads, full layers 1 KV head (`attention_k_eq_v`, as in the 12B);
- full head_dim = 2 x sliding head_dim (the 12B: 512 and 256), so a full layer's KV page is a
  quarter of a sliding layer's and vLLM gives it a 4x larger block, as it does for the 12B;
- a 128-token window (the 12B: 1,024), small enough that a sliding layer's reservation
  (window - 1 + in-flight tokens) stays visibly below a 2,048-token max model length.

Two halves, so the project's own Python (which has no torch) can import and test the first:

- `tiny_text_config(...)` is pure: it returns the Hugging Face `config.json` dictionary.
- `build(out_dir, config, seed, target_bytes)` needs torch, transformers and tokenizers, which it
  imports when called. Run it with the rehearsal virtualenv's Python:
  `python -m tools.rehearse.group.tiny_checkpoint --out DIR [--config-json FILE] [--seed N]
  [--target-bytes B]`.

`target_bytes` makes a model of (at least) that many bytes of bf16 weights for memory tests, for
example `--target-bytes 3000000000` for a ~3 GB checkpoint: `build` widens `hidden_size` in steps
of 64 (with `intermediate_size` = 4 x `hidden_size`) until the parameter count, measured on a
weightless (meta-device) instance of the real model class, reaches the target. The attention
layout, and so the KV cache per token, stays as configured.

The tokenizer is a byte-level BPE trained locally on the lines in `TRAINING_TEXT`, so the build
is offline and deterministic; it carries a Gemma-style chat template, so `/v1/chat/completions`
works.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SLIDING = "sliding_attention"
FULL = "full_attention"

# Special tokens take the ids Gemma 4 text configs expect: pad 0, eos 1, bos 2.
SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>")
PAD_ID, EOS_ID, BOS_ID = 0, 1, 2
END_OF_TURN_ID = SPECIAL_TOKENS.index("<end_of_turn>")

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)

TRAINING_TEXT = (
    "The model is split into two pipeline stages, one on each node.",
    "Each stage holds half of the decoder layers and its share of the KV cache.",
    "Sliding window layers keep only the most recent tokens; full attention layers keep all.",
    "A request may not start until every rank of the group has joined.",
    "The leader serves the API and the worker runs headless.",
    "How many tokens fit in the cache, and how many requests can run at once?",
    "Memory is counted in GiB: weights, runtime overhead, page cache and the KV cache.",
    "Hello! Please tell me a short story about two small computers sharing one big model.",
    "Once upon a time, a tiny model answered questions slowly but correctly.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000 2048 4096 8192",
    "user model system assistant: yes, no, maybe. (Quotes) 'single' \"double\" [list] {dict}",
)


def layer_types(num_layers: int, sliding_per_full: int) -> list[str]:
    """Return the Gemma layer pattern: `sliding_per_full` sliding layers, then one full layer."""
    period = sliding_per_full + 1
    return [FULL if (index + 1) % period == 0 else SLIDING for index in range(num_layers)]


def tiny_text_config(
    num_layers: int = 12,
    sliding_per_full: int = 5,
    sliding_kv_heads: int = 8,
    full_kv_heads: int = 1,
    sliding_head_dim: int = 32,
    full_head_dim: int = 64,
    sliding_window: int = 128,
    hidden_size: int = 64,
    vocab_size: int = 512,
    intermediate_size: int = 256,
    num_attention_heads: int = 8,
    max_position_embeddings: int = 8192,
    attention_k_eq_v: bool = True,
) -> dict[str, Any]:
    """Return the `config.json` of a Gemma 4 text model (`Gemma4ForCausalLM`) with this layout.

    The keys are those transformers' `Gemma4TextConfig` and vLLM's `gemma4_layer_config` read:
    sliding layers use `head_dim` and `num_key_value_heads`; full layers use `global_head_dim`
    and, because `attention_k_eq_v` is set, `num_global_key_value_heads` (without it they keep
    `num_key_value_heads`). Per-layer embeddings are off (`hidden_size_per_layer_input` 0), as
    they are for the 12B.

    Raises ValueError when the layout cannot be built: the pattern must end on a full layer (the
    12B's 48 = 8 x (5 + 1) does), and the query heads must divide evenly among each kind's KV
    heads.
    """
    _check_layout(
        num_layers,
        sliding_per_full,
        sliding_kv_heads,
        full_kv_heads,
        num_attention_heads,
        attention_k_eq_v,
    )
    return {
        "architectures": ["Gemma4ForCausalLM"],
        "model_type": "gemma4_text",
        "dtype": "bfloat16",
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_attention_heads,
        "num_key_value_heads": sliding_kv_heads,
        "head_dim": sliding_head_dim,
        "num_global_key_value_heads": full_kv_heads,
        "global_head_dim": full_head_dim,
        "attention_k_eq_v": attention_k_eq_v,
        "sliding_window": sliding_window,
        "layer_types": layer_types(num_layers, sliding_per_full),
        "max_position_embeddings": max_position_embeddings,
        **_fixed_keys(vocab_size),
    }


def _check_layout(
    num_layers: int,
    sliding_per_full: int,
    sliding_kv_heads: int,
    full_kv_heads: int,
    num_attention_heads: int,
    attention_k_eq_v: bool,
) -> None:
    """Raise ValueError for a layout `tiny_text_config` cannot build (see its docstring)."""
    if sliding_per_full < 1 or num_layers < sliding_per_full + 1:
        raise ValueError(
            f"num_layers {num_layers} must hold at least one period of {sliding_per_full} "
            "sliding layers and one full layer"
        )
    if num_layers % (sliding_per_full + 1) != 0:
        raise ValueError(
            f"num_layers {num_layers} must be a multiple of sliding_per_full + 1 = "
            f"{sliding_per_full + 1}, so that the last layer is a full-attention layer"
        )
    for name, kv_heads in (
        ("sliding_kv_heads", sliding_kv_heads),
        ("full_kv_heads", full_kv_heads),
    ):
        if kv_heads < 1 or num_attention_heads % kv_heads != 0:
            raise ValueError(
                f"{name} {kv_heads} must divide num_attention_heads {num_attention_heads}"
            )
    if not attention_k_eq_v and full_kv_heads != sliding_kv_heads:
        raise ValueError(
            "full_kv_heads differs from sliding_kv_heads only with attention_k_eq_v; "
            "without it Gemma 4 full layers use num_key_value_heads"
        )


def _fixed_keys(vocab_size: int) -> dict[str, Any]:
    """The keys no layout changes: Gemma 4's RoPE, norms and soft-capping, no per-layer
    embeddings, MoE or shared KV layers, and the tokenizer's special ids."""
    return {
        "rope_parameters": {
            SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
            FULL: {
                "rope_type": "proportional",
                "partial_rotary_factor": 0.25,
                "rope_theta": 1_000_000.0,
            },
        },
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "initializer_range": 0.02,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "final_logit_softcapping": 30.0,
        "hidden_size_per_layer_input": 0,
        "vocab_size_per_layer_input": vocab_size,
        "num_kv_shared_layers": 0,
        "enable_moe_block": False,
        "use_double_wide_mlp": False,
        "tie_word_embeddings": True,
        "use_cache": True,
        "pad_token_id": PAD_ID,
        "eos_token_id": [EOS_ID, END_OF_TURN_ID],
        "bos_token_id": BOS_ID,
    }


def build(
    out_dir: Path, config: dict[str, Any], seed: int = 0, target_bytes: int | None = None
) -> dict[str, Any]:
    """Write a random-weight model and its tokenizer to `out_dir`; return the config used.

    Needs torch, transformers and tokenizers (the rehearsal virtualenv). The same config and
    seed give the same files. With `target_bytes`, the model is first widened as the module
    docstring describes.
    """
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    config = dict(config)
    if target_bytes is not None:
        config = _widen_to_bytes(config, target_bytes)

    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(config["vocab_size"])

    torch.manual_seed(seed)
    hf_config = Gemma4TextConfig(**{k: v for k, v in config.items() if k != "architectures"})
    hf_config.architectures = list(config["architectures"])
    model = Gemma4ForCausalLM(hf_config).to(torch.bfloat16)
    model.eval()
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    # transformers 5 saves full layers as a `per_layer_config` table; keep the flat keys
    # (`global_head_dim`, `num_global_key_value_heads`) that published Gemma 4 checkpoints
    # carry, so vLLM reads the same form it reads for the 12B.
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return config


def _widen_to_bytes(config: dict[str, Any], target_bytes: int) -> dict[str, Any]:
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    def weight_bytes(candidate: dict[str, Any]) -> int:
        fields = {k: v for k, v in candidate.items() if k != "architectures"}
        with torch.device("meta"):
            model = Gemma4ForCausalLM(Gemma4TextConfig(**fields))
        return 2 * sum(parameter.numel() for parameter in model.parameters())

    widened = dict(config)
    while weight_bytes(widened) < target_bytes:
        widened["hidden_size"] += 64
        widened["intermediate_size"] = 4 * widened["hidden_size"]
    return widened


def _train_tokenizer(vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=["<start_of_turn>", "<end_of_turn>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def main(argv: Sequence[str] | None = None) -> int:
    """Build the tiny model from a config file (or the default layout) into --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="model directory to write")
    parser.add_argument(
        "--config-json", type=Path, help="config.json to build (default: tiny_text_config())"
    )
    parser.add_argument("--seed", type=int, default=0, help="weight initialisation seed")
    parser.add_argument(
        "--target-bytes", type=int, help="widen the model to at least this many bytes of weights"
    )
    args = parser.parse_args(argv)
    config = (
        json.loads(args.config_json.read_text(encoding="utf-8"))
        if args.config_json
        else tiny_text_config()
    )
    used = build(args.out, config, seed=args.seed, target_bytes=args.target_bytes)
    print(
        f"wrote {args.out}: {used['num_hidden_layers']} layers, hidden {used['hidden_size']}, "
        f"intermediate {used['intermediate_size']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
