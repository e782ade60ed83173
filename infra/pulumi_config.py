"""The program's side of config loading: Pulumi's config bag into the one validation path.

Everything is checked before the first resource is registered, so a bad stack creates nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pulumi
from pulumi.runtime import config as runtime_config

from infra.plan import advice
from infra.plan.config import (
    PROJECT,
    SECRET_KEYS,
    ConfigError,
    StackConfig,
    check_secrets,
    load_config,
)
from infra.plan.sizing import Plan


@dataclass(frozen=True)
class StackSecrets:
    """Secrets read as Pulumi secrets; they leave the program only as secret outputs."""

    hf_token: pulumi.Output[str]
    #: `None` when the stack does not set one: the model server generates it.
    api_key: pulumi.Output[str] | None


def _raw_config() -> tuple[dict[str, str], dict[str, bool]]:
    """Every `gemma-graviton:` value Pulumi passed in, and whether each was stored as a secret."""
    prefix = f"{PROJECT}:"
    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    values: dict[str, str] = {}
    secret: dict[str, bool] = {}
    for full_key in sorted(keys):
        if not full_key.startswith(prefix):
            continue
        key = full_key.removeprefix(prefix)
        values[key] = runtime_config.get_config(full_key)
        secret[key] = runtime_config.is_config_secret(full_key)
    return values, secret


def read_stack_config(stack: str) -> tuple[StackConfig, Plan, StackSecrets]:
    """Validate and plan the stack; a refusal ends the program with the CLI's one-line message."""
    values, secret = _raw_config()
    try:
        check_secrets(secret)
        if "hfToken" not in values:
            raise ConfigError(
                "hfToken",
                f"is required to download {values.get('model', 'the model')} (a gated model)",
                "run `pulumi config set --secret hfToken <token with the licence accepted>`",
            )
        cfg = load_config({k: v for k, v in values.items() if k not in SECRET_KEYS})
        result = advice.checked_plan(cfg, stack, list(values), dt.date.today())
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    config = pulumi.Config(PROJECT)
    secrets = StackSecrets(
        hf_token=config.require_secret("hfToken"),
        api_key=config.get_secret("apiKey"),
    )
    return cfg, result, secrets
