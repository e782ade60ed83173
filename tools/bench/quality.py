"""`python -m tools.bench.quality`: the served model's answers scored with lm-evaluation-harness.

    python -m tools.bench.quality [--endpoint URL] [--api-key KEY]
                                  [--against URL [--against-key KEY]] [--limit N]

Quantized weights trade quality for speed, and the trade is measured on the deployed model, not
assumed: this runs lm-eval (pinned in requirements-quality.txt, in its own virtualenv at
.rehearsal/quality, built on first use) against an endpoint on the project's own task
(`quality_task/gemma_graviton_qa.yaml`: 40 short questions, exact match, read from the JSONL
beside it, so nothing is downloaded), through the chat route, with the endpoint's key. With
`--against`, the same run on a second endpoint (the quantized stack), then both scores and the
difference (against - endpoint). The endpoint and key resolve as `make bench`'s do (flags, then
$GEMMA_GRAVITON_API_KEY, then `pulumi stack output`); the second key is `--against-key`, else
$GEMMA_GRAVITON_AGAINST_API_KEY, else the first key. The model is `--model`, else the first the
endpoint lists at /v1/models (vLLM serves one).

lm-eval's `local-chat-completions` model sends the chat messages and lets the server apply the
chat template, so no tokenizer is loaded (`tokenized_requests=False`); the key travels in its
environment (OPENAI_API_KEY), not on a command line. Raw results: bench-results/quality/.

Exit codes: 0 scored, 1 lm-eval failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from infra.plan.stackfile import REPO
from tools.bench.args import API_KEY_ENV, UsageError, normalize_base_url, resolve_endpoint
from tools.venvs import QUALITY_VENV_DIR, RehearsalEnvError, ensure_quality_env

TASK = "gemma_graviton_qa"
TASK_DIR = REPO / "tools" / "bench" / "quality_task"
#: lm-eval's key for the task's metric (metric name, filter name).
METRIC = "exact_match,none"
AGAINST_KEY_ENV = "GEMMA_GRAVITON_AGAINST_API_KEY"
RESULTS_DIR = REPO / "bench-results" / "quality"
#: Seconds lm-eval waits for one reply: 16 tokens at the 12B's ~4 tokens/s behind a queue of
#: the plan's concurrency is well under a minute; the slow end is taken (a cut reply is a retry).
REQUEST_TIMEOUT_S = 300


@dataclass(frozen=True)
class Target:
    """One endpoint to score: what it is called in the table, where it is, its key, its model."""

    label: str
    base_url: str
    key: str | None
    model: str


@dataclass(frozen=True)
class Score:
    """A task score as lm-eval reports it: mean exact match, its standard error, questions."""

    value: float
    stderr: float
    questions: int


def lm_eval_argv(python: Path, target: Target, out_dir: Path, limit: int | None) -> list[str]:
    """lm-eval's command line for one endpoint (run with the repository as working directory)."""
    model_args = ",".join(
        (
            f"model={target.model}",
            f"base_url={target.base_url}/chat/completions",
            "num_concurrent=1",
            "max_retries=3",
            f"timeout={REQUEST_TIMEOUT_S}",
            "tokenized_requests=False",
        )
    )
    return [
        str(python),
        "-m",
        "lm_eval",
        "--model",
        "local-chat-completions",
        "--model_args",
        model_args,
        "--apply_chat_template",
        "--include_path",
        str(TASK_DIR),
        "--tasks",
        TASK,
        "--output_path",
        str(out_dir),
        *(["--limit", str(limit)] if limit is not None else []),
    ]


def lm_eval_env(base: Mapping[str, str], key: str | None) -> dict[str, str]:
    """lm-eval's environment: the key, and the hub switched off (the task is a local file)."""
    env = {k: v for k, v in base.items() if k != "OPENAI_API_KEY"}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if key is not None:
        env["OPENAI_API_KEY"] = key
    return env


def read_score(out_dir: Path) -> Score:
    """The task's score from the newest `results_*.json` lm-eval wrote under `out_dir`."""
    found = sorted(out_dir.rglob("results_*.json"), key=lambda path: path.stat().st_mtime)
    if not found:
        raise ValueError(f"lm-eval wrote no results_*.json under {out_dir}")
    data = json.loads(found[-1].read_text(encoding="utf-8"))
    task = data["results"][TASK]
    questions = data.get("n-samples", {}).get(TASK, {}).get("effective", 0)
    stderr = task.get("exact_match_stderr,none")
    return Score(
        float(task[METRIC]), float(stderr) if isinstance(stderr, int | float) else 0.0, questions
    )


def render(rows: Sequence[tuple[Target, Score]]) -> str:
    """The scores, one row per endpoint, and the difference of the second from the first."""
    width = max(len(f"{t.label} ({t.base_url})") for t, _ in rows)
    lines = [f"task {TASK}: exact match, higher is better", ""]
    lines += [
        f"{f'{t.label} ({t.base_url})':<{width}}  {s.value:.3f} ± {s.stderr:.3f}"
        f"  ({s.questions} questions)"
        for t, s in rows
    ]
    if len(rows) == 2:
        (first, a), (second, b) = rows
        lines.append(f"difference ({second.label} - {first.label}): {b.value - a.value:+.3f}")
    return "\n".join(lines)


def score(
    python: Path,
    target: Target,
    out_dir: Path,
    limit: int | None,
    progress: Callable[[str], None],
) -> Score:
    """Run lm-eval against one endpoint; raise RuntimeError with its output's tail on failure."""
    argv = lm_eval_argv(python, target, out_dir, limit)
    progress(f"lm-eval: {TASK} against {target.label} ({target.base_url}, model {target.model})")
    began = time.monotonic()
    done = subprocess.run(
        argv,
        cwd=REPO,
        env=lm_eval_env(os.environ, target.key),
        capture_output=True,
        text=True,
        check=False,
    )
    (out_dir / "lm_eval.log").parent.mkdir(parents=True, exist_ok=True)
    (out_dir / "lm_eval.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).rstrip().splitlines()[-20:])
        raise RuntimeError(f"lm-eval exited {done.returncode} against {target.base_url}:\n{tail}")
    result = read_score(out_dir)
    progress(
        f"lm-eval: {target.label} scored {result.value:.3f} in {time.monotonic() - began:.0f} s"
    )
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench.quality",
        description="Score a deployed endpoint (and, with --against, a second one) on the "
        "project's lm-eval task; print both scores and the difference.",
    )
    parser.add_argument("--endpoint", metavar="URL", help="OpenAI base URL (default: the stack's)")
    parser.add_argument("--api-key", metavar="KEY", help=f"its key (default ${API_KEY_ENV})")
    parser.add_argument("--against", metavar="URL", help="a second endpoint, e.g. the int8 stack")
    parser.add_argument(
        "--against-key", metavar="KEY", help=f"its key (default ${AGAINST_KEY_ENV}, else --api-key)"
    )
    parser.add_argument("--model", metavar="NAME", help="model id (default: the first listed)")
    parser.add_argument(
        "--limit", type=int, metavar="N", help="score only the first N questions of 40"
    )
    return parser


def targets(ns: argparse.Namespace, env: Mapping[str, str]) -> list[tuple[str, str, str | None]]:
    """(label, base URL, key) of each endpoint to score, the flags checked (UsageError)."""
    if ns.limit is not None and ns.limit < 1:
        raise UsageError(f"`--limit` must be at least 1, got {ns.limit}; pass e.g. --limit 10")
    endpoint = normalize_base_url(ns.endpoint) if ns.endpoint is not None else None
    base_url, key = resolve_endpoint(endpoint, ns.api_key, env)
    chosen = [("endpoint", base_url, key)]
    if ns.against is not None:
        against_key = ns.against_key or env.get(AGAINST_KEY_ENV) or key
        chosen.append(("against", normalize_base_url(ns.against, "--against"), against_key))
    return chosen


def served_model(base_url: str, key: str | None) -> str:
    """The first model the endpoint lists at /v1/models (vLLM serves exactly one)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    fix = "check --endpoint and the key, or pass --model NAME"
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"{base_url}/models", headers=headers), timeout=30
        ) as response:
            models = [entry["id"] for entry in json.load(response)["data"]]
    except urllib.error.HTTPError as error:
        raise UsageError(f"{base_url}/models answered HTTP {error.code}; {fix}") from error
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{base_url}/models could not be read ({error}); {fix}") from error
    if not models:
        raise UsageError(f"{base_url}/models lists no models; pass --model NAME")
    return models[0]


def main(argv: Sequence[str] | None = None) -> int:
    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        ns = _parser().parse_args(argv)
        chosen = targets(ns, os.environ)
        found = [
            Target(label, url, key, ns.model or served_model(url, key))
            for label, url, key in chosen
        ]
        python = ensure_quality_env(QUALITY_VENV_DIR, progress)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RehearsalEnvError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    run_dir = RESULTS_DIR / time.strftime("%Y%m%d-%H%M%S")
    rows = []
    for target in found:
        try:
            rows.append((target, score(python, target, run_dir / target.label, ns.limit, progress)))
        except (RuntimeError, ValueError, KeyError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
