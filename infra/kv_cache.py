"""vLLM's KV-cache accounting for one pipeline rank, reproduced so a plan states vLLM's own numbers.

vLLM (v1/core/kv_cache_utils.py, v1/kv_cache_interface.py) gives every layer of a hybrid model the
largest page size (a layer with smaller pages holds proportionally more tokens per block), splits
each kind of layer into groups of one size, and hands every group the same pool of blocks:
`blocks = kv_bytes // page_bytes // group_size`. A request of length L holds, per group,
`cdiv(L, block)` blocks for full attention and `cdiv(min(window - 1 + batched, L), block) + 1`
for a sliding window. Concurrency is blocks over one max-length request's blocks, and the logged
"KV cache size" is concurrency times the max length.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.catalog import ModelProfile

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
    """One KV-cache group: a set of layers that share block ids."""

    kind: str  # "full" or "sliding"
    block_tokens: int
    window: int | None

    def blocks_for(self, max_len: int, batched_tokens: int) -> int:
        """Blocks one request of `max_len` tokens may hold in this group."""
        if self.window is None:
            return cdiv(max_len, self.block_tokens)
        tokens = min(self.window - 1 + batched_tokens, max_len)
        return cdiv(tokens, self.block_tokens) + 1


@dataclass(frozen=True)
class RankKv:
    """The KV layout of one pipeline rank."""

    rank: int
    sliding_layers: int
    full_layers: int
    page_bytes: int
    group_size: int
    groups: tuple[KvGroup, ...]

    def num_blocks(self, kv_bytes: int) -> int:
        """Blocks in the pool that a KV budget of `kv_bytes` buys."""
        return kv_bytes // self.page_bytes // self.group_size

    def blocks_per_request(self, max_len: int, batched_tokens: int) -> int:
        return sum(g.blocks_for(max_len, batched_tokens) for g in self.groups)

    def bytes_per_request(self, max_len: int, batched_tokens: int) -> int:
        """KV bytes one max-length request needs ("x GiB KV cache is needed")."""
        return self.blocks_per_request(max_len, batched_tokens) * self.page_bytes * self.group_size

    def concurrency(self, kv_bytes: int, max_len: int, batched_tokens: int) -> float:
        return self.num_blocks(kv_bytes) / self.blocks_per_request(max_len, batched_tokens)

    def max_len(self, kv_bytes: int, batched_tokens: int, upper: int) -> int:
        """Longest length whose single request fits (vLLM's `estimate_max_model_len`); 0 if none."""
        blocks = self.num_blocks(kv_bytes)
        lo, hi = 0, upper
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.blocks_per_request(mid, batched_tokens) <= blocks:
                lo = mid
            else:
                hi = mid - 1
        return lo


def rank_kv(profile: ModelProfile, stages: int, rank: int) -> RankKv:
    """Build the KV groups vLLM forms for `rank` of a `stages`-deep pipeline."""
    layer_range = stage_layers(profile.layers, stages)[rank]
    full = sum(1 for i in layer_range if profile.is_full_attention(i))
    sliding = len(layer_range) - full
    per_token = {
        "sliding": profile.sliding_kv_heads * profile.sliding_head_dim * 2 * profile.dtype_bytes,
        "full": profile.full_kv_heads * profile.full_head_dim * 2 * profile.dtype_bytes,
    }
    counts = {"sliding": sliding, "full": full}
    present = {kind: n for kind, n in counts.items() if n > 0}
    page_bytes = max(CPU_BLOCK_SIZE * per_token[kind] for kind in present)
    smallest, largest = min(present.values()), max(present.values())
    group_size = largest if largest < 1.5 * smallest else smallest
    groups: list[KvGroup] = []
    for kind, n in present.items():
        block_tokens = page_bytes // per_token[kind]
        window = profile.sliding_window if kind == "sliding" else None
        groups.extend(KvGroup(kind, block_tokens, window) for _ in range(cdiv(n, group_size)))
    return RankKv(rank, sliding, full, page_bytes, group_size, tuple(groups))
