"""The program's side of config loading: Pulumi's config bag into the one validation path.

Everything is checked before the first resource is registered, so a bad stack creates nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from pulumi.runtime import config as runtime_config

from infra.adapters import wiring
from infra.plan import addons, checked, placeholders, readiness, support, zones
from infra.plan.config import ConfigError, StackConfig
from infra.plan.config_parts import PROJECT
from infra.plan.loading import check_api_key, check_secrets, load_config
from infra.plan.sizing import Plan


@dataclass(frozen=True)
class StackSecrets:
    """Secrets read as Pulumi secrets; they leave the program only as secret outputs."""

    hf_token: pulumi.Output[str]
    #: `None` when the stack does not set one: the model server generates it.
    api_key: pulumi.Output[str] | None
    #: During a rotation, the key accepted until `apiKeyOverlapUntil`.
    api_key_previous: pulumi.Output[str] | None = None


def raw_config(project: str) -> tuple[dict[str, str], dict[str, bool]]:
    """Every `<project>:` value Pulumi passed in, and whether each was stored as a secret."""
    prefix = f"{project}:"
    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    ours = {key.removeprefix(prefix): key for key in sorted(keys) if key.startswith(prefix)}
    values = {key: runtime_config.get_config(full) for key, full in ours.items()}
    return values, {key: runtime_config.is_config_secret(full) for key, full in ours.items()}


def read_stack_config(stack: str) -> tuple[StackConfig, Plan, StackSecrets]:
    """Validate and plan the stack; a refusal ends the program with the CLI's one-line message."""
    values, secret = raw_config(PROJECT)
    try:
        check_secrets(secret)
        if "apiKey" in values:
            check_api_key(values["apiKey"])
        if "apiKeyPrevious" in values:
            check_api_key(values["apiKeyPrevious"], "apiKeyPrevious")
            if values["apiKeyPrevious"] == values.get("apiKey"):
                raise ConfigError(
                    "apiKeyPrevious",
                    "is the current `apiKey`, so nothing rotates",
                    "set `apiKey` to the new key (`pulumi config set --secret apiKey "
                    "$(openssl rand -hex 24)`)",
                )
        if "hfToken" not in values:
            raise ConfigError(
                "hfToken",
                f"is required to download {values.get('model', 'the model')} (a gated model)",
                "run `pulumi config set --secret hfToken <token with the licence accepted>`",
            )
        # Secret keys too: the rotation check needs to know `apiKeyPrevious` is set (it drops them).
        cfg = load_config(values)
        result = checked.checked_plan(cfg, stack, list(values), dt.date.today())
        wiring.server_spec(cfg, result)  # refuses `vllmExtraArgs` before anything is created
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    # A preview plans with the shipped placeholders; an update would build what nobody can use.
    refusal = None if pulumi.runtime.is_dry_run() else placeholders.refusal(placeholders.find(cfg))
    if refusal:
        raise pulumi.RunError(refusal)
    config = pulumi.Config(PROJECT)
    secrets = StackSecrets(
        hf_token=config.require_secret("hfToken"),
        api_key=config.get_secret("apiKey"),
        api_key_previous=config.get_secret("apiKeyPrevious"),
    )
    return cfg, result, secrets


def warn_about(cfg: StackConfig, today: dt.date | None = None) -> None:
    """Log the plan's warnings (support window, open endpoint) so every preview shows them."""
    for line in support.warnings(cfg, today or dt.date.today()):
        pulumi.log.warn(line)
    for line in [*addons.warnings(cfg.kubernetes_version), *readiness.warnings(cfg)]:
        pulumi.log.warn(line)


def place_zones(cfg: StackConfig, plan_: Plan, provider: aws.Provider) -> zones.ZonePlacement:
    """Ask the account which zones exist and offer the planned type; refuse a bad zone in one
    line before anything is built.

    Both lookups are data sources, so they run during `pulumi preview` too.
    """
    invoke = pulumi.InvokeOptions(provider=provider)
    available = aws.get_availability_zones(state="available", opts=invoke)
    region_zones = [
        zones.Zone(name, zone_id)
        for name, zone_id in zip(available.names, available.zone_ids, strict=True)
    ]
    offerings = aws.ec2.get_instance_type_offerings(
        location_type="availability-zone-id",
        filters=[
            aws.ec2.GetInstanceTypeOfferingsFilterArgs(
                name="instance-type", values=[plan_.instance_type]
            )
        ],
        opts=invoke,
    )
    try:
        return zones.place(
            region=cfg.region,
            availability_zone=cfg.availability_zone,
            control_plane_zone=cfg.control_plane_zone,
            instance_type=plan_.instance_type,
            zones=region_zones,
            offered_zone_ids=set(offerings.locations),
        )
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
