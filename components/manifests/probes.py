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
   last rank's sampler) with a short deadline.
The last progress seen is kept in a small state file (`/tmp`, the pod's writable emptyDir).

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

PROBE_SCRIPT = r"""
import json, os, sys, time, urllib.request

opts = dict(arg.split("=", 1) for arg in sys.argv[1:])
host = os.environ.get(opts.get("host-env", ""), "") or opts.get("host", "127.0.0.1")
base = f"http://{host}:{opts['port']}"
deadline = float(opts["request-s"])


def verdict(ok, text):
    print(("ok: " if ok else "FAIL: ") + text, flush=True)
    sys.exit(0 if ok else 1)


def call(path, body=None):
    headers = {"Content-Type": "application/json"}
    if body is not None and os.environ.get("VLLM_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["VLLM_API_KEY"]
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=deadline) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except Exception as error:
        return None, str(error).encode()


status, text = call("/health")
if status is None:
    verdict(False, f"{base}/health: {text.decode()}")
if status != 200:
    verdict(False, f"{base}/health answered {status}")
if opts["role"] == "worker":
    verdict(True, f"leader {base}/health 200")

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
try:
    with open(opts["state"]) as handle:
        seen = json.load(handle)
except (OSError, ValueError):
    seen = {}
if seen.get("progress") != progress:
    # Tokens moved since the last run: the pipeline works (the first run proves nothing).
    proven = now if seen else 0.0
    seen = {"progress": progress, "since": now, "proven": max(proven, seen.get("proven", 0.0))}
    with open(opts["state"], "w") as handle:
        json.dump(seen, handle)

if queued:
    quiet = now - seen["since"]
    if quiet > float(opts["stall-s"]):
        verdict(False, f"{queued:.0f} requests in the engine and no progress for {quiet:.0f} s")
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
if status != 200:
    verdict(False, f"idle; a one-token generation answered {status} after {took:.1f} s")
seen["proven"] = time.time()
with open(opts["state"], "w") as handle:
    json.dump(seen, handle)
verdict(True, f"idle; one token through every stage in {took:.2f} s")
"""


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


def probe_command(
    probes: ProbeSpec,
    role: Literal["leader", "worker"],
    port: int,
    model: str,
    host: str | None = None,
    state_file: str = STATE_FILE,
) -> list[str]:
    """The exec probe's argv. `host` None means the leader's own loopback on a leader and the
    leader's address from `LWS_LEADER_ADDRESS` on a worker."""
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


def engine_timeout_env(probes: ProbeSpec) -> dict[str, str]:
    """The engine's own step bound (every rank gets it; only the leader's executor waits)."""
    return {"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": str(probes.stall_s)}
