"""vLLM's KV-cache accounting for a pipeline-parallel group, reproduced so a plan states vLLM's own
numbers (vLLM 0.31: v1/core/kv_cache_utils.py, v1/kv_cache_interface.py, config/vllm.py).

- Every layer gets the model's largest page size; a layer with smaller pages holds proportionally
  more tokens per block (`unify_kv_cache_spec_page_size`).
- Groups are formed over the whole model: the group size is the smallest per-kind layer count (the
  largest, if that is under 1.5 x the smallest), each kind splits into `cdiv(count, size)` groups
  taking every n-th layer of the kind, and each rank sees the groups' layers it holds.
- A rank's block costs the page bytes of its largest group; its pool is `kv_bytes // that`, and
  every rank is cut to the smallest pool.
- A request of length L holds, in every group, `cdiv(L, block)` blocks for full attention and
  `cdiv(min(window - 1 + stages x batched_tokens, L), block) + 1` for a sliding window (a pipeline
  keeps `stages` batches in flight; CPU runs without async scheduling).
- One block is the null block: a max-length request fits if it needs at most `blocks - 1`.
  Concurrency is blocks over one max-length request's blocks; the logged "KV cache size" is
  `int(concurrency x max_len)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.plan.catalog import ModelProfile

#: vLLM's CPU attention backend block size in tokens.
CPU_BLOCK_SIZE = 128


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def stage_layers(layers: int, stages: int) -> list[range]:
    """Layer ranges per pipeline rank as vLLM's `get_pp_indices` splits them.

    An uneven remainder goes to the ranks before the last, one each, starting next to it.
    """
    partitions = [layers // stages] * stages
    for i in range(2, layers % stages + 2):
        partitions[-i] += 1
    ranges, start = [], 0
    for size in partitions:
        ranges.append(range(start, start + size))
        start += size
    return ranges


@dataclass(frozen=True)
class KvGroup:
    """One KV-cache group: layers of one kind that share block ids."""

    kind: str  # "full" or "sliding"
    block_tokens: int
    window: int | None
    layers: tuple[int, ...]

    def blocks_for(self, max_len: int, in_flight_tokens: int) -> int:
        """Blocks one request of `max_len` tokens may hold in this group."""
        if self.window is None:
            return cdiv(max_len, self.block_tokens)
        tokens = min(self.window - 1 + in_flight_tokens, max_len)
        return cdiv(tokens, self.block_tokens) + 1


@dataclass(frozen=True)
class GroupKv:
    """The KV layout of a whole pipeline group: shared groups, per-rank block costs."""

    stages: int
    page_bytes: int
    groups: tuple[KvGroup, ...]
    #: Bytes one block costs on each rank (its largest group's pages).
    bytes_per_block: tuple[int, ...]

    def num_blocks(self, kv_bytes: int) -> int:
        """Blocks in the pool a per-rank KV budget buys (the smallest over the ranks)."""
        return min(kv_bytes // per_block for per_block in self.bytes_per_block)

    def blocks_per_request(self, max_len: int, batched_tokens: int) -> int:
        in_flight = self.stages * batched_tokens
        return sum(g.blocks_for(max_len, in_flight) for g in self.groups)

    def bytes_per_request(self, max_len: int, batched_tokens: int) -> int:
        """KV bytes one max-length request needs on the costliest rank ("x GiB is needed")."""
        return self.blocks_per_request(max_len, batched_tokens) * max(self.bytes_per_block)

    def usable_bytes(self, kv_bytes: int) -> int:
        """What vLLM calls the available KV cache memory: the budget less the null block."""
        return kv_bytes - max(self.bytes_per_block)

    def fits(self, kv_bytes: int, max_len: int, batched_tokens: int) -> bool:
        return self.blocks_per_request(max_len, batched_tokens) <= self.num_blocks(kv_bytes) - 1

    def concurrency(self, kv_bytes: int, max_len: int, batched_tokens: int) -> float:
        return self.num_blocks(kv_bytes) / self.blocks_per_request(max_len, batched_tokens)

    def max_len(self, kv_bytes: int, batched_tokens: int, upper: int) -> int:
        """Longest length whose single request fits (vLLM's estimate); 0 if none does."""
        lo, hi = 0, upper
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.fits(kv_bytes, mid, batched_tokens):
                lo = mid
            else:
                hi = mid - 1
        return lo


def rank_layer_counts(profile: ModelProfile, stages: int, rank: int) -> tuple[int, int]:
    """(sliding, full) layers on `rank`."""
    layer_range = stage_layers(profile.layers, stages)[rank]
    full = sum(1 for i in layer_range if profile.is_full_attention(i))
    return len(layer_range) - full, full


def group_kv(profile: ModelProfile, stages: int) -> GroupKv:
    """Build the KV groups vLLM forms for `profile` split into `stages` ranks."""
    per_token = {
        "sliding": profile.sliding_kv_heads * profile.sliding_head_dim * 2 * profile.dtype_bytes,
        "full": profile.full_kv_heads * profile.full_head_dim * 2 * profile.dtype_bytes,
    }
    by_kind: dict[str, list[int]] = {}
    for layer in range(profile.layers):
        kind = "full" if profile.is_full_attention(layer) else "sliding"
        by_kind.setdefault(kind, []).append(layer)
    page_bytes = max(CPU_BLOCK_SIZE * per_token[kind] for kind in by_kind)
    counts = [len(layers) for layers in by_kind.values()]
    smallest, largest = min(counts), max(counts)
    group_size = largest if largest < 1.5 * smallest else smallest
    groups: list[KvGroup] = []
    for kind, layers in by_kind.items():
        block_tokens = page_bytes // per_token[kind]
        window = profile.sliding_window if kind == "sliding" else None
        n = cdiv(len(layers), group_size)
        groups.extend(KvGroup(kind, block_tokens, window, tuple(layers[i::n])) for i in range(n))
    per_block = []
    for layer_range in stage_layers(profile.layers, stages):
        held = max(sum(1 for layer in g.layers if layer in layer_range) for g in groups)
        per_block.append(held * page_bytes)
    return GroupKv(stages, page_bytes, tuple(groups), tuple(per_block))
