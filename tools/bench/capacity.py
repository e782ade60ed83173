"""`python -m tools.bench.capacity` (`make bench`): the stack's capacity, measured with
`vllm bench serve` and printed beside the plan's predictions.

    python -m tools.bench.capacity [--stack dev] [--endpoint URL] [--tokenizer DIR] ...
    python -m tools.bench.capacity --quick                          # the smoke test
    python -m tools.bench.capacity --job | kubectl apply -f -      # the same run in the cluster
    python -m tools.bench.capacity --from-logs job.log              # its table, from its logs

The endpoint and key come from the flags, then $GEMMA_GRAVITON_API_KEY, then `pulumi stack
output` (`tools.bench.args`); the key reaches the generator only through its environment. The
points (`capacity_plan.default_points`) are 1,000-token and longest prompts at concurrency 1 and
the planned concurrency, at the gatekeeper's per-client rate; `--quick` is one point, the field
report's run (`QUICK`). Each point's raw result JSON and log go to `--results` (default
`bench-results/<stack>-<time>`), with `capacity.json` (the table as JSON).

Exit codes: 0 every request of every point returned its full reply, 1 a request failed, a reply
was cut off or a point left no result, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from infra.adapters.wiring import server_spec
from infra.plan.config import ConfigError, StackConfig
from infra.plan.loading import load_config
from infra.plan.sizing import Plan, plan
from infra.plan.stackfile import REPO, add_stack_arguments, parse_overrides, stack_values
from tools.bench import loadtest_job as loadtest
from tools.bench.args import (
    API_KEY_ENV,
    UsageError,
    normalize_base_url,
    parse_whole,
    resolve_endpoint,
)
from tools.bench.capacity_plan import (
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROMPTS_PER_STREAM,
    default_points,
    predict,
)
from tools.bench.capacity_table import Row, render, report
from tools.bench.loadgen import (
    KEY_ENV,
    LoadPoint,
    PointResult,
    ResultError,
    bench_serve_argv,
    parse_result,
)
from tools.bench.loadgen import read_result as read_point_result

PROG = "python -m tools.bench.capacity"
#: The generator as the rehearsal installs it (requirements-rehearsal.txt), else `vllm` on PATH.
LOCAL_VLLM = REPO / ".rehearsal" / "venv" / "bin" / "vllm"
#: Seconds between "still running" lines while a point runs.
HEARTBEAT_S = 30.0
#: `--quick`, the smoke test: the field report's run (one stream, replies of exactly 100 tokens)
#: on a short prompt, three requests (on dev ~80 s, modelled). A flag given beside it wins.
QUICK = {
    "input_lengths": "100",
    "concurrency": "1",
    "output_tokens": "100",
    "prompts_per_stream": "3",
}

Log = Callable[[str], None]


@dataclass(frozen=True)
class Target:
    """Where the generator points and with what: the server root, served model and tokenizer."""

    base_url: str
    """The server's root, without `/v1` (the generator appends the route)."""
    model: str
    tokenizer: str


def point_argvs(
    vllm: str, points: Sequence[LoadPoint], target: Target, result_dir: str
) -> list[list[str]]:
    """One generator command line per point."""
    return [
        bench_serve_argv(
            vllm,
            point,
            base_url=target.base_url,
            model=target.model,
            tokenizer=target.tokenizer,
            result_dir=result_dir,
        )
        for point in points
    ]


def run_point(argv: Sequence[str], env: Mapping[str, str], log_path: Path, log: Log) -> int:
    """Run one generator command, its output to `log_path`, a progress line every
    `HEARTBEAT_S` seconds; returns its exit code."""
    began = time.monotonic()
    with log_path.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(argv, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
        try:
            while True:
                try:
                    return process.wait(HEARTBEAT_S)
                except subprocess.TimeoutExpired:
                    log(f"  ... still running, {time.monotonic() - began:.0f} s")
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def run_points(
    points: Sequence[LoadPoint],
    argvs: Sequence[Sequence[str]],
    key: str | None,
    result_dir: Path,
    log: Log,
    runner: Callable[[Sequence[str], Mapping[str, str], Path, Log], int] = run_point,
    extra_env: Mapping[str, str] | None = None,
) -> list[PointResult | None]:
    """Run every point in order; a point's result, or None when it left none. The key goes
    into the generator's environment only, never an ambient one."""
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV} | dict(extra_env or {})
    if key:
        env[KEY_ENV] = key
    results: list[PointResult | None] = []
    for index, (point, argv) in enumerate(zip(points, argvs, strict=True), start=1):
        log(
            f"[point {index}/{len(points)}] {point.input_tokens}-token prompts, "
            f"{point.output_tokens}-token replies, concurrency {point.concurrency}, "
            f"{point.prompts} requests at {point.request_rate:g}/s"
        )
        began = time.monotonic()
        code = runner(argv, env, result_dir / f"{point.name}.log", log)
        try:
            result = read_point_result(result_dir, point)
        except ResultError as error:
            log(f"  no result (exit {code}): {error}; see {result_dir / (point.name + '.log')}")
            results.append(None)
            continue
        log(
            f"  {result.completed}/{point.prompts} completed, {result.failed} failed, "
            f"{result.cut_off} cut off in {time.monotonic() - began:.0f} s"
        )
        results.append(result)
    return results


def parse_logs(text: str, points: Sequence[LoadPoint]) -> list[PointResult | None]:
    """Each point's result from the in-cluster Job's log (`loadtest.RESULT_MARKER` lines)."""
    found: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if line.startswith(loadtest.RESULT_MARKER):
            name = line.removeprefix(loadtest.RESULT_MARKER).strip()
        elif name is not None and line.strip():
            found[name] = line
            name = None
    results: list[PointResult | None] = []
    for point in points:
        try:
            results.append(parse_result(json.loads(found[point.name]), point))
        except (KeyError, ValueError):
            results.append(None)
    return results


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Measure the stack's capacity with vllm bench serve (prefill at 1,000 and "
        "the longest prompt, concurrency 1 and the planned) beside the plan's predictions.",
    )
    add_stack_arguments(parser)
    parser.add_argument("--endpoint", metavar="URL", help="default: `pulumi stack output endpoint`")
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"default: ${API_KEY_ENV}, else `pulumi stack output --show-secrets apiKey`",
    )
    parser.add_argument("--model", metavar="NAME", help="served model id (default: the stack's)")
    parser.add_argument(
        "--tokenizer",
        metavar="DIR|REPO",
        help="tokenizer the prompts are made with (default: the stack's model on the hub, which "
        "needs HF_TOKEN for a gated model)",
    )
    parser.add_argument("--vllm", metavar="PATH", help=f"the generator (default {LOCAL_VLLM})")
    parser.add_argument("--input-lengths", metavar="N[,N]", help="default 1000 and the longest")
    parser.add_argument("--concurrency", metavar="N[,N]", help="default 1 and the planned")
    parser.add_argument("--output-tokens", metavar="N", help=f"default {DEFAULT_OUTPUT_TOKENS}")
    parser.add_argument(
        "--prompts-per-stream", metavar="N", help=f"default {DEFAULT_PROMPTS_PER_STREAM}"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smoke test: 100-token prompts, one stream, 3 replies of 100 tokens",
    )
    parser.add_argument("--results", type=Path, metavar="DIR", help="where raw results go")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--job", action="store_true", help="print the in-cluster Job and exit")
    mode.add_argument(
        "--from-logs", type=Path, metavar="FILE", help="the table from the Job's `kubectl logs`"
    )
    return parser


def _lengths(flag: str, text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(item) for item in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise UsageError(
            f"`{flag}` must be comma-separated whole numbers of at least 1, got {text!r}; "
            f"pass e.g. {flag} 1000"
        )
    return values


def plan_points(args: argparse.Namespace) -> tuple[StackConfig, Plan, list[LoadPoint]]:
    """The stack's config and plan, and the points the flags ask for (checked against the plan)."""
    if args.quick:
        args = argparse.Namespace(
            **{**QUICK, **{k: v for k, v in vars(args).items() if v is not None}}
        )
    cfg = load_config(stack_values(args.stack, parse_overrides(args.overrides)))
    p = plan(cfg, args.stack)
    default = str(DEFAULT_OUTPUT_TOKENS)
    output = parse_whole("--output-tokens", args.output_tokens or default, 2, default)
    per_stream = args.prompts_per_stream or str(DEFAULT_PROMPTS_PER_STREAM)
    points = default_points(
        p,
        output,
        parse_whole("--prompts-per-stream", per_stream, 1, "2"),
        _lengths("--input-lengths", args.input_lengths),
        _lengths("--concurrency", args.concurrency),
    )
    longest = max(point.input_tokens for point in points) + output
    if longest > p.max_model_len:
        raise UsageError(
            f"`--input-lengths` plus `--output-tokens` must fit the {p.max_model_len}-token "
            f"context, got {longest}; pass at most {p.max_model_len - output} tokens of prompt"
        )
    return cfg, p, points


def job_manifest(cfg: StackConfig, p: Plan, points: Sequence[LoadPoint]) -> str:
    """The in-cluster Job's YAML for `points`, with a deadline of twice the modelled run."""
    spec = server_spec(cfg, p)
    target = Target(loadtest.service_url(spec), spec.model, loadtest.TOKENIZER_DIR)
    argvs = point_argvs("vllm", points, target, loadtest.RESULTS_DIR)
    # The deadline ends the run: twice the modelled duration plus 10 minutes for the image's
    # start and the tokenizer's download, the safe (long) end of a modelled figure.
    deadline = int(2 * modelled_seconds(cfg, p, points)) + 600
    job = loadtest.capacity_job(spec, argvs, [point.name for point in points], deadline)
    return yaml.safe_dump(job, sort_keys=False)


def modelled_seconds(cfg: StackConfig, p: Plan, points: Sequence[LoadPoint]) -> float:
    """How long the points take as the plan models them (requests over predicted requests/s)."""
    return sum(point.prompts / predict(cfg, p, point).requests_per_s for point in points)


def rows_for(
    cfg: StackConfig, p: Plan, points: Sequence[LoadPoint], results: Sequence[PointResult | None]
) -> list[Row]:
    """Each point beside the plan's prediction for it."""
    return [
        Row(point, predict(cfg, p, point), result)
        for point, result in zip(points, results, strict=True)
    ]


def heading(stack: str, p: Plan) -> str:
    return (
        f"capacity of {stack} ({p.nodes} x {p.instance_type}, {p.model}): "
        "the plan beside vllm bench serve"
    )


def _measure(
    args: argparse.Namespace, cfg: StackConfig, p: Plan, points: Sequence[LoadPoint], log: Log
) -> tuple[list[PointResult | None], Path]:
    """Run the generator locally against the stack's endpoint; the results and where they are."""
    endpoint = normalize_base_url(args.endpoint) if args.endpoint else None
    base, key = resolve_endpoint(endpoint, args.api_key, os.environ)
    vllm = args.vllm or (str(LOCAL_VLLM) if LOCAL_VLLM.exists() else "vllm")
    target = Target(base.removesuffix("/v1"), args.model or p.model, args.tokenizer or p.model)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    result_dir = args.results or REPO / "bench-results" / f"{args.stack}-{stamp}"
    result_dir.mkdir(parents=True, exist_ok=True)
    log(
        f"capacity: {len(points)} points against {base} with {vllm}; modelled "
        f"~{modelled_seconds(cfg, p, points) / 60:.0f} min; results in {result_dir}"
    )
    argvs = point_argvs(vllm, points, target, str(result_dir))
    return run_points(points, argvs, key, result_dir, log), result_dir


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: 0 every reply full, 1 a failed, cut-off or missing result, 2 bad input."""

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    args = _parser().parse_args(argv)
    try:
        cfg, p, points = plan_points(args)
        if args.job:
            print(job_manifest(cfg, p, points), end="")
            return 0
        if args.from_logs is not None:
            results, result_dir = parse_logs(_read(args.from_logs), points), None
        else:
            results, result_dir = _measure(args, cfg, p, points, log)
    except (ConfigError, UsageError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; no table", file=sys.stderr)
        return 130
    rows = rows_for(cfg, p, points, results)
    if result_dir is not None:
        (result_dir / "capacity.json").write_text(
            json.dumps(report(rows), indent=2) + "\n", encoding="utf-8"
        )
    print(render(rows, heading(args.stack, p)))
    return 0 if all(r.measured is not None and r.measured.ok for r in rows) else 1


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(
            f"`--from-logs` {path} cannot be read ({error.strerror}); pass the file "
            "`kubectl logs job/<name>` was saved to"
        ) from error


if __name__ == "__main__":
    raise SystemExit(main())
