"""The bounds that wait: how long a client waits for a first byte and a whole reply, and how long
a rollout or a node's removal waits for a stopping leader (its drain grace, which the Cluster
Autoscaler's --max-graceful-termination-sec repeats). All follow from the longest prompt's
prefill at the slow end of the prefill range and the longest reply's decode; a long context makes
them hours. `warning` says so on the first screen, names the key that drives them and the value
that keeps them within `PRACTICAL_BOUND_S`; `client_timeouts` are what a caller must allow.

Pure: re-plans the stack with the driving key lowered, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.plan import catalog
from infra.plan.config import ConfigError, StackConfig
from infra.plan.sizing import Plan, plan

#: A bound that holds a rollout, a scale-down or a client longer than this is not practical.
PRACTICAL_BOUND_S = 20 * 60
#: What a client allows beyond the front door's own bound, so that it reads the gatekeeper's 504
#: (or the reply's end) rather than its own timeout: the connection, TLS and the load balancer's
#: and the gatekeeper's hops. Chosen, not measured.
CLIENT_MARGIN_S = 60
#: The OpenAI Python client's default timeout, 600 s for every read (openai 3.57.0
#: `openai/_constants.py` `DEFAULT_TIMEOUT = httpx2.Timeout(timeout=600, connect=5.0)`, the
#: version requirements.txt pins; read 2026-12-06). A first byte later than this is the client's
#: own timeout, then its retries.
OPENAI_DEFAULT_TIMEOUT_S = 600

#: A context key's fix is a multiple of this (prod's `maxContextCap` 7,168 is one).
_CONTEXT_STEP = 1024


@dataclass(frozen=True)
class ClientTimeouts:
    """What a caller allows: between two bytes of a streamed reply (its longest gap is the first
    byte's), and for a whole reply (curl's --max-time, a call that does not stream)."""

    stream_s: int
    whole_s: int


def client_timeouts(p: Plan) -> ClientTimeouts:
    return ClientTimeouts(
        stream_s=p.liveness.first_byte_s + CLIENT_MARGIN_S,
        whole_s=p.front_door.reply_timeout_seconds + CLIENT_MARGIN_S,
    )


def describe_client(p: Plan) -> str:
    """The plan's "client timeout" row."""
    t = client_timeouts(p)
    openai = (
        f"above the OpenAI Python client's default {OPENAI_DEFAULT_TIMEOUT_S} s (openai 3.57.0 "
        "`DEFAULT_TIMEOUT`): pass `timeout=`"
        if t.stream_s > OPENAI_DEFAULT_TIMEOUT_S
        else f"within the OpenAI Python client's default {OPENAI_DEFAULT_TIMEOUT_S} s"
    )
    return (
        f"{t.stream_s} s between bytes of a streamed reply (first byte within "
        f"{p.liveness.first_byte_s} s + {CLIENT_MARGIN_S} s), {openai}; {t.whole_s} s for a "
        f"whole reply (reply timeout + {CLIENT_MARGIN_S} s: curl's --max-time, an unstreamed call)"
    )


def _too_long(p: Plan) -> bool:
    # The drain grace is the reply timeout and more, which is the first byte and more.
    return p.drain.grace_s > PRACTICAL_BOUND_S


def describe(p: Plan) -> str:
    """The plan's "bounds that wait" row: each bound with its source."""
    source = catalog.PREFILL_SOURCES[p.liveness.probes.path]
    band = catalog.decode_bandwidth(catalog.INSTANCE_TYPES[p.instance_type], p.pod_cpu)
    rate = "calibrated" if band.measured else "extrapolated (low end)"
    verdict = (
        f"above {PRACTICAL_BOUND_S // 60} min (see warnings)"
        if _too_long(p)
        else f"all within {PRACTICAL_BOUND_S // 60} min"
    )
    return (
        f"reply timeout {p.front_door.reply_timeout_seconds} s, drain grace {p.drain.grace_s} s, "
        f"autoscaler graceful termination {p.drain.grace_s} s (--max-graceful-termination-sec); "
        f"{verdict}; from a {p.max_model_len:,}-token prompt at the slow end of the prefill "
        f"range ({source}; `catalog.PREFILL_PROVENANCE`) and the reply at the {rate} decode "
        "rate x1.25"
    )


def _candidates(cfg: StackConfig, p: Plan) -> list[tuple[str, str, int, int]]:
    """(key, config field, its value in this plan, lowest value) of each key that lengthens the
    bounds, the one that drives them first: the longest reply's decode when it outweighs the
    first byte, the first byte's own key when the stack sets it, and the context."""
    first = p.liveness.first_byte_s
    found = []
    if p.front_door.reply_timeout_seconds - first > first:
        found.append(("maxReplyTokens", "max_reply_tokens", p.front_door.max_reply_tokens, 1))
    if cfg.first_byte_timeout_seconds != "auto":
        found.append(("firstByteTimeoutSeconds", "first_byte_timeout_seconds", first, first))
    if cfg.max_model_len != "auto":
        found.append(("maxModelLen", "max_model_len", p.max_model_len, _CONTEXT_STEP))
    else:
        found.append(("maxContextCap", "max_context_cap", p.max_model_len, _CONTEXT_STEP))
    return found


def _fits(cfg: StackConfig, stack: str, field: str, value: int) -> bool:
    try:
        return not _too_long(plan(cfg.model_copy(update={field: value}), stack))
    except ConfigError:
        return False


def _largest_fitting(cfg: StackConfig, stack: str, field: str, hi: int, lo: int) -> int | None:
    """The largest value from `lo` and below `hi` (a multiple of `lo` for a context key) whose
    plan keeps every bound within `PRACTICAL_BOUND_S`; the bounds only grow with it."""
    step = _CONTEXT_STEP if lo == _CONTEXT_STEP else 1
    low, high = lo // step, (hi - 1) // step  # in steps
    if high < low or not _fits(cfg, stack, field, low * step):
        return None
    while low < high:
        mid = (low + high + 1) // 2
        if _fits(cfg, stack, field, mid * step):
            low = mid
        else:
            high = mid - 1
    return low * step


def _fix(cfg: StackConfig, p: Plan, stack: str, field: str, value: int, lo: int) -> int | None:
    """The largest value of `field` that keeps every bound within `PRACTICAL_BOUND_S`, or None."""
    if field == "first_byte_timeout_seconds":
        # The other bounds are the first byte plus fixed seconds; the plan refuses a first
        # byte below its slowest modelled one.
        fit = value - (p.drain.grace_s - PRACTICAL_BOUND_S)
        return fit if _fits(cfg, stack, field, fit) else None
    return _largest_fitting(cfg, stack, field, value, lo)


def warning(cfg: StackConfig, p: Plan, stack: str) -> str | None:
    """One line when a bound that waits exceeds `PRACTICAL_BOUND_S`: the bounds, the key that
    drives them and the value that keeps them within it; None otherwise."""
    if not _too_long(p):
        return None
    found = _candidates(cfg, p)
    fixes = [(k, fit) for k, f, v, lo in found for fit in [_fix(cfg, p, stack, f, v, lo)] if fit]
    within = f"within {PRACTICAL_BOUND_S // 60} min"
    fix = (
        f"set `{fixes[0][0]}` to {fixes[0][1]:,} or less to keep them {within}"
        if fixes
        else f"no `{found[-1][0]}` keeps them {within} on this node: choose a larger `instanceType`"
    )
    key, _, value, _ = found[0]
    return (
        f"`{key}` {value:,} makes the bounds that wait above {PRACTICAL_BOUND_S // 60} min: "
        f"first byte within {p.liveness.first_byte_s:,} s, reply timeout "
        f"{p.front_door.reply_timeout_seconds:,} s, drain grace and the autoscaler's graceful "
        f"termination {p.drain.grace_s:,} s; {fix}; else every client must wait "
        f"{client_timeouts(p).stream_s:,} s (the client timeout row)"
    )
