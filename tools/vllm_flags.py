"""Record the flags `vllm serve` takes, read from the parser of the real vLLM the rehearsal runs,
for the stack's `vllmExtraArgs` check (infra/plan/vllm-serve-flags.json, `infra.plan.engine_flags`):

    .venv/bin/python -m tools.vllm_flags            # compare the recording with the vLLM installed
    .venv/bin/python -m tools.vllm_flags --write    # rewrite it; commit the diff

The rehearsal environment (`make rehearse` builds .rehearsal/venv) runs this same file with
`--dump`, which builds the parser `vllm serve` builds (`make_arg_parser` on vLLM's
`FlexibleArgumentParser`, vllm/entrypoints/cli/serve.py `subparser_init`) and prints each option's
spellings and whether it takes a value. Only that process imports vLLM; this file needs nothing
beyond the standard library, so it runs under either interpreter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECORDING = REPO / "infra" / "plan" / "vllm-serve-flags.json"
#: argparse's `nargs` as the recording writes it: how many items follow the flag.
VALUES = {0: "none", None: "one", "?": "optional", "+": "many", "*": "many"}


def dump() -> dict[str, Any]:
    """The options of the installed vLLM's `vllm serve`, help and version left out (a stack asks
    a server to serve, not to print and exit)."""
    import vllm
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    flags = [
        {"options": list(action.option_strings), "value": VALUES[action.nargs]}
        for action in parser._actions
        if action.option_strings
        and not isinstance(action, argparse._HelpAction | argparse._VersionAction)
    ]
    return {"vllm_version": vllm.__version__, "flags": sorted(flags, key=lambda f: f["options"])}


def read(python: Path) -> dict[str, Any]:
    """`dump` run by the interpreter `python` (the rehearsal environment's)."""
    if not python.is_file():
        raise SystemExit(f"no {python}: build the rehearsal environment first (`make rehearse`)")
    # No bytecode written into the environment; vLLM's import logs go to stderr, left out.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [str(python), __file__, "--dump"], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{python} could not read vLLM's parser:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def text(found: dict[str, Any], today: dt.date) -> str:
    """The recording as committed: one line per flag, so a refresh's diff names each change."""
    about = (
        "The options `vllm serve` takes (each option's spellings; value: none, one, optional or "
        "many items after it), read from the parser of the vLLM the rehearsal environment "
        f"installs (requirements-rehearsal.txt) on {today.isoformat()}. Written by "
        "`python -m tools.vllm_flags --write`; commit the diff."
    )
    lines = [json.dumps(flag) for flag in found["flags"]]
    head = f'{{\n "about": {json.dumps(about)},\n "vllm_version": "{found["vllm_version"]}",\n'
    return head + ' "flags": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.vllm_flags")
    parser.add_argument("--python", type=Path, default=REPO / ".rehearsal/venv/bin/python")
    parser.add_argument("--write", action="store_true", help="rewrite the recording")
    parser.add_argument("--dump", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.dump:
        print(json.dumps(dump()))
        return 0
    python = args.python.absolute()
    found = read(python)
    print(f"read vLLM {found['vllm_version']}'s `vllm serve` parser: {len(found['flags'])} flags")
    committed = json.loads(RECORDING.read_text()) if RECORDING.is_file() else {}
    same = {k: committed.get(k) for k in found} == found
    if args.write:
        RECORDING.write_text(text(found, dt.date.today()))
        print(f"wrote {RECORDING.relative_to(REPO)}" + (" (no flag changed)" if same else ""))
        return 0
    print(f"{RECORDING.relative_to(REPO)} is " + ("current" if same else "stale: run --write"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
