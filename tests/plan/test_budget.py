"""The planner's arithmetic rules, each tested as the rule it states, not through one figure.

The weights each rank holds, the share of the guard's memory `kvCacheBytes: auto` leaves unused,
the sliding-window reservation of a pipeline's batches in flight, the batch size chosen on a tie,
and the startup timeout's margin over the cold start.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest

from infra.plan import catalog
from infra.plan.budget import (
    BATCHED_TOKEN_CHOICES,
    CPU_DEFAULT_BATCHED_TOKENS_PER_RANK,
    CPU_DEFAULT_MAX_SEQS_PER_RANK,
    KV_SAFETY_FRACTION,
    auto_kv_bytes,
    choose_batched,
    longest_context,
    node_budget,
    round_gib,
    stage_weights_gib,
)
from infra.plan.catalog import GIB, MIB
from infra.plan.kv_cache import KvGroup, cdiv, group_kv, rank_layer_counts, stage_layers
from infra.plan.loading import load_config
from infra.plan.sizing import MIN_STARTUP_SECONDS, plan
from tests.plan.profiles import REQUIRED as BASE

GEMMA = catalog.MODELS["google/gemma-4-12B-it"]
#: A stack that leaves every planned figure auto.
AUTO = load_config(BASE)


# -- the weights of each rank ----------------------------------------------------------------------


@pytest.mark.parametrize("tied", [True, False])
def test_a_single_stage_holds_the_output_head_once_when_tied(tied: bool) -> None:
    profile = replace(GEMMA, tied_embeddings=tied)
    layers = profile.layers * profile.layer_bytes
    heads = 1 if tied else 2  # a tied head reuses the input embedding's memory
    expected = layers + profile.non_text_bytes + heads * profile.embedding_bytes
    assert stage_weights_gib(profile, 1, 0, profile.layers) == pytest.approx(expected / GIB)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_the_last_stage_holds_the_output_head_even_when_tied(stages: int) -> None:
    # Split, the tied head is a copy on the last rank: the first rank keeps the input embedding.
    per_rank = 8
    first = stage_weights_gib(GEMMA, stages, 0, per_rank) * GIB
    last = stage_weights_gib(GEMMA, stages, stages - 1, per_rank) * GIB
    body = per_rank * GEMMA.layer_bytes
    assert first == pytest.approx(body + GEMMA.embedding_bytes + GEMMA.non_text_bytes)
    assert last == pytest.approx(body + GEMMA.embedding_bytes)
    for middle in range(1, stages - 1):
        assert stage_weights_gib(GEMMA, stages, middle, per_rank) * GIB == pytest.approx(body)


# -- the KV budget -----------------------------------------------------------------------------


@pytest.mark.parametrize("guard_gib", [0.58, 1.0, 4.69, 20.25, 123.4])
def test_auto_kv_is_the_largest_whole_mib_within_the_safe_share(guard_gib: float) -> None:
    kv = auto_kv_bytes(guard_gib)
    safe = guard_gib * GIB * (1 - KV_SAFETY_FRACTION)
    assert kv % MIB == 0
    assert kv <= safe < kv + MIB


def test_auto_kv_is_ninety_percent_of_what_the_guard_sees_and_never_negative() -> None:
    # The README's rule for `kvCacheBytes: auto`, on a guard whose 90% is a whole number of MiB.
    assert auto_kv_bytes(10.0) == 9 * GIB
    assert auto_kv_bytes(2.5) == math.floor(2.25 * 1024) * MIB
    assert auto_kv_bytes(0.0) == auto_kv_bytes(-0.5) == 0


def test_auto_kv_in_a_plan_leaves_the_safe_share_of_the_tightest_guard() -> None:
    for overrides in ({}, {"weightPrefetch": False}, {"instanceType": "r7g.2xlarge"}):
        p = plan(load_config({**BASE, **overrides}))
        guard = min(r.guard_gib for r in p.ranks) * GIB  # rounded to 0.01 GiB in the plan
        assert p.kv_cache_bytes <= guard * (1 - KV_SAFETY_FRACTION) + 0.01 * GIB, overrides
        assert p.kv_cache_bytes >= (guard - 0.01 * GIB) * (1 - KV_SAFETY_FRACTION) - MIB


# -- the sliding-window reservation of a pipeline --------------------------------------------------


def _blocks_by_the_rule(stages: int, max_len: int, batched: int) -> int:
    """vLLM's blocks per request, written from the rule: full attention holds the whole request,
    a sliding window `window - 1 + stages x batched` tokens (capped at the request) plus one."""
    kvs = group_kv(GEMMA, stages)
    total = 0
    for g in kvs.groups:
        if g.kind == "full":
            total += cdiv(max_len, g.block_tokens)
        else:
            held = min(GEMMA.sliding_window - 1 + stages * batched, max_len)
            total += cdiv(held, g.block_tokens) + 1
    return total


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("batched", [256, 512, 2048])
@pytest.mark.parametrize("max_len", [1000, 2048, 8192, 32768])
def test_each_stage_keeps_a_batch_in_flight_in_the_sliding_window(
    stages: int, batched: int, max_len: int
) -> None:
    kvs = group_kv(GEMMA, stages)
    assert kvs.blocks_per_request(max_len, batched) == _blocks_by_the_rule(stages, max_len, batched)


def test_two_stages_reserve_two_batches() -> None:
    # 5 sliding groups x (cdiv(1023 + 2 x 512, 128) + 1) + 1 full group x cdiv(8192, 512).
    assert group_kv(GEMMA, 2).blocks_per_request(8192, 512) == 5 * 17 + 16
    assert group_kv(GEMMA, 1).blocks_per_request(8192, 512) == 5 * 13 + 16


def test_a_short_request_reserves_no_more_than_itself() -> None:
    window = KvGroup("sliding", 128, 1024, (0,))
    assert window.blocks_for(300, 4096) == cdiv(300, 128) + 1
    assert window.blocks_for(100_000, 0) == cdiv(1023, 128) + 1
    full = KvGroup("full", 512, None, (5,))
    assert full.blocks_for(100_000, 4096) == cdiv(100_000, 512)
    # A window reserves its last token too: window - 1 + 2 in flight = 1025 tokens, nine blocks
    # of 128, plus one.
    assert window.blocks_for(100_000, 2) == 10
    assert window.blocks_for(100_000, 1) == 9


def test_the_null_block_is_not_usable() -> None:
    kvs = group_kv(GEMMA, 2)
    per_block = max(kvs.bytes_per_block)
    blocks = 50
    assert kvs.num_blocks(blocks * per_block) == blocks
    assert kvs.num_blocks(blocks * per_block - 1) == blocks - 1
    assert kvs.usable_bytes(blocks * per_block) == (blocks - 1) * per_block
    need = kvs.blocks_per_request(2048, 512)
    assert kvs.fits((need + 1) * per_block, 2048, 512)
    assert not kvs.fits(need * per_block, 2048, 512)
    assert kvs.max_len((need + 1) * per_block, 512, 100_000) >= 2048
    assert kvs.concurrency(2 * need * per_block, 2048, 512) == 2


# -- the batch size ------------------------------------------------------------------------------


@pytest.mark.parametrize("stages", [1, 2, 4])
def test_on_a_tie_the_largest_batch_wins(stages: int) -> None:
    # Plenty of KV: every candidate serves the whole context, so prefill speed decides.
    kvs = group_kv(GEMMA, stages)
    floor = CPU_DEFAULT_MAX_SEQS_PER_RANK * stages
    ceiling = CPU_DEFAULT_BATCHED_TOKENS_PER_RANK * stages
    usable = [b for b in BATCHED_TOKEN_CHOICES if floor <= b <= ceiling]
    assert len(usable) > 1
    assert choose_batched(AUTO, kvs, 64 * GIB, 1024, stages) == (max(usable), 1024)


def test_a_smaller_batch_wins_when_it_serves_a_longer_context() -> None:
    kvs, kv_bytes, upper = group_kv(GEMMA, 2), 400_000_000, 8192
    batched, length = choose_batched(AUTO, kvs, kv_bytes, upper, 2)
    lengths = {b: longest_context(kvs, kv_bytes, b, upper) for b in (512, 1024, 2048, 4096)}
    assert length == max(lengths.values())
    assert batched == max(b for b, n in lengths.items() if n == length)
    assert lengths[4096] < length  # the default batch would serve less
    # Every candidate is tried: 512 and 1,024 both serve 8,192 tokens, 2,048 fewer; the tie goes
    # to 1,024.
    assert choose_batched(AUTO, kvs, 600_000_000, 8192, 2) == (1024, 8192)


def test_the_smallest_default_batch_is_a_choice_too() -> None:
    """Four stages run at least 128 sequences per rank, 512 tokens: that batch may win."""
    kvs, kv_bytes, upper = group_kv(GEMMA, 4), 300_000_000, 131_072
    floor = CPU_DEFAULT_MAX_SEQS_PER_RANK * 4
    assert floor in BATCHED_TOKEN_CHOICES
    best = longest_context(kvs, kv_bytes, floor, upper)
    assert best > longest_context(kvs, kv_bytes, 2 * floor, upper)
    assert choose_batched(AUTO, kvs, kv_bytes, upper, 4, step_cap=2 * floor) == (floor, best)


def test_an_explicit_batch_is_kept() -> None:
    cfg = load_config({**BASE, "maxNumBatchedTokens": 1024})
    kvs = group_kv(GEMMA, 2)
    assert choose_batched(cfg, kvs, 64 * GIB, 4096, 2) == (1024, 4096)


# -- the startup timeout -------------------------------------------------------------------------


@pytest.mark.parametrize("mbps", [2.0, 5.0, 12.5])
def test_startup_timeout_is_twice_a_slow_cold_start(mbps: float) -> None:
    # A slow hub puts the cold start far above the floor, so only the margin sets the timeout.
    p = plan(load_config({**BASE, "downloadMBps": mbps}))
    assert 2 * p.cold_start_seconds > MIN_STARTUP_SECONDS
    assert p.startup_timeout_seconds % 60 == 0
    assert 2 * p.cold_start_seconds <= p.startup_timeout_seconds <= 2 * p.cold_start_seconds + 62


def test_cold_start_is_download_load_and_warm_up_under_a_floored_timeout() -> None:
    fast, slow = (plan(load_config({**BASE, "downloadMBps": r})) for r in (140.0, 70.0))
    # The startup timeout never drops below the floor.
    assert 2 * fast.cold_start_seconds < MIN_STARTUP_SECONDS
    assert fast.startup_timeout_seconds == MIN_STARTUP_SECONDS
    download = GEMMA.checkpoint_bytes / 140e6
    assert slow.cold_start_seconds - fast.cold_start_seconds == pytest.approx(download, abs=1)
    heaviest = max(r.weights_gib for r in fast.ranks)
    warm = heaviest * catalog.LOAD_SECONDS_PER_GIB + catalog.WARMUP_SECONDS
    assert fast.cold_start_seconds == math.floor(download + warm)
    assert fast.warm_restart_seconds == fast.cold_start_seconds  # no volume: downloads again
    cached = plan(load_config({**BASE, "modelCache": "volume"}))
    assert cached.warm_restart_seconds == math.floor(warm)


def test_each_rank_counts_its_own_sliding_and_full_layers() -> None:
    assert rank_layer_counts(GEMMA, 2, 0) == (20, 4)
    assert rank_layer_counts(GEMMA, 2, 1) == (20, 4)
    assert rank_layer_counts(GEMMA, 3, 1) == (13, 3)  # layers 16-31: full at 17, 23 and 29
    assert sum(sum(rank_layer_counts(GEMMA, 5, r)) for r in range(5)) == GEMMA.layers


def test_plan_figures_are_rounded_to_hundredths() -> None:
    assert round_gib(1.23456) == 1.23
    assert round_gib(26.0) == 26.0


def test_a_daemonset_counts_once_and_a_deployment_per_replica(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        catalog,
        "COTENANTS",
        (
            catalog.Cotenant("agent", 10, 300, "daemonset", replicas=3),
            catalog.Cotenant("controller", 950, 100, "deployment", 2),
            catalog.Cotenant("csi", 50, 1000, "daemonset", with_volumes_only=True),
        ),
    )
    instance = catalog.INSTANCE_TYPES["m7g.2xlarge"]
    plain = node_budget(instance, volumes=False)
    assert plain.cotenants_gib == pytest.approx((300 + 2 * 100) / 1024)
    # 7,910 allocatable millicores less 1,910 requested: exactly 6 cores.
    assert plain.cpu == (catalog.allocatable_millicpu(instance) - (10 + 2 * 950)) // 1000 == 6
    allocatable = catalog.allocatable_mib(instance) / 1024
    assert plain.allocatable_gib == pytest.approx(allocatable)
    headroom = catalog.NODE_HEADROOM_MIB / 1024
    assert plain.free_gib == pytest.approx(allocatable - plain.cotenants_gib - headroom)
    with_volumes = node_budget(instance, volumes=True)
    assert with_volumes.cotenants_gib == pytest.approx((300 + 2 * 100 + 1000) / 1024)


def _group_sizes(layers: int) -> list[tuple[str, int]]:
    """(kind, layers) of each KV group of `layers` alternating layers on one rank."""
    kvs = group_kv(replace(GEMMA, layers=layers, sliding_per_full=1), 1)
    return sorted((g.kind, len(g.layers)) for g in kvs.groups)


@pytest.mark.parametrize(("layers", "stages"), [(48, 2), (10, 3), (48, 5), (7, 7), (26, 4)])
def test_stages_cover_every_layer_once_in_order(layers: int, stages: int) -> None:
    ranges = stage_layers(layers, stages)
    assert ranges[0].start == 0 and ranges[-1].stop == layers
    for before, after in itertools.pairwise(ranges):
        assert after.start == before.stop
    assert max(map(len, ranges)) - min(map(len, ranges)) <= 1


def test_a_kind_under_one_and_a_half_times_the_other_sets_the_group_size() -> None:
    # 7 layers alternating: 4 sliding, 3 full; 4 < 1.5 x 3, so groups of 4: one group each.
    assert _group_sizes(7) == [("full", 3), ("sliding", 4)]
    # 5 layers: 3 sliding, 2 full; 3 is not under 1.5 x 2, so groups of 2: two sliding groups.
    assert _group_sizes(5) == [("full", 2), ("sliding", 1), ("sliding", 2)]


def test_a_smaller_page_holds_whole_tokens_per_block() -> None:
    # Full layers of 1 x 384 x 2 x 2 bytes a token in the sliding layers' page of 1 MiB.
    kvs = group_kv(replace(GEMMA, full_head_dim=384), 2)
    full = next(g for g in kvs.groups if g.kind == "full")
    assert full.block_tokens == kvs.page_bytes // (384 * 2 * 2) == 682
    assert isinstance(full.block_tokens, int)


@pytest.mark.parametrize("kv_bytes", [0, 10_000_000, 123_456_789, 400_000_000, 2 * GIB])
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_the_longest_context_is_the_last_that_fits(kv_bytes: int, stages: int) -> None:
    kvs = group_kv(GEMMA, stages)
    for upper in (8192, 8191):
        length = kvs.max_len(kv_bytes, 512, upper)
        assert 0 <= length <= upper
        assert length == 0 or kvs.fits(kv_bytes, length, 512)
        assert length == upper or not kvs.fits(kv_bytes, length + 1, 512)


def test_a_batch_is_never_below_the_sequences_vllm_schedules() -> None:
    # Eight ranks schedule 1,024 sequences: 512 would serve longer here but vLLM refuses it.
    kvs = group_kv(GEMMA, 8)
    assert longest_context(kvs, 230_000_000, 512, 8192) > longest_context(
        kvs, 230_000_000, 1024, 8192
    )
    batched, length = choose_batched(AUTO, kvs, 230_000_000, 8192, 8)
    assert batched >= 8 * CPU_DEFAULT_MAX_SEQS_PER_RANK
    assert length == longest_context(kvs, 230_000_000, 1024, 8192)


def test_eks_reserves_cpu_core_by_core_and_memory_per_pod() -> None:
    # 6% of the first core, 1% of the second, 0.5% of cores 3 and 4, 0.25% of every other.
    def reserved(vcpu: int) -> int:
        return catalog.kube_reserved_millicpu(replace(INSTANCE, vcpu=vcpu))

    assert [reserved(n) for n in (1, 2, 3, 4, 5, 8, 16, 32)] == [60, 70, 75, 80, 82, 90, 110, 150]
    assert catalog.allocatable_millicpu(INSTANCE) == 8000 - 90
    # Memory per pod the node may run.
    assert catalog.kube_reserved_mib(INSTANCE) == 11 * 58 + 255
    visible = 32 * 1024 * catalog.VISIBLE_MEMORY_FRACTION
    assert catalog.allocatable_mib(INSTANCE) == pytest.approx(visible - (11 * 58 + 255) - 100)
    assert f"{catalog.allocatable_mib(INSTANCE) / 1024:.1f}" == "29.8"  # a real node's figure


INSTANCE = catalog.INSTANCE_TYPES["m7g.2xlarge"]
