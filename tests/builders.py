"""Small builders of the manifests' spec types, for tests that exercise a builder without the
planner. Every field has an explicit, small value here (none is a stack's); a test names the
fields it is about as keyword overrides, so what it asserts reads beside what it sets.

Tests that check the planner and the manifests agree build their spec from a plan instead
(`planned`, `planned_spec`, `rendered`: a stack with `--set` values, planned once per run and
shared, the config, plan and spec being frozen); they are integration tests, and say so.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from components.manifests.asleep import Asleep
from components.manifests.door import DoorSpec
from components.manifests.drain import DrainSpec, grace
from components.manifests.gatekeeper_conf import GatekeeperLimits
from components.manifests.quantize import QuantizeSpec
from components.manifests.scaling import CronWindow, ScalerSpec
from components.manifests.spec import MODEL_TAINT, ServerSpec
from infra.adapters.render import rendered_objects
from infra.adapters.wiring import server_spec as spec_of
from infra.plan.config import StackConfig
from infra.plan.sizing import Plan, plan
from infra.plan.stackfile import load_stack


def drain_spec(**overrides: Any) -> DrainSpec:
    """A drain with the plan's shape (accept while the NLB notices, a reply, an idle check)."""
    values: dict[str, Any] = {
        "health_check_interval_s": 10,
        "health_check_timeout_s": 10,
        "health_check_threshold": 2,
        "accept_s": 35,
        "reply_s": 600,
        "settle_s": 5,
        "deregistration_delay_s": 35,
        "unhealthy_draining_s": 635,
    }
    values |= overrides
    bounds = (values["accept_s"], values["reply_s"], values["settle_s"])
    return DrainSpec(**{"grace_s": grace(*bounds), **values})


def gatekeeper_limits(**overrides: Any) -> GatekeeperLimits:
    """A gatekeeper with one worker of 1,024 connections, one request in flight per client, no
    token tiers, no grammar input and no log-probabilities."""
    values: dict[str, Any] = {
        "tls": False,
        "listener_port": 80,
        "max_request_bytes": 4096,
        "client_requests_per_minute": 600,
        "client_burst": 2,
        "client_concurrent_requests": 1,
        "all_requests": 64,
        "large_bodies_per_minute": 600,
        "client_connections": 8,
        "connection_capacity": 0,
        "keyed_requests": 64,
        "keyed_large": 16,
        "worker_connections": 1024,
        "probe_connections": 32,
        "max_sequences": 1,
        "max_logprobs": 0,
        "max_schema_bytes": 0,
        "max_schema_counts": (10, 100),
        "schema_concurrency": 1,
        "max_reply_bytes": 1 << 20,
        "max_reply_tokens": 0,
        "reply_timeout_seconds": 30,
        "header_timeout_seconds": 10,
        "reasons": (),
        "chat_page": False,
        "client_tokens": 0,
        "client_tokens_bound": 0,
        "token_tiers": (),
        "max_model_len": 0,
        "served_model": "model",
    }
    return GatekeeperLimits(**{**values, **overrides})


def cron_window(**overrides: Any) -> CronWindow:
    """Weekdays 08:00-19:00 in Berlin, one group inside, none outside."""
    values: dict[str, Any] = {
        "time_zone": "Europe/Berlin",
        "weekdays": (0, 1, 2, 3, 4),
        "start": "08:00",
        "end": "19:00",
        "groups_inside": 1,
        "groups_outside": 0,
        "hours_a_week": 55,
    }
    return CronWindow(**{**values, **overrides})


def scaler_spec(**overrides: Any) -> ScalerSpec:
    """Zero to three groups of two nodes on the queue alone (a `schedule` override adds a
    window), polled every 30 s."""
    values: dict[str, Any] = {
        "min_groups": 0,
        "max_groups": 3,
        "queue_per_group": 4,
        "running_per_group": 256,  # one group's max_num_seqs, as the planner sets it
        "tolerance": 0.1,
        "up_window_s": 30,
        "down_window_s": 600,
        "cooldown_s": 600,
        "polling_s": 30,
        "metric_lag_s": 45,
        "cold_start_s": 300,
        "nodes_per_group": 2,
        "schedule": None,
    }
    return ScalerSpec(**{**values, **overrides})


def quantize_spec(**overrides: Any) -> QuantizeSpec:
    """A W8A8 Job for two volumes, shipping only an empty requirements file (its checkpoint,
    source and claims are the server spec's)."""
    values: dict[str, Any] = {
        "scheme": "W8A8",
        "volumes": 2,
        "modelled_seconds": 1200,
        "deadline_seconds": 3600,
        "memory_gib": 26.5,
        "cpu": 6,
        "peak_gib": 24.0,
        "scratch_gib": 60,
        "files": {"requirements-quantize.txt": ""},
    }
    return QuantizeSpec(**{**values, **overrides})


#: A model server of three stages and two groups, its gatekeeper in each leader pod.
SERVER = ServerSpec(
    name="gemma",
    namespace="serving",
    image="vllm/vllm-openai-cpu:v0.31.0-arm64",
    model="google/gemma-4-12B-it",
    stages=3,
    replicas=2,
    pod_memory_gib=26.5,
    pod_cpu=6,
    shm_gib=2,
    kv_cache_bytes=4_529_848_320,
    max_model_len=8192,
    max_num_batched_tokens=4096,
    weight_prefetch=True,
    model_volume_gib=27,
    persistent_models=False,
    storage_class=None,
    startup_timeout_seconds=1800,
    node_selector={"gemma-graviton.dev/pool": "model"},
    node_pool={"gemma-graviton.dev/pool": "model"},
    allowed_cidrs=("203.0.113.0/24",),
    limits=gatekeeper_limits(max_reply_tokens=1024),
    gatekeeper_millicpu=30,
    gatekeeper_memory_mib=64,
    drain=drain_spec(),
)


def server_spec(**overrides: Any) -> ServerSpec:
    """`SERVER` with `overrides`."""
    return replace(SERVER, **overrides)


def door_spec(**overrides: Any) -> DoorSpec:
    """An elastic stack's door for three groups, on the system nodes."""
    values: dict[str, Any] = {
        "asleep": Asleep(wake_seconds=370, signal_seconds=60),
        "max_groups": 3,
        "node_selector": {"gemma-graviton.dev/pool": "system"},
    }
    return DoorSpec(**{**values, **overrides})


def elastic_server_spec(**overrides: Any) -> ServerSpec:
    """`SERVER` behind a door, its group count KEDA's (an elastic stack)."""
    return server_spec(autoscaled=True, model_taint=MODEL_TAINT, door=door_spec(), **overrides)


@functools.cache
def _planned(stack: str, sets: str, today: dt.date | None) -> tuple[StackConfig, Plan]:
    cfg = load_stack(stack, json.loads(sets), today)
    return cfg, plan(cfg, stack)


def clear_caches() -> None:
    """Plan and render again on the next call (`tests/conftest.py`, under mutation stats)."""
    _planned.cache_clear()
    _rendered.cache_clear()


def planned(
    stack: str = "dev", sets: Mapping[str, Any] | None = None, today: dt.date | None = None
) -> tuple[StackConfig, Plan]:
    """`stack` with the `--set` values `sets` (on `today`), validated and planned once a run."""
    return _planned(stack, json.dumps(dict(sets or {}), sort_keys=True), today)


def planned_spec(
    stack: str = "dev", sets: Mapping[str, Any] | None = None, today: dt.date | None = None
) -> ServerSpec:
    """The server spec the program builds for `stack` with `sets`."""
    return spec_of(*planned(stack, sets, today))


@functools.cache
def _rendered(stack: str, sets: str, today: dt.date | None) -> list[Any]:
    return rendered_objects(*_planned(stack, sets, today))


def rendered(
    stack: str = "dev", sets: Mapping[str, Any] | None = None, today: dt.date | None = None
) -> list[dict[str, Any]]:
    """The objects `--render` prints for `stack` with `sets`: a copy a test may change."""
    return copy.deepcopy(_rendered(stack, json.dumps(dict(sets or {}), sort_keys=True), today))
