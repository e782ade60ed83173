"""What a capacity run sends, and what the stack's plan predicts for it.

The run's points follow the plan, so it measures what the plan promises and nothing the front
door would refuse:

- input lengths 1,000 tokens and the plan's longest prompt (`max_model_len` less the reply and a
  margin), the two lengths the plan states a time to first token for (`infra.plan.throughput.
  served`), so prefill is measured where it was predicted;
- concurrency 1 and the planned concurrency (the full-length sequences the KV cache holds at
  once, which is also the gatekeeper's per-client limit on requests in flight);
- arrivals at half the gatekeeper's per-client rate, so no request is refused with 429 for
  going faster than a client may.

`predict` gives the plan's figures for one point: time to first token (a range, from the range
of the prefill arithmetic rate), one stream's decode tokens/s and the requests/s and output
tokens/s of the whole run, all modelled (`infra.plan.throughput`; only single-stream decode is
calibrated on a measurement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.manifests.gatekeeper_conf import GatekeeperLimits
from infra.plan import catalog, throughput
from infra.plan.config import StackConfig
from infra.plan.economics import busiest
from infra.plan.sizing import Plan
from tools.bench.loadgen import LoadPoint

#: The short prompt the plan's summary states a time to first token for.
SHORT_PROMPT_TOKENS = throughput.SHORT_PROMPT_TOKENS
#: Tokens every reply produces: enough for a steady decode rate after the first token.
DEFAULT_OUTPUT_TOKENS = 128
#: Requests per stream of a point's concurrency.
DEFAULT_PROMPTS_PER_STREAM = 2
#: Tokens kept free below the context at the longest prompt: the generator's decode-then-encode
#: of random tokens may land a few tokens long (vLLM v0.31.0 `benchmarks/datasets/datasets.py`,
#: `gen_prompt_decode_to_target_len`; it would align them through the server's /tokenize, which
#: the gatekeeper does not pass), and vLLM refuses a prompt plus `max_tokens` over
#: `max_model_len` with 400. Measured in `make rehearse`: 2,000 asked, 2,002 sent. The safe end:
#: a few tokens shorter than the longest possible.
CONTEXT_MARGIN_TOKENS = 32


@dataclass(frozen=True)
class Prediction:
    """The plan's figures for one point (modelled; see the module doc)."""

    ttft_s: tuple[float, float]
    """Time to first token, fast..slow end of the prefill rate's range, one request alone."""
    stream_tokens_per_s: float
    """One stream's decode rate with `concurrency` streams at the prompt's context."""
    requests_per_s: float
    """Completed requests per second: `concurrency` over a round (every stream's prompt
    prefilled in turn, then the replies decoded together), at most the rate."""
    output_tokens_per_s: float
    """Output tokens per second of all streams: requests/s times the reply length."""


def longest_prompt(plan: Plan, output_tokens: int) -> int:
    """The longest prompt a point sends: the context less the reply and the margin."""
    return plan.max_model_len - output_tokens - CONTEXT_MARGIN_TOKENS


def default_points(
    plan: Plan,
    output_tokens: int = DEFAULT_OUTPUT_TOKENS,
    prompts_per_stream: int = DEFAULT_PROMPTS_PER_STREAM,
    input_lengths: tuple[int, ...] | None = None,
    concurrencies: tuple[int, ...] | None = None,
) -> list[LoadPoint]:
    """The run's points: `input_lengths` (default 1,000 and the longest prompt, short first) at
    `concurrencies` (default 1 and the planned concurrency), at half the gatekeeper's rate;
    each point sends `prompts_per_stream` requests per stream of its concurrency."""
    door = plan.front_door
    if input_lengths is None:
        input_lengths = tuple(
            sorted({min(SHORT_PROMPT_TOKENS, longest_prompt(plan, output_tokens)),
                    longest_prompt(plan, output_tokens)})
        )  # fmt: skip
    if isinstance(door, GatekeeperLimits):
        # Half the door's per-client rate: Poisson arrivals bunch, and the gatekeeper refuses
        # what goes past its burst with 429, counted as failed requests. The safe (low) end.
        cap, rate = door.client_concurrent_requests, door.client_requests_per_minute / 60 / 2
    else:
        # `vllm-key`: no door refuses a burst; the KV's full slots (rounded down) bound it.
        cap, rate = max(1, int(plan.max_concurrency)), math.inf
    if concurrencies is None:
        concurrencies = tuple(sorted({1, cap}))
    return [
        LoadPoint(length, output_tokens, conc, rate, conc * prompts_per_stream)
        for length in input_lengths
        for conc in concurrencies
    ]


def predict(cfg: StackConfig, plan: Plan, point: LoadPoint) -> Prediction:
    """The plan's figures for `point`, from the same model the plan's summary uses."""
    instance = catalog.INSTANCE_TYPES[plan.instance_type]
    # `served` states its time to first token for a prompt of `max_model_len` tokens and its
    # decode at `max_concurrency` streams, so it is asked at the point's length and concurrency.
    profile = cfg.profile()
    served = throughput.served(
        profile,
        instance,
        plan.pod_cpu,
        [(r.sliding_layers, r.full_layers) for r in plan.ranks],
        point.input_tokens,
        point.concurrency,
        # Only its figure at the engine's limit reads this, and none of those is used here.
        busiest(profile, plan),
        plan.max_num_batched_tokens,
    )
    stream = served.planned.per_stream_tokens_per_s
    # Prefill is arithmetic on the same cores, so the prompts of `concurrency` streams are
    # prefilled one after another, while their replies decode as one batch (modelled).
    round_s = point.concurrency * served.ttft_max_len_s + (point.output_tokens - 1) / stream
    # `request_rate` may be inf (all at once): the concurrency bounds it then.
    requests_per_s = min(point.request_rate, point.concurrency / round_s)
    return Prediction(
        ttft_s=served.ttft_max_len_range_s,
        stream_tokens_per_s=stream,
        requests_per_s=requests_per_s,
        output_tokens_per_s=requests_per_s * point.output_tokens,
    )
