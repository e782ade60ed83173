"""Reading `stacks/Pulumi.<stack>.yaml` offline: the same keys Pulumi hands to the program.

Stack files and `--set` values are read as YAML whose scalars all stay text, as Pulumi hands them
to the program: `kubernetesVersion: 1.30` is "1.30" (not the number 1.3), `endDate: 2027-13-45`
is text the config model refuses by name (not a crash in the YAML reader), and numbers and
booleans are converted by the config model, whose messages name the key. Whatever the file holds,
reading it ends in data or in one `ConfigError` line: syntax errors, tabs, aliases (a few lines of
aliases can expand to gigabytes), duplicate keys, oversized input and non-mapping documents are
refused with the file, line and key.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from infra.plan import rules
from infra.plan.config import ConfigError, StackConfig
from infra.plan.config_parts import PROJECT, SECRET_KEYS
from infra.plan.loading import check_secrets, load_config

REPO = Path(__file__).resolve().parents[2]
STACKS = REPO / "stacks"
#: Largest stack file read, in bytes (the committed ones are under 1 KB).
MAX_STACK_FILE_BYTES = 64 * 1024
#: Largest `--set` value, in characters.
MAX_OVERRIDE_CHARS = 4096


class _YamlRefused(yaml.MarkedYAMLError):
    """A YAML construct a stack file may not use."""


class _TextLoader(yaml.BaseLoader):
    """YAML with every scalar as text, no aliases and no duplicate keys."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _YamlRefused(
                problem=f"uses the YAML alias *{event.anchor}", problem_mark=event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    raise _YamlRefused(
                        problem=f"repeats the key {key_node.value}",
                        problem_mark=key_node.start_mark,
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def _line_key(text: str, line: int) -> str | None:
    """The stack key written on 0-based `line` of `text`, if that line holds one."""
    lines = text.splitlines()
    if not 0 <= line < len(lines):
        return None
    head = lines[line].strip().lstrip("-").strip()
    key = head.split(": ", 1)[0].rstrip(":").strip().strip("'\"")
    if not key or " " in key:
        return None
    return key.removeprefix(f"{PROJECT}:")


def _yaml_error(error: Exception, text: str, where: str, key: str | None) -> ConfigError:
    """One line for a YAML text that cannot be read, naming the key on the failing line."""
    mark = getattr(error, "problem_mark", None)
    context = getattr(error, "context_mark", None)
    line = mark.line if mark is not None else None
    named = key or (_line_key(text, line) if line is not None else None)
    if named is None and context is not None:
        named = _line_key(text, context.line)  # e.g. the line that opened an unclosed bracket
    place = where + (f" line {line + 1}" if line is not None else "")
    problem = str(getattr(error, "problem", "") or error)
    if isinstance(error, RecursionError):
        return ConfigError(named or where, f"nests too deeply to read ({place})", "flatten it")
    if isinstance(error, _YamlRefused) and "alias" in problem:
        return ConfigError(
            named or where,
            f"{problem} ({place}); aliases are not read, since a few can expand to gigabytes",
            "write the value out in full",
        )
    if isinstance(error, _YamlRefused):
        return ConfigError(named or where, f"{problem} ({place})", "keep one of them")
    if "\t" in problem or "\\t" in problem:
        return ConfigError(
            named or where,
            f"is indented with a tab ({place}), which YAML does not allow",
            "indent it with spaces",
        )
    return ConfigError(
        named or where,
        f"is not valid YAML ({place}: {problem})",
        "fix the syntax; quote values that hold ': ' or start with a special character",
    )


def read_yaml_text(text: str, where: str, key: str | None = None) -> Any:
    """Parse `text` with every scalar as text; any failure is one `ConfigError` line."""
    try:
        return yaml.load(text, Loader=_TextLoader)  # BaseLoader: no object construction
    except (yaml.YAMLError, RecursionError) as error:
        raise _yaml_error(error, text, where, key) from None


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
    where = str(path.relative_to(REPO))
    size = path.stat().st_size
    if size > MAX_STACK_FILE_BYTES:
        raise ConfigError(
            "--stack",
            f"{where} is {size} bytes, more than the {MAX_STACK_FILE_BYTES} a stack file may have",
            f"keep only {PROJECT}: keys in it",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError("--stack", f"{where} is not UTF-8 text", "save it as UTF-8") from None
    document = read_yaml_text(text, where)
    if document is None or document == "":
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(
            "--stack",
            f"{where} holds a {type(document).__name__}, not a mapping with a `config:` key",
            f"write it as `config:` followed by indented `{PROJECT}:<key>: value` lines",
        )
    config = document.get("config") or {}
    if not isinstance(config, Mapping):
        raise ConfigError(
            "config",
            f"in {where} is a {type(config).__name__}, not a mapping of {PROJECT}:<key> to values",
            f"indent `{PROJECT}:<key>: value` lines under `config:`",
        )
    values: dict[str, Any] = {}
    secret: dict[str, bool] = {}
    for full_key, value in config.items():
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
    """`KEY=VALUE` what-ifs; VALUE is read as YAML with text scalars (`[a, b]` is a list, `2048`
    the text the config model reads as a number), as a stack file's value is.

    Secrets are refused: a `--set` value sits in shell history and process listings.
    """
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().removeprefix(f"{PROJECT}:")
        if not sep or not key:
            raise ConfigError("--set", f"{pair!r} is not KEY=VALUE", "write e.g. --set replicas=2")
        if key in SECRET_KEYS:
            raise ConfigError(
                key,
                "is a secret and is not taken from --set (shell history and process listings "
                "would keep it in plain text)",
                f"drop --set {key}; store it with `pulumi config set --secret {key} <value>`",
            )
        if len(text) > MAX_OVERRIDE_CHARS:
            raise ConfigError(
                key,
                f"--set value is {len(text)} characters, more than the {MAX_OVERRIDE_CHARS} "
                "--set takes",
                "put the value in the stack file",
            )
        value = read_yaml_text(text, "--set", key) if text.strip() else text
        if isinstance(value, str) and ("\n" in text or "\r" in text):
            # YAML folds a line break in a plain scalar into a space, but `pulumi config set`
            # stores the text as typed: keep it, so the rules see what the program would.
            value = text
        overrides[key] = "" if value is None else value
    return overrides


def stack_values(stack: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A stack file's plain values with what-if overrides applied; plain-text secrets refused."""
    values, secret = read_stack(stack)
    check_secrets(secret)
    overrides = overrides or {}
    merged = {**values, **overrides}
    if overrides.get("existingCluster") and not values.get("existingCluster"):
        # A what-if into a cluster the stack does not own: the file's keys of the network and
        # cluster it would create mean nothing there (the stack file itself may not hold them).
        from infra.plan.existing_keys import NOT_WITH_EXISTING_CLUSTER  # the layer's keys

        for key in NOT_WITH_EXISTING_CLUSTER:
            if key not in overrides:
                merged.pop(key, None)
    return merged


def load_stack(
    stack: str, overrides: Mapping[str, Any] | None = None, today: dt.date | None = None
) -> StackConfig:
    """Validate a stack file plus what-if overrides through the one config path, including the
    rules that depend on the day (`today`, by default the real one)."""
    cfg = load_config(stack_values(stack, overrides))
    rules.check_dates(cfg, today or dt.date.today())
    return cfg
