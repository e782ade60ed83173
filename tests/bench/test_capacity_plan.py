"""The capacity run's points and the plan's predictions for them."""

from __future__ import annotations

import math

import pytest

from infra.plan import economics
from tests import builders
from tools.bench import capacity_plan
from tools.bench.loadgen import LoadPoint, bench_serve_argv


def test_points_measure_prefill_at_1000_and_the_longest_prompt_up_to_the_planned_streams() -> None:
    p = builders.planned()[1]
    points = capacity_plan.default_points(p)
    longest = p.max_model_len - capacity_plan.DEFAULT_OUTPUT_TOKENS - 32
    planned = p.front_door.client_concurrent_requests
    assert planned == math.floor(p.max_concurrency) > 1
    assert [(pt.input_tokens, pt.concurrency) for pt in points] == [
        (1000, 1),
        (1000, planned),
        (longest, 1),
        (longest, planned),
    ]
    # Every prompt plus its reply fits the context; arrivals at half the door's rate.
    assert all(pt.input_tokens + pt.output_tokens < p.max_model_len for pt in points)
    assert {pt.request_rate for pt in points} == {p.front_door.client_requests_per_minute / 120}
    assert [pt.prompts for pt in points] == [2, 2 * planned, 2, 2 * planned]


def test_without_a_gatekeeper_the_kv_slots_bound_the_streams_and_nothing_the_rate() -> None:
    p = builders.planned("minimal")[1]
    points = capacity_plan.default_points(p)
    assert {q.concurrency for q in points} == {1, int(p.max_concurrency)}
    assert all(math.isinf(q.request_rate) for q in points)


def test_a_context_shorter_than_1000_tokens_gets_one_length() -> None:
    p = builders.planned()[1]
    points = capacity_plan.default_points(p, output_tokens=p.max_model_len - 600)
    assert {pt.input_tokens for pt in points} == {600 - 32}


def test_at_1000_tokens_alone_the_prediction_is_the_plan_s_own_first_token_figure() -> None:
    cfg, p = builders.planned()
    served = economics.economics(cfg, p).served
    one = LoadPoint(1000, 128, 1, math.inf, 2)
    predicted = capacity_plan.predict(cfg, p, one)
    assert predicted.ttft_s == served.ttft_1k_range_s
    # The calibrated single stream (4.0 tokens/s measured in the field report).
    assert 3.5 < predicted.stream_tokens_per_s < 5.0
    request_s = served.ttft_1k_s + 127 / predicted.stream_tokens_per_s
    assert predicted.requests_per_s == pytest.approx(1 / request_s)
    assert predicted.output_tokens_per_s == pytest.approx(predicted.requests_per_s * 128)


def test_more_streams_share_the_node_and_the_rate_caps_requests() -> None:
    cfg, p = builders.planned()
    one = capacity_plan.predict(cfg, p, LoadPoint(1000, 128, 1, math.inf, 2))
    ten = capacity_plan.predict(cfg, p, LoadPoint(1000, 128, 10, math.inf, 20))
    assert ten.stream_tokens_per_s < one.stream_tokens_per_s
    assert ten.requests_per_s > one.requests_per_s
    capped = capacity_plan.predict(cfg, p, LoadPoint(1000, 128, 10, 0.01, 20))
    assert capped.requests_per_s == 0.01
    longest = capacity_plan.predict(cfg, p, LoadPoint(8000, 128, 1, math.inf, 2))
    assert longest.ttft_s[0] > one.ttft_s[0] and longest.ttft_s[1] > one.ttft_s[1]


def test_the_command_line_asks_for_exact_lengths_and_keeps_the_key_out() -> None:
    point = LoadPoint(1000, 128, 10, 5.0, 20)
    argv = bench_serve_argv(
        "/v/bin/vllm",
        point,
        base_url="http://lb.example.com",
        model="google/gemma-4-12B-it",
        tokenizer="/tok",
        result_dir="/out",
    )
    assert argv[:3] == ["/v/bin/vllm", "bench", "serve"]
    flags = dict(a.removeprefix("--").split("=", 1) for a in argv[3:] if "=" in a)
    assert flags == {
        "backend": "openai",
        "base-url": "http://lb.example.com",
        "endpoint": "/v1/completions",
        "model": "google/gemma-4-12B-it",
        "tokenizer": "/tok",
        "dataset-name": "random",
        "random-input-len": "1000",
        "random-output-len": "128",
        "random-range-ratio": "0",
        "num-prompts": "20",
        "request-rate": "5",
        "max-concurrency": "10",
        "seed": "0",
        "percentile-metrics": "ttft,tpot,itl,e2el",
        "metric-percentiles": "50,90,99",
        "result-dir": "/out",
        "result-filename": "in1000-out128-c10-r5.json",
    }
    assert {a for a in argv[3:] if "=" not in a} == {
        "--ignore-eos",
        "--save-result",
        "--save-detailed",
    }
    unbounded = LoadPoint(1000, 128, 1, math.inf, 2)
    assert unbounded.name == "in1000-out128-c1-rinf"
    assert "--request-rate=inf" in bench_serve_argv(
        "vllm", unbounded, base_url="u", model="m", tokenizer="t", result_dir="d"
    )
