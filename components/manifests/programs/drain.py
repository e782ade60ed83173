"""The engine container's preStop (`components.manifests.drain` says the order and the bounds).
Standard library only: it runs in the vLLM image's Python, from the group's programs ConfigMap.

    drain.py role=leader accept-s= reply-s= settle-s= end-s= engine-port= door-port= [ready-port=]
    drain.py role=worker accept-s= reply-s= settle-s= end-s= leader-env= leader-port=

Every wait ends by `end-s` after the hook starts: the hooks' end less one round of polling
(`components.manifests.drain.POLL_ROUND_S`: /metrics 5 s, a connect 2 s, the pause 1 s), so the
hook returns within the pod's grace whatever it waits for.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import urllib.request

began = time.monotonic()


def say(text: str) -> None:
    print(f"[drain {time.monotonic() - began:.0f} s] {text}", flush=True)


def listening(host: str, port: str | int) -> bool:
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        return True
    except OSError:
        return False


def in_flight(port: str) -> float | None:
    """Requests the engine holds; None once the engine no longer listens. A slow or failed
    answer from a listening engine counts as busy: only a closed port ends the wait early."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except Exception:
        return float("inf") if listening("127.0.0.1", port) else None
    total = 0.0
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def worker(opts: dict[str, str], end: float) -> None:
    """Waits while the leader's engine holds the group's port. The leader's name is resolved
    once, while its pod still serves, and retried only on failure: a failed lookup is not a sign
    that the leader is gone (its record may leave the DNS before its engine stops)."""
    name, address = os.environ.get(opts["leader-env"], ""), ""
    while name and time.monotonic() < end:
        try:
            address = address or socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)[0][4][0]
        except OSError:
            time.sleep(1)
            continue
        if not listening(address, opts["leader-port"]):
            break
        time.sleep(1)
    say(f"leader's engine {'gone' if time.monotonic() < end else 'still up at the bound'}")


def leave_service(port: str) -> None:
    """Fail the pod's readiness (`liveness.py serve`, POST /drain): a leader behind a door is
    then no longer the Service's serving endpoint, so kube-proxy sends it no new connection even
    when it is the last leader (KEP-1669 keeps a terminating endpoint only while it is ready)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/drain", data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=2):
            say("readiness fails from now on: out of the leaders' Service")
    except Exception as error:
        say(f"readiness could not be failed ({error}); the Service may still send connections")


def leader(opts: dict[str, str], end: float, accept: float, reply: float, settle: float) -> None:
    if opts.get("ready-port"):
        leave_service(opts["ready-port"])
    deadline, seen = min(began + accept + 30, end), False
    while listening("127.0.0.1", opts["door-port"]) and time.monotonic() < deadline:
        seen = True
        time.sleep(1)
    if not seen:
        # Behind a door: its pooled connections leave this leader within the window.
        say("no gatekeeper in the pod: serving through the load balancer's window")
        time.sleep(max(0.0, min(began + accept, end) - time.monotonic()))
    elif time.monotonic() < deadline:
        say("the gatekeeper no longer accepts")
    else:
        say("the gatekeeper still accepts; waiting for the engine")
    deadline = min(time.monotonic() + reply + settle, end)
    quiet = None
    while time.monotonic() < deadline:
        count = in_flight(opts["engine-port"])
        if count is None:
            say("the engine is gone")
            return
        if count:
            quiet = None
        elif quiet is None:
            quiet = time.monotonic()
        elif time.monotonic() - quiet >= settle:
            say(f"no request in the engine for {settle:.0f} s")
            return
        time.sleep(1)
    say("requests still in the engine at the bound")


def main(argv: list[str]) -> int:
    opts = dict(arg.split("=", 1) for arg in argv)
    accept, reply, settle, end_s = (
        float(opts[k]) for k in ("accept-s", "reply-s", "settle-s", "end-s")
    )
    end = began + end_s
    if opts["role"] == "worker":
        worker(opts, end)
    else:
        leader(opts, end, accept, reply, settle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
