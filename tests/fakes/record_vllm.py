"""Record what the real vLLM 0.31 answers on the routes the fakes imitate, for the fakes to build
their replies from (tests/fixtures/vllm/replies-v0.31.json):

    flock /work/vllm.lock .venv/bin/python -m tests.fakes.record_vllm [--rehearsal DIR]

It starts the rehearsal environment's `vllm serve` (`make rehearse` builds it) on the rehearsal's
tiny model, one rank on loopback, with the rehearsal's engine flags (those of its
`commands.txt`, less the pipeline wiring, which changes no byte of an HTTP reply), and records:

- a streamed chat completion with `stream_options.include_usage` (the event stream's bytes);
- the same request not streamed (the JSON body);
- a one-token `/v1/completions`, the liveness probe's request (components/manifests/probes.py);

each with its status and the response headers but `date`. Ids, timestamps and the model's
path are normalised (`chatcmpl-recorded`, `created` 0, `tiny-model-dir`) so a refresh shows only
what vLLM changed. The metrics page and the headers vLLM reads have their own recordings
(metrics-v0.31.json, request-headers-v0.31.json).
Test infrastructure only: the Pulumi program never imports it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tools.rehearse.group.endpoint import http_status
from tools.rehearse.group.ranks import free_port
from tools.rehearse.group.tiny_plan import ensure_tiny_model, model_cache_key, tiny_model_config

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "tests" / "fixtures" / "vllm" / "replies-v0.31.json"
API_KEY = "recording-key"
#: What the rehearsal's tiny model is served as (tools/rehearse/group/tiny_plan.py TINY_MODEL_NAME).
MODEL = "rehearsal/tiny-gemma4"
MESSAGES = [{"role": "user", "content": "Say hello."}]
#: The requests recorded, by name: greedy, a few tokens, so a refresh changes little.
REQUESTS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "models": ("/v1/models", None),
    "chat_streamed": (
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": MESSAGES,
            "max_tokens": 4,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ),
    "chat": (
        "/v1/chat/completions",
        {"model": MODEL, "messages": MESSAGES, "max_tokens": 4, "temperature": 0},
    ),
    "completion": (
        "/v1/completions",
        {"model": MODEL, "prompt": "ping", "max_tokens": 1, "temperature": 0},
    ),
}
#: A request without the key, as every route but /health answers it.
UNAUTHORIZED = "unauthorized"
#: The rehearsal's engine flags for one rank (from a rehearsal's commands.txt, 2026-12-03).
ENGINE_FLAGS = [
    "--kv-cache-memory-bytes=67108864",
    "--max-model-len=2048",
    "--max-num-batched-tokens=256",
    "--dtype=bfloat16",
    "-cc.mode=2",
    "-cc.backend=eager",
    '--limit-mm-per-prompt={"image":0,"audio":0,"video":0}',
    "--max-logprobs=0",
    '--override-generation-config={"max_new_tokens":40}',
    "--fingerprint-mode=none",
]
_ID = re.compile(r'"id":"(chatcmpl|cmpl|modelperm)-[^"]*"')
_CREATED = re.compile(r'"created":\d+')


def normalise(text: str, model_dir: Path) -> str:
    """Ids, timestamps and this machine's model path made fixed, every other byte as vLLM sent
    it."""
    text = _ID.sub(lambda m: f'"id":"{m.group(1)}-recorded"', text)
    text = text.replace(json.dumps(str(model_dir))[1:-1], "tiny-model-dir")
    return _CREATED.sub('"created":0', text)


def tiny_model(rehearsal: Path, python: Path) -> Path:
    """The rehearsal's tiny model of dev's split, built there if it is not yet."""
    cfg = load_stack("dev")
    config = tiny_model_config(cfg.profile(), plan(cfg, "dev").stages)
    built = rehearsal / "models" / model_cache_key(config)
    if (built / "config.json").is_file():
        return built
    return ensure_tiny_model(python, config, print, rehearsal / "models")


def wait_ready(port: int, server: subprocess.Popen[bytes], log: Path, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"vllm serve exited {server.returncode}:\n{log.read_text()[-3000:]}")
        if http_status(f"http://127.0.0.1:{port}/health") == 200:
            return
        time.sleep(1)
    raise SystemExit(f"vllm serve was not ready in {limit_s:.0f} s:\n{log.read_text()[-3000:]}")


def ask(
    port: int, model_dir: Path, path: str, body: dict[str, Any] | None, key: str = API_KEY
) -> dict[str, Any]:
    """One request's reply: status, headers but `date`, and the body (the event stream as text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    data = None if body is None else json.dumps(body)
    conn.request("GET" if body is None else "POST", path, data, headers)
    reply = conn.getresponse()
    text = normalise(reply.read().decode("utf-8"), model_dir)
    kept = {k.lower(): v for k, v in reply.getheaders() if k.lower() != "date"}
    recorded: dict[str, Any] = {"status": reply.status, "headers": kept}
    if body is not None and body.get("stream"):
        recorded["stream"] = text
    else:
        recorded["body"] = json.loads(text)
    return recorded


def record(rehearsal: Path) -> dict[str, Any]:
    python = rehearsal / "venv" / "bin" / "python"
    vllm = rehearsal / "venv" / "bin" / "vllm"
    if not vllm.is_file():
        raise SystemExit(f"no {vllm}: build the rehearsal environment first (`make rehearse`)")
    model = tiny_model(rehearsal, python)
    version = subprocess.run(
        [str(python), "-c", "import vllm; print(vllm.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    port = free_port()
    argv = [str(vllm), "serve", str(model), f"--served-model-name={MODEL}", *ENGINE_FLAGS]
    argv += ["--host=127.0.0.1", f"--port={port}"]
    env = {**os.environ, "VLLM_API_KEY": API_KEY}
    with tempfile.NamedTemporaryFile(prefix="record-vllm-", suffix=".log", delete=False) as log:
        server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(port, server, Path(log.name), limit_s=600)
        replies = {}
        for name, (path, body) in REQUESTS.items():
            replies[name] = {"path": path, "request": body, **ask(port, model, path, body)}
        path, body = REQUESTS["chat"]
        refused = ask(port, model, path, body, key="wrong")
        replies[UNAUTHORIZED] = {"path": path, "request": body, **refused}
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    return {
        "about": (
            "What real vLLM answered on the routes the fakes imitate (tests/fakes/openai_stub.py,"
            " vllm_leader.py), on the rehearsal's tiny model; ids, `created` and the model's"
            " path normalised."
            " Written by `flock /work/vllm.lock .venv/bin/python -m tests.fakes.record_vllm`;"
            " commit the diff."
        ),
        "vllm_version": version,
        "replies": replies,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.record_vllm")
    parser.add_argument("--rehearsal", type=Path, default=REPO / ".rehearsal")
    parser.add_argument("--out", type=Path, default=RECORDING)
    args = parser.parse_args(argv)
    recording = record(args.rehearsal.resolve())
    args.out.write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n")
    print(f"recorded {len(recording['replies'])} replies into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
