"""A monitored stack's watch as the `Monitoring` component takes it (`components.watch.WatchSpec`):
where its metrics are, the alarms' thresholds, the start-up timeout a fixed stack's no-metrics
alarm waits out and, on an elastic stack, the door's wake-up, the system nodes and the idle-nodes
alarm's clock. The cluster's name and the load balancer are the deploy's; the component puts
them in. Not in `monitoring`: the plan's costs import that module, and this one reads the elastic
figures, which stand on those costs."""

from __future__ import annotations

from components.watch import WatchSpec
from infra.plan import elastic, monitoring, sleep
from infra.plan.config import StackConfig
from infra.plan.sizing import Plan


def cloudwatch_namespace(stack: str) -> str:
    """Where the stack's own metrics are (the collector's EMF and the log filters)."""
    return f"GemmaGraviton/{stack}"


def watch_spec(cfg: StackConfig, p: Plan) -> WatchSpec:
    """The dashboard's and the alarms' figures of the stack."""
    return WatchSpec(
        stack=p.stack,
        region=cfg.region,
        namespace=cloudwatch_namespace(p.stack),
        waiting_threshold=monitoring.waiting_threshold(
            cfg.waiting_requests_alarm, p.max_concurrency, p.replicas
        ),
        server_errors_threshold=monitoring.SERVER_ERRORS_PER_5_MINUTES,
        elastic=cfg.elastic,
        wake_seconds=sleep.retry_after_seconds(cfg, p) if cfg.elastic else 0,
        system_nodes=elastic.system_group(cfg).nodes if cfg.elastic else 0,
        idle_alarm_s=elastic.idle_alarm(cfg, p) if cfg.elastic else 0,
        plan_step_s=p.liveness.calibrate_step_s,
        plan_stall_s=p.liveness.probes.stall_s,
        startup_s=p.startup_timeout_seconds,
    )
