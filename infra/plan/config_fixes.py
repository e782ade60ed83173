"""The fixes found by trying other values, loaded only once a value is refused
(`infra.plan.loading`): a region of the project's for one it does not deploy to (`region_fix`),
and a list written out for a single value where a list belongs (`list_syntax`). Each fix is
itself accepted: the config model and the rules take the values it names."""

from __future__ import annotations

import contextlib
import difflib
import ipaddress
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from infra.plan import prices, rules
from infra.plan.config import ConfigError, StackConfig
from infra.plan.config_errors import _to_config_error
from infra.plan.config_parts import THIS_NETWORK


def region_fix(raw: Mapping[str, Any]) -> str:
    """`use <region>` (with a zone of it when the stack's is not), for a region of the project's
    that this stack accepts: the nearest spelling of a misspelt one, else the certificate's
    region, the default and then every other in turn."""
    written = str(raw.get("region"))
    misspelt = None if rules.other_partition(written) else written
    close = difflib.get_close_matches(misspelt, prices.KNOWN_REGIONS, n=1) if misspelt else []
    certificate = str(raw.get("tlsCertificateArn") or "").split(":")
    candidates = [
        *close,
        *(certificate[3:4] if len(certificate) > 3 else []),
        str(StackConfig.model_fields["region"].default),
        *prices.KNOWN_REGIONS,
    ]
    zone = raw.get("availabilityZone")
    first = None
    for region in dict.fromkeys(c for c in candidates if c in prices.KNOWN_REGIONS):
        change: dict[str, Any] = {"region": region}
        if isinstance(zone, str) and not zone.startswith(region):
            change["availabilityZone"] = f"{region}a"
        fix = f"use {region}" + (
            f" with `availabilityZone` {region}a" if "availabilityZone" in change else ""
        )
        first = first or fix
        if _accepted({**raw, **change}):
            return fix
    return first or "use a region name such as us-west-2"


def list_syntax(refused: ConfigError, raw: Mapping[str, Any]) -> ConfigError:
    """A single value where a list belongs: the same refusal, with the list written out as
    `--set` and the stack file take it, for an example this stack accepts (the value itself as a
    one-item list, else its first address alone, else the key's default); `refused` as it is
    when none is."""
    key, value = refused.key, raw.get(refused.key)
    field = next((f for n, f in StackConfig.model_fields.items() if (f.alias or n) == key), None)
    if field is None or not isinstance(value, str):
        return refused
    as_list = [v.strip() for v in value.split(",") if v.strip()]
    examples = [as_list]
    with contextlib.suppress(ValueError):
        first = ipaddress.IPv4Network(value.strip(), strict=False)[0]
        if first not in THIS_NETWORK:
            examples.append([f"{first}/32"])
    for example in examples:
        if example and _refusal({**raw, key: example}) is None:
            return _as_list(refused, example)
    # The value written as a list is still refused by a rule of its own key (0.0.0.0/0 over
    # plain HTTP): that rule is the mistake to name, not the list syntax alone.
    rule = _refusal({**raw, key: as_list}) if as_list else None
    if rule is not None and rule.key == key:
        return ConfigError(
            key,
            f"{refused.rule}, as --set '{key}={json.dumps(as_list)}' writes one, but as a list "
            f"{rule.rule}",
            rule.fix,
        )
    if isinstance(field.default, tuple) and _accepted({**raw, key: list(map(str, field.default))}):
        return _as_list(refused, [str(v) for v in field.default])
    return refused


def _as_list(refused: ConfigError, example: list[str]) -> ConfigError:
    key = refused.key
    shown = json.dumps(example)
    return ConfigError(
        key,
        refused.rule,
        f"write a list, as --set '{key}={shown}' or one `- {example[0]}` line per item "
        "under the key in the stack file",
    )


def _refusal(raw: Mapping[str, Any]) -> ConfigError | None:
    """The refusal the config model and the rules give these values, if any."""
    rule = rules.region_refusal(raw)
    if rule is not None:
        return ConfigError("region", rule, region_fix(raw))
    try:
        rules.check_config(StackConfig.model_validate(raw))
    except ConfigError as error:
        return error
    except ValidationError as error:
        return _to_config_error(error, raw)
    return None


def _accepted(raw: Mapping[str, Any]) -> bool:
    """Whether the config model and the rules take these values."""
    return _refusal(raw) is None
