"""Stack values for tests that validate a config without a stack file: the keys every stack must
set, and a small model of Gemma's layout the catalogue lacks (a stack's own `modelProfile`)."""

from __future__ import annotations

from infra.plan.catalog import GIB

#: The keys a stack must set, with values the config model accepts.
REQUIRED = {
    "owner": "ml-platform",
    "endDate": "2027-01-01",
    "endpointPublicAccessCidrs": ["198.51.100.0/24"],
}


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
