"""`vllmExtraArgs`: `vllm serve` flags a stack adds to every rank's command line, checked before
anything is created against the flags vLLM's own parser takes and against those the plan sets.

What vLLM takes is a recording (`vllm-serve-flags.json` beside this file): every option of the
parser `vllm serve` builds, with its spellings and how many items follow it, read from the real
vLLM by `python -m tools.vllm_flags --write` (tests/plan/test_engine_flags.py holds it to the
pinned version). A flag is read as vLLM's `FlexibleArgumentParser` reads it: `--flag value` or
`--flag=value`, underscores as dashes before the first dot, `-cc.mode=2` as one key of the
`--compilation-config` dictionary. What the plan sets is the planned command line itself
(`engine_args` of both roles without the extras), so a flag the planner starts setting is owned
from then on with no list to keep; with the flags a rank takes from its environment instead
(`ENV_FLAGS`: the engine key).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from components.manifests.engine import EngineSpec, engine_args
from infra.plan.config import ConfigError

KEY = "vllmExtraArgs"
#: Settings a rank takes from its environment, not its argv, by the variable vLLM reads as the
#: flag's default: the engine key on the leader (`components.manifests.pods`), kept out of the
#: process list. vLLM 0.31 takes `--api-key` over `VLLM_API_KEY`
#: (entrypoints/serve/middleware/register.py), so the plan owns that flag as it owns those it
#: writes.
ENV_FLAGS = {"VLLM_API_KEY": "--api-key"}
RECORDING = Path(__file__).with_name("vllm-serve-flags.json")
_RECORDED = json.loads(RECORDING.read_text(encoding="utf-8"))
VLLM_VERSION: str = _RECORDED["vllm_version"]
#: Each spelling -> (the option's first spelling, which names the one setting all of them set;
#: how many items follow it: none, one, optional or many).
OPTIONS: dict[str, tuple[str, str]] = {
    spelling: (flag["options"][0], flag["value"])
    for flag in _RECORDED["flags"]
    for spelling in flag["options"]
}
#: A negative number is a value, not a flag: argparse's own pattern (`_negative_number_matcher`),
#: which it applies when no option looks like one, as none of vLLM's does.
_NUMBER = re.compile(r"-\d+|-\d*\.\d+")
#: Settings the plan does not write but rests on: why an extra flag may not set them (vLLM 0.31).
UNSAFE = {
    "--grpc": "serves a gRPC API with no key check and no gatekeeper in front "
    "(entrypoints/launchers/grpc_server.py)",
    "--config": "reads more flags from a file this check never sees (utils/argparse_utils.py)",
    "--uds": "moves the API off the TCP port the gatekeeper, the probes and the drain reach",
    "--num-gpu-blocks-override": "sizes the KV cache apart from the planned bytes "
    "(v1/core/kv_cache_utils.py), past what the pod's memory holds",
    "--enforce-eager": "turns off the planned compilation mode (config/vllm.py)",
    "--disable-log-stats": "takes the request counts off /metrics, which the drain, the liveness "
    "check and the scaler read",
    "--hf-token": "writes the Hugging Face token into the pod's spec; the stack mounts it from "
    "its Secret",
    # What the pod's memory and the planned context rest on (config/vllm.py, config/cache.py).
    "--kv-cache-dtype": "changes the bytes a token's KV holds, which the planned context rests on",
    "--block-size": "changes the KV block, which the planned context and concurrency rest on",
    "--disable-hybrid-kv-cache-manager": "gives the sliding layers full-length KV, which the "
    "planned context does not fit",
    "--kv-offloading-size": "adds a host KV buffer the pod's memory was not planned for",
    "--kv-offloading-backend": "offloads KV to a buffer the pod's memory was not planned for",
    "--kv-transfer-config": "sends KV to a connector the plan neither sizes nor wires",
    "--cpu-offload-gb": "moves weights into memory the plan does not count",
    "--speculative-config": "loads a draft model the pod's memory was not planned for",
    "--hf-overrides": "changes the model's shape, which every planned figure rests on",
    "--quantization": "changes the weights' format the plan was computed from; set `weights`",
    "--api-server-count": "starts API processes the pod's memory was not planned for",
    "--data-parallel-": "runs data-parallel engines the plan neither sizes nor wires",
    "--performance-mode": "changes the batch limits the plan computed (engine/arg_utils.py)",
    "--no-enable-chunked-prefill": "turns off chunked prefill, which a batch below the context "
    "needs (config/scheduler.py)",
}


def _unsafe(name: str, setting: str) -> str | None:
    """Why a flag may not be given (`UNSAFE`): by its spelling, else by its setting (a `--no-`
    spelling turns the setting off, which only its own entry refuses); a key ending in `-` names
    a family by its prefix, any other only itself (`--config` is not `--config-format`)."""
    if name in UNSAFE:
        return UNSAFE[name]
    if name.startswith("--no-"):
        return None
    family = (why for key, why in UNSAFE.items() if key.endswith("-") and setting.startswith(key))
    return UNSAFE.get(setting) or next(family, None)


_SEE = f"the flags vLLM {VLLM_VERSION} takes are in infra/plan/vllm-serve-flags.json"


@dataclass(frozen=True)
class Flag:
    """One flag of a command line: as written (less its value), the setting it sets, and the
    dictionary key under it (`-cc.mode` sets `mode` of `--compilation-config`; () the whole)."""

    written: str
    setting: str
    path: tuple[str, ...] = ()
    #: The spelling it is written with (`-cc`, `--compilation-config`).
    spelling: str = ""

    def overlaps(self, other: Flag) -> bool:
        """Both set the same setting, or the same key of it (or one a key the other holds). Keys
        under two spellings overlap whatever they are: vLLM merges a dictionary's keys per
        spelling and passes each spelling's as a whole, the last one winning
        (utils/argparse_utils.py)."""
        if self.setting != other.setting:
            return False
        shorter = min(len(self.path), len(other.path))
        return self.path[:shorter] == other.path[:shorter] or self.spelling != other.spelling


def _is_flag(item: str) -> bool:
    return item.startswith("-") and not _NUMBER.fullmatch(item)


def _spelling(key: str) -> tuple[str, tuple[str, ...]]:
    """`--max_num_seqs` -> (`--max-num-seqs`, ()); `-cc.mode` -> (`-cc`, (`mode`,))."""
    name, *path = key.split(".")
    if name.startswith("--"):
        name = "--" + name[2:].replace("_", "-")
    return name, tuple(p.removesuffix("+") for p in path)


def _refuse(rule: str, fix: str) -> ConfigError:
    return ConfigError(KEY, rule, fix)


def parse(extra: Sequence[str]) -> list[Flag]:
    """The flags of `extra`, each refused in one line where vLLM's parser would not take it."""
    found: list[Flag] = []
    i = 0
    while i < len(extra):
        item = extra[i]
        if "$(" in item:
            raise _refuse(
                f"holds {item!r}, whose `$(` Kubernetes would expand in the container's args",
                "write the value itself",
            )
        if not _is_flag(item):
            raise _refuse(
                f"holds {item!r}, which is no flag and follows none that takes a value",
                "write each flag as --flag=value or as --flag then its value, such as "
                "--max-num-seqs=8",
            )
        key, eq, _ = item.partition("=")
        name, path = _spelling(key)
        if name not in OPTIONS:
            close = difflib.get_close_matches(name, OPTIONS, n=1)
            fix = f"did you mean {close[0]}? ({_SEE})" if close else f"remove it ({_SEE})"
            raise _refuse(
                f"holds {key}, which is not the whole name of a flag vLLM {VLLM_VERSION}'s "
                "`vllm serve` takes",
                fix,
            )
        setting, takes = OPTIONS[name]
        why = _unsafe(name, setting)
        if why is not None:
            raise _refuse(f"holds {key}, which {why}", "remove it")
        i += 1
        if takes == "none":
            if eq or path:
                raise _refuse(f"gives {key} a value, but it takes none", f"write {name} alone")
        elif not eq:
            values = 0
            while i < len(extra) and not _is_flag(extra[i]) and (values == 0 or takes == "many"):
                values, i = values + 1, i + 1
            if values == 0 and takes != "optional":
                raise _refuse(
                    f"gives {key} no value, but it takes one",
                    f"write {key}=<value> or put the value after it",
                )
        found.append(Flag(key, setting, path, name))
    return found


def planned(args: Sequence[str]) -> list[Flag]:
    """The flags of a planned command line (`serve`, the model, then flags with `=values`); the
    model, passed by position, is vLLM's `--model`."""
    flags = [Flag(f"{args[1]} (the model)", "--model")]
    for item in args[2:]:
        if _is_flag(item):
            name, path = _spelling(item.partition("=")[0])
            flags.append(Flag(item, OPTIONS.get(name, (name, ""))[0], path, name))
    return flags


def check(engine: EngineSpec) -> None:
    """Refuse `engine.extra_args` where vLLM would not take a flag or where one sets what a rank's
    planned command line sets already (the stack has a key for that, or the plan derives it)."""
    extra = parse(engine.extra_args)
    alone = replace(engine, extra_args=())
    owned = [*planned(engine_args(alone, "leader")), *planned(engine_args(alone, "worker"))]
    owned += [Flag(f"{env} in the leader's environment", flag) for env, flag in ENV_FLAGS.items()]
    for i, flag in enumerate(extra):
        twice = next((other for other in extra[:i] if flag.overlaps(other)), None)
        if twice is not None:
            raise _refuse(
                f"sets {flag.setting} twice ({twice.written}, {flag.written}); vLLM keeps the last",
                "write it once",
            )
        clash = next((own for own in owned if flag.overlaps(own)), None)
        if clash is not None:
            raise _refuse(
                f"holds {flag.written}, which sets what the plan sets itself ({clash.written})",
                "remove it; the plan derives that flag from the stack's keys (docs/planning.md)",
            )
