"""`python -m infra.rehearse`: the stack's vLLM group, for real, on this machine.

    python -m infra.rehearse [--stack dev] [--set KEY=VALUE ...] [--timeout 600] [--keep]
                             [--extra-arg=ARG ...]

A deployment takes minutes of node boot and download before vLLM says whether it accepts the
command lines. The rehearsal says it in about a minute: it serves a tiny random-weight model of the
stack's family (the same sliding:full layer pattern, KV-head and head-dim ratios, split over the
same number of pipeline ranks) with a real CPU build of vLLM, as separate processes on 127.0.0.1,
and checks what the plan promised:

- the command lines are the LeaderWorkerSet's own (`components.manifests.engine_args` on the
  stack's `ServerSpec.engine()`); only the rank wiring (model path, --nnodes, --node-rank,
  --master-addr, --master-port, --port) and the memory figures, which the tiny model's own plan
  gives, differ (`rehearsal_argv`);
- the group forms and `/health` answers; `/v1` refuses a request without the key (401) and serves
  a streamed completion with it;
- vLLM logs the KV cache tokens and the concurrency the same planner (`infra.plan.sizing.plan`)
  predicted for the tiny model;
- the benchmark client (`infra.bench`) runs against the leader and flags no cut-off reply.

Every process it starts is its own process group and is stopped by group (SIGTERM, then SIGKILL)
whatever happens, including Ctrl-C; a headless rank does not exit when its leader dies, so nothing
else would stop it. A rank that exits early fails the run at once with vLLM's own error line.
Logs go to `.rehearsal/logs/<timestamp>/rank<N>.log`.

Exit codes: 0 every check passed, 1 a check failed or vLLM refused, 2 bad input (one line naming
the key, the rule and the fix), 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import openai

from components.manifests import EngineSpec, engine_args
from infra import bench
from infra.plan.catalog import MIB, ModelProfile
from infra.plan.config import ConfigError, StackConfig, load_config
from infra.plan.sizing import CPU_DEFAULT_MAX_SEQS_PER_RANK, Plan, plan
from infra.plan.stackfile import REPO, add_stack_arguments, parse_overrides, stack_values
from infra.plan.wiring import server_spec
from infra.rehearse.env import RehearsalEnvError, ensure_env, tail
from infra.rehearse.tiny_model import FULL, SLIDING, tiny_text_config
from infra.rehearse.vllm_logs import (
    first_fatal_error,
    parse_kv_cache_allocation,
    parse_kv_cache_size,
    parse_max_concurrency,
)

REHEARSAL_DIR = REPO / ".rehearsal"
VENV_DIR = REHEARSAL_DIR / "venv"
MODELS_DIR = REHEARSAL_DIR / "models"
LOGS_DIR = REHEARSAL_DIR / "logs"

#: The served name of the tiny model; the rehearsal's plan and command lines carry it where the
#: stack's carry the real model's.
TINY_MODEL_NAME = "rehearsal/tiny-gemma4"
#: The tiny model's smallest head dim; the profile's head dims keep their ratio above it.
TINY_HEAD_DIM_UNIT = 32
#: A window far below the rehearsal's context, so the sliding layers' reservation (window - 1 +
#: in-flight tokens) stays visibly smaller than a full layer's, as the 12B's 1,024 does at 8,192.
TINY_WINDOW = 128
TINY_HIDDEN = 64
TINY_VOCAB = 512
TINY_MAX_CONTEXT = 8192
TINY_SEED = 0

#: Memory figures scaled to the tiny model; the planner checks them as it checks the stack's.
REHEARSAL_KV_CACHE_BYTES = 64 * MIB
REHEARSAL_MAX_MODEL_LEN = 2048
REHEARSAL_BATCHED_TOKENS = 256

#: What the streamed check asks for, and the benchmark's run (small: the point is that it runs).
CHECK_TOKENS = 16
BENCH_RUNS = 2
BENCH_TOKENS = 32
BENCH_CONCURRENCY = 1

DEFAULT_TIMEOUT_S = 600.0
#: Seconds between SIGTERM and SIGKILL of a rank's process group.
STOP_GRACE_S = 20.0
#: Seconds to wait for a killed group's members to disappear.
REAP_WAIT_S = 10.0
#: After one rank exits, seconds to let the others write their own error before quoting.
SETTLE_S = 2.0
POLL_S = 0.5
LOG_TAIL_LINES = 30

#: vLLM logs this on every rank once the gloo group has formed.
_RANK_ASSIGNED = re.compile(r"\brank (\d+) in world size (\d+) is assigned as\b")
#: The flags `rehearsal_argv` replaces, and the memory figures the tiny plan gives.
WIRING_FLAGS = ("--nnodes", "--node-rank", "--master-addr", "--master-port", "--port")
MEMORY_FLAGS = ("--kv-cache-memory-bytes", "--max-model-len", "--max-num-batched-tokens")


class RehearsalError(RuntimeError):
    """A step of the rehearsal could not run (not a check that failed); the CLI exits 1."""


# --------------------------------------------------------------------------------------------
# The tiny model


def tiny_model_config(profile: ModelProfile, stages: int) -> dict[str, Any]:
    """The `config.json` of the tiny model that rehearses `profile` split into `stages` ranks.

    It keeps the profile's sliding:full pattern, the ratio of sliding to full KV heads and of
    sliding to full head dims (reduced to lowest terms, head dims scaled up to
    `TINY_HEAD_DIM_UNIT`), and has `stages` x one pattern period of layers, so every rank holds
    both kinds of layer. Raises ConfigError for a profile the family's builder cannot express.
    """
    if profile.sliding_per_full < 1:
        raise ConfigError(
            "modelProfile.slidingPerFull",
            f"is {profile.sliding_per_full}, and the rehearsal's Gemma 4 builder needs at least "
            "one sliding layer per full layer",
            "rehearse a model with a sliding:full pattern, or skip the rehearsal",
        )
    kv_gcd = math.gcd(profile.sliding_kv_heads, profile.full_kv_heads)
    sliding_kv, full_kv = profile.sliding_kv_heads // kv_gcd, profile.full_kv_heads // kv_gcd
    dim_gcd = math.gcd(profile.sliding_head_dim, profile.full_head_dim)
    return tiny_text_config(
        num_layers=stages * (profile.sliding_per_full + 1),
        sliding_per_full=profile.sliding_per_full,
        sliding_kv_heads=sliding_kv,
        full_kv_heads=full_kv,
        sliding_head_dim=profile.sliding_head_dim // dim_gcd * TINY_HEAD_DIM_UNIT,
        full_head_dim=profile.full_head_dim // dim_gcd * TINY_HEAD_DIM_UNIT,
        sliding_window=TINY_WINDOW,
        hidden_size=TINY_HIDDEN,
        vocab_size=TINY_VOCAB,
        num_attention_heads=max(8, math.lcm(sliding_kv, full_kv)),
        max_position_embeddings=TINY_MAX_CONTEXT,
        # Gemma 4's full layers share K and V weights; that is what lets them have fewer KV heads.
        attention_k_eq_v=True,
    )


def model_cache_key(
    config: Mapping[str, Any], seed: int = TINY_SEED, target_bytes: int | None = None
) -> str:
    """The cache directory name of a built model: a hash of what it is built from."""
    built_from = {"config": config, "seed": seed}
    if target_bytes is not None:
        built_from["target_bytes"] = target_bytes
    text = json.dumps(built_from, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def checkpoint_bytes(model_dir: Path) -> int:
    """Bytes of the model's weight files, as a download would write them."""
    return sum(path.stat().st_size for path in model_dir.glob("*.safetensors"))


def ensure_tiny_model(
    python: Path,
    config: Mapping[str, Any],
    progress: Callable[[str], None],
    models_dir: Path = MODELS_DIR,
    target_bytes: int | None = None,
) -> Path:
    """Build the model once into `models_dir/<hash>` with the rehearsal env's Python; reuse it.

    `target_bytes` widens the model to that many bytes of weights
    (`infra.rehearse.tiny_model.build`).
    The build writes into a scratch directory that is renamed into place when complete, so an
    interrupted build is redone rather than served half-written.
    """
    target = models_dir / model_cache_key(config, target_bytes=target_bytes)
    if (target / "config.json").is_file() and checkpoint_bytes(target) > 0:
        progress(f"tiny model: reusing {target.relative_to(REPO)}")
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    scratch = models_dir / f"{target.name}.partial-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    request = models_dir / f"{target.name}.json"
    request.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    argv = [
        str(python),
        "-m",
        "infra.rehearse.tiny_model",
        "--out",
        str(scratch),
        "--config-json",
        str(request),
        "--seed",
        str(TINY_SEED),
        *(["--target-bytes", str(target_bytes)] if target_bytes is not None else []),
    ]
    progress(
        f"tiny model: building {target.relative_to(REPO)} ({config['num_hidden_layers']} layers)"
    )
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise RehearsalError(
            f"building the tiny model failed (exit {done.returncode}): {shlex.join(argv)}\n"
            + tail(done.stdout + done.stderr)
        )
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
    return target


def tiny_profile(config: Mapping[str, Any], weights_bytes: int) -> dict[str, Any]:
    """The stack's `modelProfile` describing a built tiny model (its real config and size)."""
    kinds = list(config["layer_types"])
    full, sliding = kinds.count(FULL), kinds.count(SLIDING)
    return {
        "layers": config["num_hidden_layers"],
        "slidingPerFull": sliding // full,
        "slidingKvHeads": config["num_key_value_heads"],
        "slidingHeadDim": config["head_dim"],
        "fullKvHeads": config["num_global_key_value_heads"],
        "fullHeadDim": config["global_head_dim"],
        "slidingWindow": config["sliding_window"],
        "hiddenSize": config["hidden_size"],
        "vocabSize": config["vocab_size"],
        "checkpointBytes": weights_bytes,
        "maxContext": config["max_position_embeddings"],
        "tiedEmbeddings": bool(config.get("tie_word_embeddings", True)),
    }


# --------------------------------------------------------------------------------------------
# The two plans


def tiny_stack_values(
    stack_values: Mapping[str, Any], profile: Mapping[str, Any], stages: int
) -> dict[str, Any]:
    """The stack's own values with the tiny model and memory figures scaled to it.

    Everything else (instance type, image, replicas, model cache) stays the stack's, so the same
    config model, planner and builders see the stack as the deployment does.
    """
    return {
        **stack_values,
        "model": TINY_MODEL_NAME,
        "modelProfile": dict(profile),
        "pipelineStages": stages,
        "kvCacheBytes": REHEARSAL_KV_CACHE_BYTES,
        "maxModelLen": min(REHEARSAL_MAX_MODEL_LEN, int(profile["maxContext"])),
        "maxNumBatchedTokens": max(
            REHEARSAL_BATCHED_TOKENS, CPU_DEFAULT_MAX_SEQS_PER_RANK * stages
        ),
        "weightPrefetch": True,
    }


def plan_tiny(values: Mapping[str, Any], model_dir: Path, stages: int) -> tuple[StackConfig, Plan]:
    """Config and plan of the tiny model, through the stack's config model and planner."""
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    profile = tiny_profile(config, checkpoint_bytes(model_dir))
    cfg = load_config(tiny_stack_values(values, profile, stages))
    return cfg, plan(cfg, "rehearsal")


# --------------------------------------------------------------------------------------------
# Command lines and environment


def rehearsal_argv(
    engine: EngineSpec,
    model_dir: Path | str,
    rank: int,
    master_port: int,
    port: int,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """`vllm` arguments of one loopback rank: the LWS's builder with only the rank wiring swapped.

    `engine` is `server_spec(tiny_cfg, tiny_plan).engine()`, so every flag except the wiring comes
    from the same plan-to-command-line path the LeaderWorkerSet uses. `extra_args` are appended
    verbatim (to break a flag on purpose, or to debug).
    """
    local = dataclasses.replace(
        engine,
        model=str(model_dir),
        nnodes=str(engine.pipeline_stages),
        node_rank=str(rank),
        master_addr="127.0.0.1",
        master_port=master_port,
        port=port,
    )
    role: Literal["leader", "worker"] = "leader" if rank == 0 else "worker"
    return [*engine_args(local, role), *extra_args]


def rank_env(rank: int, api_key: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A rank's environment: its own core, loopback, offline, the key on the leader only.

    Ambient `VLLM_*` variables are dropped so the shell a rehearsal runs from cannot change it.
    Like the LWS, only the leader gets `VLLM_API_KEY`: headless ranks serve no HTTP.
    """
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("VLLM_")}
    cores = os.cpu_count() or 1
    env.update(
        {
            "VLLM_CPU_OMP_THREADS_BIND": str(rank % cores),
            "VLLM_HOST_IP": "127.0.0.1",
            "HF_HUB_OFFLINE": "1",
        }
    )
    if rank == 0:
        env["VLLM_API_KEY"] = api_key
    return env


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --------------------------------------------------------------------------------------------
# Processes


@dataclass(frozen=True)
class RankLaunch:
    """One process to start: its rank, full argv and environment."""

    rank: int
    argv: Sequence[str]
    env: Mapping[str, str]


@dataclass
class RankProcess:
    """A started rank: its process (leader of its own process group) and its log."""

    launch: RankLaunch
    log_path: Path
    popen: subprocess.Popen[bytes]
    log_handle: Any = field(repr=False)

    @property
    def rank(self) -> int:
        return self.launch.rank

    @property
    def pgid(self) -> int:
        # start_new_session makes the child the leader of a new process group.
        return self.popen.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""


class RankFailure(RuntimeError):
    """The group did not come up: a rank exited, or `/health` stayed silent.

    `summary` says what happened to the processes; `quote` is vLLM's own reason, from its log.
    """

    def __init__(self, summary: str, quote: str) -> None:
        self.summary, self.quote = summary, quote
        super().__init__(f"{summary}; {quote}")


@dataclass(frozen=True)
class Readiness:
    """When the group formed (every rank logged its assignment) and `/health` turned 200."""

    group_formed_s: float | None
    healthy_s: float


def quote_failure(log_text: str) -> str:
    """vLLM's own reason for a failed start: its first fatal error line, else its last line."""
    fatal = first_fatal_error(log_text)
    if fatal is not None:
        if fatal.kind == "argparse":
            return f"vllm serve: error: {fatal.message}"
        return f"{fatal.kind}: {fatal.message}"
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    return lines[-1] if lines else "(the log is empty)"


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command may hold spaces and parentheses: fields start after the last ")".
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def group_gone(pgid: int) -> bool:
    """True once no live process is left in the group (`killpg(pgid, 0)` finds none)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # Zombies answer kill(); they hold no memory and wait only for their reaper.
    return not group_members(pgid)


class RankGroup:
    """The rehearsal's processes: started as separate process groups, always stopped by group.

    Use as a context manager; leaving it (normally, on an exception or on Ctrl-C) stops every
    group: SIGTERM, SIGKILL after `grace_s`, then a check that no member is left.
    """

    def __init__(
        self,
        launches: Sequence[RankLaunch],
        log_dir: Path,
        grace_s: float = STOP_GRACE_S,
        progress: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.launches = tuple(launches)
        self.progress = progress
        self.log_dir = log_dir
        self.grace_s = grace_s
        self.processes: list[RankProcess] = []
        self.started_at = 0.0
        #: Seconds from start until every rank had logged its place in the group.
        self.formed_at: float | None = None
        #: Filled by `stop`: process groups that were still alive afterwards, and how long it took.
        self.leftovers: list[int] = []
        self.stop_seconds = 0.0

    def __enter__(self) -> RankGroup:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.started_at = time.monotonic()
        for launch in self.launches:
            log_path = self.log_dir / f"rank{launch.rank}.log"
            handle = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
            try:
                popen = subprocess.Popen(
                    list(launch.argv),
                    stdin=subprocess.DEVNULL,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    env=dict(launch.env),
                    start_new_session=True,
                )
            except OSError as error:
                handle.close()
                raise RehearsalError(f"rank {launch.rank} could not start: {error}") from error
            self.processes.append(RankProcess(launch, log_path, popen, handle))

    def elapsed(self) -> float:
        return time.monotonic() - self.started_at

    def exited(self) -> list[RankProcess]:
        return [p for p in self.processes if p.popen.poll() is not None]

    def formed(self) -> bool:
        """Every rank has logged its place in the group."""
        return all(
            any(int(m[1]) == p.rank for m in _RANK_ASSIGNED.finditer(p.log_text()))
            for p in self.processes
        )

    def early_exit(self) -> RankFailure:
        """Which rank exited, with what code, quoting vLLM's own error.

        The other ranks get `SETTLE_S` to write theirs: the root cause may be logged by a rank
        that is still shutting down (a leader refusing its KV budget outlives its headless peer).
        """
        time.sleep(SETTLE_S)
        first = self.exited()[0]
        others = [p for p in self.processes if p is not first]
        source = next(
            (p for p in [first, *others] if first_fatal_error(p.log_text()) is not None), first
        )
        return RankFailure(
            f"rank {first.rank} exited with code {first.popen.returncode} after "
            f"{self.elapsed():.0f} s",
            f"rank {source.rank} log: {quote_failure(source.log_text())}",
        )

    def wait_ready(
        self, health_url: str, timeout_s: float, progress: Callable[[str], None]
    ) -> Readiness:
        """Wait until `/health` answers 200; raise RankFailure at once if a rank exits."""
        while True:
            if self.exited():
                raise self.early_exit()
            if self.formed_at is None and self.formed():
                self.formed_at = self.elapsed()
                progress(f"group formed: {len(self.processes)} ranks in {self.formed_at:.0f} s")
            if http_status(health_url) == 200:
                return Readiness(self.formed_at, self.elapsed())
            if self.elapsed() > timeout_s:
                raise RankFailure(
                    f"no 200 from /health within {timeout_s:.0f} s while every rank kept "
                    f"running (group {'formed' if self.formed_at else 'not formed'})",
                    f"rank 0 log: {quote_failure(self.processes[0].log_text())}",
                )
            time.sleep(POLL_S)

    def stop(self) -> None:
        """Stop every process group; record any that is still alive afterwards.

        Ctrl-C and SIGTERM are held back meanwhile, so a second interrupt cannot leave a rank
        behind; they are delivered once every group is gone.
        """
        held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            self._stop_groups()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _stop_groups(self) -> None:
        began = time.monotonic()
        for process in self.processes:
            _signal_group(process.pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for process in self.processes:
            while not group_gone(process.pgid) and time.monotonic() < deadline:
                process.popen.poll()
                time.sleep(0.2)
        for process in self.processes:
            if not group_gone(process.pgid):
                _signal_group(process.pgid, signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                process.popen.wait(timeout=REAP_WAIT_S)
        deadline = time.monotonic() + REAP_WAIT_S
        while time.monotonic() < deadline and not all(group_gone(p.pgid) for p in self.processes):
            for process in self.processes:
                _signal_group(process.pgid, signal.SIGKILL)
            time.sleep(0.2)
        self.leftovers = [p.pgid for p in self.processes if not group_gone(p.pgid)]
        for process in self.processes:
            process.log_handle.close()
        self.stop_seconds = time.monotonic() - began
        if self.processes:
            self.progress(
                f"stopped {len(self.processes)} process group(s) in {self.stop_seconds:.1f} s"
                if not self.leftovers
                else f"process groups STILL ALIVE after SIGKILL: {self.leftovers}"
            )


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def log_tails(processes: Sequence[RankProcess], lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of every rank's log, each under a header naming the file."""
    parts = []
    for process in processes:
        shown = tail(process.log_text(), lines) or "(empty)"
        parts.append(f"---- {process.log_path} (last {lines} lines) ----\n{shown}")
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------
# Checks


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
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  "
        + row[3]
        for row in [header, *rows]
    ]
    lines += [f"{c.name}: {c.note}" for c in checks if c.note]
    failed = [c.name for c in checks if c.ok is False]
    skipped = sum(c.ok is None for c in checks)
    lines.append("")
    if not failed and not skipped:
        lines.append("verdict: PASS")
    else:
        lines.append(
            f"verdict: FAIL ({', '.join(failed)}"
            + (f"; {skipped} checks not reached" if skipped else "")
            + ")"
        )
    return "\n".join(line.rstrip() for line in lines)


# --------------------------------------------------------------------------------------------
# Talking to the leader


def http_status(
    url: str, body: Mapping[str, Any] | None = None, api_key: str | None = None
) -> int | None:
    """The HTTP status of a GET (or a JSON POST when `body` is given); None if nothing answers."""
    headers = {"Content-Type": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    data = json.dumps(body).encode("utf-8") if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return None


def streamed_reply(base_url: str, api_key: str, model: str) -> Any:
    """One streamed fixed-length chat completion through the benchmark's own request code."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
    try:
        record = bench.RequestRecord(concurrency=1, round=1, stream=1, requested=CHECK_TOKENS)
        return bench.run_request(client, model, "Say hello to the pipeline.", record)
    finally:
        client.close()


def bench_args(base_url: str, api_key: str) -> bench.BenchArgs:
    """The benchmark's arguments for the local leader, through its own parser."""
    return bench.parse_args(
        [
            f"--endpoint={base_url}",
            f"--api-key={api_key}",
            "--runs",
            str(BENCH_RUNS),
            "--tokens",
            str(BENCH_TOKENS),
            "--concurrency",
            str(BENCH_CONCURRENCY),
        ]
    )


def run_bench(base_url: str, api_key: str, log: Callable[[str], None]) -> dict[str, Any]:
    """`infra.bench` against the local leader: its report, as `--json` would print it."""
    return bench.run_bench(bench_args(base_url, api_key), base_url, api_key, log)


def bench_check(report: Mapping[str, Any]) -> Check:
    level = report["levels"][0]
    decode = level["decode_tokens_per_s"]
    rate = "-" if decode is None else f"{decode['median']:.1f} tok/s"
    observed = (
        f"{rate} decode median, {level['ok']}/{level['requests']} ok, "
        f"{report['cut_off_or_short']} cut off or short, {report['failed']} failed"
    )
    expected = f"{report['requested_tokens']}-token replies, none cut off"
    return Check("bench", expected, observed, bool(report["ok"]) and decode is not None)


# --------------------------------------------------------------------------------------------
# The run


@dataclass
class Options:
    stack: str
    overrides: dict[str, Any]
    timeout_s: float
    keep: bool
    extra_args: tuple[str, ...]


class Progress:
    """One line per step on stderr, with seconds since the start."""

    def __init__(self) -> None:
        self.began = time.monotonic()

    def __call__(self, line: str) -> None:
        print(f"[{time.monotonic() - self.began:6.1f} s] {line}", file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.began


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    began = time.monotonic()
    try:
        yield
    finally:
        timings[name] = time.monotonic() - began


NOT_REACHED = (
    ("request without key", "401"),
    ("request with key", "200"),
    ("finish_reason", f'"length" after {CHECK_TOKENS} tokens'),
    ("KV cache tokens", "planner's"),
    ("max concurrency", "planner's"),
    ("KV budget accepted", "every rank"),
    ("bench", "no cut-off"),
)


def rehearse(options: Options, progress: Progress) -> tuple[list[Check], dict[str, float]]:
    """Run the rehearsal; return the verdict's checks and the step timings.

    Raises ConfigError (bad stack input) before anything is started.
    """
    timings: dict[str, float] = {}
    values = stack_values(options.stack, options.overrides)
    cfg = load_config(values)
    real_plan = plan(cfg, options.stack)
    progress(
        f"plan: {options.stack} splits {real_plan.model} into {real_plan.stages} stage(s); "
        "rehearsing that split on a tiny model"
    )
    with _timed(timings, "env"):
        python = ensure_env(VENV_DIR, progress)
    with _timed(timings, "model"):
        model_dir = ensure_tiny_model(
            python, tiny_model_config(cfg.profile(), real_plan.stages), progress
        )
    tiny_cfg, tiny_plan = plan_tiny(values, model_dir, real_plan.stages)
    progress(
        f"tiny plan: {tiny_plan.stages} ranks, KV {tiny_plan.kv_cache_bytes} bytes, max len "
        f"{tiny_plan.max_model_len}, batched {tiny_plan.max_num_batched_tokens}: predicts "
        f"{tiny_plan.kv_cache_tokens:,} tokens at {tiny_plan.max_concurrency:.2f}x"
    )

    engine = server_spec(tiny_cfg, tiny_plan).engine()
    port, master_port = free_port(), free_port()
    while master_port == port:
        master_port = free_port()
    # Hex: a key that starts with "-" would read as a flag on a command line.
    api_key = secrets.token_hex(24)
    vllm = str(python.parent / "vllm")
    launches = [
        RankLaunch(
            rank,
            [vllm, *rehearsal_argv(engine, model_dir, rank, master_port, port, options.extra_args)],
            rank_env(rank, api_key),
        )
        for rank in range(tiny_plan.stages)
    ]
    log_dir = LOGS_DIR / time.strftime("%Y%m%d-%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "commands.txt").write_text(
        "".join(f"rank {launch.rank}: {shlex.join(launch.argv)}\n" for launch in launches),
        encoding="utf-8",
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    progress(f"starting {len(launches)} ranks (logs in {log_dir.relative_to(REPO)})")
    group = RankGroup(launches, log_dir, progress=progress)
    checks: list[Check] = []
    try:
        with group:
            checks += _check_group(group, options, tiny_plan, base_url, api_key, timings)
    finally:
        timings["stop"] = group.stop_seconds
    stopped = not group.leftovers
    checks.append(
        Check(
            "processes stopped",
            "no process group left",
            f"{len(group.processes)} groups gone in {group.stop_seconds:.1f} s"
            if stopped
            else f"still alive: process groups {group.leftovers}",
            stopped,
        )
    )
    if not verdict_ok(checks):
        print(log_tails(group.processes), file=sys.stderr)
    return checks, timings


def _check_group(
    group: RankGroup,
    options: Options,
    tiny_plan: Plan,
    base_url: str,
    api_key: str,
    timings: dict[str, float],
) -> list[Check]:
    """Every check that needs the running group, in order; a failed start ends the list early."""
    ranks = f"{len(group.launches)} ranks"
    with _timed(timings, "start-up"):
        try:
            ready = group.wait_ready(
                base_url.removesuffix("/v1") + "/health", options.timeout_s, group.progress
            )
        except RankFailure as failure:
            formed = group.formed_at is not None or group.formed()
            return [
                Check("group formed", ranks, _formed_text(group.formed_at, formed), formed),
                Check("/health", "200", failure.summary, False, note=failure.quote),
                *(Check(name, expected, "not reached", None) for name, expected in NOT_REACHED),
            ]
    checks = [
        Check("group formed", ranks, _formed_text(ready.group_formed_s, True), True),
        Check(
            "/health",
            f"200 within {options.timeout_s:.0f} s",
            f"200 after {ready.healthy_s:.0f} s",
            True,
        ),
    ]
    group.progress(f"/health 200 after {ready.healthy_s:.0f} s")
    with _timed(timings, "checks"):
        checks += _endpoint_checks(base_url, api_key, tiny_plan.model, group.progress)
        logs = [p.log_text() for p in group.processes]
        checks += kv_checks(tiny_plan, logs[0])
        checks.append(kv_budget_check(tiny_plan, logs))
    with _timed(timings, "bench"):
        try:
            checks.append(bench_check(run_bench(base_url, api_key, group.progress)))
        except bench.BenchError as error:
            checks.append(Check("bench", "no cut-off", "could not run", False, note=str(error)))
    if options.keep:
        _keep_serving(group, base_url, api_key)
    return checks


def _formed_text(seconds: float | None, formed: bool) -> str:
    if not formed:
        return "no"
    return "yes" if seconds is None else f"yes, in {seconds:.0f} s"


def _endpoint_checks(
    base_url: str, api_key: str, model: str, progress: Callable[[str], None]
) -> list[Check]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    without = http_status(f"{base_url}/chat/completions", body)
    checks = [Check("request without key", "401", str(without), without == 401)]
    record = streamed_reply(base_url, api_key, model)
    status = "200" if record.error is None else (str(record.error_status or record.error))
    checks.append(Check("request with key", "200", status, record.error is None))
    verdict = record.verdict
    checks.append(
        Check(
            "finish_reason",
            f'"length" after {CHECK_TOKENS} tokens',
            f"{json.dumps(record.finish_reason)} after {record.completion_tokens} tokens",
            verdict.ok,
        )
    )
    progress(f"endpoint: without key {without}, with key {status}, {verdict.note}")
    return checks


def _keep_serving(group: RankGroup, base_url: str, api_key: str) -> None:
    progress = group.progress
    progress(f"--keep: serving at {base_url} with key {api_key}; Ctrl-C stops every rank")
    try:
        while not group.exited():
            time.sleep(1)
        progress("a rank exited; stopping the group")
    except KeyboardInterrupt:
        progress("stopping the group")


# --------------------------------------------------------------------------------------------
# CLI


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infra.rehearse",
        description="Serve a tiny model of the stack's layout with real vLLM, two ranks on "
        "127.0.0.1, using the stack's own command lines, and check the plan's numbers.",
    )
    add_stack_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for /health (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="after the checks, keep the group serving until Ctrl-C",
    )
    parser.add_argument(
        "--extra-arg",
        dest="extra_args",
        action="append",
        default=[],
        metavar="ARG",
        help="append ARG to every rank's vllm arguments (repeatable; write --extra-arg=--flag)",
    )
    return parser


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def termination_unwinds() -> Iterator[None]:
    """A SIGTERM or SIGHUP unwinds like Ctrl-C while inside, so every started rank is stopped."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    progress = Progress()
    with termination_unwinds():
        try:
            if args.timeout <= 0:
                raise ConfigError(
                    "--timeout",
                    f"must be positive (got {args.timeout:g})",
                    "pass seconds such as 600",
                )
            options = Options(
                stack=args.stack,
                overrides=parse_overrides(args.overrides),
                timeout_s=args.timeout,
                keep=args.keep,
                extra_args=tuple(args.extra_args),
            )
            checks, timings = rehearse(options, progress)
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        except (RehearsalError, RehearsalEnvError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            return 130
    print(render_verdict(checks))
    shown = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items())
    print(f"timings: {shown}; total {progress.elapsed():.1f} s")
    return 0 if verdict_ok(checks) else 1
