"""gemma-4-26B-A4B-it in the planner: its catalogue layout, memory sized like the 12B's with every
expert resident, decode and prefill derived from the measured MoE/dense ratio (never from active
parameters alone), one-line refusals for formats without a figure, and `--compare` across models.

The measured figures (`infra.plan.moe_measured`) are replaced here by stated test figures, so
each test checks the arithmetic and the labels whatever a probe run measured.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from infra.adapters.cli import main
from infra.adapters.render import render_stack
from infra.plan import catalog, compare, moe, moe_measured, throughput
from infra.plan.config import ConfigError
from infra.plan.kv_cache import CPU_BLOCK_SIZE, group_kv
from infra.plan.moe_measured import MoeDecodeRatio
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests import builders
from tools.rehearse.group.tiny_checkpoint import FULL, SLIDING
from tools.rehearse.measure import moe_probe

TODAY = dt.date(2026, 12, 3)
MOE = "google/gemma-4-26B-A4B-it"
DENSE = "google/gemma-4-12B-it"
PROFILE = catalog.MODELS[MOE]
#: Test figures: a MoE layer decodes in 0.6x a dense layer's time at one stream, 0.9x at four;
#: its prefill takes 0.7x.
LAYER_RATIO, LAYER_RATIO_N, PREFILL_RATIO = 0.6, 0.9, 0.7
INT4_REASON = "vLLM 0.31's CPU int4 MoE kernel takes SiLU/SwiGLU only, Gemma 4's experts GELU-tanh"


def _ratio(weights: str, layer: float = LAYER_RATIO) -> MoeDecodeRatio:
    return MoeDecodeRatio(
        weights=weights,
        moe_layer_s=0.010 * layer,
        dense_layer_s=0.010,
        moe_layer_n_s=0.020 * LAYER_RATIO_N,
        dense_layer_n_s=0.020,
        streams=4,
        prefill_ratio=PREFILL_RATIO,
        bytes_ratio=0.17,
        kernels=("test",),
        source=f"test figures for {weights}",
    )


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> dict[str, MoeDecodeRatio]:
    """bf16 and int8 measured, int4 not (with the probe's kind of reason)."""
    ratios = {w: _ratio(w) for w in ("bf16", "int8")}
    monkeypatch.setattr(moe_measured, "MOE_DECODE_RATIO", ratios)
    monkeypatch.setattr(moe_measured, "NOT_MEASURED", {"int4": INT4_REASON})
    return ratios


@pytest.fixture
def int4_measured(measured: dict[str, MoeDecodeRatio]) -> None:
    measured["int4"] = _ratio("int4")
    moe_measured.NOT_MEASURED.clear()


def _moe(weights: str) -> catalog.ModelProfile:
    return replace(PROFILE, weights=weights)


#: An int8 checkpoint named by the stack: the quantize Job cannot hold the MoE's bf16 checkpoint
#: in an m7g.2xlarge pod (`test_a_quantize_job_over_its_pods_memory_is_refused_in_one_line`).
CHECKPOINT = "example/gemma-4-26B-A4B-it-W8A8@" + "a" * 40
INT8_CHECKPOINT = {
    "model": MOE,
    "weights": "int8",
    "weightsSource": CHECKPOINT,
    "modelCache": "volume",
}
SET_INT8_CHECKPOINT = tuple(
    arg for key, value in INT8_CHECKPOINT.items() for arg in ("--set", f"{key}={value}")
)
#: A type whose pod holds the quantize Job's modelled peak for the MoE (56 of 50.02 GiB).
QUANTIZE_TYPE = "r7g.2xlarge"


#: Each layer's attention kind, as the probe names it.
KINDS = [FULL if PROFILE.is_full_attention(i) else SLIDING for i in range(PROFILE.layers)]


# --------------------------------------------------------------------------------------------
# The catalogue entry


def test_the_layout_is_the_probes_and_its_config() -> None:
    layout = moe_probe.MOE_26B
    assert layout["name"] == PROFILE.name
    assert (PROFILE.layers, PROFILE.sliding_per_full) == (layout["layers"], 5)
    assert (PROFILE.sliding_kv_heads, PROFILE.sliding_head_dim) == (8, 256)
    assert (PROFILE.full_kv_heads, PROFILE.full_head_dim) == (2, 512)
    assert (PROFILE.sliding_window, PROFILE.hidden_size) == (1024, 2816)
    assert PROFILE.vocab_size == 262_144
    assert (PROFILE.attention_heads, PROFILE.intermediate_size) == (16, 2112)
    assert (PROFILE.experts, PROFILE.experts_per_token) == (128, 8)
    assert PROFILE.expert_intermediate_size == 704
    assert PROFILE.is_moe and not catalog.MODELS[DENSE].is_moe
    assert PROFILE.decode_reference == DENSE


def test_checkpoint_bytes_are_the_shapes_parameters_in_bf16() -> None:
    # The decoder the checkpoint implies, against the probe's own shape arithmetic.
    resident = sum(moe_probe.resident_params(moe_probe.MOE_26B, k) for k in KINDS)
    assert PROFILE.layers * PROFILE.layer_params == pytest.approx(resident, rel=1e-9)
    assert PROFILE.non_text_bytes == 550_000_000 * 2
    text = (PROFILE.checkpoint_bytes - PROFILE.non_text_bytes) / 2
    assert text == pytest.approx(25.2e9, rel=0.01)  # the model card's "25.2B total"


def test_active_parameters_are_the_shared_parts_and_eight_experts() -> None:
    parts = [moe_probe.layer_parts(moe_probe.MOE_26B, k) for k in KINDS]
    active = sum(p["attention"] + p["mlp"] + p["router"] + p["active_experts"] for p in parts)
    assert PROFILE.layers * PROFILE.active_layer_params == pytest.approx(active, rel=1e-9)
    total_active = active + PROFILE.embedding_bytes / 2
    assert total_active == pytest.approx(3.8e9, rel=0.02)  # "3.8B active"


def test_kv_is_counted_from_its_attention_layout() -> None:
    # vLLM stores K and V on every layer, k_eq_v full layers too (models/gemma4.py).
    kvs = group_kv(PROFILE, 2)
    sliding = 8 * 256 * 2 * 2
    assert kvs.page_bytes == CPU_BLOCK_SIZE * sliding
    full = next(g for g in kvs.groups if g.kind == "full")
    assert full.block_tokens == CPU_BLOCK_SIZE * sliding // (2 * 512 * 2 * 2)
    full_layers = sorted(layer for g in kvs.groups if g.kind == "full" for layer in g.layers)
    assert full_layers == [5, 11, 17, 23, 29]


# --------------------------------------------------------------------------------------------
# Acceptance: int8 plans two m7g.2xlarge with a single-stream rate derived from the ratio


def _bandwidth() -> float:
    instance = catalog.INSTANCE_TYPES["m7g.2xlarge"]
    return catalog.node_decode_gbps(instance, 5) * 1e9


def test_int8_plans_two_m7g_2xlarge_at_the_derived_rate(measured: dict) -> None:
    p = builders.planned("dev", INT8_CHECKPOINT, TODAY)[1]
    assert (p.nodes, p.stages, p.instance_type) == (2, 2, "m7g.2xlarge")
    assert p.quantize is None and p.weights_source == CHECKPOINT
    # Every expert resident: each rank holds its layers' whole weights.
    moe_int8 = _moe("int8")
    assert p.ranks[0].weights_gib == pytest.approx(
        (15 * moe_int8.layer_bytes + moe_int8.embedding_bytes + moe_int8.non_text_bytes)
        / catalog.GIB,
        abs=0.01,
    )
    # The 12B's calibrated per-layer time x the measured ratio, the head as bytes.
    dense_layer = replace(catalog.MODELS[DENSE], weights="int8").layer_bytes
    seconds = (30 * LAYER_RATIO * dense_layer + moe_int8.embedding_bytes) / _bandwidth()
    assert p.decode_tokens_per_s == pytest.approx(1 / seconds, abs=0.01)
    # Not the rate of the active parameters' bytes, which would be faster.
    active = (moe.read_bytes(moe_int8, 30) + moe_int8.embedding_bytes) / _bandwidth()
    assert p.decode_tokens_per_s < 0.9 / active


def test_the_decode_rows_say_derived_from_the_measured_ratio_and_the_revision_is_unpinned(
    measured: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    assert PROFILE.revision is None
    assert main([*SET_INT8_CHECKPOINT], today=TODAY) == 0
    out = capsys.readouterr().out
    assert "main, unpinned (see warnings)" in out
    assert f"catalogue holds no checked commit of {MOE}" in out
    verdict = out.split("\n\n")[0]
    assert "dev starts: 2 x m7g.2xlarge, one group of 2 pipeline stages, serving " + MOE in verdict
    assert "for one stream (derived from a measured MoE/dense ratio)" in verdict
    row = next(line for line in out.splitlines() if line.startswith("decode, 1 stream"))
    assert "derived from a measured MoE/dense ratio: a layer decodes in 0.60x" in row
    assert "(test figures for int8)" in row
    why = next(line for line in out.splitlines() if line.startswith("  - decode ~"))
    assert "derived from a measured MoE/dense ratio" in why and "test figures for int8" in why
    assert "MoE/dense prefill ratio 0.70" in out


def test_the_rate_follows_the_ratio_not_the_active_parameters(
    measured: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_stack("dev", INT8_CHECKPOINT, TODAY)
    head = _moe("int8").embedding_bytes
    base = plan(cfg, "dev").decode_tokens_per_s
    monkeypatch.setitem(moe_measured.MOE_DECODE_RATIO, "int8", _ratio("int8", 2 * LAYER_RATIO))
    slower = plan(cfg, "dev").decode_tokens_per_s
    # Seconds per token: head + layers; the layers' part doubles with the ratio.
    layers_s = 1 / base - head / _bandwidth()
    assert 1 / slower == pytest.approx(head / _bandwidth() + 2 * layers_s, rel=1e-3)


def test_a_ratio_faster_than_its_bytes_is_capped_at_the_bandwidth(
    measured: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(moe_measured.MOE_DECODE_RATIO, "int8", _ratio("int8", 0.01))
    profile = _moe("int8")
    assert moe.step_weight_bytes(profile, 30) == pytest.approx(moe.read_bytes(profile, 30))
    p = plan(load_stack("dev", INT8_CHECKPOINT, TODAY), "dev")
    reads = moe.read_bytes(profile, 30) + profile.embedding_bytes
    assert p.decode_tokens_per_s <= _bandwidth() / reads * 1.001


def test_more_streams_read_more_experts() -> None:
    profile = _moe("bf16")
    one, four, many = (moe.read_bytes(profile, 1, n) for n in (1, 4, 1000))
    assert one == pytest.approx(profile.active_layer_params * profile.dtype_bytes)
    assert one < four < many
    assert many == pytest.approx(profile.layer_bytes, rel=1e-6)  # every expert, once


def test_prefill_scales_the_12b_per_layer_arithmetic(measured: dict) -> None:
    profile = _moe("int8")
    dense = catalog.MODELS[DENSE]
    assert moe.prefill_layer_params(profile) == pytest.approx(PREFILL_RATIO * dense.layer_params)
    assert moe.prefill_layer_params(dense) == dense.layer_params
    # Never below the active parameters each token computes.
    tiny = replace(measured["int8"], prefill_ratio=0.01)
    moe_measured.MOE_DECODE_RATIO["int8"] = tiny
    assert moe.prefill_layer_params(profile) == pytest.approx(profile.active_layer_params)


# --------------------------------------------------------------------------------------------
# Acceptance: bad combinations exit 2 with one line


def test_a_format_without_a_measured_ratio_is_refused_in_one_line(
    measured: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--set", f"model={MOE}", "--set", "weights=int4"], today=TODAY) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: `weights` int4 has no measured MoE decode ratio for {MOE} ({INT4_REASON}); "
        "choose one of bf16, int8\n"
    )


def test_a_type_too_small_is_refused_in_one_line(
    measured: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--set", f"model={MOE}", "--set", "weights=int8", "--set", "instanceType=m7g.large"]
    assert main(argv, today=TODAY) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: `instanceType` m7g.large")


def test_a_quantize_job_over_its_pods_memory_is_refused_in_one_line(
    measured: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    # The Job loads the bf16 checkpoint whole: 48 GB of MoE in a 25.25 GiB pod is OOM-killed.
    assert main(["--set", f"model={MOE}", "--set", "weights=int8"], today=TODAY) == 2
    assert capsys.readouterr().err == (
        f"error: `weightsSource` is quantize, but the quantize Job loads {MOE}'s bf16 checkpoint "
        "whole (llm-compressor oneshot): 50.02 GiB at its peak (modelled), over the 25.25 GiB a "
        "m7g.2xlarge pod may take; set `weightsSource` to a compressed-tensors checkpoint as "
        "owner/name@<40-character commit SHA>, or choose an `instanceType` whose pod holds the "
        "peak\n"
    )


def test_an_unknown_model_to_compare_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--compare", "--models", "meta-llama/Llama-3-8B"], today=TODAY) == 2
    assert capsys.readouterr().err == (
        "error: `--models` 'meta-llama/Llama-3-8B' is not a catalogue model; list some of "
        f"{DENSE}, {MOE}, or all\n"
    )


# --------------------------------------------------------------------------------------------
# Deployment overrides: int4 on one node with the quantize Job


def test_int4_plans_one_node_with_the_quantize_job(int4_measured: None) -> None:
    sets = {"model": MOE, "weights": "int4", "instanceType": QUANTIZE_TYPE}
    p = plan(load_stack("dev", sets, TODAY), "dev")
    assert (p.nodes, p.stages, p.instance_type) == (1, 1, QUANTIZE_TYPE)
    assert p.quantize is not None and p.quantize.scheme == "W4A8"
    assert p.weights_source == "quantize" and p.model_cache == "volume"


def _no_ratio_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(moe_measured, "MOE_DECODE_RATIO", {})
    monkeypatch.setattr(moe_measured, "NOT_MEASURED", {})


def _zero_dense_time(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = replace(_ratio("bf16"), dense_layer_s=0.0)
    monkeypatch.setitem(moe_measured.MOE_DECODE_RATIO, "bf16", broken)


def _no_dense_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(catalog.MODELS, MOE, replace(PROFILE, decode_reference=None))


@pytest.mark.parametrize(
    ("breaks", "key", "rule"),
    [
        (_no_ratio_at_all, "weights", "no measured MoE decode ratio"),  # every format refused
        (_zero_dense_time, "weights", "is zero"),  # refused, not divided
        (_no_dense_reference, "model", "no dense catalogue model"),
    ],
)
def test_a_moe_without_a_usable_ratio_is_refused(
    breaks: Callable[[pytest.MonkeyPatch], None],
    key: str,
    rule: str,
    measured: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    breaks(monkeypatch)
    with pytest.raises(ConfigError) as error:
        plan(load_stack("dev", {"model": MOE}, TODAY), "dev")
    assert error.value.key == key and rule in error.value.rule


# --------------------------------------------------------------------------------------------
# Acceptance: --compare shows both models


def test_the_12b_rows_do_not_change_beside_the_moe(measured: dict) -> None:
    cfg = load_stack("dev", {}, TODAY)
    need = compare.default_need(cfg, "dev")
    alone = compare.compare(cfg, need, "dev", TODAY, ("bf16", "int8"))
    both = compare.compare(cfg, need, "dev", TODAY, ("bf16", "int8"), (DENSE, MOE))

    def rows(result: compare.Comparison) -> list[dict]:
        every = (*result.ranked, *result.short, *result.refused)
        return [c.to_json() for c in every if c.model == DENSE]

    assert rows(both) == rows(alone)


def _moe_rows(formats: tuple[str, ...] = ("bf16", "int8")) -> list[compare.Candidate]:
    """Every catalogue type `--compare` plans the MoE on, in every format it can run."""
    cfg = load_stack("dev", {}, TODAY)
    result = compare.compare(cfg, compare.default_need(cfg, "dev"), "dev", TODAY, formats, (MOE,))
    return [c for c in (*result.ranked, *result.short) if c.plan is not None]


def _over_bandwidth(rows: list[compare.Candidate]) -> list[str]:
    """Rows whose one stream reads faster than the planner's own bandwidth for their node
    (`catalog.node_decode_gbps` at the pod's cores), or decodes above the layout's ceiling."""
    bad = []
    for c in rows:
        assert c.plan is not None and c.econ is not None
        instance = catalog.INSTANCE_TYPES[c.instance_type]
        node = catalog.node_decode_gbps(instance, c.plan.pod_cpu)
        one = c.econ.served.one.aggregate_tokens_per_s
        streamed = one * c.econ.served.one_stream_bytes_per_token / 1e9
        ceiling = moe.ceiling_tokens_per_s(_moe(c.weights), node)
        # 1% for the rounding of tokens/s to two decimals.
        if streamed > node * 1.01 or one > ceiling * 1.01:
            bad.append(f"{c.instance_type} {c.weights}: {streamed:.1f} of {node:.1f} GB/s")
    return bad


def test_no_moe_row_reads_faster_than_its_node() -> None:
    """The shipped measured ratios, every type and format the planner prints for the MoE."""
    rows = _moe_rows()
    assert {c.weights for c in rows} == {"bf16", "int8"} and len(rows) > 20
    assert _over_bandwidth(rows) == []


def test_the_property_catches_a_ratio_without_the_cap(
    measured: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A ratio far faster than its bytes, and the planner's floor at the bytes read removed.
    monkeypatch.setitem(moe_measured.MOE_DECODE_RATIO, "int8", _ratio("int8", 0.01))
    uncapped = moe.step_weight_bytes
    monkeypatch.setattr(
        moe,
        "step_weight_bytes",
        lambda profile, layers, streams=1: min(
            uncapped(profile, layers, streams), 0.01 * moe.read_bytes(profile, layers, streams)
        ),
    )
    bad = _over_bandwidth(_moe_rows(("int8",)))
    assert bad and all(" int8: " in b for b in bad)


def test_bytes_per_token_follow_the_layout_head_included() -> None:
    """int8: attention, dense MLP and eight experts in int8, the router and the tied head bf16:
    ~4.57 GB a token, the head about a third of it."""
    int8, bf16 = _moe("int8"), _moe("bf16")
    parts = [moe_probe.layer_parts(moe_probe.MOE_26B, k) for k in KINDS]
    read = moe.token_bytes(int8)
    assert read["attention"] == pytest.approx(sum(p["attention"] for p in parts), rel=1e-9)
    assert read["dense MLP"] == 30 * 3 * 2816 * 2112
    assert read["routed experts"] == 30 * 8 * 3 * 2816 * 704
    assert read["router"] == 30 * 2816 * 128 * 2  # bf16 in every format
    assert read["output head"] == 262_144 * 2816 * 2  # tied, bf16 as the checkpoint keeps it
    layers = sum(moe_probe.bytes_per_token(moe_probe.MOE_26B, k, "int8") for k in KINDS)
    assert sum(read.values()) - read["output head"] == pytest.approx(layers, rel=1e-9)
    assert moe.read_bytes(int8, 30) == pytest.approx(layers, rel=1e-9)
    assert sum(read.values()) == pytest.approx(4.57e9, rel=0.005)
    assert read["output head"] / sum(read.values()) == pytest.approx(0.32, abs=0.01)
    assert sum(moe.token_bytes(bf16).values()) == pytest.approx(7.64e9, rel=0.005)
    # At the field report's effective ~95 GB/s: ~21 tokens/s for one stream in int8.
    assert moe.ceiling_tokens_per_s(int8, 95) == pytest.approx(20.8, abs=0.1)


def test_moe_bytes_per_token_are_its_active_bytes(measured: dict) -> None:
    profile = _moe("int8")
    loads = throughput.stage_loads(profile, [(25, 5)])
    weights = loads[0].read_bytes
    assert weights == pytest.approx(sum(moe.token_bytes(profile).values()))
    assert loads[0].weight_bytes > weights  # the measured ratio is slower than the bytes


def test_the_int8_override_renders_the_quantize_job_for_the_moe(
    measured: dict, tmp_path: Path
) -> None:
    cfg = load_stack("dev", {"model": MOE, "weights": "int8", "instanceType": QUANTIZE_TYPE}, TODAY)
    written = render_stack(cfg, plan(cfg, "dev"), tmp_path)
    jobs = [yaml.safe_load(p.read_text()) for p in written if "-job-" in p.name]
    assert len(jobs) == 1
    env = {
        e["name"]: e.get("value")
        for e in jobs[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert MOE in env.values()
    assert env["SOURCE_REVISION"] == ""  # unpinned: the plan warns
    volumes = [p for p in written if "persistentvolumeclaim" in p.name]
    assert len(volumes) == 1  # one weights volume for the one rank


def test_int8_plans_two_nodes_with_its_measured_ratio_labelled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The shipped catalogue, unpatched: int8 plans on two m7g.2xlarge, its one-stream rate
    derived from the int8 ratio measured on zentorch's fused MoE, the run named, the ceiling its
    bytes set printed beside it. (The shipped int4 refusal: test_moe_measured.py.)"""
    assert main([*SET_INT8_CHECKPOINT], today=TODAY) == 0
    out = capsys.readouterr().out
    verdict = out.split("\n\n")[0]
    assert "dev starts: 2 x m7g.2xlarge, one group of 2 pipeline stages" in verdict
    assert "(derived from a measured MoE/dense ratio)" in verdict
    measured = next(line for line in out.splitlines() if line.startswith("decode, 1 stream"))
    assert "ZenCPUExpertsInt8" in measured and "2026-12-07" in measured
    row = next(line for line in out.splitlines() if line.startswith("decode ceiling"))
    bandwidth = catalog.node_decode_gbps(catalog.INSTANCE_TYPES["m7g.2xlarge"], 5)
    ceiling = moe.ceiling_tokens_per_s(_moe("int8"), bandwidth)
    assert f"{ceiling:.1f} tokens/s for one stream: 4.57 GB a token" in row
    assert "output head 1.48; head 32%, bf16 as the checkpoint keeps it" in row
    assert float(measured.split()[3]) <= ceiling
    assert main(["--set", "weights=int8"], today=TODAY) == 0
    assert "decode ceiling" not in capsys.readouterr().out  # a dense model's rate is its bytes'


def test_only_a_moe_in_int8_makes_its_job_check_the_arm_kernel() -> None:
    """vLLM 0.31 serves int8 experts on Arm only with `cpu_fused_moe_int8`, absent from some
    builds; a dense model's int8 linear layers need no such op."""
    moe_int8 = plan(
        load_stack("dev", {"model": MOE, "weights": "int8", "instanceType": QUANTIZE_TYPE}), "dev"
    )
    dense_int8 = plan(load_stack("dev", {"weights": "int8"}), "dev")
    assert moe_int8.quantize is not None and dense_int8.quantize is not None
    assert moe_int8.quantize.required_ops == ("cpu_fused_moe_int8",)
    assert dense_int8.quantize.required_ops == ()
