"""The vLLM command line of one rank, shared by the pod templates and the rehearsal."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class EngineSpec:
    """One vLLM rank's command line. The LWS fills the rank fields with LWS's injected variables;
    the rehearsal fills them with loopback values."""

    #: What vLLM loads: a local directory (prefetched) or a hub repository id.
    model: str
    #: The name clients ask for in the OpenAI API.
    served_model_name: str
    pipeline_stages: int
    kv_cache_bytes: int
    max_model_len: int
    max_num_batched_tokens: int
    #: Group size, this rank's index and the leader's address, as text (`$(LWS_GROUP_SIZE)`).
    nnodes: str
    node_rank: str
    master_addr: str
    master_port: int = 29501
    port: int = 8000
    #: The API server's address: loopback, so only the gatekeeper beside it reaches vLLM.
    host: str = "127.0.0.1"
    #: Longest reply of any request; `None` leaves vLLM's (the rest of the context).
    max_reply_tokens: int | None = None
    #: Largest `logprobs`/`prompt_logprobs` vLLM serves; `None` leaves vLLM's default (20).
    max_logprobs: int | None = None
    dtype: str = "bfloat16"
    #: Hub commit of the model and tokenizer, when vLLM downloads them itself.
    revision: str | None = None
    #: Further `vllm serve` flags, last on every rank's line (the stack's `vllmExtraArgs`,
    #: checked against vLLM's parser and the planned flags by `infra.plan.engine_flags`).
    extra_args: tuple[str, ...] = ()
    #: Seconds vLLM lets the requests in flight finish after SIGTERM (`--shutdown-timeout`);
    #: None keeps vLLM's 0, which aborts them (behind the gatekeeper the preStop waits for an
    #: idle engine first).
    shutdown_timeout_s: int | None = None


def engine_args(spec: EngineSpec, role: Literal["leader", "worker"]) -> list[str]:
    """`vllm serve` arguments for one rank; workers are headless (no HTTP server).

    Kubernetes expands `$(VAR)` in args: only the rank wiring may use it, so a `$(` in a value
    from the stack (the model, the extra flags) is refused rather than run.
    """
    named = [("model", spec.model), ("served_model_name", spec.served_model_name)]
    for name, value in [*named, *(("extra_args", a) for a in spec.extra_args)]:
        if "$(" in value:
            raise ValueError(f"{name} {value!r} holds `$(`, which Kubernetes would expand")
    args = [
        "serve",
        spec.model,
        f"--served-model-name={spec.served_model_name}",
        f"--pipeline-parallel-size={spec.pipeline_stages}",
        "--tensor-parallel-size=1",
    ]
    if spec.pipeline_stages > 1:
        # One rank is a single-node engine: no group to form, no leader address to resolve.
        args += [
            f"--nnodes={spec.nnodes}",
            f"--node-rank={spec.node_rank}",
            f"--master-addr={spec.master_addr}",
            f"--master-port={spec.master_port}",
        ]
    args += [
        f"--kv-cache-memory-bytes={spec.kv_cache_bytes}",
        f"--max-model-len={spec.max_model_len}",
        f"--max-num-batched-tokens={spec.max_num_batched_tokens}",
        f"--dtype={spec.dtype}",
        "-cc.mode=2",
        "-cc.backend=eager",
    ]
    if spec.revision:
        args += [f"--revision={spec.revision}", f"--tokenizer-revision={spec.revision}"]
    # Image, audio and video inputs off: the model is served text-only.
    modalities = {"image": 0, "audio": 0, "video": 0}
    args.append(f"--limit-mm-per-prompt={json.dumps(modalities, separators=(',', ':'))}")
    if spec.max_logprobs is not None:
        # The second lock behind the gatekeeper's refusal: vLLM 0.31 refuses a request whose
        # logprobs or prompt_logprobs exceed it (ModelConfig.max_logprobs). Every rank: it is
        # model config, and the last rank samples.
        args.append(f"--max-logprobs={spec.max_logprobs}")
    if role == "leader":
        if spec.max_reply_tokens is not None:
            # vLLM 0.31 takes max_new_tokens as a cap on every request: a request's max_tokens
            # can lower it, not raise it; without max_tokens a reply stops there
            # (entrypoints/openai/chat_completion/serving.py `override_max_tokens`,
            # entrypoints/serve/utils/api_utils.py `get_max_tokens`).
            override = {"max_new_tokens": spec.max_reply_tokens}
            args.append(
                f"--override-generation-config={json.dumps(override, separators=(',', ':'))}"
            )
        # No system_fingerprint in replies: vLLM 0.31's default names its version and the
        # pipeline split (entrypoints/serve/utils/fingerprint.py, `--fingerprint-mode`).
        args.append("--fingerprint-mode=none")
        if spec.shutdown_timeout_s is not None:
            # vLLM 0.31 on SIGTERM: `drain` mode, the engine finishes what it holds up to this
            # long, then the HTTP server stops (entrypoints/launchers/launcher.py
            # `handle_shutdown`, config/vllm.py `shutdown_timeout`, default 0: abort).
            args.append(f"--shutdown-timeout={spec.shutdown_timeout_s}")
        args += [f"--host={spec.host}", f"--port={spec.port}"]
    else:
        args.append("--headless")
    return [*args, *spec.extra_args]


def command_line(container: Mapping[str, Any]) -> str:
    """A container's command and args as one shell-quoted line (for display)."""
    return shlex.join([*container.get("command", []), *container.get("args", [])])
