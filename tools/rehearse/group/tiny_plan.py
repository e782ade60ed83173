"""The tiny model that stands in for the stack's model, and the planner's plan of it.

A rehearsal runs in about a minute on this machine's CPU, too little for gemma-4-12B-it, so it
serves a random-weight model of the same family whose attention layout keeps the real profile's
ratios (sliding:full pattern, KV heads, head dims) over the same number of pipeline ranks. This
module owns that translation: the profile -> the tiny model's `config.json`
(`tiny_model_config`), built once and cached (`ensure_tiny_model`), and the built model back into
the stack's own config model and planner (`plan_tiny`), so the rehearsal checks vLLM against the
same planner the deployment is sized by.

Pure apart from `ensure_tiny_model` (which runs the builder) and the reads of a built model.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infra.plan.budget import CPU_DEFAULT_MAX_SEQS_PER_RANK
from infra.plan.catalog import MIB, ModelProfile
from infra.plan.config import ConfigError, StackConfig
from infra.plan.loading import load_config
from infra.plan.sizing import Plan, plan
from infra.plan.stackfile import REPO
from tools.rehearse.group.tiny_checkpoint import FULL, SLIDING, tiny_text_config
from tools.rehearse.group.workspace import MODELS_DIR, RehearsalError
from tools.venvs import tail

#: The served name of the tiny model; the rehearsal's plan and command lines carry it where the
#: stack's carry the real model's.
TINY_MODEL_NAME = "rehearsal/tiny-gemma4"
#: The tiny model's smallest head dim; the profile's head dims keep their ratio above it.
TINY_HEAD_DIM_UNIT = 32
#: A window far below the rehearsal's context, so the sliding layers' reservation (window - 1 +
#: in-flight tokens) stays visibly smaller than a full layer's, as the 12B's 1,024 does at 8,192.
TINY_WINDOW = 128
TINY_HIDDEN = 64
TINY_VOCAB = 512
TINY_MAX_CONTEXT = 8192
TINY_SEED = 0

#: Memory figures scaled to the tiny model; the planner checks them as it checks the stack's.
REHEARSAL_KV_CACHE_BYTES = 64 * MIB
REHEARSAL_MAX_MODEL_LEN = 2048
REHEARSAL_BATCHED_TOKENS = 256
#: The longest reply: above what the streamed check (16) and the benchmark (32) ask for, so only
#: a request without max_tokens meets it.
REHEARSAL_MAX_REPLY_TOKENS = 40


def tiny_model_config(profile: ModelProfile, stages: int) -> dict[str, Any]:
    """The `config.json` of the tiny model that rehearses `profile` split into `stages` ranks.

    It keeps the profile's sliding:full pattern, the ratio of sliding to full KV heads and of
    sliding to full head dims (reduced to lowest terms, head dims scaled up to
    `TINY_HEAD_DIM_UNIT`), and has `stages` x one pattern period of layers, so every rank holds
    both kinds of layer. Raises ConfigError for a profile the family's builder cannot express.
    """
    if profile.sliding_per_full < 1:
        raise ConfigError(
            "modelProfile.slidingPerFull",
            f"is {profile.sliding_per_full}, and the rehearsal's Gemma 4 builder needs at least "
            "one sliding layer per full layer",
            "rehearse a model with a sliding:full pattern, or skip the rehearsal",
        )
    kv_gcd = math.gcd(profile.sliding_kv_heads, profile.full_kv_heads)
    sliding_kv, full_kv = profile.sliding_kv_heads // kv_gcd, profile.full_kv_heads // kv_gcd
    dim_gcd = math.gcd(profile.sliding_head_dim, profile.full_head_dim)
    return tiny_text_config(
        num_layers=stages * (profile.sliding_per_full + 1),
        sliding_per_full=profile.sliding_per_full,
        sliding_kv_heads=sliding_kv,
        full_kv_heads=full_kv,
        sliding_head_dim=profile.sliding_head_dim // dim_gcd * TINY_HEAD_DIM_UNIT,
        full_head_dim=profile.full_head_dim // dim_gcd * TINY_HEAD_DIM_UNIT,
        sliding_window=TINY_WINDOW,
        hidden_size=TINY_HIDDEN,
        vocab_size=TINY_VOCAB,
        num_attention_heads=max(8, math.lcm(sliding_kv, full_kv)),
        max_position_embeddings=TINY_MAX_CONTEXT,
        # Gemma 4's full layers share K and V weights; that is what lets them have fewer KV heads.
        attention_k_eq_v=True,
    )


def model_cache_key(
    config: Mapping[str, Any], seed: int = TINY_SEED, target_bytes: int | None = None
) -> str:
    """The cache directory name of a built model: a hash of what it is built from."""
    built_from = {"config": config, "seed": seed}
    if target_bytes is not None:
        built_from["target_bytes"] = target_bytes
    text = json.dumps(built_from, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def checkpoint_bytes(model_dir: Path) -> int:
    """Bytes of the model's weight files, as a download would write them."""
    return sum(path.stat().st_size for path in model_dir.glob("*.safetensors"))


def ensure_tiny_model(
    python: Path,
    config: Mapping[str, Any],
    progress: Callable[[str], None],
    models_dir: Path = MODELS_DIR,
    target_bytes: int | None = None,
) -> Path:
    """Build the model once into `models_dir/<hash>` with the rehearsal env's Python; reuse it.

    `target_bytes` widens the model to that many bytes of weights
    (`tools.rehearse.group.tiny_checkpoint.build`).
    The build writes into a scratch directory that is renamed into place when complete, so an
    interrupted build is redone rather than served half-written.
    """
    target = models_dir / model_cache_key(config, target_bytes=target_bytes)
    if (target / "config.json").is_file() and checkpoint_bytes(target) > 0:
        progress(f"tiny model: reusing {target.relative_to(REPO)}")
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    scratch = models_dir / f"{target.name}.partial-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    request = models_dir / f"{target.name}.json"
    request.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    argv = [
        str(python),
        "-m",
        "tools.rehearse.group.tiny_checkpoint",
        "--out",
        str(scratch),
        "--config-json",
        str(request),
        "--seed",
        str(TINY_SEED),
        *(["--target-bytes", str(target_bytes)] if target_bytes is not None else []),
    ]
    progress(
        f"tiny model: building {target.relative_to(REPO)} ({config['num_hidden_layers']} layers)"
    )
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise RehearsalError(
            f"building the tiny model failed (exit {done.returncode}): {shlex.join(argv)}\n"
            + tail(done.stdout + done.stderr)
        )
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
    return target


def tiny_profile(config: Mapping[str, Any], weights_bytes: int) -> dict[str, Any]:
    """The stack's `modelProfile` describing a built tiny model (its real config and size)."""
    kinds = list(config["layer_types"])
    full, sliding = kinds.count(FULL), kinds.count(SLIDING)
    return {
        "layers": config["num_hidden_layers"],
        "slidingPerFull": sliding // full,
        "slidingKvHeads": config["num_key_value_heads"],
        "slidingHeadDim": config["head_dim"],
        "fullKvHeads": config["num_global_key_value_heads"],
        "fullHeadDim": config["global_head_dim"],
        "slidingWindow": config["sliding_window"],
        "hiddenSize": config["hidden_size"],
        "vocabSize": config["vocab_size"],
        "checkpointBytes": weights_bytes,
        "maxContext": config["max_position_embeddings"],
        "tiedEmbeddings": bool(config.get("tie_word_embeddings", True)),
    }


def model_config(model_dir: Path) -> dict[str, Any]:
    """The `config.json` of a built model."""
    return json.loads((model_dir / "config.json").read_text(encoding="utf-8"))


def tiny_stack_values(
    stack_values: Mapping[str, Any], profile: Mapping[str, Any], stages: int
) -> dict[str, Any]:
    """The stack's own values with the tiny model and memory figures scaled to it.

    Everything else (instance type, image, replicas, model cache) stays the stack's, so the same
    config model, planner and builders see the stack as the deployment does.
    """
    return {
        **stack_values,
        "model": TINY_MODEL_NAME,
        "modelProfile": dict(profile),
        "pipelineStages": stages,
        "kvCacheBytes": REHEARSAL_KV_CACHE_BYTES,
        "maxModelLen": min(REHEARSAL_MAX_MODEL_LEN, int(profile["maxContext"])),
        "maxNumBatchedTokens": max(
            REHEARSAL_BATCHED_TOKENS, CPU_DEFAULT_MAX_SEQS_PER_RANK * stages
        ),
        "weightPrefetch": True,
        "maxReplyTokens": REHEARSAL_MAX_REPLY_TOKENS,
    }


def plan_tiny(values: Mapping[str, Any], model_dir: Path, stages: int) -> tuple[StackConfig, Plan]:
    """Config and plan of the tiny model, through the stack's config model and planner."""
    profile = tiny_profile(model_config(model_dir), checkpoint_bytes(model_dir))
    cfg = load_config(tiny_stack_values(values, profile, stages))
    return cfg, plan(cfg, "rehearsal")
