"""llama.cpp beside vLLM, the engine a Graviton user would otherwise run: the peer probe's per-layer
decode ratios (`make rehearse-peer`, docs/development.md), which the plan carries so a user can see
when the planned stack is the slower choice for one stream. Measured on x86 only: on Graviton both
engines take other kernels (llama.cpp its NEON/SVE and i8mm paths, vLLM oneDNN/ACL and KleidiAI)."""

from __future__ import annotations

#: Where and when the ratios were measured, with the versions.
RUN = "AMD EPYC Zen 4, 2 threads, 2026-12-07; llama.cpp 0c1e57098, vLLM 0.31.0"
#: llama.cpp's time for one gemma-4-12B-it layer over vLLM's (below 1: llama.cpp is faster), by
#: vLLM's format (llama.cpp's bf16, and Q8_0 beside W8A8): one stream, four, a 256-token prefill.
RATIOS = {"bf16": (0.68, 1.15, 1.26), "int8": (0.84, 1.51, 3.56)}
#: The dense model the slices were cut from: a MoE's layers are another measurement.
MODEL = "google/gemma-4-12B-it"


def describe(
    model: str, weights: str, one_stream_tokens_s: float, bytes_per_token: float, chip_gbps: float
) -> str | None:
    """The plan's peer row: llama.cpp's one-stream rate derived from the plan's at the measured
    ratio, held to what the node's chip can stream (`chip_gbps`, its achievable bandwidth: a
    stream reads `bytes_per_token` a token, every stage's in turn), or None where nothing was
    measured (another model, int4)."""
    if model != MODEL or weights not in RATIOS:
        return None
    one, four, prefill = RATIOS[weights]
    peer = "bf16" if weights == "bf16" else "Q8_0"
    ceiling = chip_gbps * 1e9 / bytes_per_token
    rate = min(one_stream_tokens_s / one, ceiling)
    held = " and held to the chip's" if rate == ceiling else ""
    return (
        f"~{rate:.2f} tokens/s for one stream with llama.cpp {peer} on this node type, reading "
        f"{rate * bytes_per_token / 1e9:.0f} GB/s of the chip's achievable {chip_gbps:.0f} "
        f"(derived: its layer time {one:g} of vLLM's{held}, measured on {RUN}; "
        f"carried from x86, unmeasured on Graviton); with 4 streams and in prefill vLLM is the "
        f"faster (llama.cpp takes {four:g} and {prefill:g} of its time)"
    )
