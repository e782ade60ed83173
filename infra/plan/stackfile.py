"""Reading `stacks/Pulumi.<stack>.yaml` offline: the same keys Pulumi hands to the program."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from infra.plan.config import PROJECT, ConfigError, StackConfig, check_secrets, load_config

REPO = Path(__file__).resolve().parents[2]
STACKS = REPO / "stacks"


def stack_names() -> list[str]:
    """Every stack that has a file in `stacks/`."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in _stack_files())


def _stack_files() -> list[Path]:
    return sorted(STACKS.glob("Pulumi.*.yaml"))


def read_stack(stack: str) -> tuple[dict[str, Any], dict[str, bool]]:
    """The stack's `gemma-graviton:` values (namespace stripped) and which keys are secrets."""
    path = STACKS / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(stack_names()) or "none"
        raise ConfigError(
            "--stack", f"{stack!r} has no file {path.relative_to(REPO)}", f"use one of: {known}"
        )
    document = yaml.safe_load(path.read_text()) or {}
    values: dict[str, Any] = {}
    secret: dict[str, bool] = {}
    for full_key, value in (document.get("config") or {}).items():
        namespace, _, key = str(full_key).partition(":")
        if namespace != PROJECT or not key:
            raise ConfigError(
                str(full_key),
                f"is outside the {PROJECT}: namespace",
                f"set it as {PROJECT}:<key>; the program configures its providers itself",
            )
        is_secret = isinstance(value, Mapping) and set(value) == {"secure"}
        secret[key] = is_secret
        if not is_secret:
            values[key] = value
    return values, secret


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """`--stack NAME` and repeatable `--set KEY=VALUE`, as every command here takes them."""
    parser.add_argument("--stack", default="dev", help="stack file stacks/Pulumi.<stack>.yaml")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a stack key for this run only (repeatable)",
    )


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` what-ifs; VALUE is read as YAML (`2048` is a number, `[a, b]` a list)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().removeprefix(f"{PROJECT}:")
        if not sep or not key:
            raise ConfigError("--set", f"{pair!r} is not KEY=VALUE", "write e.g. --set replicas=2")
        try:
            overrides[key] = yaml.safe_load(text) if text.strip() else text
        except yaml.YAMLError:
            overrides[key] = text
    return overrides


def stack_values(stack: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A stack file's plain values with what-if overrides applied; plain-text secrets refused."""
    values, secret = read_stack(stack)
    check_secrets(secret)
    return {**values, **(overrides or {})}


def load_stack(stack: str, overrides: Mapping[str, Any] | None = None) -> StackConfig:
    """Validate a stack file plus what-if overrides through the one config path."""
    return load_config(stack_values(stack, overrides))
