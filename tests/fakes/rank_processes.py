"""Stand-in rank processes for the process-group tests. Test infrastructure only.

Each is a Python one-liner run with `sys.executable` that plays one behaviour of a vLLM rank the
rehearsal's `RankGroup` must handle: a headless rank that never exits and has a SIGTERM-deaf child
in its process group, a `vllm serve` argument parser that rejects a bad `--dtype` as vLLM does,
and a leader that logs its group assignment and answers `/health`.
"""

from __future__ import annotations

import sys
import textwrap


def python_rank(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


HEADLESS_FOREVER = """
    import signal, subprocess, sys, time
    # Like vLLM's workers: a child in the same process group, deaf to SIGTERM.
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    print("rank 1 in world size 2 is assigned as DP rank 0, PP rank 1", flush=True)
    print(f"child {child.pid}", flush=True)
    time.sleep(600)
"""


STAND_IN_VLLM = """
import argparse, sys, time
# Parses --dtype as vLLM does (last one wins, a closed set of choices) and ignores the rest.
parser = argparse.ArgumentParser(prog="vllm serve")
parser.add_argument("command")
parser.add_argument("model")
parser.add_argument("--dtype", choices=["auto", "bfloat16", "float", "float16", "float32", "half"])
parser.parse_known_args()
time.sleep(600)
"""


SERVING_LEADER = """
import http.server, sys
print("rank 0 in world size 2 is assigned as DP rank 0, PP rank 0", flush=True)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""
