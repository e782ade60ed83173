"""The rehearsal's verdict: one `Check` per promise of the plan, and the table they make.

Each check compares what the plan or the stack promised with what vLLM did, and knows nothing of
how the run was orchestrated, so any rehearsal (the group as deployed, one behind a proxy, one
that kills ranks) builds its verdict from the same pieces: the planner's KV figures against
vLLM's log lines (`vllm_logs`), the endpoint (`endpoint`), the filter the ranks run under, the
stopped processes (`ranks.RankGroup`), and the table, PASS only when every check passed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from infra.plan.sizing import Plan
from tools.rehearse.group.endpoint import CHECK_TOKENS, http_status, streamed_reply
from tools.rehearse.group.ranks import RankGroup
from tools.rehearse.group.vllm_logs import (
    parse_kv_cache_allocation,
    parse_kv_cache_size,
    parse_max_concurrency,
)
from tools.rehearse.group.workspace import aligned


@dataclass(frozen=True)
class Check:
    """One row of the verdict: what was expected, what was seen, and whether they agree.

    `ok` is None for a check the run did not reach (an earlier step failed).
    """

    name: str
    expected: str
    observed: str
    ok: bool | None
    #: A longer explanation printed under the table (vLLM's quoted error).
    note: str = ""


def labelled(label: str, checks: Sequence[Check]) -> list[Check]:
    """`checks` named for one of several groups: "int8: KV cache tokens"."""
    return [replace(check, name=f"{label}: {check.name}") for check in checks]


def not_reached(rows: Sequence[tuple[str, str]], why: str = "not reached") -> list[Check]:
    """A row per (name, expected) that a step which could not run leaves unjudged."""
    return [Check(name, expected, why, None) for name, expected in rows]


def kv_checks(tiny_plan: Plan, log_text: str) -> list[Check]:
    """The planner's KV tokens and concurrency against what vLLM logged on the leader.

    Tokens must agree within 1% and concurrency to the two decimals vLLM prints, at the same max
    model length.
    """
    size = parse_kv_cache_size(log_text)
    concurrency = parse_max_concurrency(log_text)
    predicted_tokens = tiny_plan.kv_cache_tokens
    if size is None:
        tokens = Check("KV cache tokens", f"{predicted_tokens:,}", "no line in the log", False)
    else:
        off = abs(size.tokens - predicted_tokens) / max(predicted_tokens, 1)
        tokens = Check(
            "KV cache tokens",
            f"{predicted_tokens:,} (planner)",
            f"{size.tokens:,} (vLLM; {100 * off:.1f}% off)",
            off <= 0.01,
        )
    predicted = f"{tiny_plan.max_concurrency:.2f}x at {tiny_plan.max_model_len:,}"
    if concurrency is None:
        conc = Check("max concurrency", predicted, "no line in the log", False)
    else:
        logged = f"{concurrency.concurrency:.2f}x at {concurrency.max_model_len:,}"
        conc = Check(
            "max concurrency", f"{predicted} (planner)", f"{logged} (vLLM)", logged == predicted
        )
    return [tokens, conc]


def kv_budget_check(tiny_plan: Plan, logs: Sequence[str]) -> Check:
    """Every rank accepted the explicit KV budget ("Explicitly set (k/t) GiB for KV cache")."""
    expected = f"{tiny_plan.kv_cache_bytes / 2**30:.2f} GiB explicit on {len(logs)} ranks"
    seen, ok = [], True
    for rank, text in enumerate(logs):
        allocation = parse_kv_cache_allocation(text)
        if allocation is None:
            seen.append(f"rank {rank}: none")
            ok = False
            continue
        seen.append(f"rank {rank}: {allocation.kv_gib:.2f}/{allocation.total_gib:.2f}")
        ok = (
            ok
            and allocation.explicit
            and allocation.kv_gib == round(tiny_plan.kv_cache_bytes / 2**30, 2)
        )
    return Check("KV budget accepted", expected, ", ".join(seen) + " GiB", ok)


def verdict_ok(checks: Sequence[Check]) -> bool:
    return bool(checks) and all(c.ok is True for c in checks)


def render_verdict(checks: Sequence[Check]) -> str:
    """The verdict table, one row per check, then PASS or FAIL."""
    header = ("check", "expected", "observed", "result")
    rows = [
        (c.name, c.expected, c.observed, "ok" if c.ok else "-" if c.ok is None else "FAIL")
        for c in checks
    ]
    lines = aligned([header, *rows])
    lines += [f"{c.name}: {c.note}" for c in checks if c.note]
    failed = [c.name for c in checks if c.ok is False]
    skipped = sum(c.ok is None for c in checks)
    lines.append("")
    if not failed and not skipped:
        lines.append("verdict: PASS")
    else:
        parts = [", ".join(failed)] if failed else []
        parts += [f"{skipped} checks not reached"] if skipped else []
        lines.append(f"verdict: FAIL ({'; '.join(parts)})")
    return "\n".join(line.rstrip() for line in lines)


def endpoint_checks(
    base_url: str, api_key: str, model: str, progress: Callable[[str], None]
) -> list[Check]:
    """`/v1` at `base_url` answers 401 without the key, and a streamed reply with it."""
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    without = http_status(f"{base_url}/chat/completions", body)
    checks = [Check("request without key", "401", str(without), without == 401)]
    reply = streamed_reply(base_url, api_key, model)
    status = "200" if reply.error is None else reply.error
    checks.append(Check("request with key", "200", status, reply.error is None))
    ended = f"{json.dumps(reply.finish_reason)} after {reply.tokens} tokens"
    checks.append(
        Check("finish_reason", f'"length" after {CHECK_TOKENS} tokens', ended, reply.full)
    )
    progress(f"endpoint: without key {without}, with key {status}, finish_reason {ended}")
    return checks


def seccomp_status(pid: int) -> str | None:
    """The `Seccomp:` field of a live process (0 none, 1 strict, 2 filter); None once gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Seccomp:"):
            return line.split(":", 1)[1].strip()
    return None


def seccomp_check(group: RankGroup) -> Check:
    """Every rank runs under a seccomp filter (`seccomp.py`), and whether vLLM said that its NUMA
    memory binding was refused (it does when libnuma takes the refusal for a NUMA system)."""
    modes = [seccomp_status(p.popen.pid) for p in group.processes]
    filtered = bool(modes) and all(mode == "2" for mode in modes)
    refused = ("numa_set_membind failed", "numa_migrate_pages failed")
    logs = [p.log_text() for p in group.processes]
    warned = sum(any(line in log for line in refused) for log in logs)
    return Check(
        "NUMA calls refused",
        "every rank filtered, still serving",
        f"{modes.count('2')} of {len(modes)} ranks filtered; {warned} logged the refused binding"
        if filtered
        else f"seccomp modes {modes}",
        filtered,
    )


def stopped_check(group: RankGroup) -> Check:
    """No process group of `group` is left after it was stopped."""
    stopped = not group.leftovers
    return Check(
        "processes stopped",
        "no process group left",
        f"{len(group.processes)} groups gone in {group.stop_seconds:.1f} s"
        if stopped
        else f"still alive: process groups {group.leftovers}",
        stopped,
    )
