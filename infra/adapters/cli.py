"""`python -m infra.plan`: what a stack will get and cost, offline, before any money is spent.

    python -m infra.plan [--stack dev] [--set KEY=VALUE ...] [--brief | --json] [--render DIR]
    python -m infra.plan --compare [--need context=N,concurrency=X,decode=T] [--formats ...]
        [--models all|MODEL,...] [--json]

The plan opens with its verdict (`infra.adapters.verdict`), then the table, the reasons and the
warnings (`infra.adapters.table`); `--brief` prints the verdict alone. Bad input exits 2 with one
line on stderr naming the key, the rule and the fix.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from infra.adapters import verdict, wiring
from infra.adapters.table import format_table
from infra.bootstrap import config as bootstrap_config
from infra.plan import (
    addons,
    advice,
    catalog,
    checked,
    compare,
    placeholders,
    readiness,
    waits,
    weights,
)
from infra.plan.config import ConfigError, StackConfig
from infra.plan.economics import economics
from infra.plan.stackfile import add_stack_arguments, load_stack, parse_overrides, read_stack
from infra.plan.weights import FORMATS

if TYPE_CHECKING:
    pass


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit 2 like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}; see `python -m infra.plan --help`\n")


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="python -m infra.plan",
        description="Show what a stack will get: pods, memory, KV cache, context, speed, cost.",
    )
    add_stack_arguments(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON object")
    output.add_argument(
        "--brief", action="store_true", help="print the verdict alone (at most eight lines)"
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="plan every catalogue type for the stack and rank them by $ per million tokens",
    )
    parser.add_argument(
        "--need",
        metavar="context=N,concurrency=X,decode=T",
        default="",
        help="what --compare's types must serve (default: what the stack's own plan serves)",
    )
    parser.add_argument(
        "--formats",
        metavar="bf16,int8,int4",
        default=",".join(FORMATS),
        help="the weight formats --compare plans each type in (default: all, side by side)",
    )
    parser.add_argument(
        "--models",
        metavar="all|MODEL,...",
        default="all",
        help="the catalogue models --compare plans (default: all of them, the stack's first)",
    )
    parser.add_argument(
        "--render",
        metavar="DIR",
        type=Path,
        help="also write the Kubernetes objects the program applies, one YAML file each",
    )
    return parser


def _user_keys(stack: str, overrides: dict[str, object]) -> list[str]:
    """The keys the user set: this run's --set keys first, then the stack file's."""
    stack_keys = [k for k in read_stack(stack)[0] if k not in overrides]
    return [*overrides, *stack_keys]


def _compare(args: argparse.Namespace, cfg: StackConfig, today: dt.date) -> int:
    need = compare.parse_need(args.need, compare.default_need(cfg, args.stack))
    models = _models(args.models, cfg)
    result = compare.compare(cfg, need, args.stack, today, _formats(args.formats), models)
    if args.json:
        data = {"stack": args.stack, "instance_type": cfg.instance_type} | result.to_json()
        print(json.dumps(data, indent=2))
    else:
        print(
            f"stack {args.stack} ({cfg.region}): every catalogue type planned for each model "
            "compared"
        )
        current = (cfg.instance_type, cfg.weights, cfg.model)
        print(compare.format_comparison(result, current))
    return 0


def _models(text: str, cfg: StackConfig) -> tuple[str, ...]:
    """`--models`: all (the stack's model, then every other catalogue model) or a
    comma-separated list of the stack's model and catalogue models."""
    known = tuple(dict.fromkeys((cfg.model, *catalog.MODELS)))
    if text.strip() == "all":
        return known
    fix = f"list some of {', '.join(catalog.MODELS)}, or all"
    return _listed("--models", text, known, "a catalogue model", fix)


def _formats(text: str) -> tuple[str, ...]:
    """`--formats`: a comma-separated subset of the weight formats, or all of them."""
    fix = f"list some of {', '.join(FORMATS)}, such as --formats bf16,int8"
    return _listed("--formats", text, FORMATS, "a weight format", fix)


def _listed(key: str, text: str, known: Sequence[str], what: str, fix: str) -> tuple[str, ...]:
    """The comma-separated names of `text`, each once; refuses an empty list or a name not
    `known`."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(key, f"{unknown[0] if unknown else text!r} is not {what}", fix)
    return names


def main(argv: Sequence[str] | None = None, today: dt.date | None = None) -> int:
    args = _parser().parse_args(argv)
    today = today or dt.date.today()
    try:
        overrides = parse_overrides(args.overrides)
        cfg = load_stack(args.stack, overrides, today)
        if args.need and not args.compare:
            raise ConfigError("--need", "is read only with --compare", "add --compare")
        if args.models != "all" and not args.compare:
            raise ConfigError("--models", "is read only with --compare", "add --compare")
        if args.brief and args.compare:
            raise ConfigError("--brief", "is the verdict of one plan", "drop --compare")
        if args.compare:
            return _compare(args, cfg, today)
        result = checked.checked_plan(cfg, args.stack, _user_keys(args.stack, overrides), today)
        wiring.server_spec(cfg, result)  # refuses `vllmExtraArgs` as the program would
        econ = economics(cfg, result, today)
        changed = advice.change_warning(
            load_stack(args.stack, today=today), cfg, result, econ, overrides, args.stack, today
        )
        # The stack's own keys come first: a type compared with badly set keys is no advice.
        first = advice.change_first(cfg, result, econ, args.stack, today)
        buy = None if first else advice.buy_line(cfg, result, econ, args.stack, today)
        long_wait = waits.warning(cfg, result, args.stack)
        warnings = [
            *([long_wait] if long_wait else []),
            *verdict.plan_warnings(cfg, econ, changed, today),
            *addons.warnings(cfg.kubernetes_version),
            *readiness.warnings(cfg),
        ]
        if cfg.elastic:
            from infra.plan import elastic  # the elastic layer, elastic stacks only
        scaled = elastic.elastic_plan(cfg, result, today) if cfg.elastic else None
        written: list[Path] = []
        faults: list[str] = []
        if args.render is not None:
            from infra.adapters.render import render_stack
            from infra.adapters.semantics import findings

            written = render_stack(cfg, result, args.render)
            # What Kubernetes itself would refuse or never run (components/manifests/semantics.py).
            faults = findings(cfg, result)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if faults:
        for fault in faults:
            print(f"error: --render: {fault}", file=sys.stderr)
        return 2
    if args.json:
        data = result.to_json() | econ.to_json()
        data["warnings"] = warnings
        version = cfg.kubernetes
        data["kubernetes"] = {
            "version": cfg.kubernetes_version,
            "standard_support_end": version.end_of_standard.isoformat() if version else None,
            "extended_support_end": version.end_of_extended.isoformat() if version else None,
        }
        data["cheaper"] = buy if buy and buy.startswith("cheaper:") else None
        data["verdict"] = verdict.verdict_json(
            result, econ, first or buy, warnings, scaled, long_wait
        )
        timeouts = waits.client_timeouts(result)
        data["client_timeout_s"] = {"stream": timeouts.stream_s, "whole": timeouts.whole_s}
        data["placeholders"] = [p.key for p in placeholders.find(cfg)]
        data["quality"] = weights.weight_format(result.weights).quality
        data["elastic"] = None if scaled is None else scaled.to_json()
        data["existing_cluster"] = None
        if cfg.existing_cluster is not None:
            from infra.plan import existing  # the existing-cluster layer, `existingCluster` only

            data["existing_cluster"] = {
                "name": cfg.existing_cluster,
                "reads": list(existing.READS),
                "assumes": list(existing.ASSUMES),
            }
        print(json.dumps(data, indent=2))
        return 0
    # The main stack's placeholders, then the bootstrap's, which runs first in the account.
    for notice in (placeholders.notice(placeholders.find(cfg)), bootstrap_config.notice()):
        if notice:
            print(notice)
    print("\n".join(verdict.verdict_lines(result, econ, first or buy, warnings, scaled, long_wait)))
    if args.brief:
        return 0
    print()
    print(format_table(result, econ, cfg, today, warnings))
    if written:
        print(f"\nrendered {len(written)} objects into {args.render}")
    return 0
