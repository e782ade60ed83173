"""Weight formats in the plan: bytes per parameter by layer type, one-rank groups, decode,
download, the quantize Job's figures, the labels on every figure, and `--compare` side by side."""

from __future__ import annotations

import pytest

from infra.adapters import verdict
from infra.adapters.cli import main
from infra.plan import catalog, moe_measured, prefill, weights
from infra.plan.catalog import GIB
from infra.plan.compare import Need, compare
from infra.plan.config import ConfigError
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests.plan.test_verdict_and_advice import TODAY, _json, _out

NAMED = "someone/gemma-4-12B-it-W8A8@" + "0123456789" * 4


def _plan(values: dict[str, object], stack: str = "dev"):
    cfg = load_stack(stack, values, TODAY)
    return cfg, plan(cfg, stack)


def test_int8_plans_one_m7g_2xlarge_per_replica() -> None:
    for replicas in (1, 3):
        _, p = _plan({"weights": "int8", "replicas": replicas})
        assert (p.instance_type, p.stages, p.nodes) == ("m7g.2xlarge", 1, replicas)
        assert p.max_model_len == 8192 and p.max_concurrency > 1


def test_pipeline_stages_still_override_the_format() -> None:
    _, p = _plan({"weights": "int8", "pipelineStages": 2})
    assert (p.stages, p.nodes) == (2, 2)


def test_bf16_keeps_its_two_stages_and_checkpoint() -> None:
    _, p = _plan({})
    assert (p.stages, p.weights, p.quantize) == (2, "bf16", None)
    assert p.download_gib == pytest.approx(22.3, abs=0.01)


def test_bytes_per_parameter_by_layer_type() -> None:
    bf16 = catalog.MODELS["google/gemma-4-12B-it"]
    int8 = bf16.__class__(**{**bf16.__dict__, "weights": "int8"})
    int4 = bf16.__class__(**{**bf16.__dict__, "weights": "int4"})
    # Decoder linears shrink; embeddings (the tied output head) and encoders stay bf16.
    assert int8.layer_bytes == pytest.approx(bf16.layer_bytes / 2)
    assert int4.layer_bytes == pytest.approx(bf16.layer_bytes * (0.5 + 2 / 128) / 2)
    assert int8.embedding_bytes == bf16.embedding_bytes
    kept = bf16.embedding_bytes + bf16.non_text_bytes
    assert int8.download_bytes == pytest.approx(kept + bf16.layers * bf16.layer_bytes / 2, 1)
    # W4A8 is saved int-quantized (one int8 byte per int4 weight): no smaller download.
    assert int4.download_bytes > int8.download_bytes
    assert int8.layer_params == bf16.layer_params


def test_decode_streams_fewer_bytes_per_token() -> None:
    _, one_stage_bf16 = _plan({"instanceType": "m7g.4xlarge"})
    # A named checkpoint: no volumes, so the same pod size as bf16's.
    _, one_stage_int8 = _plan(
        {"instanceType": "m7g.4xlarge", "weights": "int8", "weightsSource": NAMED}
    )
    assert one_stage_bf16.stages == one_stage_int8.stages == 1
    assert one_stage_bf16.pod_cpu == one_stage_int8.pod_cpu
    profile = catalog.MODELS["google/gemma-4-12B-it"]
    bf16_bytes = profile.layers * profile.layer_bytes + profile.embedding_bytes
    int8_bytes = profile.layers * profile.layer_bytes / 2 + profile.embedding_bytes
    ratio = one_stage_int8.decode_tokens_per_s / one_stage_bf16.decode_tokens_per_s
    assert ratio == pytest.approx(bf16_bytes / int8_bytes, rel=0.01)


def test_the_prefill_rate_keeps_bf16s_slow_end() -> None:
    for generation in ("graviton3", "graviton4"):
        slow, fast = prefill.gflops_range(generation)
        q_slow, q_fast = prefill.gflops_range(generation, "int8")
        assert (q_slow, q_fast) == (slow, 2 * fast)


def test_a_produced_checkpoint_has_its_job_and_lives_on_volumes() -> None:
    cfg, p = _plan({"weights": "int8", "replicas": 2})
    assert cfg.model_cache == "none" and p.model_cache == "volume"
    job = p.quantize
    assert job is not None and job.scheme == "W8A8" and job.volumes == 2
    assert job.memory_gib == p.pod_memory_gib and job.cpu == p.pod_cpu
    assert job.deadline_seconds >= 3 * job.modelled_seconds
    # The ranks find the checkpoint on their volume: no download in the cold start.
    assert p.cold_start_seconds == p.warm_restart_seconds


def test_a_named_checkpoint_is_downloaded_without_a_job() -> None:
    _, p = _plan({"weights": "int8", "weightsSource": NAMED})
    _, produced = _plan({"weights": "int8"})
    assert p.quantize is None and p.model_cache == "none"
    # Every start downloads the smaller checkpoint (12.59 GiB at 140 MB/s: ~97 s).
    download = p.download_gib * GIB / 140e6
    assert p.cold_start_seconds - produced.cold_start_seconds == pytest.approx(download, abs=1)


def test_every_figure_says_measured_or_modelled(capsys: pytest.CaptureFixture[str]) -> None:
    out = _out(capsys, "--set", "weights=int8")
    assert "in int8 (quality unmeasured here)" in out
    assert "for one stream (modelled)" in out and "(calibrated)" not in out.split("\n\n")[0]
    assert "modelled: int8 bytes per token at the bandwidth calibrated" in out
    assert weights.PREFILL_SOURCE in out
    assert "12.59 GiB (modelled), written once to the weights volumes" in out


def test_int4_warns_about_its_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "--set", "weights=int4")
    assert verdict.INT4_KERNEL_WARNING in data["warnings"]
    assert data["weights"] == "int4" and data["quantize"]["scheme"] == "W4A8"
    assert data["quality"] == "unmeasured here"


def test_compare_shows_models_and_formats_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "--compare")
    rows = data["ranked"] + data["starts_but_misses_need"] + data["cannot_start"]
    assert {r["weights"] for r in rows} == {"bf16", "int8", "int4"}
    assert {r["model"] for r in rows} == set(catalog.MODELS)
    assert {r["quality"] for r in rows if r["weights"] != "bf16"} == {"unmeasured here"}
    m7g = {(r["model"], r["weights"]): r for r in rows if r["instance_type"] == "m7g.2xlarge"}
    dense, moe = "google/gemma-4-12B-it", "google/gemma-4-26B-A4B-it"
    assert (m7g[dense, "int8"]["nodes"], m7g[dense, "int8"]["stages"]) == (1, 1)
    assert m7g[dense, "bf16"]["nodes"] == 2
    # Produced by the quantize Job, which an m7g.2xlarge pod cannot hold for the MoE.
    assert "the quantize Job loads" in m7g[moe, "int8"]["refusal"]
    assert moe_measured.NOT_MEASURED["int4"] in m7g[moe, "int4"]["refusal"]
    text = _out(capsys, "--compare")
    assert "gemma-4-26B-A4B-it" in text and "gemma-4-12B-it" in text
    assert "mixture-of-experts decode and prefill derived from a measured MoE/dense ratio" in text
    only = _json(capsys, "--compare", "--formats", "bf16")
    assert {r["weights"] for r in only["ranked"]} == {"bf16"}


def test_the_plans_own_comparison_stays_in_its_format() -> None:
    cfg = load_stack("dev", {}, TODAY)
    result = compare(cfg, Need(8192), "dev", TODAY)
    assert {c.weights for c in result.ranked + result.short + result.refused} == {"bf16"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--set", f"weightsSource={NAMED}"],
            f"error: `weightsSource` names {NAMED}, but `weights` is bf16, whose checkpoint is "
            "`model` at `modelRevision`; set `weights` to the checkpoint's format (int8 or "
            "int4), or set `weightsSource` to quantize\n",
        ),
        (
            ["--set", "weights=fp8"],
            "error: `weights` must be 'bf16', 'int8' or 'int4' (got 'fp8'); use bf16, int8 or "
            "int4\n",
        ),
        (
            ["--set", "weights=int8", "--set", "weightsSource=someone/gemma"],
            "error: `weightsSource` has the wrong form (got 'someone/gemma'); use quantize, or a "
            "compressed-tensors checkpoint as owner/name@<40-character commit SHA>\n",
        ),
        (
            ["--compare", "--formats", "int3"],
            "error: `--formats` 'int3' is not a weight format; list some of bf16, int8, int4, "
            "such as --formats bf16,int8\n",
        ),
    ],
)
def test_bad_weights_input_is_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv, today=TODAY) == 2
    assert capsys.readouterr().err == message


def test_the_weights_keys_refuse_at_load() -> None:
    with pytest.raises(ConfigError) as error:
        load_stack("dev", {"weightsSource": NAMED}, TODAY)
    assert error.value.key == "weightsSource"
