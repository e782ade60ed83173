"""The elasticity keys' checks (`minGroups`, `maxGroups`, `schedule`, `queuePerGroup`): they come
together, without `replicas` and behind the gatekeeper, and a schedule's groups lie between the
floor and the ceiling. The config model runs them only when one of the keys is set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.plan.config_parts import ConfigError, ScheduleConfig

if TYPE_CHECKING:
    from infra.plan.config import StackConfig


def _keys(keys: set[str]) -> str:
    """Stack keys as prose: `a`, `b` and `c`."""
    names = [f"`{k}`" for k in sorted(keys)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


def _count(groups: int) -> str:
    return "one group" if groups == 1 else f"{groups} groups"


def check(cfg: StackConfig, given: set[str]) -> None:
    """The elasticity keys `given` come together, and `replicas` does not come with them. An
    elastic stack's groups sit behind the gatekeeper's always-on door (it answers and raises the
    wake flag while no group runs), so `frontDoor: vllm-key` is refused."""
    if cfg.elastic and not cfg.gatekeeper:
        raise ConfigError(
            "minGroups",
            "makes the stack elastic, whose groups sit behind the gatekeeper's always-on "
            "door (it answers and wakes a group while none runs), which `frontDoor: "
            "vllm-key` does not run",
            "set `replicas` instead of the elasticity keys, or set `frontDoor: gatekeeper`",
        )
    if "replicas" in cfg.model_fields_set:
        raise ConfigError(
            "replicas",
            f"fixes the number of groups, but {_keys(given)} make it follow the queue",
            "remove `replicas`, or remove the elasticity keys",
        )
    inside = cfg.schedule.groups_inside if cfg.schedule else 1
    if cfg.min_groups is None:
        raise ConfigError(
            "minGroups",
            f"is required with {_keys(given)}",
            "set it to 0 (no group while nothing asks) or 1",
        )
    lowest = min(16, max(cfg.min_groups + 1, inside))
    if cfg.max_groups is None:
        raise ConfigError("maxGroups", f"is required with {_keys(given)}", f"set it to {lowest}")
    if cfg.max_groups <= cfg.min_groups:
        # Raising `maxGroups` above a mistyped `minGroups` would hold that many groups all
        # month: lowering `minGroups` comes first, and the raise says what it holds.
        # (`maxGroups` is at least 1, so `minGroups` is too.)
        raise ConfigError(
            "maxGroups",
            f"{cfg.max_groups} is not above `minGroups` {cfg.min_groups}, so the group count "
            "is fixed",
            f"lower `minGroups` to {cfg.max_groups - 1}, or set `maxGroups` to {lowest}, "
            f"which holds {_count(cfg.min_groups)} all month, or use "
            f"`replicas: {cfg.max_groups}` without elasticity keys",
        )
    if cfg.schedule is not None:
        _check_schedule(cfg.schedule, cfg.min_groups, cfg.max_groups)


def _check_schedule(schedule: ScheduleConfig, least: int, most: int) -> None:
    if schedule.groups_inside > most:
        raise ConfigError(
            "schedule.groupsInside",
            f"{schedule.groups_inside} is above `maxGroups` {most}",
            f"use {most} or fewer, or raise `maxGroups`",
        )
    if schedule.groups_inside <= least:
        raise ConfigError(
            "schedule.groupsInside",
            f"{schedule.groups_inside} is not above `minGroups` {least}, so the window holds "
            "nothing more than the rest of the week",
            f"use {least + 1}, or remove `schedule`",
        )
    if schedule.groups_outside is not None and schedule.groups_outside != least:
        raise ConfigError(
            "schedule.groupsOutside",
            f"{schedule.groups_outside} differs from `minGroups` {least}: outside the window "
            "the floor is `minGroups`",
            f"set it to {least}, or leave it out",
        )
