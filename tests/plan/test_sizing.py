"""The planner against the field report's measured table, from first principles."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.plan import catalog
from infra.plan.budget import node_budget, rank_plans
from infra.plan.catalog import GIB
from infra.plan.kv_cache import group_kv, stage_layers
from infra.plan.loading import load_config
from infra.plan.sizing import PlanError, plan
from tests.plan.profiles import REQUIRED as BASE
from tests.plan.profiles import small_gemma
from tools.rehearse.group import vllm_logs

GEMMA = catalog.MODELS["google/gemma-4-12B-it"]

# The report's deployment: two m7g.2xlarge, vLLM downloading the weights itself, 400 MB of KV.
REPORT = {
    "instanceType": "m7g.2xlarge",
    "weightPrefetch": False,
    "kvCacheBytes": 400_000_000,
    "maxModelLen": 2048,
}


def _plan(**overrides: object):
    return plan(load_config({**BASE, **overrides}))


def test_report_deployment_is_reproduced() -> None:
    p = _plan(**REPORT)
    assert p.stages == 2
    assert p.nodes == 2
    assert abs(p.pod_memory_gib - 26) <= 0.5
    assert p.kv_cache_tokens == 2186
    assert f"{p.max_concurrency:.2f}" == "1.07"
    assert p.pod_cpu == 6
    assert f"{p.node_allocatable_gib:.1f}" == "29.8"
    assert 3.0 <= p.decode_tokens_per_s <= 5.0  # the report's rate, within 25 percent


def test_layers_split_as_vllm_splits_them() -> None:
    assert [len(r) for r in stage_layers(48, 2)] == [24, 24]
    assert [len(r) for r in stage_layers(10, 3)] == [3, 4, 3]
    kv = group_kv(GEMMA, 2)
    # 40 sliding + 8 full layers: groups of 8 (every 5th sliding layer), 4 of each on a rank.
    assert [len(g.layers) for g in kv.groups] == [8, 8, 8, 8, 8, 8]
    assert kv.groups[0].layers == (0, 6, 12, 18, 24, 30, 36, 42)
    assert kv.page_bytes == 128 * 8 * 512 * 2  # every layer gets the sliding layers' page
    assert kv.bytes_per_block == (4 * kv.page_bytes, 4 * kv.page_bytes)
    uneven = group_kv(GEMMA, 3)  # 16 layers per rank: a group may hold 3 of them on one rank
    assert max(uneven.bytes_per_block) == 3 * kv.page_bytes


def test_dev_defaults_beat_the_report_on_the_same_nodes() -> None:
    p = _plan()  # prefetch on, everything auto
    report = _plan(**REPORT)
    assert p.instance_type == report.instance_type and p.nodes == report.nodes
    assert p.max_model_len > 2048
    assert p.max_concurrency > 1.07
    assert p.guard_available_gib > 5 * report.guard_available_gib
    # Concurrency is rounded to hundredths.
    kvs = group_kv(GEMMA, p.stages)
    exact = kvs.concurrency(p.kv_cache_bytes, p.max_model_len, p.max_num_batched_tokens)
    assert round(exact, 3) != round(exact, 2)
    assert p.max_concurrency == round(exact, 2)


def test_bigger_nodes_change_stages_and_context() -> None:
    small, big = _plan(), _plan(instanceType="m7g.4xlarge")
    assert (small.stages, big.stages) == (2, 1)
    assert big.max_concurrency > small.max_concurrency
    no_prefetch = _plan(instanceType="m7g.4xlarge", weightPrefetch=False)
    # The report's expectation: a 64 GB node lets the page cache exist without starving the guard.
    assert no_prefetch.guard_available_gib > 2


def test_auto_batched_tokens_shrinks_to_serve_a_longer_context() -> None:
    p = _plan(weightPrefetch=False, pipelineStages=2)
    assert p.max_num_batched_tokens < 4096
    fixed = _plan(weightPrefetch=False, maxNumBatchedTokens=4096, pipelineStages=2)
    assert p.max_model_len > fixed.max_model_len


def test_disk_holds_image_and_checkpoint_unless_cached_on_a_volume() -> None:
    node = _plan()
    cached = _plan(modelCache="volume")
    assert node.node_disk_gib >= catalog.IMAGE_DISK_GIB + 22.3
    assert cached.node_disk_gib < node.node_disk_gib
    # An image upgrade puts an old and a new image on the node beside the OS, and the weights'
    # emptyDir may fill to its limit: the disk holds all of that (prod had 30 GiB for 36).
    both_images = catalog.NODE_OS_DISK_GIB + 2 * catalog.IMAGE_DISK_GIB
    assert cached.node_disk_gib >= both_images
    assert node.node_disk_gib >= both_images + node.model_volume_gib
    assert cached.model_volume_gib >= 22.3
    assert cached.warm_restart_seconds < node.warm_restart_seconds
    # A model volume holds the checkpoint with its margin.
    assert cached.model_volume_gib == math.ceil(GEMMA.checkpoint_bytes / GIB * 1.2)


@settings(max_examples=60, deadline=None)
@given(
    family=st.sampled_from(["m7g", "m8g", "r7g", "c7g"]),
    sizes=st.lists(
        st.sampled_from(["xlarge", "2xlarge", "4xlarge", "8xlarge"]), min_size=2, max_size=2
    ),
    prefetch=st.booleans(),
)
def test_more_node_memory_never_shortens_the_context(
    family: str, sizes: list[str], prefetch: bool
) -> None:
    def context(size: str) -> int:
        try:
            return _plan(instanceType=f"{family}.{size}", weightPrefetch=prefetch).max_model_len
        except PlanError:
            return 0

    small, big = sorted(sizes, key=lambda s: catalog.INSTANCE_TYPES[f"{family}.{s}"].memory_gib)
    assert context(big) >= context(small)


@settings(max_examples=80, deadline=None)
@given(
    instance=st.sampled_from(sorted(catalog.INSTANCE_TYPES)),
    prefetch=st.booleans(),
    pod=st.one_of(st.just("auto"), st.floats(min_value=8, max_value=240)),
    stages=st.one_of(st.just("auto"), st.integers(min_value=1, max_value=8)),
)
def test_planned_kv_never_exceeds_what_the_guard_sees(
    instance: str, prefetch: bool, pod: object, stages: object
) -> None:
    try:
        p = _plan(
            instanceType=instance, weightPrefetch=prefetch, podMemoryGiB=pod, pipelineStages=stages
        )
    except PlanError:
        return
    assert p.kv_cache_bytes <= min(r.guard_gib for r in p.ranks) * GIB + 0.01 * GIB
    assert p.kv_cache_bytes > 0
    assert p.max_concurrency >= 1


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"


def test_planner_matches_real_vllm_on_the_12b_layout() -> None:
    # Real vLLM 0.31 on a random-weight model with gemma-4-12B-it's attention layout (48 layers,
    # 40 sliding x 8 KV heads x 256, 8 full x 1 KV head x 512, window 1024), two ranks,
    # --kv-cache-memory-bytes=400000000 --max-model-len=2048, default batched tokens (4096).
    log = (FIXTURES / "pp2-12b-layout-rank0.log").read_text()
    size, concurrency = vllm_logs.parse_kv_cache_size(log), vllm_logs.parse_max_concurrency(log)
    assert size is not None and concurrency is not None
    p = _plan(**REPORT, maxNumBatchedTokens=4096)
    assert p.kv_cache_tokens == size.tokens
    assert p.max_model_len == concurrency.max_model_len
    assert f"{p.max_concurrency:.2f}" == f"{concurrency.concurrency:.2f}"


def test_planner_matches_real_vllms_refusal_of_4096_tokens() -> None:
    # The same model asked for 4,096 tokens with the report's --kv-cache-memory-bytes=400000000
    # (0.37 GiB): vLLM's own refusal, "0.68 GiB KV cache is needed ... the estimated maximum
    # model length is 2048".
    refusal = vllm_logs.parse_max_seq_len_refusal(
        (FIXTURES / "refused-max-seq-len-rank0.log").read_text()
    )
    assert refusal is not None
    assert (refusal.max_model_len, refusal.estimated_max_model_len) == (4096, 2048)
    assert (refusal.needed_gib, refusal.available_gib) == (0.68, 0.37)
    kv = group_kv(GEMMA, 2)
    assert f"{kv.bytes_per_request(4096, 4096) / GIB:.2f}" == f"{refusal.needed_gib:.2f}"
    for budget in (400_000_000, int(0.37 * GIB)):
        assert f"{kv.usable_bytes(budget) / GIB:.2f}" == f"{refusal.available_gib:.2f}"
        assert kv.max_len(budget, 4096, 4096) == refusal.estimated_max_model_len


# The plan says why each number is what it is: one line a decision, worded for the key the stack
# set (auto: the planner's rule; a number: "as the stack sets").
AUTO_REASONS = [
    "pod memory 25.8125 GiB: 29.8 GiB allocatable on m7g.2xlarge less 1.93 GiB for the pods that "
    "may share the node and 2 GiB headroom; requests = limits",
    "2 stage(s): the fewest whose heaviest rank holds its weights (12.6 GiB), the runtime every "
    "pod pays (8.7 GiB) and KV for the longest context",
    "memory guard sees 4.50 GiB on rank 0: the init container's page cache is charged outside the "
    "engine container",
    "KV cache 4.05 GiB per rank: 90% of what the guard sees",
    "max_num_batched_tokens 512: the largest that keeps the longest context (sliding layers "
    "reserve window - 1 + stages x batched) and a step short enough to tell busy from stalled, "
    "else the least; 16 step(s) prefill 8,192 tokens",
    "max_model_len 8192: the longest one request fits, capped at 8192 (`maxContextCap`); 10.26 "
    "such requests fit at once",
    "decode ~4.3 tokens/s per stream: each token streams the stages' weights in series at ~99 GB/s "
    "per node, set by 16.5 GB/s per vCPU x 6 (calibrated)",
    "liveness every 2 s, 3 failures: before it takes traffic the leader measures its own step (3 "
    "one-token requests of 512 prompt tokens, the first a warm-up, the slowest of the rest kept),"
    " and calls a busy engine that emits nothing for that step x 1.11 (the last chunk of a "
    "8,192-token prompt over the first, modelled) x 1.5 stuck, at least 10 s and at most 85 s: "
    "the longest step at the slow end of the onednn prefill range (42.1 s) x 2 batch(es) in "
    "flight, also the engine's step timeout, which vLLM reads once at start; a broken group is "
    "noticed within 52 s at the fast half of the range, 99 s at its slow end; the longest "
    "prompt's first token comes within 729 s (`firstByteTimeoutSeconds`, part of the reply "
    "timeout); idle, one generated token proves the pipeline at most every 60 s (1,440 requests a"
    " day, counted by vLLM's metrics as traffic), so a pipeline broken while idle is noticed "
    "within 128 s at the fast half of the range (a proof with no answer fails only after the "
    "stall bound: vLLM's counts show a request in its first step as idle)",
    "without the weight prefetch the guard would see 0.58 GiB (the checkpoint's page cache "
    "charged to the engine container), leaving 8,192 tokens at 1.32x",
]
SET_REASONS = [
    AUTO_REASONS[0],
    "3 stage(s), as the stack sets",
    "memory guard sees 0.58 GiB on rank 0: the checkpoint's page cache is charged to the engine "
    "container",
    "KV cache 0.37 GiB per rank: as the stack sets",
    "max_num_batched_tokens 1024: as the stack sets",
    "max_model_len 2048: as the stack sets; 1.43 such requests fit at once",
    AUTO_REASONS[6],
    "liveness every 2 s, 3 failures: before it takes traffic the leader measures its own step (3 "
    "one-token requests of 1024 prompt tokens, the first a warm-up, the slowest of the rest "
    "kept), and calls a busy engine that emits nothing for that step x 1.01 (the last chunk of a "
    "2,048-token prompt over the first, modelled) x 1.5 stuck, at least 10 s and at most 235 s: "
    "the longest step at the slow end of the onednn prefill range (78.2 s) x 3 batch(es) in "
    "flight, also the engine's step timeout, which vLLM reads once at start; a broken group is "
    "noticed only after 83 s at the fast half of the range, beyond the 60 s budget; "
    "`maxNumBatchedTokens` 512 shortens it to 49 s; the longest prompt's first token comes within"
    " 391 s (`firstByteTimeoutSeconds`, part of the reply timeout); idle, one generated token "
    "proves the pipeline at most every 60 s (1,440 requests a day, counted by vLLM's metrics as "
    "traffic), so a pipeline broken while idle is noticed within 159 s at the fast half of the "
    "range (a proof with no answer fails only after the stall bound: vLLM's counts show a request"
    " in its first step as idle)",
]


def test_reasons_explain_each_automatic_choice() -> None:
    assert list(_plan(replicas=2).reasons) == AUTO_REASONS


def test_reasons_name_each_value_the_stack_set() -> None:
    p = _plan(
        **{**REPORT, "pipelineStages": 3, "maxNumBatchedTokens": 1024, "replicas": 2},
    )
    assert list(p.reasons) == SET_REASONS


def test_decode_streams_every_stage_and_the_output_head_in_series() -> None:
    p = _plan()
    instance = catalog.INSTANCE_TYPES[p.instance_type]
    rate = instance.decode_gbps_per_vcpu * 1e9 * p.pod_cpu
    reads = [r.layers * GEMMA.layer_bytes for r in p.ranks]
    reads[-1] += GEMMA.embedding_bytes  # the output head, read for every token
    assert p.decode_tokens_per_s == round(1 / sum(read / rate for read in reads), 2)
    one = _plan(instanceType="m7g.4xlarge")
    assert one.pod_cpu == 14
    single = GEMMA.layers * GEMMA.layer_bytes + GEMMA.embedding_bytes
    # Never measured: the low end, what the measured pods of 6 vCPUs stream, not 14 x 16.5 GB/s.
    expected = instance.decode_gbps_per_vcpu * 1e9 * 6 / single
    assert one.decode_tokens_per_s == round(expected, 2)


def _room_of_rank_0(stages: int) -> float:
    """Pod GiB rank 0's weights and runtime take (unrounded), so a test can leave it x GiB."""
    pod = 30.0
    return pod - rank_plans(GEMMA, stages, pod, True)[0][0].free_gib


P4 = small_gemma(4)
NO_SPLIT = (
    "cannot hold google/gemma-4-12B-it at any split (1 stage(s) need 33.7 GiB per pod before any "
    "KV cache; 8 stage(s) need 12.0 GiB per pod before any KV cache); choose a larger type such "
    "as m7g.4xlarge"
)
# Every refusal of the planner, with the key it blames, the rule and the fix (those a user meets
# through the CLI too, their whole line asserted, are test_config.py's BAD_INPUTS and
# test_bad_input.py's CASES: no whole CPU, too little memory at any split, a pod too large).
REFUSALS = [
    ({"instanceType": "m6g.4xlarge"},
     "`instanceType` m6g.4xlarge is graviton2, whose cores have no bf16 instructions; vLLM's Arm "
     "CPU backend serves bf16 weights from Graviton3 on; choose a Graviton3 or Graviton4 type "
     "such as m7g.2xlarge"),
    ({"instanceType": "m7g.16xlarge"},
     "`instanceType` m7g.16xlarge is not in the catalogue (families c6g, c7g, c8g, m6g, m7g, "
     "m8g, r6g, r7g, r8g, large to 8xlarge); choose one of those, such as m7g.2xlarge"),
    ({"model": "example/small", "modelProfile": P4, "pipelineStages": 5},
     "`pipelineStages` 5 is more than the model's 4 layers; use at most 4, or auto"),
    ({"pipelineStages": 2, "podMemoryGiB": 21.3},
     "`pipelineStages` 2 stage(s) put 21.3 GiB of weights and runtime on rank 0, more than its "
     "21.3 GiB pod; use more stages or auto, or choose a larger `instanceType`"),
    ({"kvCacheBytes": 5 * GIB, "pipelineStages": 2},
     "`kvCacheBytes` 5368709120 (5.00 GiB) is more than vLLM's memory guard will see on rank 0 "
     "(4.50 GiB: the init container's page cache is charged outside the engine container); set "
     "it to at most 4348444672 or auto"),
    ({"kvCacheBytes": 1},
     "`kvCacheBytes` 1 holds KV for 0 tokens, fewer than the 1024 one request needs (0.19 GiB "
     "per rank); set it to at least 201326592 or auto"),
    ({"pipelineStages": 2, "kvCacheBytes": 201326591},
     "`kvCacheBytes` 201326591 holds KV for 896 tokens, fewer than the 1024 one request needs "
     "(0.19 GiB per rank); set it to at least 201326592 or auto"),
    ({"pipelineStages": 2, "podMemoryGiB": 21.5, "kvCacheBytes": 1},
     "`kvCacheBytes` 1 holds KV for 0 tokens, fewer than the 1024 one request needs (0.19 GiB "
     "per rank); set it to auto, or choose a larger `instanceType`"),
    ({"podMemoryGiB": 12.02},
     "`instanceType` m7g.2xlarge (12.02 GiB per pod) cannot hold google/gemma-4-12B-it at any "
     "split (1 stage(s) need 33.7 GiB per pod before any KV cache; 8 stage(s) leave KV for only "
     "512 tokens); choose a larger type such as m7g.4xlarge"),
    ({"podMemoryGiB": 12.05, "maxModelLen": 2048},
     "`maxModelLen` 2048 tokens need 0.09 GiB of KV cache per rank, more than the 0.05 GiB "
     "available to it (vLLM would estimate a maximum of 1152); set it to at most 1152 or auto, "
     "or give the KV cache more memory"),
    ({"maxNumBatchedTokens": 256, "pipelineStages": 3},
     "`maxNumBatchedTokens` 256 is below vLLM's max_num_seqs of 384; use at least 384, or auto"),
    # A forced split whose KV holds no token.
    ({"pipelineStages": 2, "podMemoryGiB": _room_of_rank_0(2) + 0.04},
     "`maxModelLen` 1024 tokens need 0.18 GiB of KV cache per rank, more than the 0.03 GiB "
     "available to it (vLLM would estimate a maximum of 0); set it to at most 0 or auto, or give "
     "the KV cache more memory"),
]  # fmt: skip


@pytest.mark.parametrize(("values", "message"), REFUSALS, ids=lambda v: str(v)[:48])
def test_each_refusal_names_the_key_the_rule_and_the_fix(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(PlanError) as error:
        _plan(**values)
    assert str(error.value) == message


NO_POD = (
    "`instanceType` m7g.2xlarge leaves no memory for a model pod after its other tenants; "
    "choose a larger type such as m7g.2xlarge"
)


# A pod's memory comes in sixteenths of a GiB: a node that leaves less than one (32 MiB, or
# none) has no pod; one that leaves 70 MiB gets a 64 MiB pod, which holds no split.
def _headroom_leaving(mib: float) -> float:
    free = node_budget(catalog.INSTANCE_TYPES["m7g.2xlarge"], volumes=False).free_gib
    return catalog.NODE_HEADROOM_MIB + free * 1024 - mib


@pytest.mark.parametrize(
    ("free_mib", "message"),
    [
        (32, NO_POD),
        (-9000, NO_POD),
        (70, f"`instanceType` m7g.2xlarge (0.0625 GiB per pod) {NO_SPLIT}"),
    ],
)
def test_a_node_without_a_sixteenth_of_a_gib_for_a_pod_is_refused_and_one_gets_a_pod(
    free_mib: int, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catalog, "NODE_HEADROOM_MIB", _headroom_leaving(free_mib))
    with pytest.raises(PlanError) as error:
        _plan()
    assert str(error.value) == message


FREE = node_budget(catalog.INSTANCE_TYPES["m7g.2xlarge"], volumes=False).free_gib
# (stack values, the figures of the plan they give).
FIGURES = [
    ({"replicas": 3}, {"nodes": 6}),  # replicas multiply nodes
    # A model that fits one node is not split.
    ({"model": "example/small-model", "modelProfile": small_gemma(26)}, {"stages": 1, "nodes": 1}),
    # The report could have served 4,096 tokens with fewer batched tokens: the sliding-window
    # reservation is window - 1 + batched tokens, and shrinking the batch frees it.
    (
        {**REPORT, "maxModelLen": 4096},
        {"stages": 2, "max_model_len": 4096, "max_num_batched_tokens": 512},
    ),
    # An explicit context that two stages cannot hold moves to more stages.
    ({**REPORT, "maxModelLen": 16384}, {"stages": 4, "max_model_len": 16384}),
    # A pod may take exactly what the node gives.
    ({"podMemoryGiB": FREE}, {"pod_memory_gib": FREE}),
    # A set value is kept as it is; auto is in sixteenths of a GiB.
    ({"podMemoryGiB": 25.8}, {"pod_memory_gib": 25.8}),
    ({}, {"pod_memory_gib": 25.8125}),
    # Automatic stages are the fewest that serve the context: two ranks with 0.6 GiB of guard
    # still serve 8,192 tokens, no third node; a KV budget above what two ranks' guard sees moves
    # to three, where it fits, whatever the context asked for (a short explicit one included).
    ({"podMemoryGiB": 21.9}, {"stages": 2, "max_model_len": 8192}),
    ({"kvCacheBytes": 5 * GIB}, {"stages": 3}),
    ({"kvCacheBytes": 5 * GIB, "maxModelLen": 512}, {"stages": 3}),
    # As many stages as the model has layers is allowed.
    ({"model": "example/small", "modelProfile": P4, "pipelineStages": 4}, {"stages": 4}),
    # The model's whole context is a valid explicit length.
    ({"maxModelLen": GEMMA.max_context}, {"max_model_len": GEMMA.max_context}),
    # Just inside the refusals: the least KV the refusal asks for serves exactly the shortest
    # useful context; a forced split keeps what its automatic KV serves, even below that minimum.
    ({"pipelineStages": 2, "kvCacheBytes": 201326592}, {"max_model_len": 1024}),
    ({"pipelineStages": 2, "podMemoryGiB": 21.5}, {"max_model_len": 896}),
    ({"maxNumBatchedTokens": 256, "pipelineStages": 2}, {"max_num_batched_tokens": 256}),
]


@pytest.mark.parametrize(("values", "figures"), FIGURES)
def test_stack_values_give_the_plan_figures_they_should(
    values: dict[str, object], figures: dict[str, object]
) -> None:
    p = _plan(**values)
    assert {name: getattr(p, name) for name in figures} == figures


def test_the_plan_carries_the_stack_and_what_follows_from_the_split() -> None:
    image = "vllm/vllm-openai-cpu:v0.31.1-arm64@sha256:" + "ab" * 32
    p = _plan(vllmImage=image, modelCache="volume")
    assert (p.stack, p.model, p.generation) == ("dev", GEMMA.name, "graviton3")
    assert (p.weight_prefetch, p.model_cache) == (True, "volume")
    assert p.vllm_image == image
    assert p.shm_gib == 1
    assert p.tightest_rank == 0 and p.guard_available_gib == p.ranks[0].guard_gib
    assert p.max_num_seqs == 128 * p.stages
    assert p.prefill_steps_at_max_len == -(-p.max_model_len // p.max_num_batched_tokens)
    kvs = group_kv(GEMMA, p.stages)
    needed = kvs.bytes_per_request(p.max_model_len, p.max_num_batched_tokens)
    assert p.kv_needed_gib == round(needed / GIB, 2)
    concurrency = kvs.concurrency(p.kv_cache_bytes, p.max_model_len, p.max_num_batched_tokens)
    assert p.max_concurrency == round(concurrency, 2)
    assert p.kv_cache_tokens == int(concurrency * p.max_model_len)
    budget = node_budget(catalog.INSTANCE_TYPES[p.instance_type], volumes=True)
    assert p.node_cotenants_gib == round(budget.cotenants_gib, 2)
    assert p.node_allocatable_gib == round(budget.allocatable_gib, 2)
    for rank in p.ranks:
        assert rank.free_gib == round(rank.free_gib, 2) and rank.guard_gib == round(
            rank.guard_gib, 2
        )
    assert p.decode_tokens_per_s == round(p.decode_tokens_per_s, 2)


def test_the_fix_asks_for_the_least_kv_when_auto_would_give_exactly_that() -> None:
    # A guard whose 90% is 192 MiB: `auto` gives exactly the 192 MiB 1,024 tokens need.
    pod = _room_of_rank_0(2) + 0.2088
    with pytest.raises(PlanError) as error:
        _plan(pipelineStages=2, podMemoryGiB=pod, kvCacheBytes=1)
    assert str(error.value).endswith("; set it to at least 201326592 or auto")
    assert _plan(pipelineStages=2, podMemoryGiB=pod).max_model_len == 1024


def test_one_whole_cpu_is_enough_to_try(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without other tenants m7g.large leaves its pod one core: the memory is what refuses it.
    monkeypatch.setattr(catalog, "COTENANTS", ())
    with pytest.raises(PlanError) as error:
        _plan(instanceType="m7g.large")
    assert str(error.value).startswith("`instanceType` m7g.large (5 GiB per pod) cannot hold")
