"""The ranks' liveness: a probe program that proves the pipeline works, and the engine's own
bound on a step. Pure. The check is a file, `programs/liveness.py`, shipped in the group's
programs ConfigMap (`pods.programs_config`): one long-lived process per engine container
(`liveness.py serve`, started by `programs/engine.sh` before vLLM) runs one check per kubelet
httpGet, so a probe period costs an HTTP request instead of an exec and a Python start; the
fault rehearsal runs the same file against the group on loopback (`programs.local`).

Why `/health` is not enough: vLLM 0.31's `/health` answers 503 only for an engine it already
knows is dead (`entrypoints/serve/instrumentator/health.py`). When a headless rank hangs or
vanishes, the leader's engine waits for the last stage's reply and `/health` stays 200.

The leader's probe (role `leader`, `GET /live`), one run per period:
1. `/health` must answer 200;
2. `/metrics`: while requests are in the engine (`vllm:num_requests_running` + `..._waiting`), the
   pipeline is alive if its progress counters moved (generated and prompt tokens, KV usage) within
   the stall bound; a busy engine is never sent a probe request, so the probe never queues behind
   a full batch;
3. an idle engine gets one generation of one token (`max_tokens: 1`, through every stage to the
   last rank's sampler) with a short deadline. vLLM publishes its running and waiting counts
   when a step ends, so a request in its first step looks idle and the proof waits behind it: a
   proof that gets no answer in time fails the probe only once such answers have been missing
   for longer than the stall bound (an HTTP error fails it at once).
The last progress seen is kept in a small state file (`/tmp`, the pod's writable emptyDir).

The leader's startup probe (the same process, `GET /startup`) runs before the pod is Ready, so no
client request reaches vLLM while it measures:
1. the linear path: on a plan whose bounds assume vLLM's oneDNN matmul (`path=onednn`), a leader
   whose vLLM took torch's linear (vLLM 0.31 `model_executor/layers/utils.py`
   `dispatch_cpu_unquantized_gemm`, at weight loading) refuses to start, in one line. vLLM says
   so in two ways: a warning "Failed to create oneDNN linear, fallback to torch linear" when
   oneDNN refuses a weight, and only a debug line "CPU unquantized GEMM dispatch: using
   torch.nn.functional.linear (fallback)" when its build has no oneDNN ops at all
   (`_supports_onednn` false). Its logging config (`engine_logging_config`) writes both, with
   the warnings and that module's dispatch lines, to a file the probe reads;
2. the node's step: `runs` one-token completions of `calibrate-tokens` prompt tokens (token ids,
   different in every run, so no prefix is cached), each within `calibrate-s`; the first is a
   warm-up, the slowest of the others is the step. The warm-up alone samples (temperature 1):
   vLLM 0.31's CPU sampler is `torch.compile`d (v1/sample/ops/topk_topp_sampler.py
   `compiled_random_sample`, `dynamic=True`), its start-up (`_dummy_sampler_run`) compiles it
   for a batch of many, and Dynamo specializes a batch of one, so the first lone sampled
   request builds it again (an inductor C++ build: 26 s on the rehearsal's two shared cores,
   measured 2026-12-06) inside `sample_tokens`, which the engine's step timeout bounds. Here no
   client waits and no load slows it (a run past `calibrate-s` fails; the next run measures
   again, the build done or the engine already restarting). A step x `growth` x `margin` x
   `in-flight` beyond `stall-s` (the engine's own step timeout, fixed at start) refuses the
   node; else the stall bound is step x `growth` x `margin`, within [`floor-s`, `stall-s`]
   (`infra.plan.liveness.measured_stall_seconds`), kept in the state file, and one line says
   both on the container's log (`announce`);
3. the record: the measured step, the stall bound and whether vLLM fell back to torch's linear,
   as Prometheus gauges in a small text file (`SELF_METRICS_FILE`, the check's `GAUGES`), which the
   gatekeeper's metrics listener serves to the collector (`/metrics/self`), so the dashboard
   draws every leader's measurement beside the plan's range. A refused node's file says what
   was measured (no stall bound: none was taken).
A refusal is final: said once, kept in the state file, and the engine (`stop-pid`, the
container's PID 1) is sent SIGTERM, so the kubelet restarts the container at once instead of
waiting out the startup probe's threshold (`pkg/kubelet/prober/worker.go` counts failed runs).
Liveness runs take the measured bound from the state file, or `stall-s` if none was measured.

The worker's probe (role `worker`) fails when its leader no longer answers `/health`: a headless
rank whose leader is gone waits on its message queue forever (`vllm serve --headless` runs the
executor with no monitor of the peer, `entrypoints/cli/serve.py` `run_headless`).

The engine's bound: `VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS` (v1/executor/multiproc_executor.py,
`execute_model` and `sample_tokens`; 300 s by default) set to the stall bound, so a step that
never completes kills the engine core: requests in flight end with an error and `/health` turns
503 instead of every client waiting for the kubelet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from components.manifests.programs import MOUNT as PROGRAMS_MOUNT

#: Where the leader's probe keeps the last progress it saw (the pod's /tmp emptyDir).
STATE_FILE = "/tmp/gemma-liveness.json"
#: The environment variable holding the leader's address on a worker (injected by LWS).
LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
#: The module whose dispatch lines (debug, once per process) the warnings file also takes: the
#: check looks there for the lines vLLM logs when a bf16 linear takes torch's matmul
#: (`programs/liveness.py` `FALLBACK_LINE`, `FALLBACK_DISPATCH`, their one home).
DISPATCH_LOGGER = "vllm.model_executor.layers.utils"
#: Where the leader's vLLM writes its warnings (besides its stdout), and its logging config.
WARNINGS_LOG = "/tmp/vllm-warnings.log"
LOGGING_CONFIG_PATH = "/tmp/vllm-logging.json"
#: Where the startup probe writes its measurement as Prometheus gauges (the pod's /tmp, which the
#: gatekeeper mounts read-only); the gauges' names and help texts are the check's own
#: (`programs/liveness.py` `GAUGES`).
SELF_METRICS_FILE = "/tmp/gemma-self.prom"
#: Where the startup probe writes its one line: the container's main process's stdout, which is
#: the container's log (a probe's own answer reaches only the kubelet's events).
ANNOUNCE_TO = "/proc/1/fd/1"

#: The port each engine container's check listens on (`liveness.py serve`, every address: the
#: kubelet's httpGet comes from the node to the pod's IP, never to its loopback). Not declared
#: (vLLM's container declares no port, `policies/rules.py`); the group's NetworkPolicy admits
#: only the group's own pods to it besides the kubelet, as the gatekeeper's probe listener.
LIVENESS_PORT = 8082


@dataclass(frozen=True)
class ProbeSpec:
    """The liveness bounds of a plan (`infra.plan.liveness`), in whole seconds."""

    #: A busy engine that shows no progress for longer is stalled; also the engine's step bound.
    stall_s: int = 60
    period_s: int = 5
    failures: int = 3
    #: The kubelet stops a probe run after this long (`timeoutSeconds`).
    timeout_s: int = 8
    #: Deadline of each HTTP call inside a run.
    request_s: int = 5
    #: An idle engine proves its pipeline with one generated token at most this often (tokens
    #: that came out since, a client's included, prove it too).
    idle_check_s: int = 60
    #: The leader's start-up measurement (`infra.plan.liveness`): prompt tokens per request,
    #: requests (the first a warm-up), each one's deadline, the longest step over the measured
    #: one, the margin, and the least stall bound.
    calibrate_tokens: int = 512
    calibrate_runs: int = 3
    calibrate_s: int = 60
    growth: float = 1.0
    margin: float = 1.5
    floor_s: int = 10
    #: Batches in flight (the pipeline's size): a measured step x growth x this beyond
    #: `stall_s`, the engine's own step timeout, refuses the node.
    in_flight: int = 1
    #: The linear path the plan's bounds assume: `onednn` refuses a leader whose vLLM fell back.
    path: Literal["onednn", "fallback"] = "onednn"
    #: Token ids the measurement draws from lie below this (the model's vocabulary).
    vocab_size: int = 262_144


def check_args(
    probes: ProbeSpec,
    role: Literal["leader", "worker"],
    port: int,
    model: str,
    host: str | None = None,
    state_file: str = STATE_FILE,
    startup: bool = False,
    warnings_log: str = WARNINGS_LOG,
    announce: str = ANNOUNCE_TO,
    stop_pid: int | None = None,
    self_metrics: str = SELF_METRICS_FILE,
) -> list[str]:
    """The check's `key=value` arguments (`programs/liveness.py`). `host` None means the
    leader's own loopback on a leader and the leader's address from `LWS_LEADER_ADDRESS` on a
    worker. With `startup`, a leader's check can also run its startup phase: check the linear
    path in `warnings_log` and measure the step, writing one line to `announce` and the gauges
    to `self_metrics`."""
    args = [f"role={role}", f"port={port}", f"request-s={probes.request_s}"]
    if host is not None:
        args.append(f"host={host}")
    elif role == "worker":
        args.append(f"host-env={LEADER_ADDRESS_ENV}")
    if role == "leader":
        args += [
            f"model={model}",
            f"stall-s={probes.stall_s}",
            f"state={state_file}",
            f"idle-s={probes.idle_check_s}",
        ]
    # Each check ends within its probe's `timeoutSeconds` (`liveness_probe`, and
    # `leader_startup_probe` for the startup phase), less a second for the HTTP round trip.
    args.append(f"timeout-s={probes.timeout_s - 1}")
    if role == "leader" and startup:
        args += [
            f"path={probes.path}",
            f"log={warnings_log}",
            f"announce={announce}",
            f"self-metrics={self_metrics}",
            f"calibrate-tokens={probes.calibrate_tokens}",
            f"runs={probes.calibrate_runs}",
            f"calibrate-s={probes.calibrate_s}",
            f"growth={probes.growth}",
            f"margin={probes.margin}",
            f"floor-s={probes.floor_s}",
            f"in-flight={probes.in_flight}",
            f"vocab={probes.vocab_size}",
            *([f"stop-pid={stop_pid}"] if stop_pid is not None else []),
            f"startup-timeout-s={leader_startup_timeout(probes) - 1}",
        ]
    return args


def probe_command(
    probes: ProbeSpec,
    role: Literal["leader", "worker"],
    port: int,
    model: str,
    phase: Literal["live", "startup"] = "live",
    **check: Any,
) -> list[str]:
    """One check as a command (`liveness.py check`, exit 0 or 1): what `GET /live` or
    `GET /startup` of the pod's check process runs, for the rehearsal and the tests, which run
    the checkout's file (`programs.local`). `check` takes `check_args`' keywords."""
    startup = phase == "startup"
    args = check_args(probes, role, port, model, startup=startup, **check)
    return [
        "python3",
        f"{PROGRAMS_MOUNT}/liveness.py",
        "check",
        *args,
        *(["phase=startup"] * startup),
    ]


def engine_command(role: Literal["leader", "worker"], checks: list[str]) -> list[str]:
    """The engine container's command (`programs/engine.sh`): start the check process with
    `checks` (`check_args`), then become vLLM with the container's args."""
    entry = f"{PROGRAMS_MOUNT}/engine.sh"
    return ["/bin/sh", entry, role, f"listen={LIVENESS_PORT}", *checks, "--"]


def _http_probe(path: str) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": LIVENESS_PORT}}


def liveness_probe(probes: ProbeSpec) -> dict[str, Any]:
    """One check per period through the container's check process; a run the kubelet gives up
    on (`timeoutSeconds`) fails, as any answer but 2xx/3xx (pkg/probe/http/http.go)."""
    return {
        **_http_probe("/live"),
        "periodSeconds": probes.period_s,
        "failureThreshold": probes.failures,
        "timeoutSeconds": probes.timeout_s,
    }


#: Period of a startup probe: a cold start is minutes long, so ten seconds late is nothing.
STARTUP_PERIOD_S = 10
#: Room in a leader's startup run beyond its requests' deadlines: the HTTP round trip, the log
#: read (a run the kubelet gave up on finishes before the next starts, which then reads its
#: state).
STARTUP_SLACK_S = 15


def startup_probe(probes: ProbeSpec, startup_timeout_s: int, path: str = "/live") -> dict[str, Any]:
    """The same check, patient through a cold start (whole periods within `startup_timeout_s`,
    at least one); liveness begins only once it passed. Each run may take as long as a liveness
    run, so its own HTTP deadline always ends it first."""
    return {
        **_http_probe(path),
        "periodSeconds": STARTUP_PERIOD_S,
        "failureThreshold": max(1, startup_timeout_s // STARTUP_PERIOD_S),
        "timeoutSeconds": probes.timeout_s,
    }


def leader_startup_timeout(probes: ProbeSpec) -> int:
    """A leader's startup run: a liveness run's time, and the measurement's requests'."""
    return probes.timeout_s + probes.calibrate_runs * probes.calibrate_s + STARTUP_SLACK_S


def leader_startup_probe(probes: ProbeSpec, startup_timeout_s: int) -> dict[str, Any]:
    """The leader's startup probe (`GET /startup`): `startup_probe` with room in each run for
    the start-up measurement's requests, each bounded by its own deadline."""
    probe = startup_probe(probes, startup_timeout_s, "/startup")
    probe["timeoutSeconds"] = leader_startup_timeout(probes)
    return probe


def engine_logging_config(warnings_log: str = WARNINGS_LOG) -> dict[str, Any]:
    """vLLM's logging config (`VLLM_LOGGING_CONFIG_PATH`, read by vLLM 0.31 `logger.py`
    `_configure_vllm_root_logger`, which then uses it in place of its default): its default
    stdout handler and format, plus its warnings in `warnings_log`, where the startup probe
    looks for the linear fallback. A config file replaces vLLM's whole default, so the stdout
    handler repeats it (`DEFAULT_LOGGING_CONFIG`, `_FORMAT`, `_DATE_FORMAT`)."""
    formatter = {
        "()": "vllm.logging_utils.NewLineFormatter",
        "datefmt": "%m-%d %H:%M:%S",
        "format": "(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s "
        "[%(fileinfo)s:%(lineno)d] %(message)s",
        "log_level": "INFO",
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"vllm": formatter},
        "handlers": {
            "vllm": {
                "class": "logging.StreamHandler",
                "formatter": "vllm",
                "level": "INFO",
                "stream": "ext://sys.stdout",
            },
            # A plain file: the API server and the engine processes each open it, and a
            # rotating handler in one would leave the others writing to the rotated file.
            "warnings": {
                "class": "logging.FileHandler",
                "formatter": "vllm",
                "level": "WARNING",
                "filename": warnings_log,
            },
            # The same file, appended to (every process opens it in append mode): the dispatch
            # module's debug lines, which the warnings handler leaves out (its warnings land
            # there twice, through both).
            "dispatch": {
                "class": "logging.FileHandler",
                "formatter": "vllm",
                "level": "DEBUG",
                "filename": warnings_log,
            },
        },
        "loggers": {
            "vllm": {"handlers": ["vllm", "warnings"], "level": "INFO", "propagate": False},
            # The linear dispatch's debug lines, to the warnings file only: the stdout handler
            # drops them (its level), the warnings handler too, so this one writes them.
            DISPATCH_LOGGER: {"handlers": ["dispatch"], "level": "DEBUG", "propagate": True},
        },
    }


def engine_timeout_env(probes: ProbeSpec) -> dict[str, str]:
    """The engine's own step bound (every rank gets it; only the leader's executor waits)."""
    return {"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": str(probes.stall_s)}
