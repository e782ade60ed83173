"""A stack's own `modelProfile` for tests: a small model of Gemma's layout the catalogue lacks."""

from __future__ import annotations

from infra.plan.catalog import GIB


def small_gemma(layers: int) -> dict[str, object]:
    """A 2 GiB Gemma-like checkpoint of `layers` layers (one KV head, 32k context)."""
    return {
        "layers": layers,
        "slidingPerFull": 5,
        "slidingKvHeads": 1,
        "slidingHeadDim": 256,
        "fullKvHeads": 1,
        "fullHeadDim": 256,
        "slidingWindow": 512,
        "hiddenSize": 1152,
        "vocabSize": 262144,
        "checkpointBytes": 2 * GIB,
        "maxContext": 32768,
    }
