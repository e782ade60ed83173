"""The MoE probe's pure parts: shapes, bytes read per token, per-layer time and ratios."""

from __future__ import annotations

import pytest

from tools.rehearse.group.tiny_checkpoint import FULL, SLIDING
from tools.rehearse.measure.moe_probe import (
    DENSE_12B,
    MOE_26B,
    PEERS,
    SLICE_LAYERS,
    Timing,
    batched_step_s,
    bench_s,
    bytes_per_token,
    distinct_experts,
    fixed_s,
    kernel_lines,
    layer_parts,
    main,
    moe_slice_config,
    peer_rows,
    per_layer_s,
    ratio,
    report,
    resident_params,
    row,
    slice_kinds,
    step_s,
    whole_model_s,
    zentorch_runs,
)

# Tensor shapes of one gemma-4-26B-A4B-it sliding layer, as the built slice's safetensors and
# the published checkpoint name them (q_proj [4096, 2816], k_proj and v_proj [2048, 2816],
# o_proj [2816, 4096], experts.gate_up_proj [128, 1408, 2816], experts.down_proj
# [128, 2816, 704], mlp gate/up [2112, 2816], down [2816, 2112], router.proj [128, 2816]).
SLIDING_ATTENTION = 4096 * 2816 + 2 * 2048 * 2816 + 2816 * 4096
EXPERTS = 128 * 1408 * 2816 + 128 * 2816 * 704
MLP = 3 * 2112 * 2816
ROUTER = 128 * 2816


def test_moe_sliding_layer_parts_match_the_checkpoint_shapes() -> None:
    parts = layer_parts(MOE_26B, SLIDING)
    assert parts["attention"] == SLIDING_ATTENTION
    assert parts["mlp"] == MLP
    assert parts["router"] == ROUTER
    assert parts["experts"] == EXPERTS
    assert parts["active_experts"] == EXPERTS * 8 // 128


def test_full_layers_share_k_and_v() -> None:
    # 16 x 512 query and output, 2 KV heads x 512 for k only (attention_k_eq_v).
    assert layer_parts(MOE_26B, FULL)["attention"] == 2 * 8192 * 2816 + 1024 * 2816
    assert layer_parts(DENSE_12B, FULL)["attention"] == 2 * 8192 * 3840 + 512 * 3840


def test_whole_moe_model_is_about_25_billion_parameters() -> None:
    # 25 sliding + 5 full layers and the tied embedding: the published "25.97B" less the
    # vision encoder (~0.5B).
    layers = 25 * resident_params(MOE_26B, SLIDING) + 5 * resident_params(MOE_26B, FULL)
    total = layers + 262_144 * 2816
    assert 25.0e9 < total < 25.5e9


def test_dense_layer_reads_all_of_itself() -> None:
    parts = layer_parts(DENSE_12B, SLIDING)
    assert bytes_per_token(DENSE_12B, SLIDING) == 2 * (parts["attention"] + parts["mlp"])
    assert bytes_per_token(DENSE_12B, SLIDING, "int8") == parts["attention"] + parts["mlp"]


def test_moe_layer_reads_attention_mlp_router_and_top_k_experts() -> None:
    one = bytes_per_token(MOE_26B, SLIDING)
    assert one == 2 * (SLIDING_ATTENTION + MLP + ROUTER + EXPERTS * 8 / 128)
    # int8 halves everything but the router, which stays bf16.
    assert bytes_per_token(MOE_26B, SLIDING, "int8") == (one - 2 * ROUTER) / 2 + 2 * ROUTER


def test_several_streams_share_the_dense_parts_and_some_experts() -> None:
    assert distinct_experts(128, 8, 1) == pytest.approx(8)
    assert distinct_experts(128, 8, 4) == pytest.approx(128 * (1 - (120 / 128) ** 4))
    assert distinct_experts(0, 0, 4) == 0
    assert bytes_per_token(MOE_26B, SLIDING, streams=4) < bytes_per_token(MOE_26B, SLIDING)


def test_bad_kind_and_format_are_refused() -> None:
    with pytest.raises(ValueError, match="layer kind 'mixed'"):
        layer_parts(MOE_26B, "mixed")
    with pytest.raises(ValueError, match="weights 'fp8' must be one of"):
        bytes_per_token(MOE_26B, SLIDING, "fp8")


def test_per_layer_time_is_the_long_slice_less_the_short() -> None:
    # 2 layers 0.09 s, 4 layers 0.13 s: 20 ms per layer, 50 ms of fixed cost per step.
    assert per_layer_s(0.09, 0.13, 2, 4) == pytest.approx(0.02)
    assert fixed_s(0.09, 0.02, 2) == pytest.approx(0.05)
    assert per_layer_s(0.10, 0.09, 2, 4) == 0.0
    with pytest.raises(ValueError, match="long slice 2 layers must be longer than the short 2"):
        per_layer_s(1.0, 1.0, 2, 2)


def test_ratio_and_whole_model() -> None:
    assert ratio(3.0, 2.0) == 1.5
    with pytest.raises(ValueError, match="dense time 0"):
        ratio(1.0, 0)
    assert whole_model_s(0.01, 30, 0.05) == pytest.approx(0.35)


def _t(name: str, layers: int, prefill: float, one: float, many: float) -> Timing:
    return Timing(name, "bf16", layers, prefill, 256, one, many, 4)


def test_row_from_timings() -> None:
    moe, dense = MOE_26B["name"], DENSE_12B["name"]
    short, long = SLICE_LAYERS
    extra = long - short
    # Per extra layer: MoE 30 ms at 1 stream, 50 ms at 4, prefill 0.6 s; dense 20, 25, 0.3.
    timings = {
        (moe, short): _t(moe, short, 1.4, 0.110, 0.140),
        (moe, long): _t(moe, long, 1.4 + 0.6 * extra, 0.110 + 0.030 * extra, 0.140 + 0.05 * extra),
        (dense, short): _t(dense, short, 0.7, 0.090, 0.100),
        (dense, long): _t(
            dense, long, 0.7 + 0.3 * extra, 0.090 + 0.02 * extra, 0.1 + 0.025 * extra
        ),
    }
    r = row(timings, "bf16")
    assert r.moe.layer_1_s == pytest.approx(0.030)
    assert r.dense.layer_1_s == pytest.approx(0.020)
    assert r.layer_ratio == pytest.approx(1.5)
    assert r.layer_ratio_n == pytest.approx(0.050 / 0.025)
    assert r.prefill_ratio == pytest.approx(0.6 / 0.3)
    assert r.moe.fixed_1_s == pytest.approx(0.110 - 0.030 * short)
    assert r.dense.fixed_1_s == pytest.approx(0.090 - 0.020 * short)
    moe_model = 0.030 * 30 + r.moe.fixed_1_s
    assert r.model_ratio == pytest.approx(moe_model / (0.020 * 48 + r.dense.fixed_1_s))
    # Bytes per layer over sliding + full pairs, modelled from the shapes.
    pair = bytes_per_token(MOE_26B, SLIDING) + bytes_per_token(MOE_26B, FULL)
    assert r.moe.bytes_per_layer == pytest.approx(pair / 2)
    assert r.bytes_ratio < 0.5


def test_slice_configs() -> None:
    assert slice_kinds(4) == [SLIDING, FULL, SLIDING, FULL]
    moe = moe_slice_config(MOE_26B, 2)
    assert moe["layer_types"] == [SLIDING, FULL]
    assert (moe["enable_moe_block"], moe["num_experts"], moe["top_k_experts"]) == (True, 128, 8)
    assert moe["moe_intermediate_size"] == 704
    assert moe["num_global_key_value_heads"] == 2
    assert moe_slice_config(MOE_26B, 4)["layer_types"] == slice_kinds(4)
    dense = moe_slice_config(DENSE_12B, 2)
    assert dense["enable_moe_block"] is False
    assert "num_experts" not in dense


def test_kernel_lines_keep_vllm_dispatch_lines_once() -> None:
    log = (
        "(EngineCore pid=1) INFO 12-03 10:30:01 [unquantized.py:505] Using "
        "CPUUnquantizedExperts MoE backend\n"
        "DEBUG 12-03 10:30:02 [utils.py:1] CPU unquantized GEMM dispatch: using oneDNN\n"
        "DEBUG 12-03 10:30:02 [utils.py:1] CPU unquantized GEMM dispatch: using oneDNN\n"
        "INFO 12-03 10:30:03 [api_server.py:1] Started server\n"
    )
    assert kernel_lines(log) == (
        "Using CPUUnquantizedExperts MoE backend",
        "CPU unquantized GEMM dispatch: using oneDNN",
    )


def test_int4_is_refused_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--formats", "bf16,int4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: `--formats` 'int4': the probe runs bf16 and int8")
    assert "GELU-tanh" in err and "\n" not in err


def test_step_time_counts_tokens_not_chunks() -> None:
    # The first chunk carries the prefill's token; a busy server sent steps 3 and 4 together.
    stamps = [(10.0, 1), (10.1, 2), (10.3, 4), (10.4, 5)]
    assert step_s(stamps) == pytest.approx(0.1)
    with pytest.raises(RuntimeError, match="streamed 1 tokens"):
        step_s([(1.0, 1), (2.0, 1)])


def test_zentorch_runs_on_amd_with_avx512_only() -> None:
    # Its fused MoE stopped with an illegal instruction on an AVX2-only EPYC.
    amd = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse avx2 {}\n"
    assert zentorch_runs(amd.format("avx512f avx512_bf16"))
    assert not zentorch_runs(amd.format("fma"))
    assert not zentorch_runs("vendor_id\t: GenuineIntel\nflags\t\t: avx512f amx_tile\n")


def test_a_busy_machine_s_slices_give_a_line_saying_so_not_a_crash() -> None:
    # The 6-layer MoE slice prefilled faster than the 2-layer one (other work slowed the short):
    # the per-layer time is 0, and the report says why instead of dividing by it.
    moe, dense = MOE_26B["name"], DENSE_12B["name"]
    short, long = SLICE_LAYERS
    timings = {
        (moe, short): _t(moe, short, 0.63, 0.028, 0.034),
        (moe, long): _t(moe, long, 0.60, 0.039, 0.058),
        (dense, short): _t(dense, short, 0.34, 0.036, 0.036),
        (dense, long): _t(dense, long, 0.95, 0.049, 0.052),
    }
    text = report([row(timings, "bf16")], list(timings.values()), "cpu", "now")
    assert (
        f"bf16: no per-layer figure: a {long}-layer slice took no longer than its {short}" in text
    )
    assert "ratio" not in text.split("per layer (derived")[1].split("int4")[0]


def test_llama_cpp_benches_are_read_as_median_seconds() -> None:
    # Fields as llama-bench -o jsonl and llama-batched-bench --output-format jsonl print them.
    pp = '{"n_prompt": 256, "n_gen": 0, "samples_ns": [ 900000000, 700000000, 800000000 ]}'
    tg = '{"n_prompt": 0, "n_gen": 64, "samples_ns": [ 1920000000, 3200000000, 1280000000 ]}'
    assert bench_s(f"{pp}\n{tg}\n") == (0.8, 0.03)
    runs = [f'{{"pp": 16, "tg": 48, "pl": 4, "t_pp": 0.2, "t_tg": {t}}}' for t in (2.4, 1.92, 4.8)]
    assert batched_step_s("\n".join([*runs, "", ""])) == pytest.approx(0.05)


def test_peer_rows_give_llama_cpp_over_vllm_per_layer_and_say_what_was_not_run() -> None:
    # Per extra layer, llama.cpp 2 ms (3 ms a 4-stream step, 0.1 s prefill), vLLM 4 (4, 0.2 s).
    ours = {(k, n): _t(k, n, n / 10, n / 500, 3 * n / 1000) for k in PEERS for n in SLICE_LAYERS}
    theirs = {(k, n): _t(k, n, n / 5, n / 250, n / 250) for k in ("bf16", "int8") for n in (2, 6)}
    head, bf16, q8, q4 = peer_rows(ours, theirs)
    assert head[1:4] == ["1 stream", "vLLM", "ratio"] and bf16[0] == "bf16 / bf16"
    assert " ".join(q8) == "Q8_0 / int8 2.00 4.00 0.50 3.00 4.00 0.75 100.00 200.00 0.50"
    assert q4[2:4] == ["not run", "-"]
