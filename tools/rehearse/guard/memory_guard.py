"""`python -m tools.rehearse.guard.memory_guard`: why the weight prefetch exists, shown with vLLM.

    python -m tools.rehearse.guard.memory_guard [--stack dev] [--limit-gib auto] [--kv-gib 1.5]
                                 [--target-bytes 4800000000] [--timeout 900]

vLLM's CPU worker refuses a KV budget above `cgroup limit - cgroup usage`, and a memory cgroup's
usage includes the page cache of the files its processes read. A pod whose engine container
downloads and reads the checkpoint itself is charged for that page cache; a pod whose init
container read it is not, once that container's cgroup is gone. The planner (`infra.plan.sizing`)
encodes this: with `weightPrefetch` its guard sees pod - weights - overhead, without it the
checkpoint's page cache is charged to the engine.

This command runs a single-rank vLLM engine on a random-weight model of the stack's family (a few
GB, widened by `tools.rehearse.group.tiny_checkpoint.build`'s `target_bytes`) inside a memory
cgroup whose limit plays the pod limit, twice with the same limit and the same
`--kv-cache-memory-bytes`:

1. the weights are read inside the engine's cgroup first (the engine downloads them itself);
2. the weights are read by a finished process in a sibling cgroup that is then removed (the init
   container).

The limit defaults to the pod the planner would size for that KV budget with the prefetch: the
smallest multiple of 0.25 GiB at which it accepts, plus 0.25 GiB. The planner's runtime overhead
is calibrated on the 12B in its EKS pod and is about 3 GiB above what this small engine needs, so
the checkpoint must outweigh that gap for the engine-reads case to be refused at a pod the
planner accepts with the prefetch: hence ~4.8 GB of weights (a 3 GB model is accepted either way
at such a pod, the page cache notwithstanding). vLLM applies a cgroup limit only below the
memory node's total, so the limit must stay under it. The runs use vLLM's default batch of 2,048
tokens for one rank, the batch the planner's overhead was measured at.

The engine sees its own cgroup where vLLM looks (a private mount namespace, `cgroups`), and
before each case the model's and the rehearsal environment's files are evicted from the page
cache, so each engine starts as a fresh pod would. This module owns the experiment: the two
cases, and the report that prints the planner's prediction (`guard_prediction`) and vLLM's answer
side by side; cgroups are removed and every process is stopped (`ranks.RankGroup`) whatever
happens. Where
there is no root or no writable memory cgroup, it says why and exits 0 with "skipped".

Exit codes: 0 both outcomes as predicted (or skipped), 1 a disagreement or a failed run, 2 bad
input.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from components.manifests import EngineSpec, engine_args
from infra.plan.catalog import GIB
from infra.plan.config import ConfigError
from infra.plan.loading import load_config
from infra.plan.stackfile import REPO, add_stack_arguments, parse_overrides, stack_values
from tools.rehearse.group.ranks import (
    RankGroup,
    RankLaunch,
    exit_code,
    free_port,
    quote_failure,
    rank_env,
)
from tools.rehearse.group.tiny_plan import (
    checkpoint_bytes,
    ensure_tiny_model,
    model_config,
    tiny_model_config,
    tiny_profile,
)
from tools.rehearse.group.vllm_logs import parse_kv_cache_allocation, parse_memory_guard_refusal
from tools.rehearse.group.workspace import LOGS_DIR, Progress, RehearsalError, aligned
from tools.rehearse.guard.cgroups import (
    Cgroup,
    MemoryHierarchy,
    evict_page_cache,
    find_hierarchy,
    prefetch_in_sibling,
    wrapped_engine,
)
from tools.rehearse.guard.guard_prediction import (
    BATCHED_TOKENS,
    GUARD_MODEL_NAME,
    MAX_MODEL_LEN,
    Prediction,
    planner_pod_gib,
    predict,
)
from tools.venvs import VENV_DIR, ensure_env

DEFAULT_KV_GIB = 1.5
DEFAULT_TARGET_BYTES = 4_800_000_000
DEFAULT_TIMEOUT_S = 900.0
SAMPLE_S = 1.0

Case = Literal["engine reads", "prefetched"]
CASES: tuple[Case, ...] = ("engine reads", "prefetched")
CASE_TITLES = {
    "engine reads": "weights read in the engine's cgroup",
    "prefetched": "weights read by a removed sibling",
}


# --------------------------------------------------------------------------------------------
# One engine start


@dataclass(frozen=True)
class Outcome:
    """What vLLM did with the KV budget, and the engine cgroup when it decided."""

    case: Case
    accepted: bool | None
    #: vLLM's own line: the acceptance, the refusal, or the error it died of.
    quote: str
    #: The engine cgroup's usage and page cache at the last sample before the decision.
    usage_bytes: int
    cache_bytes: int
    limit_bytes: int
    #: Bytes the prefetch process left charged to its (then removed) cgroup.
    prefetch_charged_bytes: int | None
    seconds: float


def engine_argv(model_dir: Path, kv_bytes: int, port: int, master_port: int) -> list[str]:
    """`vllm serve` for one rank, from the same builder as the LeaderWorkerSet's."""
    spec = EngineSpec(
        model=str(model_dir),
        served_model_name=GUARD_MODEL_NAME,
        pipeline_stages=1,
        kv_cache_bytes=kv_bytes,
        max_model_len=MAX_MODEL_LEN,
        max_num_batched_tokens=BATCHED_TOKENS,
        nnodes="1",
        node_rank="0",
        master_addr="127.0.0.1",
        master_port=master_port,
        port=port,
    )
    return engine_args(spec, "leader")


def run_case(
    case: Case,
    hierarchy: MemoryHierarchy,
    python: Path,
    model_dir: Path,
    limit_bytes: int,
    kv_bytes: int,
    timeout_s: float,
    log_dir: Path,
    progress: Callable[[str], None],
) -> Outcome:
    """Start the engine once in a fresh pod-sized cgroup and read vLLM's verdict on the KV."""
    weights = sorted(model_dir.glob("*.safetensors"))
    evicted = evict_page_cache([model_dir, VENV_DIR])
    progress(f"{case}: evicted {evicted / GIB:.1f} GiB of model and environment files from cache")
    base = Cgroup.create(hierarchy, hierarchy.root / f"gemma-guard-{os.getpid()}")
    engine: Cgroup | None = None
    try:
        charged = None
        if case == "prefetched":
            charged = prefetch_in_sibling(hierarchy, base, weights, timeout_s)
            progress(
                f"{case}: a sibling cgroup read the weights ({charged / GIB:.2f} GiB charged to "
                "it) and was removed"
            )
        engine = Cgroup.create(hierarchy, base.path / "engine", limit_bytes)
        argv = engine_argv(model_dir, kv_bytes, free_port(), free_port())
        command = wrapped_engine(
            hierarchy, engine, weights, case == "engine reads", [str(python.parent / "vllm"), *argv]
        )
        env = {**rank_env(0, "guard"), "VLLM_CPU_OMP_THREADS_BIND": "0-1"}
        group = RankGroup(
            [RankLaunch(0, command, env)], log_dir / case.replace(" ", "-"), progress=progress
        )
        with group:
            outcome = _watch(case, group, engine, limit_bytes, timeout_s, charged)
        if group.leftovers:
            raise RehearsalError(f"process groups still alive after SIGKILL: {group.leftovers}")
        return outcome
    finally:
        if engine is not None:
            engine.remove()
        base.remove()


def _watch(
    case: Case,
    group: RankGroup,
    engine: Cgroup,
    limit_bytes: int,
    timeout_s: float,
    charged: int | None,
) -> Outcome:
    process = group.processes[0]
    usage = cache = 0
    while True:
        text = process.log_text()
        allocation = parse_kv_cache_allocation(text)
        refusal = parse_memory_guard_refusal(text)
        decided: bool | None = None
        quote = ""
        if allocation is not None:
            decided = True
            quote = next(line for line in text.splitlines() if "for KV cache on node" in line)
            quote = quote[quote.index("Explicitly" if allocation.explicit else "Auto") :]
        elif refusal is not None:
            decided = False
            quote = quote_failure(text)
        elif process.popen.poll() is not None:
            quote = f"exited with code {process.popen.returncode}: {quote_failure(text)}"
        elif group.elapsed() > timeout_s:
            quote = f"no KV decision within {timeout_s:.0f} s"
        else:
            with contextlib.suppress(OSError):
                usage, cache = engine.usage(), engine.cache()
            time.sleep(SAMPLE_S)
            continue
        return Outcome(case, decided, quote, usage, cache, limit_bytes, charged, group.elapsed())


# --------------------------------------------------------------------------------------------
# The report


def render(
    predictions: Mapping[Case, Prediction], outcomes: Mapping[Case, Outcome], kv_bytes: int
) -> str:
    """Prediction and result side by side, one row per case, then vLLM's and the planner's lines."""
    header = (
        "case",
        "planner: guard sees",
        "planner predicts",
        "vLLM did",
        "engine cgroup at decision",
        "agree",
    )
    rows = []
    for case in CASES:
        p, o = predictions[case], outcomes.get(case)
        predicted = "accept" if p.accepts else "refuse"
        if o is None:
            did, seen, agree = "not run", "-", "-"
        else:
            did = {True: "accepted", False: "refused", None: "failed"}[o.accepted]
            seen = (
                f"{o.usage_bytes / GIB:.2f}/{o.limit_bytes / GIB:.2f} GiB used, "
                f"page cache {o.cache_bytes / GIB:.2f} GiB"
            )
            agree = "yes" if o.accepted is p.accepts else "NO"
        rows.append(
            (
                CASE_TITLES[case],
                f"{p.guard_gib:.2f} GiB",
                f"{predicted} {kv_bytes / GIB:.2f} GiB KV",
                did,
                seen,
                agree,
            )
        )
    lines = [*aligned([header, *rows]), ""]
    for case in CASES:
        o = outcomes.get(case)
        if o is not None:
            lines.append(f"{CASE_TITLES[case]}: vLLM: {o.quote} ({o.seconds:.0f} s)")
            if o.prefetch_charged_bytes is not None:
                lines.append(
                    f"  the prefetch's cgroup was charged {o.prefetch_charged_bytes / GIB:.2f} GiB "
                    "of page cache before it was removed"
                )
        if predictions[case].reason:
            lines.append(f"  planner: {predictions[case].reason}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# CLI


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.rehearse.guard.memory_guard",
        description="Run vLLM's memory guard in a pod-sized memory cgroup with and without the "
        "weight prefetch, and compare with the planner.",
    )
    add_stack_arguments(parser)
    parser.add_argument(
        "--limit-gib",
        default="auto",
        help="the pod limit the engine's cgroup gets, in GiB; auto = the pod the planner sizes "
        "for the KV budget with the prefetch, plus 0.25 (default auto)",
    )
    parser.add_argument(
        "--kv-gib",
        type=float,
        default=DEFAULT_KV_GIB,
        help=f"--kv-cache-memory-bytes in GiB (default {DEFAULT_KV_GIB:g})",
    )
    parser.add_argument(
        "--target-bytes",
        type=int,
        default=DEFAULT_TARGET_BYTES,
        help=f"bytes of weights of the random model (default {DEFAULT_TARGET_BYTES:,})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds to wait for vLLM's KV decision per case",
    )
    return parser


@dataclass(frozen=True)
class Setup:
    """What both cases share: the engine's Python and model, the pod limit, the KV budget, and
    the planner's prediction for each case."""

    python: Path
    model_dir: Path
    limit_gib: float
    kv_bytes: int
    predictions: dict[Case, Prediction]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    progress = Progress()

    def run() -> int:
        hierarchy, why = find_hierarchy()
        if hierarchy is None:
            print(f"skipped: {why}")
            return 0
        progress(f"machine: {why}")
        setup = _setup(args, progress)
        log_dir = LOGS_DIR / time.strftime("%Y%m%d-%H%M%S-memory-guard")
        outcomes = _run_cases(setup, hierarchy, args, log_dir, progress)
        predictions = setup.predictions
        print(render(predictions, outcomes, setup.kv_bytes))
        agree = all(outcomes[c].accepted is predictions[c].accepts for c in CASES)
        print(f"\nverdict: {'PASS' if agree else 'FAIL'}; logs in {log_dir.relative_to(REPO)}")
        return 0 if agree else 1

    return exit_code(run, OSError)


def _setup(args: argparse.Namespace, progress: Progress) -> Setup:
    """The stack's values, the env, the widened model, the pod limit and both predictions."""
    overrides = parse_overrides(args.overrides)
    values = stack_values(args.stack, overrides)
    cfg = load_config(values)
    kv_bytes = int(args.kv_gib * GIB)
    python = ensure_env(VENV_DIR, progress)
    model_dir = ensure_tiny_model(
        python,
        tiny_model_config(cfg.profile(), 1),
        progress,
        target_bytes=args.target_bytes,
    )
    profile = tiny_profile(model_config(model_dir), checkpoint_bytes(model_dir))
    progress(f"model: {checkpoint_bytes(model_dir) / 1e9:.2f} GB of weights in {model_dir}")
    limit_gib = _limit(args.limit_gib, values, profile, kv_bytes)
    progress(
        f"pod limit: {limit_gib:g} GiB"
        + (" (planner's pod with the prefetch + 0.25)" if args.limit_gib == "auto" else "")
    )
    predictions = {
        case: predict(values, profile, limit_gib, kv_bytes, case == "prefetched") for case in CASES
    }
    return Setup(python, model_dir, limit_gib, kv_bytes, predictions)


def _run_cases(
    setup: Setup,
    hierarchy: MemoryHierarchy,
    args: argparse.Namespace,
    log_dir: Path,
    progress: Progress,
) -> dict[Case, Outcome]:
    """Each case in turn, the planner's prediction announced before vLLM's answer."""
    outcomes: dict[Case, Outcome] = {}
    for case in CASES:
        p = setup.predictions[case]
        progress(
            f"{case}: planner says the guard sees {p.guard_gib:.2f} GiB and "
            f"{'accepts' if p.accepts else 'refuses'} {args.kv_gib:g} GiB of KV"
        )
        outcomes[case] = run_case(
            case,
            hierarchy,
            setup.python,
            setup.model_dir,
            int(setup.limit_gib * GIB),
            setup.kv_bytes,
            args.timeout,
            log_dir,
            progress,
        )
        progress(f"{case}: vLLM {outcomes[case].quote}")
    return outcomes


def _limit(
    text: str, values: Mapping[str, Any], profile: Mapping[str, Any], kv_bytes: int
) -> float:
    if text == "auto":
        return planner_pod_gib(values, profile, kv_bytes)
    try:
        limit = float(text)
    except ValueError:
        limit = 0.0
    if limit <= 0:
        raise ConfigError(
            "--limit-gib",
            f"must be auto or a positive number (got {text!r})",
            "pass e.g. --limit-gib 12.75",
        )
    return limit


if __name__ == "__main__":
    sys.exit(main())
