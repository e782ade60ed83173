"""The capacity run's one table: what the generator measured beside what the plan predicted.

One row per point, and for each figure the plan's value beside the measured one: time to first
token (the plan's fast..slow range beside the measured median and p90), one stream's decode
tokens/s (measured: 1000 / median time per output token), output tokens/s of all streams and
completed requests/s. The replies column counts failed requests and cut-off replies loudly (upper
case), so a point whose figures rest on broken replies cannot pass for a good one.

`report` is the same content as JSON (written beside the generator's raw results); `planned_text`
and `measured_text` are one row's two halves, which the rehearsal's verdict rows reuse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tools.bench.capacity_plan import Prediction
from tools.bench.loadgen import LoadPoint, PointResult


@dataclass(frozen=True)
class Row:
    """One point: the plan's prediction (None when the stack does not plan) and the result
    (None when the generator produced none)."""

    point: LoadPoint
    predicted: Prediction | None
    measured: PointResult | None


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def seconds(value: float) -> str:
    """Seconds with two decimals below 10 s, whole seconds above (prefill of long prompts)."""
    return f"{value:.2f}" if value < 10 else f"{value:.0f}"


def replies_text(result: PointResult | None, point: LoadPoint) -> str:
    """`full/sent full`, then FAILED and CUT OFF counts when there are any."""
    if result is None:
        return f"0/{point.prompts}, NO RESULT"
    text = f"{result.completed - result.cut_off}/{point.prompts} full"
    if result.failed:
        text += f", {result.failed} FAILED"
    if result.cut_off:
        text += f", {result.cut_off} CUT OFF"
    return text


def planned_text(predicted: Prediction | None) -> str:
    """The plan's half of a row, in one line."""
    if predicted is None:
        return "no plan"
    low, high = predicted.ttft_s
    return (
        f"TTFT {seconds(low)}-{seconds(high)} s, {predicted.stream_tokens_per_s:.2f} tok/s/stream, "
        f"{predicted.output_tokens_per_s:.2f} tok/s, {predicted.requests_per_s:.3f} req/s"
    )


def measured_text(result: PointResult | None, point: LoadPoint) -> str:
    """The measured half of a row, in one line, replies first."""
    if result is None:
        return replies_text(result, point)
    return (
        f"{replies_text(result, point)}; TTFT {_num(result.ttft_s.get('median'), 2)} s, "
        f"{_num(result.stream_tokens_per_s, 2)} tok/s/stream, "
        f"{result.output_tokens_per_s:.2f} tok/s, {result.requests_per_s:.3f} req/s"
    )


_HEADER = (
    ("prompt", ">7"),
    ("conc", ">4"),
    ("rate/s", ">6"),
    ("replies", "<24"),
    ("TTFT s plan", ">11"),
    ("p50 (p90)", ">15"),
    ("tok/s/stream plan", ">17"),
    ("meas", ">7"),
    ("tok/s all plan", ">14"),
    ("meas", ">8"),
    ("req/s plan", ">10"),
    ("meas", ">7"),
)


def _cells(row: Row) -> list[str]:
    point, p, m = row.point, row.predicted, row.measured
    ttft = (
        "-" if m is None else f"{_num(m.ttft_s.get('median'), 2)} ({_num(m.ttft_s.get('p90'), 2)})"
    )
    prompt = point.input_tokens if m is None or not m.prompt_tokens else m.prompt_tokens
    return [
        str(prompt),
        str(point.concurrency),
        "inf" if math.isinf(point.request_rate) else f"{point.request_rate:g}",
        replies_text(m, point),
        "-" if p is None else f"{seconds(p.ttft_s[0])}-{seconds(p.ttft_s[1])}",
        ttft,
        "-" if p is None else f"{p.stream_tokens_per_s:.2f}",
        "-" if m is None else _num(m.stream_tokens_per_s, 2),
        "-" if p is None else f"{p.output_tokens_per_s:.2f}",
        "-" if m is None else f"{m.output_tokens_per_s:.2f}",
        "-" if p is None else f"{p.requests_per_s:.3f}",
        "-" if m is None else f"{m.requests_per_s:.3f}",
    ]


def render(rows: Sequence[Row], heading: str) -> str:
    """The side-by-side table: a heading line, a header and one line per point."""
    lines = [
        heading,
        " ".join(f"{name:{fmt}}" for name, fmt in _HEADER),
        *(
            " ".join(f"{cell:{fmt}}" for cell, (_, fmt) in zip(_cells(row), _HEADER, strict=True))
            for row in rows
        ),
        "prompt: tokens as the server counted them; plan figures modelled "
        "(decode calibrated on one measured stream); measured by vllm bench serve",
        *(
            f"!!! {row.point.name}: {'; '.join(row.measured.errors)}"
            for row in rows
            if row.measured is not None and row.measured.errors
        ),
    ]
    return "\n".join(line.rstrip() for line in lines)


def _measured_json(result: PointResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    fields = {k: v for k, v in asdict(result).items() if k != "point"}
    return {**fields, "stream_tokens_per_s": result.stream_tokens_per_s, "ok": result.ok}


def report(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The table as JSON: per point what was sent, predicted and measured (an unbounded rate
    is written as null: JSON has no infinity)."""
    return [
        {
            "point": {
                **asdict(row.point),
                "request_rate": None
                if math.isinf(row.point.request_rate)
                else row.point.request_rate,
                "name": row.point.name,
            },
            "predicted": None if row.predicted is None else asdict(row.predicted),
            "measured": _measured_json(row.measured),
        }
        for row in rows
    ]
