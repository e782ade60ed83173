"""A key rotation, rehearsed for real: the gatekeeper's own config in front of the real vLLM
leader, its key file replaced as the kubelet replaces a Secret volume's files
(`gatekeeper_run.write_keys`), with the new key current and the old one accepted until a time a few
seconds ahead (`gatekeeper.key_file_text`, as the program writes it from `apiKeyPrevious` and
`apiKeyOverlapUntil`). Clients keep calling through the change: a client with the old key until
the overlap ends, one with the new key from the rotation on; neither may see a failure, the old
key must get 401 after the overlap, and nginx must never reload.

vLLM checks the engine key, which the gatekeeper sends in place of either client key, so every
accepted request goes all the way through the engine (`/v1/completions`, one token).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from components.manifests import gatekeeper
from components.manifests.gatekeeper import GatekeeperLimits
from tools.rehearse.checks import Check
from tools.rehearse.front_door import gatekeeper_run

#: Seconds both keys are accepted in the rehearsal.
OVERLAP_S = 6.0
#: Calls within this of the overlap's end may be judged either side of it (clock resolution
#: and a call's own duration); they are counted but not held to either answer.
EDGE_S = 0.5
#: Seconds of calls after the overlap.
AFTER_S = 3.0
#: One call with each key this often: well inside the per-client rates, failures included.
ROUND_S = 0.5
NOT_REACHED = (
    ("rotation: during the overlap", "old and new key 200"),
    ("rotation: after the overlap", "old key 401, new key 200"),
    ("rotation: no reload", "nginx and vLLM not restarted, new key never refused"),
)


def _call(door: gatekeeper_run.Gate, key: str, model: str) -> int:
    body = json.dumps({"model": model, "prompt": "Hi", "max_tokens": 1}).encode()
    return gatekeeper_run.request(
        door.base_url, "POST", "/v1/completions", body, key, timeout=30
    ).status


def rotation_checks(
    nginx: str,
    limits: GatekeeperLimits,
    engine_key: str,
    vllm_port: int,
    work_dir: Path,
    model: str,
    progress: Callable[[str], None],
) -> list[Check]:
    """The rotation rows, times from the rotation."""
    old, new = gatekeeper_run.rehearsal_key(), gatekeeper_run.rehearsal_key()
    with gatekeeper_run.running_gate(
        nginx,
        limits,
        old,
        gatekeeper_run.free_port(),
        vllm_port,
        work_dir,
        progress,
        engine_key=engine_key,
    ) as door:
        pid = (work_dir / "run" / "nginx.pid").read_text().strip()
        before = _call(door, old, model)
        # A whole second, as the key file holds it: the rows judge against the file's time.
        until = dt.datetime.fromtimestamp(math.ceil(time.time() + OVERLAP_S), dt.UTC)
        rotated = time.monotonic()
        gatekeeper_run.write_keys(work_dir / "key", gatekeeper.key_file_text(new, old, until))
        progress(f"rotation: new key current, old key accepted for {OVERLAP_S:.0f} s")
        end = rotated + (until - dt.datetime.now(dt.UTC)).total_seconds()
        calls: list[tuple[float, str, int]] = []
        while time.monotonic() < end + AFTER_S:
            for which, key in (("old", old), ("new", new)):
                calls.append((time.monotonic() - rotated, which, _call(door, key, model)))
            time.sleep(ROUND_S)
        wrong = _call(door, secrets.token_hex(24), model)
        pid_after = (work_dir / "run" / "nginx.pid").read_text().strip()
    overlap_end = end - rotated
    during = [(w, s) for t, w, s in calls if t < overlap_end - EDGE_S]
    after = [(w, s) for t, w, s in calls if t > overlap_end + EDGE_S]
    edge = len(calls) - len(during) - len(after)

    def tally(rows: list[tuple[str, int]], which: str) -> str:
        codes = sorted({s for w, s in rows if w == which})
        return f"{which} {sum(1 for w, _ in rows if w == which)} x {codes}"

    during_ok = before == 200 and bool(during) and all(s == 200 for _, s in during)
    after_ok = (
        bool(after)
        and all(s == 401 for w, s in after if w == "old")
        and all(s == 200 for w, s in after if w == "new")
        and any(w == "old" for w, _ in after)
        and wrong == 401
    )
    new_calls = [s for _, w, s in calls if w == "new"]
    return [
        Check(
            "rotation: during the overlap",
            "old and new key 200",
            f"old key 200 before; 0-{overlap_end - EDGE_S:.1f} s: {tally(during, 'old')}, "
            f"{tally(during, 'new')}",
            during_ok,
        ),
        Check(
            "rotation: after the overlap",
            "old key 401, new key 200",
            f"{overlap_end + EDGE_S:.1f}-{calls[-1][0]:.1f} s: {tally(after, 'old')}, "
            f"{tally(after, 'new')}; a wrong key {wrong}; {edge} calls at the edge",
            after_ok,
        ),
        Check(
            NOT_REACHED[2][0],
            NOT_REACHED[2][1],
            f"nginx pid {pid} -> {pid_after}; new key {len(new_calls)} calls, "
            f"{sum(1 for s in new_calls if s != 200)} not 200",
            pid == pid_after and all(s == 200 for s in new_calls),
        ),
    ]
