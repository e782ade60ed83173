"""The report: one JSON document built from the measured rounds, and the table rendered from it.

`build_report` is the single source of the numbers: `--json` prints it as is, `render_table`
only formats it. The table is a sequence of sections (`TABLE_SECTIONS`), each a function from the
report to its lines, so a new part of the report is a new key in `build_report` and a new section
here, without touching the others.

Every reply that is not the fixed-length reply asked for is counted per level and listed under
`problems`, and the table shows it in upper case: a cut-off reply is never averaged away.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tools.bench.args import BenchArgs
from tools.bench.client import (
    STATUS_CUT_OFF,
    STATUS_FAILED,
    STATUS_LONG,
    STATUS_OK,
    STATUS_SHORT,
    STATUS_UNEXPECTED_FINISH,
    STATUS_UNFINISHED,
    TOKEN_SOURCE_USAGE,
    RoundResult,
)
from tools.bench.stats import Summary, summarize

STATUS_LABELS = {
    STATUS_OK: "ok",
    STATUS_CUT_OFF: "CUT OFF",
    STATUS_SHORT: "SHORT",
    STATUS_LONG: "LONG",
    STATUS_UNFINISHED: "NO FINISH",
    STATUS_UNEXPECTED_FINISH: "ODD FINISH",
    STATUS_FAILED: "FAILED",
}
"""How each status appears in the table; every non-ok label is upper case on purpose."""


def level_stats(concurrency: int, rounds: Sequence[RoundResult]) -> dict[str, Any]:
    """Per-level JSON: median and spread of each metric, and loud counts of bad replies."""
    records = [r for rnd in rounds for r in rnd.records]
    measured = [r for r in records if r.error is None]
    statuses = Counter(r.verdict.status for r in records)

    def stat(values: Iterable[float | None]) -> dict[str, float | int] | None:
        summary = summarize(values)
        return None if summary is None else summary.to_json()

    return {
        "concurrency": concurrency,
        "rounds": len(rounds),
        "requests": len(records),
        "ok": statuses[STATUS_OK],
        "failed": statuses[STATUS_FAILED],
        "cut_off": statuses[STATUS_CUT_OFF],
        "short": sum(
            n for s, n in statuses.items() if s not in (STATUS_OK, STATUS_FAILED, STATUS_CUT_OFF)
        ),
        "statuses": dict(sorted(statuses.items())),
        "finish_reasons": dict(sorted(Counter(str(r.finish_reason) for r in measured).items())),
        "token_sources": sorted({r.token_source for r in measured}),
        "round_wall_s": [rnd.wall_s for rnd in rounds],
        "round_completion_tokens": [rnd.completion_tokens for rnd in rounds],
        "aggregate_tokens_per_s": stat(rnd.aggregate_tokens_per_s for rnd in rounds),
        "decode_tokens_per_s": stat(r.decode_tokens_per_s for r in measured),
        "ms_per_token": stat(r.ms_per_token for r in measured),
        "ttft_s": stat(r.ttft_s for r in measured),
        "total_s": stat(r.total_s for r in measured),
    }


def build_report(
    endpoint: str, model: str, args: BenchArgs, levels: Sequence[tuple[int, Sequence[RoundResult]]]
) -> dict[str, Any]:
    """The one JSON object `--json` prints; the table is rendered from it too."""
    records = [r for _, rounds in levels for rnd in rounds for r in rnd.records]
    problems = [
        {
            "concurrency": r.concurrency,
            "round": r.round,
            "stream": r.stream,
            "status": r.verdict.status,
            "note": r.verdict.note,
        }
        for r in records
        if not r.verdict.ok
    ]
    return {
        "endpoint": endpoint,
        "model": model,
        "requested_tokens": args.tokens,
        "runs": args.runs,
        "concurrency": list(args.concurrency),
        "prompt": args.prompt,
        "ok": not problems,
        "failed": sum(r.verdict.status == STATUS_FAILED for r in records),
        "cut_off_or_short": sum(
            not r.verdict.ok and r.verdict.status != STATUS_FAILED for r in records
        ),
        "problems": problems,
        "levels": [level_stats(c, rounds) for c, rounds in levels],
        "requests": [r.to_json() for r in records],
    }


def fmt_value(value: float | None, digits: int) -> str:
    """A number with `digits` decimals, or "-" for a metric that does not exist."""
    return "-" if value is None else f"{value:.{digits}f}"


def _fmt_summary(stat: Mapping[str, float] | None, digits: int) -> str:
    """A `Summary` in its JSON form, formatted as `median (min..max)`, or "-"."""
    if stat is None:
        return "-"
    return Summary(stat["median"], stat["min"], stat["max"], int(stat["n"])).format(digits)


Section = Callable[[Mapping[str, Any]], list[str]]
"""One part of the table: the report in, its lines out (a blank line first, to separate it)."""


def _heading(report: Mapping[str, Any]) -> list[str]:
    """What was measured: the model, the endpoint and the run's shape."""
    return [
        f"model {report['model']} at {report['endpoint']}",
        f"{report['requested_tokens']} tokens per reply, {report['runs']} rounds per level, "
        f"concurrency {','.join(str(c) for c in report['concurrency'])}",
    ]


def _finish_label(request: Mapping[str, Any]) -> str:
    """The finish column: "length" is expected at the requested count and EARLY before it."""
    if request["ok"] and request["finish_reason"] == "length":
        return "length (expected)"
    if request["status"] == STATUS_CUT_OFF:
        return "length (EARLY)"
    return str(request["finish_reason"])


def _request_rows(report: Mapping[str, Any]) -> list[str]:
    """One row per reply, in the order they were sent."""
    requested = report["requested_tokens"]
    lines = [
        "",
        "Per request",
        f"{'conc':>4} {'round':>5} {'stream':>6} {'tokens':>9} {'counted':>7} "
        f"{'finish':<17} {'TTFT s':>7} {'tok/s':>7} {'ms/tok':>7} {'total s':>8}  status",
    ]
    for r in report["requests"]:
        lines.append(
            f"{r['concurrency']:>4} {r['round']:>5} {r['stream']:>6} "
            f"{r['completion_tokens']:>4}/{requested:<4} {r['token_source']:>7} "
            f"{_finish_label(r):<17} "
            f"{fmt_value(r['ttft_s'], 3):>7} {fmt_value(r['decode_tokens_per_s'], 2):>7} "
            f"{fmt_value(r['ms_per_token'], 1):>7} {fmt_value(r['total_s'], 2):>8}  "
            f"{STATUS_LABELS[r['status']]}"
        )
    return lines


def _replies_cell(level: Mapping[str, Any]) -> str:
    """`ok/requests ok`, then every kind of bad reply in upper case."""
    replies = f"{level['ok']}/{level['requests']} ok"
    if level["failed"]:
        replies += f", {level['failed']} FAILED"
    if level["cut_off"]:
        replies += f", {level['cut_off']} CUT OFF"
    if level["short"]:
        replies += f", {level['short']} SHORT"
    return replies


def _level_rows(report: Mapping[str, Any]) -> list[str]:
    """One row per concurrency level: medians and spreads, then how tokens were counted."""
    lines = [
        "",
        "Per level: median (min..max); aggregate is all tokens of a round over its wall time",
        f"{'conc':>4} {'replies':<22} {'aggregate tok/s':<22} {'decode tok/s/stream':<22} "
        f"{'ms/token':<22} {'TTFT s':<22} {'total s':<22}",
    ]
    for lvl in report["levels"]:
        lines.append(
            f"{lvl['concurrency']:>4} {_replies_cell(lvl):<22} "
            f"{_fmt_summary(lvl['aggregate_tokens_per_s'], 2):<22} "
            f"{_fmt_summary(lvl['decode_tokens_per_s'], 2):<22} "
            f"{_fmt_summary(lvl['ms_per_token'], 1):<22} "
            f"{_fmt_summary(lvl['ttft_s'], 3):<22} "
            f"{_fmt_summary(lvl['total_s'], 2):<22}"
        )
    return lines + _token_source_lines(report)


def _token_source_lines(report: Mapping[str, Any]) -> list[str]:
    """Where the token counts came from; chunk counting is an approximation and says so."""
    sources = sorted({s for lvl in report["levels"] for s in lvl["token_sources"]})
    if sources == [TOKEN_SOURCE_USAGE]:
        return ["tokens counted from the server's usage"]
    if not sources:
        return []
    return [
        "tokens counted from: "
        + ", ".join(
            "server usage" if s == TOKEN_SOURCE_USAGE else "content chunks (no usage sent)"
            for s in sources
        )
    ]


def _verdict_lines(report: Mapping[str, Any]) -> list[str]:
    """Every bad reply, loudly, or the one line that says all replies were complete."""
    if not report["problems"]:
        return [
            "",
            f"all replies were exactly {report['requested_tokens']} tokens; finish_reason "
            '"length" there is the expected end of a fixed-length run',
        ]
    return [
        "",
        f"!!! replies CUT OFF or SHORT: {report['cut_off_or_short']}, "
        f"requests FAILED: {report['failed']}",
        *(
            f"!!! conc {p['concurrency']} round {p['round']} stream {p['stream']}: {p['note']}"
            for p in report["problems"]
        ),
    ]


TABLE_SECTIONS: tuple[Section, ...] = (_heading, _request_rows, _level_rows, _verdict_lines)
"""The table's parts, in order."""


def render_table(report: Mapping[str, Any]) -> str:
    """Human-readable report: per-request rows, per-level medians and spreads, then problems."""
    lines = [line for section in TABLE_SECTIONS for line in section(report)]
    return "\n".join(line.rstrip() for line in lines)
