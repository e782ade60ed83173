"""The ranks' liveness: a probe program that proves the pipeline works, and the engine's own
bound on a step. Pure; the pod templates run exactly this, and the fault rehearsal runs the same
command against the group on loopback.

Why `/health` is not enough: vLLM 0.31's `/health` answers 503 only for an engine it already
knows is dead (`entrypoints/serve/instrumentator/health.py`). When a headless rank hangs or
vanishes, the leader's engine waits for the last stage's reply and `/health` stays 200.

The leader's probe (`PROBE_SCRIPT`, role `leader`), one run per period:
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

The leader's startup probe (the same program, `phase=startup`) runs before the pod is Ready, so no
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
   as Prometheus gauges in a small text file (`SELF_METRICS_FILE`, `SELF_METRICS`), which the
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

#: Where the leader's probe keeps the last progress it saw (the pod's /tmp emptyDir).
STATE_FILE = "/tmp/gemma-liveness.json"
#: The environment variable holding the leader's address on a worker (injected by LWS).
LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
#: The lines vLLM 0.31 logs when a bf16 linear takes torch's matmul (`model_executor/layers/
#: utils.py` `dispatch_cpu_unquantized_gemm`): the warning when oneDNN refuses the weight, the
#: debug line on every fallback, oneDNN refused or absent from the build.
FALLBACK_LINE = "Failed to create oneDNN linear"
FALLBACK_DISPATCH = "CPU unquantized GEMM dispatch: using torch.nn.functional.linear (fallback)"
#: The module whose dispatch lines (debug, once per process) the warnings file also takes.
DISPATCH_LOGGER = "vllm.model_executor.layers.utils"
#: Where the leader's vLLM writes its warnings (besides its stdout), and its logging config.
WARNINGS_LOG = "/tmp/vllm-warnings.log"
LOGGING_CONFIG_PATH = "/tmp/vllm-logging.json"
#: Where the startup probe writes its measurement as Prometheus gauges (the pod's /tmp, which the
#: gatekeeper mounts read-only), and the gauges' names and help texts, in the file's order.
SELF_METRICS_FILE = "/tmp/gemma-self.prom"
MEASURED_STEP = "gemma_measured_step_seconds"
STALL_BOUND = "gemma_liveness_stall_bound_seconds"
PREFILL_FALLBACK = "gemma_prefill_fallback"
SELF_METRICS: dict[str, str] = {
    MEASURED_STEP: "Slowest of the leader's start-up one-token prefills after the warm-up.",
    STALL_BOUND: "The liveness stall bound the leader took from its measured step.",
    PREFILL_FALLBACK: "1 if vLLM fell back to torch's linear (no oneDNN for this CPU), else 0.",
}
#: Where the startup probe writes its one line: the container's main process's stdout, which is
#: the container's log (an exec probe's own output reaches only the kubelet's events).
ANNOUNCE_TO = "/proc/1/fd/1"

PROBE_SCRIPT = (
    r"""
import json, math, os, signal, sys, time, urllib.request

opts = dict(arg.split("=", 1) for arg in sys.argv[1:])
GAUGES = @GAUGES@
host = os.environ.get(opts.get("host-env", ""), "") or opts.get("host", "127.0.0.1")
base = f"http://{host}:{opts['port']}"
deadline = float(opts["request-s"])


def verdict(ok, text):
    print(("ok: " if ok else "FAIL: ") + text, flush=True)
    sys.exit(0 if ok else 1)


def announce(text):
    # One line on the container's log; the probe's own output is the kubelet's only.
    try:
        with open(opts["announce"], "a") as handle:
            handle.write("gemma-graviton: " + text + "\n")
    except (KeyError, OSError):
        pass


def call(path, body=None, seconds=None):
    headers = {"Content-Type": "application/json"}
    if body is not None and os.environ.get("VLLM_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["VLLM_API_KEY"]
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=seconds or deadline) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except Exception as error:
        return None, str(error).encode()


def save(state):
    # Whole or not at all: a run the kubelet kills mid-write leaves the last state.
    with open(opts["state"] + ".new", "w") as handle:
        json.dump(state, handle)
    os.replace(opts["state"] + ".new", opts["state"])


def export(step, stall, fell_back):
    # The record the gatekeeper serves to the collector, as Prometheus text (exposition format
    # 0.0.4); whole or not at all, like the state. A gauge not measured is left out.
    if not opts.get("self-metrics"):
        return
    lines = []
    for (name, about), value in zip(GAUGES.items(), (step, stall, int(fell_back))):
        if value is not None:
            lines += [f"# HELP {name} {about}", f"# TYPE {name} gauge", f"{name} {value}"]
    with open(opts["self-metrics"] + ".new", "w") as handle:
        handle.write("\n".join(lines) + "\n")
    os.replace(opts["self-metrics"] + ".new", opts["self-metrics"])


def refuse(state, line):
    # Final: said once on the container's log, kept, and the engine stopped, so the kubelet
    # restarts the container now (a failing startup probe would wait out its whole threshold).
    if "refused" not in state:
        announce(line)
        state["refused"] = line
        save(state)
        if opts.get("stop-pid"):
            try:
                os.kill(int(opts["stop-pid"]), signal.SIGTERM)
            except OSError:
                pass
    verdict(False, line)


status, text = call("/health")
if status is None:
    verdict(False, f"{base}/health: {text.decode()}")
if status != 200:
    verdict(False, f"{base}/health answered {status}")
if opts["role"] == "worker":
    verdict(True, f"leader {base}/health 200")

try:
    with open(opts["state"]) as handle:
        seen = json.load(handle)
except (OSError, ValueError):
    seen = {}
ceiling = int(opts["stall-s"])

if opts.get("phase") == "startup":
    if "refused" in seen:
        verdict(False, seen["refused"])
    fell_back = False
    if opts.get("log"):
        try:
            with open(opts["log"], errors="replace") as handle:
                text = handle.read()
            fell_back = any(line in text for line in @FALLBACK_LINES@)
        except OSError:
            pass
    if fell_back and opts.get("path") == "onednn":
        export(None, None, fell_back)
        refuse(seen, "vLLM fell back to torch's linear (its log: '@FALLBACK@'); this plan's "
               "timeouts assume oneDNN, so the leader does not start: use an image whose "
               "oneDNN supports this CPU, or set prefillPath=fallback")
    if "step_s" not in seen:
        tokens, runs = int(opts["calibrate-tokens"]), int(opts["runs"])
        # Ids above the first ones (special tokens) and below the vocabulary, which vLLM
        # refuses ids beyond ("Token id ... is out of vocabulary").
        vocab = int(opts["vocab"])
        low = min(1000, vocab // 4)
        span = max(1, vocab - low)
        times = []
        for run in range(runs):
            prompt = [low + (run * tokens + i * 7919) % span for i in range(tokens)]
            # The warm-up samples: vLLM builds its sampler for a lone sampled request on first
            # use, in a step its timeout bounds (see above).
            body = {"model": opts["model"], "prompt": prompt, "max_tokens": 1,
                    "temperature": 0 if run else 1}
            began = time.monotonic()
            status, _ = call("/v1/completions", body, float(opts["calibrate-s"]))
            took = time.monotonic() - began
            if status != 200:
                verdict(False, f"measuring the step: a {tokens}-token prompt answered {status} "
                        f"after {took:.1f} s (bound {opts['calibrate-s']} s)")
            times.append(took)
        step = max(times[1:] or times)
        growth, in_flight = float(opts["growth"]), int(opts["in-flight"])
        margin = float(opts["margin"])
        if step * growth * margin * in_flight > ceiling:
            export(round(step, 3), None, fell_back)
            refuse(seen, f"this node's step is {step:.1f} s for {tokens} prompt tokens: x {growth} "
                   f"for the longest context x {margin} x {in_flight} in flight is beyond the "
                   f"engine's {ceiling} s step timeout, which would kill healthy long prompts; "
                   "the plan's prefill range is wrong for this node (a larger type, a shorter "
                   "`maxModelLen` or `prefillPath` fallback lengthens the bounds)")
        stall = min(ceiling, max(int(opts["floor-s"]),
                                 math.ceil(step * growth * margin)))
        seen.update(step_s=round(step, 3), stall_s=stall, runs_s=[round(t, 3) for t in times],
                    fell_back=fell_back, proven=time.time())
        save(seen)
        export(seen["step_s"], stall, fell_back)
        announce(f"measured step {step:.2f} s ({tokens} prompt tokens, runs "
                 + ", ".join(f"{t:.2f}" for t in times) + f" s); liveness stall bound {stall} s "
                 f"(x {opts['growth']} x {opts['margin']}, within {opts['floor-s']}-{ceiling} s)")
    verdict(True, f"step {seen['step_s']:.2f} s measured; stall bound {seen['stall_s']} s")

stall_bound = float(seen.get("stall_s", ceiling))
status, text = call("/metrics")
if status != 200:
    verdict(False, f"/metrics answered {status}")
sums = {}
for line in text.decode().splitlines():
    name = line.split("{")[0].split(" ")[0]
    if name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                "vllm:generation_tokens_total", "vllm:prompt_tokens_total",
                "vllm:kv_cache_usage_perc"):
        sums[name] = sums.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
queued = sums.get("vllm:num_requests_running", 0) + sums.get("vllm:num_requests_waiting", 0)
progress = [sums.get(k, 0.0) for k in sorted(sums) if not k.startswith("vllm:num_requests")]
now = time.time()
if seen.get("progress") != progress:
    # Tokens moved since the last run: the pipeline works (the first run proves nothing).
    proven = now if "progress" in seen else 0.0
    seen.update(progress=progress, since=now, proven=max(proven, seen.get("proven", 0.0)))
    save(seen)

if queued:
    if seen.pop("idle_waiting_since", None) is not None:
        save(seen)  # the engine answered for itself: a later idle wait starts afresh
    quiet = now - seen["since"]
    if quiet > stall_bound:
        verdict(False, f"{queued:.0f} requests in the engine and no progress for {quiet:.0f} s "
                f"(bound {stall_bound:.0f} s)")
    verdict(True, f"{queued:.0f} requests in the engine, progress {quiet:.0f} s ago")

# Idle: one token through every stage proves the pipeline, at most every idle-s seconds (a
# run that fails proves nothing, so the next one asks again).
ago = now - seen.get("proven", 0.0)
if ago < float(opts.get("idle-s", "0")):
    verdict(True, f"idle; tokens came out of the last stage {ago:.0f} s ago")
began = time.monotonic()
body = {"model": opts["model"], "prompt": "ping", "max_tokens": 1, "temperature": 0}
status, text = call("/v1/completions", body)
took = time.monotonic() - began
if status is None:
    # No answer in time. vLLM publishes its running and waiting counts when a step ends, so a
    # request whose first step is still running looks idle, and the proof waits behind that
    # step: a slow step, not a broken pipeline, until the wait outlasts the stall bound.
    waiting = seen.setdefault("idle_waiting_since", now)
    save(seen)
    if now - waiting <= stall_bound:
        verdict(True, f"idle; no token after {took:.1f} s, waiting {now - waiting:.0f} s of "
                f"the {stall_bound:.0f} s stall bound (a step may be running)")
    verdict(False, f"idle; no token for {now - waiting:.0f} s, beyond the {stall_bound:.0f} s "
            "stall bound")
if status != 200:
    verdict(False, f"idle; a one-token generation answered {status} after {took:.1f} s")
seen.pop("idle_waiting_since", None)
seen["proven"] = time.time()
save(seen)
verdict(True, f"idle; one token through every stage in {took:.2f} s")
""".replace("@FALLBACK@", FALLBACK_LINE)
    .replace("@GAUGES@", repr(SELF_METRICS))
    .replace("@FALLBACK_LINES@", repr((FALLBACK_LINE, FALLBACK_DISPATCH)))
)


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


def probe_command(
    probes: ProbeSpec,
    role: Literal["leader", "worker"],
    port: int,
    model: str,
    host: str | None = None,
    state_file: str = STATE_FILE,
    phase: Literal["live", "startup"] = "live",
    warnings_log: str = WARNINGS_LOG,
    announce: str = ANNOUNCE_TO,
    stop_pid: int | None = None,
    self_metrics: str = SELF_METRICS_FILE,
) -> list[str]:
    """The exec probe's argv. `host` None means the leader's own loopback on a leader and the
    leader's address from `LWS_LEADER_ADDRESS` on a worker. A leader's `startup` phase checks the
    linear path in `warnings_log` and measures the step, writing one line to `announce` and the
    gauges to `self_metrics`."""
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
    if role == "leader" and phase == "startup":
        args += [
            "phase=startup",
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
        ]
    return ["python3", "-c", PROBE_SCRIPT, *args]


def liveness_probe(command: list[str], probes: ProbeSpec) -> dict[str, Any]:
    return {
        "exec": {"command": command},
        "periodSeconds": probes.period_s,
        "failureThreshold": probes.failures,
        "timeoutSeconds": probes.timeout_s,
    }


#: Period of a startup probe: a cold start is minutes long, so ten seconds late is nothing.
STARTUP_PERIOD_S = 10
#: Room in a leader's startup run beyond its requests' deadlines: the exec, Python's start, the
#: log read (containerd kills an exec that outlives `timeoutSeconds`, and the next run measures
#: again from the start).
STARTUP_SLACK_S = 15


def startup_probe(command: list[str], probes: ProbeSpec, startup_timeout_s: int) -> dict[str, Any]:
    """The same check, patient through a cold start (whole periods within `startup_timeout_s`,
    at least one); liveness begins only once it passed. Each run may take as long as a liveness
    run, so its own HTTP deadline always ends it first."""
    return {
        "exec": {"command": command},
        "periodSeconds": STARTUP_PERIOD_S,
        "failureThreshold": max(1, startup_timeout_s // STARTUP_PERIOD_S),
        "timeoutSeconds": probes.timeout_s,
    }


def leader_startup_probe(
    command: list[str], probes: ProbeSpec, startup_timeout_s: int
) -> dict[str, Any]:
    """The leader's startup probe: `startup_probe` with room in each run for the start-up
    measurement's requests, each bounded by its own deadline."""
    probe = startup_probe(command, probes, startup_timeout_s)
    probe["timeoutSeconds"] = (
        probes.timeout_s + probes.calibrate_runs * probes.calibrate_s + STARTUP_SLACK_S
    )
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
