"""Reading a stack's keys into the model: `load_config` (the one door both readers use, the
Pulumi program's and the offline CLI's), and the secrets' own checks (how they are stored, the
API key's shape, a rotation's two halves)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import (
    ValidationError,
)

from components.manifests import spec
from infra.plan import rules
from infra.plan.config import ConfigError, StackConfig
from infra.plan.config_parts import SECRET_KEYS


def load_config(raw: Mapping[str, Any]) -> StackConfig:
    """Validate the stack's keys (namespace already stripped) into a `StackConfig`.

    Secret keys are set aside: the caller reads them as secrets and `check_secrets` makes sure
    they were stored as such.
    """
    values = {k: _decode(v) for k, v in raw.items() if k not in SECRET_KEYS}
    region = rules.region_refusal(values)
    if region is not None:
        from infra.plan.config_fixes import region_fix  # the fix, refused only

        raise ConfigError("region", region, region_fix(values))
    try:
        cfg = StackConfig.model_validate(values)
    except ValidationError as error:
        from infra.plan.config_errors import _to_config_error  # the refusal's line, refused only

        refused = _to_config_error(error, values)
        if refused.rule.startswith("must be a list"):
            from infra.plan.config_fixes import list_syntax  # the fix, refused only

            refused = list_syntax(refused, values)
        raise refused from None
    check_rotation(raw)
    rules.check_config(cfg)
    return cfg


def _decode(value: Any) -> Any:
    """Pulumi hands structured config to the program as JSON text; decode it once."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


#: A user-chosen API key: the gatekeeper's own rule for a key it accepts (at least this many
#: characters of RFC 6750's b64token alphabet; `components.manifests.spec`), one home.
API_KEY_MIN_CHARS = spec.KEY_MIN_CHARS
API_KEY_ALPHABET = spec.KEY_ALPHABET
_API_KEY = spec.KEY_SHAPE


def check_api_key(key: str, name: str = "apiKey") -> None:
    """Refuse a user-chosen key (`name`: apiKey or apiKeyPrevious) that is short or holds other
    characters; the message never shows the key."""
    if _API_KEY.fullmatch(key):
        return
    if len(key) < API_KEY_MIN_CHARS:
        rule = (
            f"is {len(key)} characters; it needs at least {API_KEY_MIN_CHARS} of {API_KEY_ALPHABET}"
        )
    elif len(key) > spec.KEY_MAX_CHARS:
        rule = (
            f"is {len(key)} characters, more than {spec.KEY_MAX_CHARS}, which a client's headers "
            "no longer fit within the gatekeeper's 1.5 KiB of header buffers"
        )
    else:
        rule = f"holds characters outside {API_KEY_ALPHABET}"
    raise ConfigError(
        name,
        rule,
        f"run `pulumi config set --secret {name} $(openssl rand -hex 24)`"
        + (", or remove it to have one generated" if name == "apiKey" else ""),
    )


def check_rotation(raw: Mapping[str, Any]) -> None:
    """A key rotation names both its halves: the previous key (a secret) and when it stops."""
    if "apiKeyPrevious" in raw and raw.get("apiKeyOverlapUntil") is None:
        raise ConfigError(
            "apiKeyPrevious",
            "is set without `apiKeyOverlapUntil`, so the old key would be accepted for ever",
            "set `apiKeyOverlapUntil` to when it stops, such as 2026-12-09T00:00:00Z",
        )
    if raw.get("apiKeyOverlapUntil") is not None and "apiKeyPrevious" not in raw:
        raise ConfigError(
            "apiKeyOverlapUntil",
            "is set without `apiKeyPrevious`, the key it keeps accepting",
            "run `pulumi config set --secret apiKeyPrevious <the old key>`, or remove it",
        )


def check_secrets(present: Mapping[str, bool]) -> None:
    """Refuse a secret key stored in plain text. `present` maps key -> stored as secret."""
    for key, is_secret in present.items():
        if key in SECRET_KEYS and not is_secret:
            raise ConfigError(
                key,
                "is a secret but is stored in plain text",
                f"run `pulumi config set --secret {key} <value>` and remove the plain value",
            )
