"""The ranks' liveness and startup check (`components.manifests.probes` says what it proves and
why). Standard library only: it runs in the vLLM image's Python, from the group's programs
ConfigMap.

    liveness.py serve listen=PORT KEY=VALUE...   one process per container, started with it; the
                                                 kubelet's httpGet asks GET /live or /startup
                                                 and each request runs one check
    liveness.py check KEY=VALUE...               one check; exit 0 (pass) or 1 (fail)

A check's keys: role (leader|worker), port, request-s, host or host-env, timeout-s; a leader's
model, stall-s, state, idle-s; its startup phase's phase=startup, path, log, announce,
self-metrics, calibrate-tokens, runs, calibrate-s, growth, margin, floor-s, in-flight, vocab,
stop-pid, startup-timeout-s. A check ends within its probe's timeout (`timeout-s`, or
`startup-timeout-s` for the startup phase), as an exec probe's run was stopped at it: the next
period's check then starts at once, never behind one the kubelet already gave up on.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import time
import urllib.error
import urllib.request

#: The lines vLLM 0.31 logs when a bf16 linear takes torch's matmul (the prefill probe's too).
FALLBACK_LINE = "Failed to create oneDNN linear"
FALLBACK_DISPATCH = "CPU unquantized GEMM dispatch: using torch.nn.functional.linear (fallback)"
#: The leader's record, as Prometheus gauges, in the file's order (the collector's too).
GAUGES = {
    "gemma_measured_step_seconds": (
        "Slowest of the leader's start-up one-token prefills after the warm-up."
    ),
    "gemma_liveness_stall_bound_seconds": (
        "The liveness stall bound the leader took from its measured step."
    ),
    "gemma_prefill_fallback": (
        "1 if vLLM fell back to torch's linear (no oneDNN for this CPU), else 0."
    ),
}
#: The metrics the leader's check reads: the requests in the engine, then its progress.
QUEUE = ("vllm:num_requests_running", "vllm:num_requests_waiting")
PROGRESS = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:kv_cache_usage_perc")


#: vLLM's /health answers not 200 in a row that fail `/ready`: the kubelet fails readiness at
#: the first failed probe (`components.manifests.pods`), so a drain shows within one period.
READY_FAILURES = 3


class Verdict(Exception):
    """A check's end: pass or fail, and its one line. The kubelet's event shows only the status
    (kubernetes v1.35 pkg/probe/http/http.go `DoHTTPProbe` leaves the body out), so `serve`
    writes a failing line, and the pass after it, on the container's log."""

    def __init__(self, ok: bool, text: str) -> None:
        super().__init__(text)
        self.ok, self.text = ok, text


def verdict(ok: bool, text: str) -> None:
    raise Verdict(ok, text)


class Check:
    """One check against a leader, from the probe's options."""

    def __init__(self, opts: dict[str, str]) -> None:
        self.opts = opts
        host = os.environ.get(opts.get("host-env", ""), "") or opts.get("host", "127.0.0.1")
        self.base = f"http://{host}:{opts['port']}"
        self.deadline = float(opts["request-s"])
        budget = opts.get("startup-timeout-s" if opts.get("phase") == "startup" else "timeout-s")
        self.ends = time.monotonic() + float(budget) if budget else math.inf

    def announce(self, text: str) -> None:
        # One line on the container's log; a probe's own answer reaches only the kubelet.
        try:
            with open(self.opts["announce"], "a") as handle:
                handle.write("gemma-graviton: " + text + "\n")
        except (KeyError, OSError):
            pass

    def call(
        self, path: str, body: dict | None = None, seconds: float | None = None
    ) -> tuple[int | None, bytes]:
        headers = {"Content-Type": "application/json"}
        if body is not None and os.environ.get("VLLM_API_KEY"):
            headers["Authorization"] = "Bearer " + os.environ["VLLM_API_KEY"]
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, headers=headers)
        left = self.ends - time.monotonic()
        if left <= 0:
            return None, b"out of time: the probe's timeout has passed"
        try:
            wait = min(seconds or self.deadline, left)
            with urllib.request.urlopen(request, timeout=wait) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, b""
        except Exception as error:
            return None, str(error).encode()

    def save(self, state: dict) -> None:
        # Whole or not at all: a run stopped mid-write leaves the last state.
        with open(self.opts["state"] + ".new", "w") as handle:
            json.dump(state, handle)
        os.replace(self.opts["state"] + ".new", self.opts["state"])

    def export(self, step: float | None, stall: int | None, fell_back: bool) -> None:
        # The record the gatekeeper serves to the collector, as Prometheus text (exposition
        # format 0.0.4); whole or not at all, like the state. A gauge not measured is left out.
        target = self.opts.get("self-metrics")
        if not target:
            return
        lines = []
        for (name, about), value in zip(GAUGES.items(), (step, stall, int(fell_back)), strict=True):
            if value is not None:
                lines += [f"# HELP {name} {about}", f"# TYPE {name} gauge", f"{name} {value}"]
        with open(target + ".new", "w") as handle:
            handle.write("\n".join(lines) + "\n")
        os.replace(target + ".new", target)

    def refuse(self, state: dict, line: str) -> None:
        # Final: said once on the container's log, kept, and the engine stopped, so the kubelet
        # restarts the container now (a failing startup probe would wait out its threshold).
        if "refused" not in state:
            self.announce(line)
            state["refused"] = line
            self.save(state)
            if self.opts.get("stop-pid"):
                with contextlib.suppress(OSError):
                    os.kill(int(self.opts["stop-pid"]), signal.SIGTERM)
        verdict(False, line)

    def run(self) -> None:
        status, text = self.call("/health")
        if status is None:
            verdict(False, f"{self.base}/health: {text.decode()}")
        if status != 200:
            verdict(False, f"{self.base}/health answered {status}")
        if self.opts["role"] == "worker":
            verdict(True, f"leader {self.base}/health 200")
        try:
            with open(self.opts["state"]) as handle:
                seen = json.load(handle)
        except (OSError, ValueError):
            seen = {}
        if self.opts.get("phase") == "startup":
            self.startup(seen)
        self.live(seen)

    def startup(self, seen: dict) -> None:
        opts, ceiling = self.opts, int(self.opts["stall-s"])
        if "refused" in seen:
            verdict(False, seen["refused"])
        fell_back = False
        if opts.get("log"):
            try:
                with open(opts["log"], errors="replace") as handle:
                    text = handle.read()
                fell_back = FALLBACK_LINE in text or FALLBACK_DISPATCH in text
            except OSError:
                pass
        if fell_back and opts.get("path") == "onednn":
            self.export(None, None, fell_back)
            self.refuse(
                seen,
                f"vLLM fell back to torch's linear (its log: '{FALLBACK_LINE}'); this plan's "
                "timeouts assume oneDNN, so the leader does not start: use an image whose "
                "oneDNN supports this CPU, or set prefillPath=fallback",
            )
        if "step_s" not in seen:
            self.measure(seen, fell_back, ceiling)
        verdict(True, f"step {seen['step_s']:.2f} s measured; stall bound {seen['stall_s']} s")

    def measure(self, seen: dict, fell_back: bool, ceiling: int) -> None:
        opts = self.opts
        tokens, runs = int(opts["calibrate-tokens"]), int(opts["runs"])
        # Ids above the first ones (special tokens) and below the vocabulary, which vLLM
        # refuses ids beyond ("Token id ... is out of vocabulary").
        vocab = int(opts["vocab"])
        low = min(1000, vocab // 4)
        span = max(1, vocab - low)
        times = []
        for run in range(runs):
            prompt = [low + (run * tokens + i * 7919) % span for i in range(tokens)]
            # The warm-up samples: vLLM builds its sampler for a lone sampled request on
            # first use, in a step its timeout bounds (`probes`).
            body = {
                "model": opts["model"],
                "prompt": prompt,
                "max_tokens": 1,
                "temperature": 0 if run else 1,
            }
            began = time.monotonic()
            status, _ = self.call("/v1/completions", body, float(opts["calibrate-s"]))
            took = time.monotonic() - began
            if status != 200:
                verdict(
                    False,
                    f"measuring the step: a {tokens}-token prompt answered {status} after "
                    f"{took:.1f} s (bound {opts['calibrate-s']} s)",
                )
            times.append(took)
        step = max(times[1:] or times)
        growth, in_flight = float(opts["growth"]), int(opts["in-flight"])
        margin = float(opts["margin"])
        if step * growth * margin * in_flight > ceiling:
            self.export(round(step, 3), None, fell_back)
            self.refuse(
                seen,
                f"this node's step is {step:.1f} s for {tokens} prompt tokens: x {growth} "
                f"for the longest context x {margin} x {in_flight} in flight is beyond the "
                f"engine's {ceiling} s step timeout, which would kill healthy long prompts; "
                "the plan's prefill range is wrong for this node (a larger type, a shorter "
                "`maxModelLen` or `prefillPath` fallback lengthens the bounds)",
            )
        stall = stall_bound(step, growth, margin, int(opts["floor-s"]), ceiling)
        seen.update(
            step_s=round(step, 3),
            stall_s=stall,
            runs_s=[round(t, 3) for t in times],
            fell_back=fell_back,
            proven=time.time(),
        )
        self.save(seen)
        self.export(seen["step_s"], stall, fell_back)
        self.announce(
            f"measured step {step:.2f} s ({tokens} prompt tokens, runs "
            + ", ".join(f"{t:.2f}" for t in times)
            + f" s); liveness stall bound {stall} s (x {opts['growth']} x {opts['margin']}, "
            f"within {opts['floor-s']}-{ceiling} s)"
        )

    def live(self, seen: dict) -> None:
        stall = float(seen.get("stall_s", int(self.opts["stall-s"])))
        status, text = self.call("/metrics")
        if status != 200:
            verdict(False, f"/metrics answered {status}")
        queued, progress = read_metrics(text.decode())
        now = time.time()
        if seen.get("progress") != progress:
            # Tokens moved since the last run: the pipeline works (the first run proves nothing).
            proven = now if "progress" in seen else 0.0
            seen.update(progress=progress, since=now, proven=max(proven, seen.get("proven", 0.0)))
            self.save(seen)
        if queued:
            if seen.pop("idle_waiting_since", None) is not None:
                self.save(seen)  # the engine answered for itself: a later idle wait starts afresh
            quiet = now - seen["since"]
            if quiet > stall:
                verdict(
                    False,
                    f"{queued:.0f} requests in the engine and no progress for {quiet:.0f} s "
                    f"(bound {stall:.0f} s)",
                )
            verdict(True, f"{queued:.0f} requests in the engine, progress {quiet:.0f} s ago")
        self.idle(seen, now, stall)

    def idle(self, seen: dict, now: float, stall: float) -> None:
        # One token through every stage proves the pipeline, at most every idle-s seconds (a
        # run that fails proves nothing, so the next one asks again).
        ago = now - seen.get("proven", 0.0)
        if ago < float(self.opts.get("idle-s", "0")):
            verdict(True, f"idle; tokens came out of the last stage {ago:.0f} s ago")
        began = time.monotonic()
        body = {"model": self.opts["model"], "prompt": "ping", "max_tokens": 1, "temperature": 0}
        status, _ = self.call("/v1/completions", body)
        took = time.monotonic() - began
        if status is None:
            # No answer in time. vLLM publishes its running and waiting counts when a step
            # ends, so a request whose first step is still running looks idle and the proof
            # waits behind that step: a slow step, not a broken pipeline, until the wait
            # outlasts the stall bound.
            waiting = seen.setdefault("idle_waiting_since", now)
            self.save(seen)
            if now - waiting <= stall:
                verdict(
                    True,
                    f"idle; no token after {took:.1f} s, waiting {now - waiting:.0f} s of "
                    f"the {stall:.0f} s stall bound (a step may be running)",
                )
            verdict(
                False,
                f"idle; no token for {now - waiting:.0f} s, beyond the {stall:.0f} s stall bound",
            )
        if status != 200:
            verdict(False, f"idle; a one-token generation answered {status} after {took:.1f} s")
        seen.pop("idle_waiting_since", None)
        seen["proven"] = time.time()
        self.save(seen)
        verdict(True, f"idle; one token through every stage in {took:.2f} s")


def stall_bound(step: float, growth: float, margin: float, floor: int, ceiling: int) -> int:
    """The stall bound a leader takes from its measured step (`infra.plan.liveness.
    measured_stall_seconds`, held equal by a test)."""
    return min(ceiling, max(floor, math.ceil(step * growth * margin)))


def read_metrics(text: str) -> tuple[float, list[float]]:
    """Requests in the engine, and the progress counters in name order, summed over labels."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name in QUEUE or name in PROGRESS:
            sums[name] = sums.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    queued = sum(sums.get(name, 0.0) for name in QUEUE)
    return queued, [sums[name] for name in sorted(sums) if name in PROGRESS]


def check(opts: dict[str, str]) -> tuple[bool, str]:
    """One check: whether it passed, and its line ("ok: ..." or "FAIL: ...")."""
    try:
        Check(opts).run()
    except Verdict as end:
        return end.ok, ("ok: " if end.ok else "FAIL: ") + end.text
    except Exception as error:  # an answer the check cannot read fails it, with the reason
        return False, f"FAIL: {error!r}"
    return False, "FAIL: no verdict"


def serve(opts: dict[str, str]) -> None:
    """Answer the kubelet's httpGet probes: GET /live runs a liveness check, GET /startup the
    startup phase; 200 with the check's line, or 503. One check at a time (the kubelet never
    overlaps a probe's runs; a run it gave up on finishes before the next starts). GET /ready
    is vLLM's /health, failed after `READY_FAILURES` in a row, until the engine's preStop
    (`drain.py`) POSTs /drain from inside the pod, then 503 at once for the rest of the
    container's life: a leader behind a door leaves its Service within one probe period."""
    # Here, not at the top: a one-off `check` does not pay for importing them.
    import http.server
    import threading

    listen = opts.pop("listen")
    lock = threading.Lock()
    failing: set[str] = set()
    draining = threading.Event()
    unhealthy = [0]  # vLLM's /health answers not 200 in a row

    class Probe(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            # Only the pod's own preStop: the kubelet and other pods reach this port too.
            if self.path != "/drain" or self.client_address[0] != "127.0.0.1":
                self.send_error(404)
                return
            draining.set()
            print("gemma-graviton: draining: /ready fails from now on", file=sys.stderr)
            self.answer(True, "draining")

        def do_GET(self) -> None:
            if self.path == "/ready":
                if draining.is_set():
                    self.answer(False, "draining: the pod is stopping")
                    return
                status, _ = Check(opts).call("/health", seconds=4)
                unhealthy[0] = 0 if status == 200 else unhealthy[0] + 1
                ok = unhealthy[0] < READY_FAILURES
                self.answer(ok, f"vLLM's /health: {status or 'no answer'}")
                return
            phases = {"/live": "live", "/startup": "startup"}
            if self.path not in phases:
                self.send_error(404)
                return
            with lock:
                ok, line = check({**opts, "phase": phases[self.path]})
                if not ok or self.path in failing:
                    # Why a probe failed: the kubelet's event says only "statuscode: 503".
                    state = "pass" if ok else "FAIL"
                    print(f"gemma-graviton: {self.path} {state}: {line}", file=sys.stderr)
                    (failing.discard if ok else failing.add)(self.path)
            self.answer(ok, line)

        def answer(self, ok: bool, line: str) -> None:
            body = (line + "\n").encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # every period would fill the container's log

    server = http.server.ThreadingHTTPServer(("", int(listen)), Probe)
    server.daemon_threads = True
    server.serve_forever()


def main(argv: list[str]) -> int:
    mode, opts = argv[0], dict(arg.split("=", 1) for arg in argv[1:])
    if mode == "serve":
        serve(opts)
        return 0
    ok, line = check(opts)
    print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
