"""A plan's buying-guide figures in one place: served tokens, time to first token, itemised cost
and dollars per million output tokens. Pure; `today` decides which EKS support rate applies."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import asdict, dataclass

from infra.plan import catalog, throughput
from infra.plan.catalog import ModelProfile
from infra.plan.config import StackConfig
from infra.plan.costs import CostBreakdown, CostInputs, stack_costs, usd_per_million_tokens
from infra.plan.kv_cache import group_kv
from infra.plan.sizing import Plan
from infra.plan.throughput import Served


@dataclass(frozen=True)
class Economics:
    """What a planned stack serves and what it costs."""

    served: Served
    costs: CostBreakdown
    #: $ per million output tokens with the planned concurrency busy, and with one stream.
    usd_per_million_full: float | None
    usd_per_million_one: float | None

    def to_json(self) -> dict[str, object]:
        served = asdict(self.served)
        served["provenance"] = dict(throughput.PROVENANCE)
        return {
            "served": served,
            "costs": self.costs.to_json(),
            "usd_per_hour": self.costs.usd_per_hour,
            "usd_per_month": self.costs.usd_per_month,
            "usd_per_million_tokens_full_load": self.usd_per_million_full,
            "usd_per_million_tokens_one_stream": self.usd_per_million_one,
        }


def busiest(profile: ModelProfile, p: Plan) -> tuple[int, int]:
    """(sequences, context): the most short requests the engine runs at once. Each holds KV blocks
    in every cache group however short it is (`infra.plan.kv_cache`), so the pool, not only
    vLLM's `max_num_seqs`, caps them; dividing the logged token count by `max_num_seqs` instead
    gave hundreds of 8-token "requests" that no KV cache holds."""
    context = min(throughput.SHORT_PROMPT_TOKENS, p.max_model_len)
    blocks = group_kv(profile, p.stages)
    fit = blocks.concurrency(p.kv_cache_bytes, context, p.max_num_batched_tokens)
    return max(1, min(p.max_num_seqs, math.floor(fit))), context


def cost_inputs(
    cfg: StackConfig,
    p: Plan,
    *,
    nodes: int,
    checkpoint_bytes: int,
    aggregate_tokens_per_s: float,
    surge_groups: int = 0,
) -> CostInputs:
    """What `stack_costs` prices for stack `cfg` at plan `p`, with `nodes` model nodes running
    (volumes for every group of the plan, asleep or not)."""
    return CostInputs(
        region=cfg.region,
        kubernetes_version=cfg.kubernetes_version,
        end_date=cfg.end_date,
        node_subnets=cfg.node_subnets,
        instance_type=p.instance_type,
        nodes=nodes,
        stages=p.stages,
        replicas=p.replicas,
        node_disk_gib=p.node_disk_gib,
        model_cache=p.model_cache,
        model_volume_gib=p.model_volume_gib,
        checkpoint_bytes=checkpoint_bytes,
        aggregate_tokens_per_s=aggregate_tokens_per_s,
        monitoring=cfg.monitoring,
        elastic=cfg.elastic,
        surge_groups=surge_groups,
        existing_cluster=cfg.existing_cluster is not None,
        internal_load_balancer=cfg.private_clients_only,
    )


def economics(cfg: StackConfig, p: Plan, today: dt.date | None = None) -> Economics:
    """Served tokens, time to first token and cost of plan `p` for config `cfg`."""
    profile = cfg.profile()
    instance = catalog.INSTANCE_TYPES[p.instance_type]
    served = throughput.served(
        profile,
        instance,
        p.pod_cpu,
        [(r.sliding_layers, r.full_layers) for r in p.ranks],
        p.max_model_len,
        p.max_concurrency,
        busiest(profile, p),
        p.max_num_batched_tokens,
        cfg.prefill_path,
    )
    full = served.planned.aggregate_tokens_per_s * p.replicas
    costs = stack_costs(
        cost_inputs(
            cfg,
            p,
            nodes=p.nodes,
            checkpoint_bytes=profile.download_bytes,
            aggregate_tokens_per_s=full,
            surge_groups=p.rollout.surge_groups,
        ),
        today or dt.date.today(),
    )
    return Economics(
        served,
        costs,
        usd_per_million_tokens(costs.usd_per_hour, full),
        usd_per_million_tokens(costs.usd_per_hour, served.one.aggregate_tokens_per_s),
    )
