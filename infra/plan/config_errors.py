"""A pydantic refusal of a stack's keys turned into the one `ConfigError` line: the key as the
stack file writes it, the rule and the fix (`to_config_error`)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from pydantic import (
    ValidationError,
)

from infra.plan.config import ConfigError, StackConfig
from infra.plan.config_parts import SECRET_KEYS, ModelProfileConfig, ScheduleConfig


def _fix_of(key: str) -> str:
    top = key.split(".")[0]
    for name, info in StackConfig.model_fields.items():
        if (info.alias or name) == top:
            extra = info.json_schema_extra
            if isinstance(extra, dict) and "fix" in extra:
                return str(extra["fix"])
    return "see the stack keys in docs/planning.md"


class MissingKeysError(ConfigError):
    """Every required key a stack leaves out, in one line, so one edit of the file fixes them
    all (`key`, `rule` and `fix` are the first one's)."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(keys[0], "is required", _fix_of(keys[0]))
        self.keys = tuple(keys)
        if len(keys) > 1:
            names = ", ".join(f"`{k}`" for k in keys[:-1]) + f" and `{keys[-1]}`"
            fixes = "; ".join(f"`{k}`: {_fix_of(k)}" for k in keys)
            self.args = (f"{names} are required; {fixes}",)


def _alias_of(loc: tuple[int | str, ...]) -> str:
    """The stack key a pydantic error location points at (`maxModelLen`, `modelProfile.layers`).

    Locations are aliases (keys are validated as written); union branches append tags such as
    `int` or `literal['auto']`, which are not keys."""
    top = str(loc[0]) if loc else "config"
    profile_keys = {f.alias or n for n, f in ModelProfileConfig.model_fields.items()}
    if top == "modelProfile" and len(loc) > 1 and loc[1] in profile_keys:
        return f"modelProfile.{loc[1]}"
    schedule_keys = {f.alias or n for n, f in ScheduleConfig.model_fields.items()}
    if top == "schedule" and len(loc) > 1 and loc[1] in schedule_keys:
        return f"schedule.{loc[1]}"
    return top


#: Keys a stack once took and takes no more, with what to do instead.
RETIRED_KEYS = {
    "permissionsBoundaryArn": (
        "is no longer a stack key: the stack's IAM roles are the bootstrap's, which gives them "
        "their boundary (docs/deploying.md, step 4)",
        "remove it with `pulumi config rm permissionsBoundaryArn`",
    ),
}


def _unknown_key(key: str) -> ConfigError:
    if key in RETIRED_KEYS:
        return ConfigError(key, *RETIRED_KEYS[key])
    known = [f.alias or n for n, f in StackConfig.model_fields.items()] + list(SECRET_KEYS)
    close = difflib.get_close_matches(key, known, n=1)
    fix = f"did you mean `{close[0]}`?" if close else "remove it (see docs/planning.md)"
    return ConfigError(key, "is not a gemma-graviton stack key", fix)


def _to_config_error(error: ValidationError, raw: Mapping[str, Any]) -> ConfigError:
    first = error.errors()[0]
    loc = tuple(first["loc"])
    if first["type"] == "extra_forbidden":
        if len(loc) == 1:
            return _unknown_key(str(loc[0]))
        key = _alias_of(loc[:-1])
        if key == "schedule":
            fields = ", ".join(f.alias or n for n, f in ScheduleConfig.model_fields.items())
            return ConfigError(
                f"schedule.{loc[-1]}", "is not a field of the schedule", f"remove it ({fields})"
            )
        return ConfigError(f"{key}.{loc[-1]}", "is not a field of the model profile", "remove it")
    if first["type"] == "missing":
        key = _alias_of(loc)
        if "." in key:
            return ConfigError(key, "is required", _fix_of(key))
        missing = [
            str(e["loc"][0])
            for e in error.errors()
            if e["type"] == "missing" and len(e["loc"]) == 1
        ]
        # Keys required unless another is set: one line names them with the others.
        for name, info in StackConfig.model_fields.items():
            unless = (info.json_schema_extra or {}).get("required_unless")  # type: ignore[union-attr]
            key = info.alias or name
            if unless and not raw.get(unless) and raw.get(key) is None:
                missing.append(key)
        order = [f.alias or n for n, f in StackConfig.model_fields.items()]
        return MissingKeysError(sorted(missing, key=order.index))
    key = _alias_of(loc)
    ctx_error = (first.get("ctx") or {}).get("error")
    if isinstance(ctx_error, ConfigError):
        return ctx_error
    top = key.split(".")[0]
    shown = raw.get(top, "?")
    if "." in key and isinstance(shown, Mapping):
        shown = shown.get(key.split(".", 1)[1], "?")
    rule = _rule_text(first)
    return ConfigError(key, f"{rule} (got {_shown(shown)})", _fix_of(key))


def _shown(value: Any) -> str:
    """A value as the user wrote it: numbers bare, other text quoted."""
    if isinstance(value, str) and re.fullmatch(r"[-+]?\d+(\.\d*)?", value.strip()):
        return value.strip()
    return repr(value)


def _rule_text(first: Mapping[str, Any]) -> str:
    """Pydantic's message for the most specific branch, phrased as a rule. The container
    checks come first: "a valid tuple" is pydantic's word for a list in the stack file."""
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "too_short":
        return "must list at least one value"
    if message == "Input should be a valid tuple":
        return "must be a list"
    if message == "Input should be a valid dictionary":
        return "must be a mapping"
    if message.startswith("Input should be "):
        return "must be " + message.removeprefix("Input should be ")
    if message.startswith("Input is not a valid "):
        return "must be a valid " + message.removeprefix("Input is not a valid ")
    if message.startswith("String should match pattern"):
        return "has the wrong form"
    return message
