"""The plan's table, after its verdict: every figure with its unit, then why each derived value
was chosen, what the front door gives up, what a change costs and the warnings. Pure text from a
plan and its economics (`python -m infra.plan`, `infra.adapters.cli`)."""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from components.manifests.programs.key_check import OPEN_PATHS
from components.manifests.spec import EndpointLimits
from infra.plan import (
    catalog,
    changes,
    peer,
    pods,
    readiness,
    waits,
    weights,
)
from infra.plan.config import StackConfig
from infra.plan.economics import Economics
from infra.plan.liveness import CALIBRATION_RUNS, MIN_STALL_S
from infra.plan.sizing import Plan
from infra.plan.throughput import Served

if TYPE_CHECKING:
    from components.manifests.gatekeeper_conf import GatekeeperLimits


def _economics_rows(p: Plan, e: Economics) -> list[tuple[str, str]]:
    """Served tokens, time to first token and cost, each with its unit and where it comes from."""
    s = e.served
    low, high = s.ttft_max_len_range_s
    k_low, k_high = s.ttft_1k_range_s
    rows = [
        (
            "decode, 1 stream",
            f"{s.one.aggregate_tokens_per_s:.2f} tokens/s"
            + (
                ""
                if s.bandwidth_measured
                else f" at the bandwidth's low end, up to {s.one_stream_high_tokens_per_s:.2f} "
                "at its high end"
            )
            + f" ({_decode_source(p, s)})",
        ),
        *[("llama.cpp", peer) for peer in [_peer(p, s)] if peer],
        (
            "node bandwidth",
            f"{s.node_bandwidth_gbps:.0f}"
            + ("" if s.bandwidth_measured else f"-{s.node_bandwidth_high_gbps:.0f}")
            + f" GB/s for decode, {s.bandwidth_bound}",
        ),
        *_ceiling_rows(p, s),
        (
            "decode, full load",
            f"{s.planned.aggregate_tokens_per_s * p.replicas:.2f} tokens/s in all, "
            f"{s.planned.per_stream_tokens_per_s:.2f} per stream at {s.planned.sequences} "
            f"x {s.planned.context:,} tokens ({s.planned.bound}-bound; modelled)",
        ),
        (
            "decode, short requests",
            f"{s.limit.aggregate_tokens_per_s * p.replicas:.2f} tokens/s in all at "
            f"{s.limit.sequences} x {s.limit.context:,} tokens, as many as "
            + ("vLLM's max_num_seqs admits" if s.limit.sequences == p.max_num_seqs else "fit")
            + f" ({s.limit.bound}-bound; modelled)",
        ),
        (
            "time to first token",
            f"~{s.ttft_max_len_s:.0f} s for {p.max_model_len:,} tokens ({low:.0f}-{high:.0f} s), "
            f"~{s.ttft_1k_s:.0f} s for 1,000 ({k_low:.0f}-{k_high:.0f} s); {s.prefill_source}",
        ),
    ]
    c = e.costs
    cost = (
        "; ".join(c.missing)
        if c.usd_per_hour is None
        else f"${c.usd_per_hour:.4f}/hour, ${c.usd_per_month:,.2f}/month "
        f"({c.price_region} on-demand list prices)"
    )
    rows.append(("cost", cost))
    for line in c.lines:
        rows.append(
            (
                f"  {line.item}",
                f"${line.usd_per_month:,.2f}/month: {line.basis}"
                + (" (estimate)" if line.estimate else ""),
            )
        )
    if e.usd_per_million_full is not None and e.usd_per_million_one is not None:
        rows.append(
            (
                "$ per million tokens",
                f"${e.usd_per_million_full:.2f} at full load, ${e.usd_per_million_one:.2f} "
                "with one stream (output tokens, decode modelled as above)",
            )
        )
    return rows


def _peer(p: Plan, s: Served) -> str | None:
    """llama.cpp's one-stream rate where the peer probe measured this model and format."""
    chip = catalog.chip_bandwidth_gbps(catalog.INSTANCE_TYPES[p.instance_type].generation)
    one = s.one.aggregate_tokens_per_s
    return peer.describe(p.model, p.weights, one, s.one_stream_bytes_per_token, chip)


def _ceiling_rows(p: Plan, s: Served) -> list[tuple[str, str]]:
    """For a mixture of experts, whose rate is derived, the ceiling its bytes set."""
    known = catalog.MODELS.get(p.model)
    if known is None or not known.is_moe:
        return []
    profile = replace(known, weights=p.weights)
    from infra.plan import moe  # the MoE layer, for a mixture-of-experts model only

    return [("decode ceiling", moe.describe_ceiling(profile, s.node_bandwidth_gbps))]


def _decode_source(p: Plan, s: Served) -> str:
    """Where the single-stream figure comes from: calibrated, modelled, or for a mixture of
    experts derived from its measured ratio to the dense model (`infra.plan.moe`)."""
    known = catalog.MODELS.get(p.model)
    if known is not None and known.is_moe:
        from infra.plan import moe  # the MoE layer, for a mixture-of-experts model only

        return moe.decode_source(replace(known, weights=p.weights))
    return _format_decode_source(p.weights, s.bandwidth_measured)


def _format_decode_source(name: str, measured: bool = True) -> str:
    """Where a plan's single-stream decode figure comes from, in this format; `measured` when the
    node is the type the bandwidth was measured on (`catalog.DecodeBandwidth`), else the figure
    is extrapolated from it."""
    if name == "bf16":
        if measured:
            return "calibrated on the field report's measured 4.0"
        return "extrapolated from the field report's measured 4.0 on m7g.2xlarge"
    basis = "calibrated on" if measured else "extrapolated from"
    return f"modelled: {name} bytes per token at the bandwidth {basis} bf16's measured 4.0"


def _weights_row(name: str) -> str:
    """One line for the plan: the scheme, what stays bf16, the kernel, the quality."""
    fmt = weights.weight_format(name)
    if fmt.scheme is None:
        return "bf16, the published checkpoint"
    return (
        f"{name} (compressed-tensors {fmt.scheme}; embeddings, output head and encoders bf16; "
        f"{fmt.resident_bytes:.2f} bytes per linear parameter in memory, "
        f"{fmt.disk_bytes:.2f} on disk); vLLM's {fmt.kernel}; quality {fmt.quality}"
    )


def _kubernetes_support(cfg: StackConfig, today: dt.date) -> str:
    """One line on the pinned version's support window, as the plan shows it."""
    version = cfg.kubernetes
    if version is None:
        return f"{cfg.kubernetes_version}: support window not in the catalogue"
    left = (version.end_of_standard - today).days
    if left >= 0:
        return (
            f"{version.version}: standard support until {version.end_of_standard} "
            f"({left} days), then extended support until {version.end_of_extended}"
        )
    return (
        f"{version.version}: EXTENDED support since {version.end_of_standard}, until "
        f"{version.end_of_extended}"
    )


def format_table(
    p: Plan,
    econ: Economics | None = None,
    cfg: StackConfig | None = None,
    today: dt.date | None = None,
    warnings: Sequence[str] = (),
) -> str:
    """The human view after the verdict: every figure with its unit, then why each derived value
    was chosen, then (in one place) the warnings."""
    per_stage = ", ".join(f"{w:.2f}" for w in p.weights_gib_per_stage)
    probes = p.liveness.probes
    gatekeeper = not isinstance(p.front_door, EndpointLimits)
    if gatekeeper:
        from infra.plan import frontdoor  # the gatekeeper layer, `frontDoor: gatekeeper` only
    rows = [
        ("stack", p.stack),
        ("model", p.model),
        ("nodes", f"{p.nodes} x {p.instance_type} ({p.generation}), one availability zone"),
        ("groups x stages", f"{p.replicas} x {p.stages} (one pipeline rank per node)"),
        ("node allocatable", f"{p.node_allocatable_gib:.2f} GiB"),
        ("pod memory", f"{p.pod_memory_gib:g} GiB request = limit"),
        ("pod cpu", f"{p.pod_cpu} cores request = limit"),
        ("weights", _weights_row(p.weights)),
        ("checkpoint", _checkpoint(p)),
        ("weights per stage", f"{per_stage} GiB"),
        ("runtime overhead", f"{p.overhead_gib_per_pod:.2f} GiB per pod (largest rank)"),
        ("weight prefetch", "on (init container)" if p.weight_prefetch else "off"),
        (
            "pod containers",
            pods.describe(p.weight_prefetch, bool(cfg and (cfg.elastic or not cfg.gatekeeper))),
        ),
        ("vcpu quota", _quota(p)),
        ("guard sees", f"{p.guard_available_gib:.2f} GiB on rank {p.tightest_rank}"),
        ("kv cache", f"{p.kv_cache_bytes} bytes ({p.kv_cache_bytes / 1024**3:.2f} GiB) per rank"),
        ("max batched tokens", f"{p.max_num_batched_tokens} tokens"),
        ("max model len", f"{p.max_model_len} tokens"),
        ("kv needed at max len", f"{p.kv_needed_gib:.2f} GiB per rank"),
        ("kv cache size", f"{p.kv_cache_tokens:,} tokens (as vLLM will log it)"),
        ("max concurrency", f"{p.max_concurrency:.2f}x at {p.max_model_len:,} tokens"),
        ("request limit", f"{p.max_num_seqs} sequences (vLLM's max_num_seqs)"),
        ("node disk", f"{p.node_disk_gib} GiB gp3"),
        (
            "model cache",
            f"{p.model_cache}: weights in "
            + (
                f"a {p.model_volume_gib} GiB EBS volume per rank"
                if p.model_cache == "volume"
                else f"a {p.model_volume_gib} GiB emptyDir on the node disk"
            ),
        ),
        ("cold start", f"~{p.cold_start_seconds} s; restart ~{p.warm_restart_seconds} s"),
        ("startup timeout", f"{p.startup_timeout_seconds // 60} min"),
        (
            "liveness",
            f"every {probes.period_s} s, {probes.failures} failures, timeout "
            f"{probes.timeout_s} s; stalled after the leader's measured step x "
            f"{probes.growth:.2f} (longest context) x {probes.margin:g} without a token, "
            f"within {MIN_STALL_S}-{probes.stall_s} s; noticed within "
            f"{p.liveness.fast_half_detection_s} s at the fast half of the prefill range "
            f"({p.liveness.fast_half_stall_s} s stall), {p.liveness.detection_s} s at its slow end",
        ),
        (
            "step measured",
            f"at start, before the leader takes traffic: {CALIBRATION_RUNS} one-token requests of "
            f"{probes.calibrate_tokens} prompt tokens; a node whose step x "
            f"{probes.growth:.2f} x {probes.margin:g} x {probes.in_flight} in flight "
            f"exceeds the engine's {probes.stall_s} s step timeout refuses to start"
            + (
                ", as does a leader whose vLLM fell back to torch's linear (`prefillPath` "
                f"{probes.path}); a refusal stops the engine, so the kubelet restarts it at once, "
                "with the reason on its log"
                if probes.path == "onednn"
                else " (`prefillPath` fallback: torch's linear allowed)"
            ),
        ),
        (
            "engine step timeout",
            f"{probes.stall_s} s: the longest step ({p.liveness.step_s:.1f} s at the prefill "
            f"rate's slow end) x {probes.in_flight} in flight; read once at start, so it "
            "stays at the slow end",
        ),
        ("first byte", f"within {p.liveness.first_byte_s} s (longest prompt + stall bound)"),
        (
            "listener",
            "HTTPS on 443 (TLS at the load balancer)" if p.front_door.tls else "plain HTTP on 80",
        ),
        *(_front_door_rows if gatekeeper else _vllm_key_rows)(p.front_door),
        (
            "drain",
            f"a stopping leader accepts {p.drain.accept_s} s more (the NLB checks every "
            f"{p.drain.health_check_interval_s} s, {p.drain.health_check_threshold} failures), "
            f"then finishes its streams within {p.drain.reply_s} s; grace "
            f"{p.drain.grace_s} s",
        ),
        ("bounds that wait", waits.describe(p)),
        ("client timeout", waits.describe_client(p)),
        (
            "idle cut",
            frontdoor.idle_cut(p.front_door, p.liveness.first_byte_s)
            if gatekeeper
            else f"after {catalog.NLB_IDLE_TIMEOUT_S} s without a byte (no gatekeeper "
            f"keepalives); first byte within {p.liveness.first_byte_s} s",
        ),
        ("rollout", changes.describe_rollout(p.rollout)),
    ]
    if econ is not None:
        rows += _economics_rows(p, econ)
    today = today or dt.date.today()
    if cfg is not None and cfg.elastic:
        from infra.plan import elastic, sleep  # the elastic layer, elastic stacks only

        scaled = elastic.elastic_plan(cfg, p, today)
        rows += elastic.describe(scaled) if scaled is not None else []
        rows.append(sleep.describe(cfg, p))
    if cfg is not None:
        rows.append(("model revision", _revision(cfg)))
        rows.append(("kubernetes", _kubernetes_support(cfg, today)))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    if cfg is not None and cfg.existing_cluster is not None:
        from infra.plan import existing  # the existing-cluster layer, `existingCluster` only

        lines += ["", f"into the existing cluster {cfg.existing_cluster}, the program reads:"]
        lines.extend(f"  - {read}" for read in existing.READS)
        lines.append("and assumes:")
        lines.extend(f"  - {assumed}" for assumed in existing.ASSUMES)
    if cfg is not None and cfg.vllm_extra_args:
        lines += ["", "extra vLLM flags (`vllmExtraArgs`), last on every rank, not in the figures:"]
        lines.append(f"  {shlex.join(cfg.vllm_extra_args)}")
    lines += ["", "why:"]
    door_reasons = p.front_door.reasons if gatekeeper else ()
    lines.extend(f"  - {reason}" for reason in (*p.reasons, *door_reasons))
    if not gatekeeper:
        lines += ["", "what `frontDoor: vllm-key` gives up against the gatekeeper:"]
        lines.extend(f"  - {line}" for line in _vllm_key_gives_up())
    lines += ["", "what a change costs:"]
    lines.extend(f"  - {line}" for line in changes.describe(p))
    if warnings:
        lines += ["", "warnings:"]
        lines.extend(f"  - {warning}" for warning in warnings)
    return "\n".join(lines)


def _quota(p: Plan) -> str:
    """The vCPUs the nodes need, running and at the peak of a change (`infra.plan.readiness`)."""
    running, replacing = readiness.vcpus_needed(p)
    return (
        f"{running} vCPUs running, {replacing} {readiness.changing(p)} (EC2 quota "
        f"{readiness.QUOTA_CODE}, On-Demand Standard instances)"
    )


def _checkpoint(p: Plan) -> str:
    """What every rank loads and where it comes from."""
    size = f"{p.download_gib:.2f} GiB"
    if p.weights == "bf16":
        return f"{size}, downloaded from the hub (`model` at its revision)"
    if p.weights_source != "quantize":
        return f"{size} (modelled), downloaded from {p.weights_source} (`weightsSource`)"
    job = p.quantize
    assert job is not None  # a produced checkpoint always has its Job
    checked = (
        f"; it first checks that the image's vLLM has {', '.join(job.required_ops)}, which "
        f"serves {p.weights} experts on Arm, and stops in one line if not"
        if job.required_ops
        else ""
    )
    return (
        f"{size} (modelled), written once to the weights volumes by the quantize Job "
        f"(~{job.modelled_seconds} s modelled, deadline {job.deadline_seconds} s){checked}"
    )


def _revision(cfg: StackConfig) -> str:
    """The hub commit every rank downloads, and where it comes from."""
    if cfg.model_revision != "auto":
        return f"{cfg.model_revision} (`modelRevision`, as the stack sets)"
    profile = cfg.profile()
    if profile.revision is None:
        return "main, unpinned (see warnings)"
    return (
        f"{profile.revision} (catalogue, checked {profile.revision_checked}: "
        f"{profile.revision_source})"
    )


def _front_door_rows(door: GatekeeperLimits) -> list[tuple[str, str]]:
    """The gatekeeper's limits, each a stack key (docs/front-door.md)."""
    from infra.plan import frontdoor  # the gatekeeper layer, `frontDoor: gatekeeper` only

    return [
        ("max request body", f"{door.max_request_bytes:,} bytes (`maxRequestBytes`)"),
        (
            "per client",
            f"{door.client_requests_per_minute} requests/min (`clientRequestsPerMinute`), "
            f"{door.client_concurrent_requests} in flight (`clientConcurrentRequests`), "
            f"{door.client_connections} connections (`clientConnections`)",
        ),
        (
            "per client tokens",
            f"{door.client_tokens:,} KV-cache tokens in flight (`clientTokensInFlight`); "
            + ", ".join(f"{n} over {t:,}" for t, n in door.token_tiers)
            + f", at most {door.client_tokens_bound:,} in all",
        ),
        (
            "connections",
            f"{door.connection_capacity:,} public in all, "
            f"{door.connection_capacity // door.client_connections:,} addresses at their cap; "
            f"nginx worker_connections {door.worker_connections:,} (from the gatekeeper's memory)",
        ),
        (
            "all clients",
            f"{door.all_requests} request(s) at vLLM at once, then 503; bodies of "
            f"{frontdoor.LARGE_BODY_BYTES:,} bytes or more {door.large_bodies_per_minute}/min "
            "per client",
        ),
        (
            "per request",
            f"{door.max_sequences} sequence(s) (`maxSequencesPerRequest`), logprobs up to "
            f"{door.max_logprobs} (`maxLogprobs`), no echo",
        ),
        (
            "schemas",
            (
                f"up to {door.max_schema_bytes:,} bytes (`maxSchemaBytes`), "
                f"{door.schema_concurrency} in flight per client"
            )
            if door.max_schema_bytes
            else "structured outputs off (`maxSchemaBytes` 0)",
        ),
        (
            "max reply",
            f"{door.max_reply_tokens} tokens (`maxReplyTokens`), {door.max_reply_bytes:,} bytes",
        ),
        ("reply timeout", f"{door.reply_timeout_seconds} s, then cut (504 or a stream error)"),
        (
            "chat page",
            f"{'https' if door.tls else 'http'}://<endpoint>/ (`chatPage`)"
            if door.chat_page
            else "off (`chatPage: false`)",
        ),
    ]


def _vllm_key_rows(door: EndpointLimits) -> list[tuple[str, str]]:
    """The door rows that still hold without the gatekeeper, after the listener's."""
    return [
        (
            "front door",
            "vLLM checks the key itself on every route but "
            f"{', '.join(OPEN_PATHS)} (`frontDoor: vllm-key`, VLLM_API_KEY from the key's "
            "Secret); no gatekeeper",
        ),
        ("per request", f"logprobs up to {door.max_logprobs} (`maxLogprobs`, vLLM's own)"),
        ("max reply", f"{door.max_reply_tokens} tokens (`maxReplyTokens`, vLLM's own)"),
    ]


def _vllm_key_gives_up() -> tuple[str, ...]:
    """What a stack without the gatekeeper goes without, for the plan's text. vLLM 0.31 reads one
    key from VLLM_API_KEY (serve/middleware/register.py) and checks it under /v1, /v2, /inference
    and /cohere only (serve/middleware/authenticate.py `GUARDED_PREFIX`), read 2026-12-06;
    `key_check.py` asks for it everywhere else."""
    return (
        "no per-client limits: request rate, requests, KV-cache tokens and connections in flight "
        "and body size are not bounded per client address, so one client can hold every slot",
        "no refusals before vLLM: request fields (`n`, schema size and counts, `priority`, "
        "`request_id`, ...) and headers reach vLLM as sent, and no cap on requests at vLLM (503)",
        f"routes without the key: {' and '.join(OPEN_PATHS)} only (the probes, the preStop and the "
        "metrics collector read them; counts, no inference) answer every client in `allowedCidrs`",
        "one key: vLLM reads VLLM_API_KEY when it starts, so a new key restarts the group and a "
        "rotation has no overlap (`apiKeyOverlapUntil` refused)",
        "no reply timeout and no TCP keepalives at the door: a first token slower than the load "
        f"balancer's {catalog.NLB_IDLE_TIMEOUT_S} s idle timeout is cut; no chat page; the "
        "dashboard's front-door answer counts and 5xx alarm read the gatekeeper's log and stay "
        "empty",
    )
