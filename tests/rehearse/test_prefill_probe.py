"""The prefill probe's pure parts: the slice it serves, the peak it reads, the warm-up it parses and
the figures and rows it reports; and the step-timeout row's sizing and timeout formula."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from infra.plan import catalog, liveness, prefill
from infra.plan.catalog import MODELS
from infra.plan.config import ConfigError
from tools.rehearse.checks import Check
from tools.rehearse.measure import prefill_probe, step_timeout
from tools.rehearse.measure.prefill_probe import Measured, Peak

GEMMA = MODELS["google/gemma-4-12B-it"]

CPUINFO = """processor\t: 0
model name\t: AMD EPYC
cpu MHz\t\t: 2445.404
flags\t\t: fpu sse sse2 avx fma avx2 bmi2
"""


def test_the_slice_is_one_pattern_period_at_full_width() -> None:
    config = prefill_probe.slice_config(GEMMA)
    assert config["num_hidden_layers"] == 6
    assert config["layer_types"].count("full_attention") == 1
    assert config["layer_types"][-1] == "full_attention"
    assert (config["hidden_size"], config["intermediate_size"]) == (3840, 15360)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (16, 8)
    assert (config["head_dim"], config["global_head_dim"]) == (256, 512)
    assert config["num_global_key_value_heads"] == 1
    assert config["sliding_window"] == 1024


def test_the_short_slice_keeps_both_kinds_of_layer_at_full_width() -> None:
    config = prefill_probe.slice_config(GEMMA, prefill_probe.QUICK_SLIDING)
    assert config["layer_types"] == ["sliding_attention", "full_attention"]
    assert (config["hidden_size"], config["intermediate_size"]) == (3840, 15360)
    assert (config["head_dim"], config["global_head_dim"]) == (256, 512)


def test_a_profile_without_heads_cannot_be_sliced() -> None:
    from dataclasses import replace

    with pytest.raises(ConfigError) as caught:
        prefill_probe.slice_config(replace(GEMMA, attention_heads=None))
    assert caught.value.key == "modelProfile.attentionHeads"


def test_the_peak_comes_from_the_widest_isa_and_the_clock() -> None:
    peak = prefill_probe.cpu_peak(CPUINFO)
    assert peak.flop_per_cycle == 32
    assert peak.gflops_per_core == pytest.approx(2445.404 * 32 / 1000)
    amx = CPUINFO.replace("avx2", "avx2 avx512f avx512_bf16 amx_bf16")
    assert prefill_probe.cpu_peak(amx).flop_per_cycle == 1024
    assert prefill_probe.cpu_peak(CPUINFO.replace("avx2", "avx512f")).flop_per_cycle == 64


def test_the_warm_up_is_read_between_vllms_two_lines() -> None:
    log = (
        "(EngineCore pid=1) INFO 12-01 23:59:50 [cpu_model_runner.py:88] Warming up model for "
        "the compilation...\n"
        "(EngineCore pid=1) INFO 12-02 00:00:31 [cpu_model_runner.py:92] Warming up done.\n"
    )
    assert prefill_probe.warmup_seconds(log) == 41.0
    assert prefill_probe.warmup_seconds(log.splitlines()[0]) is None


def _measured(**changes: object) -> Measured:
    base = {
        "tokens": 512,
        "layers": 6,
        "step_s": 40.0,
        "cpu_s": 80.0,
        "warmup_s": 50.0,
        "flop": 1.6e12,
        "load": 3.0,
        "peak": Peak(80.0, 2500.0, 32, "test"),
        "date": dt.date(2026, 12, 1),
        "cores": 2,
    }
    return Measured(**{**base, **changes})  # type: ignore[arg-type]


def _row(m: Measured, name: str) -> Check:
    (row,) = [c for c in prefill_probe.probe_checks(m) if c.name == name]
    return row


def test_the_figures_follow_from_what_was_measured() -> None:
    f = prefill_probe.figures(_measured())
    assert f.tokens_per_s_per_layer == pytest.approx(512 * 6 / 40)
    assert f.gflops_per_core == pytest.approx(20.0)  # per CPU-second, not per wall second
    assert f.efficiency == pytest.approx(0.25)
    assert f.warmup_bounds_step is True
    assert prefill_probe.figures(_measured(warmup_s=39.0)).warmup_bounds_step is False
    assert prefill_probe.figures(_measured(warmup_s=None)).warmup_bounds_step is None


def test_the_rows_hold_the_efficiency_against_the_catalogues_slow_end() -> None:
    # Measured on oneDNN (the default `path`): judged against that path's slow end.
    slow = catalog.PREFILL_EFFICIENCY["onednn"][0]
    peak = Peak(100.0, 2500.0, 40, "test")
    at = _measured(peak=peak, flop=1.001 * slow * 100e9 * 80.0)
    assert _row(at, "prefill: measured vs modelled").ok is True
    below = _measured(peak=peak, flop=0.9 * slow * 100e9 * 80.0)
    assert _row(below, "prefill: measured vs modelled").ok is False
    assert {c.name for c in prefill_probe.probe_checks(below)} == {
        "prefill linear path",
        "prefill tokens/s per layer",
        "warm-up vs step",
        "GFLOP/s per core vs peak",
        "prefill: measured vs modelled",
    }


def test_the_modelled_step_sits_beside_the_measured_one() -> None:
    # 1.6 TFLOP on 2 cores of an 80 GFLOP/s peak: 10 s at 100%, so 10 s / efficiency.
    m = _measured()
    slow, fast = catalog.PREFILL_EFFICIENCY["onednn"]
    assert prefill_probe.modelled_step_s(m, 1.0) == pytest.approx(10.0)
    assert prefill_probe.modelled_step_s(m, slow) == pytest.approx(10.0 / slow)
    row = _row(m, "prefill tokens/s per layer")
    assert f"modelled {10 / fast:.0f}-{10 / slow:.0f} s" in row.expected
    assert row.observed.startswith("40.0 s, 77 tok/s/layer")


def test_a_fallback_measurement_is_judged_against_the_fallbacks_slow_end() -> None:
    peak = Peak(100.0, 2500.0, 40, "test")
    fallback = prefill_probe.FALLBACK_PATH
    onednn_slow = catalog.PREFILL_EFFICIENCY["onednn"][0]
    fallback_slow = catalog.PREFILL_EFFICIENCY["fallback"][0]
    between = (onednn_slow + fallback_slow) / 2 * 100e9 * 80.0
    on_fallback = _measured(peak=peak, flop=between, path=fallback)
    on_onednn = _measured(peak=peak, flop=between)
    assert _row(on_fallback, "prefill: measured vs modelled").ok
    assert not _row(on_onednn, "prefill: measured vs modelled").ok


def test_the_step_flop_counts_layers_not_embeddings() -> None:
    config = prefill_probe.slice_config(GEMMA)
    embeddings = config["vocab_size"] * config["hidden_size"] * 2
    weights = embeddings + 2 * 1_000_000_000
    flop = prefill_probe.step_flop(GEMMA, config, weights, 512)
    work = prefill.StageWork(1e9, weights, 5, 1)
    assert flop == pytest.approx(2 * 1e9 * 512 + prefill.attention_flops(GEMMA, work, 512, 512))


def test_the_timeout_rows_model_takes_seconds_a_step_at_the_measured_rate() -> None:
    # 2 x params x tokens / rate = the targeted step.
    size = step_timeout.widened_bytes(5.0, 2)
    params = size / 2
    assert 2 * params * step_timeout.ROW_BATCHED / 5e9 == pytest.approx(step_timeout.ROW_STEP_S)
    assert step_timeout.ROW_STEP_S * 2 > liveness.MIN_STALL_S


def test_the_timeout_rows_prompt_keeps_two_batches_in_flight() -> None:
    # vLLM sends a prompt's next chunk while the previous one runs, so a prompt of more than
    # one chunk fills the two-stage pipeline: the wait the half timeout must catch spans two.
    prompt = step_timeout.ROW_MAX_LEN - 8
    assert math.ceil(prompt / step_timeout.ROW_BATCHED) >= 2


# The kernel lines vLLM 0.31 writes (vllm/model_executor/layers/utils.py
# dispatch_cpu_unquantized_gemm), as the probe's DEBUG log shows them.
ONEDNN = (
    "(EngineCore pid=9) DEBUG 12-02 10:01:02 [utils.py:576] CPU unquantized GEMM dispatch: "
    "using oneDNN onednn_mm\n"
)
SGL = (
    "(EngineCore pid=9) DEBUG 12-02 10:01:02 [utils.py:566] CPU unquantized GEMM dispatch: "
    "using sgl-kernel weight_packed_linear\n"
)
FALLBACK = (
    "(EngineCore pid=9) WARNING 12-02 10:01:02 [utils.py:580] Failed to create oneDNN linear, "
    "fallback to torch linear. Exception: could not create a primitive\n"
    "(EngineCore pid=9) DEBUG 12-02 10:01:02 [utils.py:589] CPU unquantized GEMM dispatch: "
    "using torch.nn.functional.linear (fallback)\n"
)


def test_the_linear_path_is_read_from_vllms_own_dispatch_lines() -> None:
    assert prefill_probe.linear_path(ONEDNN) == "oneDNN onednn_mm"
    assert (
        prefill_probe.linear_path(SGL + ONEDNN)
        == "sgl-kernel weight_packed_linear, oneDNN onednn_mm"
    )
    # Any layer on torch's generic linear is the fallback, with or without the warning.
    assert prefill_probe.linear_path(ONEDNN + FALLBACK) == prefill_probe.FALLBACK_PATH
    assert prefill_probe.linear_path(FALLBACK.splitlines()[1]) == prefill_probe.FALLBACK_PATH
    assert prefill_probe.linear_path(FALLBACK.splitlines()[0]) == prefill_probe.FALLBACK_PATH
    # No dispatch line at all (vLLM logging above debug): oneDNN, vLLM's default.
    assert prefill_probe.linear_path("") == prefill_probe.FAST_PATH


def test_bf16_support_and_the_cpu_name_come_from_cpuinfo() -> None:
    epyc = "model name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 avx512f avx512_bf16\n"
    old = "model name\t: AMD EPYC 7R13\nflags\t\t: fpu avx2\n"
    graviton3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU part\t: 0xd40\n"
    graviton2 = "processor\t: 0\nFeatures\t: fp asimd asimddp\nCPU part\t: 0xd0c\n"
    found = [prefill_probe.has_bf16(c) for c in (epyc, old, graviton3, graviton2)]
    assert found == [True, False, True, False]
    assert prefill_probe.cpu_model(epyc) == "AMD EPYC 9R14"
    assert prefill_probe.cpu_model(graviton3) == "Arm CPU part 0xd40"


def test_a_group_on_a_cpu_without_bf16_is_planned_on_the_fallback_path() -> None:
    """vLLM refuses oneDNN's linear there, and a leader planned on oneDNN would not start."""
    said: list[str] = []
    old = "model name\t: AMD EPYC 7R13\nflags\t\t: fpu avx2\n"
    assert prefill_probe.cpu_path(said.append, old) == {"prefillPath": "fallback"}
    assert said == ["AMD EPYC 7R13 has no bf16 instructions: planned with prefillPath=fallback"]
    bf16 = "model name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 avx512f avx512_bf16\n"
    assert prefill_probe.cpu_path(said.append, bf16) == {}
    assert len(said) == 1


def test_the_fallback_on_a_bf16_cpu_fails_its_row_and_is_expected_without_bf16() -> None:
    fallback, name = prefill_probe.FALLBACK_PATH, "prefill linear path"
    assert _row(_measured(path="oneDNN onednn_mm", bf16=True, cpu="EPYC"), name).ok
    assert not _row(_measured(path=fallback, bf16=True, cpu="EPYC"), name).ok
    # Without bf16 the fallback is what vLLM does: the row names it and passes.
    row = _row(_measured(path=fallback, bf16=False, cpu="EPYC"), name)
    assert row.ok and "torch's generic linear" in row.observed and "no bf16" in row.expected
