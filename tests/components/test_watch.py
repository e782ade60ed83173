"""The dashboard and the alarms, held to CloudWatch's rules and to docs/watching.md.

`components.watch` is pure data; these tests read it the way CloudWatch would:

- every widget against the dashboard body structure (AWS CloudWatch API reference, "Dashboard
  Body Structure and Syntax": a 24-column grid, the metric widget's properties, the format of each
  entry of `metrics`), every alarm against PutMetricAlarm's rules and the arguments
  `aws.cloudwatch.MetricAlarm` takes;
- every metric read against what its producer writes: the collector's own config (its Prometheus
  relabelling and its EMF declarations, emulated), the gatekeeper's log metric filters (run on log
  lines written in the gatekeeper's own `log_format`), the NLB and Container Insights;
- what each panel draws and when each alarm fires, by emulating the part of CloudWatch that
  watch.py uses (statistics per period, metric math's IF, DIFF and MIN, SEARCH, one Metrics
  Insights SELECT, alarm evaluation) on made-up samples of two groups' leaders.

Everything watch.py returns is computed inside the tests: mutation testing switches a mutant on
only after the modules are imported.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import json
import operator
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import watch
from components.manifests import gatekeeper, metrics
from infra.adapters import monitoring_layer, wiring
from infra.plan import monitoring as plan_monitoring
from infra.plan.stackfile import load_stack
from tests import builders

WATCHING = Path(__file__).resolve().parents[2] / "docs" / "watching.md"
GRID_COLUMNS = 24
#: Properties of a metric widget (Dashboard Body Structure, "Properties of a Metric Widget").
METRIC_WIDGET_PROPERTIES = frozenset(
    {"accountId", "annotations", "end", "labels", "legend", "liveData", "metrics", "period"}
    | {"region", "setPeriodToTimeRange", "singleValueFullPrecision", "sparkline", "stacked"}
    | {"start", "stat", "table", "timezone", "title", "trend", "view", "yAxis"}
)
VIEWS = frozenset({"timeSeries", "singleValue", "gauge", "bar", "pie", "table"})
#: Rendering properties of one entry of `metrics` ("Metric Widget: Format for Each Metric").
RENDERING = frozenset(
    {"accountId", "color", "expression", "id", "label", "period", "region", "stat", "visible"}
    | {"yAxis"}
)
HORIZONTAL_ANNOTATION = frozenset({"value", "label", "color", "fill", "visible", "yAxis"})
AXIS = frozenset({"min", "max", "label", "showUnits"})
STATISTICS = frozenset({"SampleCount", "Average", "Sum", "Minimum", "Maximum"})
#: GetMetricData / PutMetricAlarm query ids: a lowercase letter, then letters, digits, `_`.
QUERY_ID = re.compile(r"[a-z][A-Za-z0-9_]*")
#: PutMetricAlarm's comparison operators and missing-data treatments.
COMPARE = {
    "GreaterThanOrEqualToThreshold": operator.ge,
    "GreaterThanThreshold": operator.gt,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
MISSING_BREACHES = {"breaching": True, "notBreaching": False, "ignore": False, "missing": False}
#: Container Insights metrics for EKS and their dimension sets (CloudWatch user guide,
#: "Amazon EKS and Kubernetes Container Insights metrics"), the ones the dashboard may read.
CONTAINER_INSIGHTS = {
    "node_cpu_utilization": {"ClusterName"},
    "node_memory_utilization": {"ClusterName"},
}
#: Words that are written in capitals in prose.
ACRONYMS = frozenset({"CPU", "KV", "NLB", "LWS"})
#: The NLB's target group dimension in the made-up NLB metrics, and another NLB's dimensions.
TARGET_GROUP = "targetgroup/k8s-gemma-vllm/0123456789abcdef"
OTHER_NLB = {"LoadBalancer": "net/another/fedcba9876543210", "TargetGroup": TARGET_GROUP}


def _dev_collector() -> metrics.CollectorSpec:
    return monitoring_layer.collector_spec(load_stack("dev"), "dev")


def dev_spec(**changes: Any) -> watch.WatchSpec:
    """As `Monitoring` builds it: names from the collector's spec, the plan's 5xx threshold and
    dev's start-up timeout."""
    collector = _dev_collector()
    planned = {"startup_s": builders.planned("dev")[1].startup_timeout_seconds}
    return watch.WatchSpec(
        stack=collector.stack,
        region=collector.region,
        namespace=collector.cloudwatch_namespace,
        cluster_name="gemma-graviton-dev-eks",
        load_balancer="net/a0123456789abcdef0123456789abcde/0123456789abcdef",
        waiting_threshold=3,
        server_errors_threshold=plan_monitoring.SERVER_ERRORS_PER_5_MINUTES,
        **{**planned, **changes},
    )


def elastic_spec(spec: watch.WatchSpec) -> watch.WatchSpec:
    """`spec` as an elastic stack's (prod's wake-up and idle-nodes clock)."""
    return dataclasses.replace(
        spec, elastic=True, wake_seconds=370, system_nodes=2, idle_alarm_s=1080
    )


@pytest.fixture
def spec() -> watch.WatchSpec:
    return dev_spec()


def _collector_config(spec: metrics.CollectorSpec | None = None) -> dict[str, Any]:
    """The collector's config (dev's by default) as Prometheus and the EMF exporter read it: the
    collector expands `$$` to a literal `$` before either sees it."""
    return yaml.safe_load(metrics.collector_config(spec or _dev_collector()).replace("$$", "$"))


@pytest.fixture
def collector_config() -> dict[str, Any]:
    return _collector_config()


# ---------------------------------------------------------------------------------------------
# The README's tables.


def _watching_it() -> str:
    return WATCHING.read_text().split("\n## Dashboard and alarms\n", 1)[1].split("\n## ", 1)[0]


def _readme_table(heading: str) -> list[list[str]]:
    rows = []
    for line in _watching_it().split(heading, 1)[1].strip().splitlines():
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] in {"panel", "alarm"} or set(cells[0]) <= {"-", " "}:
            continue
        rows.append(cells)
    return rows


def _readme_panels() -> list[tuple[str, str]]:
    """(panel name, what it shows), in the table's order; a row may name two panels."""
    return [
        (name, shows)
        for names, shows in _readme_table("**The dashboard's panels:**")
        for name in names.split(", ")
    ]


def _readme_alarms() -> dict[str, str]:
    """Alarm key: when it fires."""
    return {row[0].strip("`"): row[1] for row in _readme_table("**The alarms, and what to do:**")}


def _readme_alarm_actions() -> dict[str, str]:
    """Alarm key: what to do."""
    return {row[0].strip("`"): row[2] for row in _readme_table("**The alarms, and what to do:**")}


# ---------------------------------------------------------------------------------------------
# The dashboard body structure.


@dataclass(frozen=True)
class Row:
    """One entry of a metric widget's `metrics`: a metric (namespace, name, dimensions) or an
    expression, and its rendering properties."""

    namespace: str | None
    name: str | None
    dimensions: dict[str, str]
    options: dict[str, Any]

    @property
    def expression(self) -> str | None:
        return self.options.get("expression")

    @property
    def visible(self) -> bool:
        return self.options.get("visible", True)


#: What CloudWatch accepts for each rendering property a test checks.
_OPTION_RULES: dict[str, Callable[[Any], Any]] = {
    "id": QUERY_ID.fullmatch,
    "stat": STATISTICS.__contains__,
    "period": lambda period: _valid_period(period),
    "visible": lambda visible: isinstance(visible, bool),
    "label": lambda label: isinstance(label, str) and label,
}


def _row(entry: Any) -> Row:
    """Parses one `metrics` entry: `[namespace, name, dimName, dimValue, ..., {options}]` or
    `[{"expression": ..., "id": ...}]`; fails on anything CloudWatch would not read."""
    assert isinstance(entry, list) and entry, entry
    *parts, options = entry if isinstance(entry[-1], dict) else [*entry, {}]
    if parts:
        assert set(options) <= RENDERING - {"expression"}, f"unknown properties in {entry}"
        assert all(isinstance(p, str) and p for p in parts), entry
        assert len(parts) >= 2 and len(parts) % 2 == 0, f"namespace, name, dimension pairs: {entry}"
    else:
        assert set(options) <= RENDERING, f"unknown rendering properties in {entry}"
        assert isinstance(options.get("expression"), str), f"an expression row needs one: {entry}"
        assert "id" in options, f"an expression row needs an id: {entry}"
    for key, value in options.items():
        assert _OPTION_RULES.get(key, lambda _: True)(value), f"{key} {value!r} in {entry}"
    namespace, name = parts[:2] if parts else (None, None)
    return Row(namespace, name, dict(zip(parts[2::2], parts[3::2], strict=True)), dict(options))


def _valid_period(period: Any) -> bool:
    """CloudWatch periods: 1, 5, 10 or 30 (high resolution) or a multiple of 60 seconds."""
    return isinstance(period, int) and (
        period in (1, 5, 10, 30) or (period > 0 and period % 60 == 0)
    )


_NAME = re.compile(r"[A-Za-z_]\w*")
_FUNCTIONS = frozenset({"IF", "DIFF", "FILL", "MIN", "SEARCH"})


def _referenced_ids(expression: str) -> set[str]:
    """The query ids a metric math expression names (quoted search terms are not ids)."""
    unquoted = re.sub(r"'[^']*'", "''", expression)
    return set(_NAME.findall(unquoted)) - _FUNCTIONS


def _rows(widget: dict[str, Any]) -> list[Row]:
    return [_row(entry) for entry in widget["properties"]["metrics"]]


def _check_widget(widget: dict[str, Any], region: str) -> None:
    """Fails on anything the dashboard body structure does not allow in a metric widget."""
    props, title = widget["properties"], widget["properties"].get("title")
    assert set(widget) == {"type", "x", "y", "width", "height", "properties"}, title
    assert widget["type"] == "metric", f"{title}: every panel is a metric graph"
    x, y, width, height = (widget[k] for k in ("x", "y", "width", "height"))
    assert all(type(v) is int for v in (x, y, width, height)), f"{title}: integers"
    assert x >= 0 and width >= 1 and x + width <= GRID_COLUMNS, f"{title}: x {x} width {width}"
    assert y >= 0 and 1 <= height <= 1000, f"{title}: y {y} height {height}"
    assert set(props) <= METRIC_WIDGET_PROPERTIES, sorted(set(props) - METRIC_WIDGET_PROPERTIES)
    assert {"metrics", "region", "title", "view", "period"} <= set(props), title
    assert props["region"] == region, f"{title}: region {props['region']!r}, not {region!r}"
    assert props["view"] in VIEWS and _valid_period(props["period"]), title
    assert props.get("stat", "Sum") in STATISTICS, title
    for side, axis in props.get("yAxis", {}).items():
        assert side in {"left", "right"} and set(axis) <= AXIS, f"{title}: yAxis {side} {axis}"
    for kind, lines in props.get("annotations", {}).items():
        assert kind == "horizontal", f"{title}: annotations {kind!r}"
        for line in lines:
            assert set(line) <= HORIZONTAL_ANNOTATION and "value" in line, line
    rows = _rows(widget)
    assert rows, title
    ids = [row.options["id"] for row in rows if "id" in row.options]
    assert len(ids) == len(set(ids)), f"duplicate ids in {title}"
    for row in rows:
        if row.expression is not None:
            missing = _referenced_ids(row.expression) - set(ids)
            assert not missing, f"{row.expression} names {missing}, not ids of its widget"


def test_every_widget_is_a_valid_metric_widget_in_the_stacks_region(spec: watch.WatchSpec) -> None:
    widgets = watch.dashboard_widgets(spec)
    # Every row reads one scrape per period: a period of one scrape interval holds one sample
    # per leader, the Sum of a running total over the groups, not over repeated scrapes of one.
    assert watch.PERIOD == metrics.SCRAPE_INTERVAL_SECONDS == 60
    for widget in widgets:
        _check_widget(widget, spec.region)
        assert widget["properties"]["period"] == watch.PERIOD
        for row in _rows(widget):
            if row.namespace is not None:
                assert row.options.get("period", watch.PERIOD) == watch.PERIOD, row
    # The body CloudWatch stores is the same widgets, as canonical JSON: a change in how the
    # code orders its keys is no change to the dashboard.
    body = watch.dashboard_body(spec)
    assert json.loads(body) == {"widgets": widgets}
    assert body == json.dumps(json.loads(body), sort_keys=True)


def _flow(sizes: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where CloudWatch's automatic layout puts widgets of these sizes, in order: left to right,
    then on a new row below the tallest of the row."""
    x = y = row_height = 0
    positions = []
    for width, height in sizes:
        if x + width > GRID_COLUMNS:
            x, y, row_height = 0, y + row_height, 0
        positions.append((x, y))
        x += width
        row_height = max(row_height, height)
    return positions


def test_widgets_flow_in_reading_order_without_gaps_or_overlap(spec: watch.WatchSpec) -> None:
    widgets = watch.dashboard_widgets(spec)
    sizes = [(w["width"], w["height"]) for w in widgets]
    assert [(w["x"], w["y"]) for w in widgets] == _flow(sizes)
    # Two panels a row: each is wide enough to read a day of minutes.
    assert {width for width, _ in sizes} == {GRID_COLUMNS // 2}


def _sentence_case(text: str) -> bool:
    words = re.findall(r"[A-Za-z]+", text)
    shouting = [w for w in words if len(w) > 1 and w.isupper() and w not in ACRONYMS]
    return text[:1].isupper() and not shouting


def test_panel_titles_follow_the_readme_table_in_order(spec: watch.WatchSpec) -> None:
    titles = [w["properties"]["title"] for w in watch.dashboard_widgets(spec)]
    panels = _readme_panels()
    assert len(titles) == len(panels)
    for title, (name, _) in zip(titles, panels, strict=True):
        assert title.lower().startswith(name.lower()), (title, name)
        assert _sentence_case(title), title
    percentiles = ", ".join(f"p{round(q * 100)}" for q in watch.PERCENTILES)
    for title in titles[:2]:
        assert title.endswith(f"({percentiles})"), title


def _visible_labels(widget: dict[str, Any]) -> list[str | None]:
    return [row.options.get("label") for row in _rows(widget) if row.visible]


def test_every_drawn_line_has_the_legend_the_readme_promises(spec: watch.WatchSpec) -> None:
    widgets = {w["properties"]["title"].split(",")[0]: w for w in watch.dashboard_widgets(spec)}
    answers = next(shows for name, shows in _readme_panels() if name.startswith("front-door"))
    percentiles = [f"p{round(q * 100)}" for q in (0.5, 0.95)]
    assert "p50 and p95" in next(shows for name, shows in _readme_panels() if "first" in name)
    expected: dict[str, list[str | None]] = {
        "Time to first token": percentiles,
        "Inter-token latency": percentiles,
        "Generation tokens/s": ["tokens/s"],
        "Requests running and waiting": ["running", "waiting"],
        "KV cache usage (0-1)": ["KV cache used"],
        "Preemptions per minute": ["preemptions"],
        "Front-door answers by status": re.findall(r"\b\dxx\b|\b\d{3}\b", answers),
        "Group restarts": ["restarted"],
        # SEARCH draws one line per target group, named by its dimensions.
        "Healthy load balancer targets": [None],
        "Node memory and CPU": ["memory", "cpu"],
        # One line per leader and series, named by its group (a dynamic label).
        "Leaders' measured step and stall bound": [
            "step, group ${PROP('Dim.group')}",
            "stall bound, group ${PROP('Dim.group')}",
            "fell back, group ${PROP('Dim.group')}",
        ],
    }
    assert {title: _visible_labels(w) for title, w in widgets.items()} == expected
    queue = widgets["Requests running and waiting"]["properties"]["annotations"]
    threshold = _alarm(spec, "requests-waiting")["threshold"]
    assert queue == {"horizontal": [{"label": "waiting alarm", "value": threshold}]}


def _cumulative(row: Row) -> bool:
    """Counters, histogram buckets and the process start time: running totals, not rates."""
    sample = (row.name or "").removesuffix(metrics.RAW_SUFFIX)
    return sample.endswith(("_total", "_bucket")) or sample == watch.STARTED


def test_running_totals_are_never_drawn_only_what_is_made_of_them(spec: watch.WatchSpec) -> None:
    for widget in watch.dashboard_widgets(spec):
        rows = _rows(widget)
        title = widget["properties"]["title"]
        assert any(row.visible for row in rows), title
        for row in rows:
            if _cumulative(row):
                assert not row.visible, f"{title}: {row.name} is a running total"
                assert "id" in row.options, f"{title}: {row.name} is read by no expression"
        # Every hidden row feeds a drawn one.
        used = set().union(*(_referenced_ids(r.expression) for r in rows if r.expression))
        for row in rows:
            if not row.visible:
                assert row.options.get("id") in used, f"{title}: hidden {row} is read by nothing"


# ---------------------------------------------------------------------------------------------
# Where the metrics come from.


def _metrics_read(spec: watch.WatchSpec) -> list[tuple[str, str, dict[str, str]]]:
    """(namespace, name, dimensions) of every metric the dashboard and the alarms read."""
    read = [
        (row.namespace, row.name, row.dimensions)
        for widget in watch.dashboard_widgets(spec)
        for row in _rows(widget)
        if row.namespace is not None and row.name is not None
    ]
    for alarm in watch.alarms(spec):
        queries = alarm.args.get("metric_queries", [])
        for m in [alarm.args, *(q["metric"] for q in queries if "metric" in q)]:
            if "metric_name" in m:
                read.append((m["namespace"], m["metric_name"], m.get("dimensions", {})))
    return read


def test_every_metric_read_is_one_its_producer_writes(
    spec: watch.WatchSpec, collector_config: dict[str, Any]
) -> None:
    # What is written: the collector's EMF metrics of two leaders (their stack label and bucket
    # bounds as the collector's relabelling and Prometheus write them), the log metric filters
    # `Monitoring` creates (one per answer class, without dimensions) and Container Insights.
    written = _run(collector_config, 1, lambda minute, leaders: None)
    for status in watch.ANSWER_CLASSES:
        written.put(spec.namespace, watch.answers_metric(status), {}, 0, 1)
    for name, dimensions in CONTAINER_INSIGHTS.items():
        written.put("ContainerInsights", name, dict.fromkeys(dimensions, spec.cluster_name), 0, 1)
    read = _metrics_read(spec)
    assert read
    for namespace, name, dimensions in read:
        key = (namespace, name, frozenset(dimensions.items()))
        assert key in written.points, f"nothing writes {namespace} {name} {dimensions}"
    # The NLB's targets: a Metrics Insights query in the alarm (the panel's SEARCH, emulated in
    # test_healthy_targets_and_nodes_are_read_from_the_stacks_nlb_and_cluster).
    query = _alarm(spec, "no-healthy-target")["metric_queries"][0]["expression"]
    nlb, where = ("LoadBalancer", "TargetGroup"), ("LoadBalancer", spec.load_balancer)
    assert _insights(query) == Insights("MIN", "HealthyHostCount", "AWS/NetworkELB", nlb, where)


# ---------------------------------------------------------------------------------------------
# CloudWatch, emulated for the part watch.py uses.

Point = float | None
Fn = Callable[[int], Point]
STAT_FUNCTIONS: dict[str, Callable[[list[float]], float]] = {
    "Sum": sum,
    "Maximum": max,
    "Minimum": min,
    "Average": lambda values: sum(values) / len(values),
    "SampleCount": lambda values: float(len(values)),
}


@dataclass
class Store:
    """CloudWatch's metric store: raw data points per (namespace, name, dimensions), by minute."""

    minutes: int
    points: dict[tuple[str, str, frozenset[tuple[str, str]]], list[tuple[int, float]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def put(
        self, namespace: str, name: str, dims: Mapping[str, str], minute: int, value: float
    ) -> None:
        self.points[(namespace, name, frozenset(dims.items()))].append((minute, float(value)))

    def series(
        self,
        namespace: str,
        metric_name: str,
        stat: str,
        period: int,
        dimensions: Mapping[str, str] | None = None,
    ) -> list[Point]:
        raw = self.points.get((namespace, metric_name, frozenset((dimensions or {}).items())), [])
        return self.aggregate(raw, stat, period)

    def aggregate(self, raw: list[tuple[int, float]], stat: str, period: int) -> list[Point]:
        assert period % 60 == 0, period
        step = period // 60
        buckets: list[list[float]] = [[] for _ in range(self.minutes // step)]
        for minute, value in raw:
            buckets[minute // step].append(value)
        return [STAT_FUNCTIONS[stat](values) if values else None for values in buckets]

    def until(self, minutes: int) -> Store:
        """The store as it stood after its first `minutes` minutes."""
        kept = {key: [(m, v) for m, v in raw if m < minutes] for key, raw in self.points.items()}
        return Store(minutes, defaultdict(list, kept))

    def matching(
        self, namespace: str, name: str, keys: Iterable[str]
    ) -> dict[frozenset[tuple[str, str]], list[tuple[int, float]]]:
        """Every series of a metric whose dimension names are exactly `keys` (a schema)."""
        return {
            dims: raw
            for (ns, metric, dims), raw in self.points.items()
            if ns == namespace and metric == name and {k for k, _ in dims} == set(keys)
        }


#: The operators watch.py writes.
_OPERATORS: dict[type, Callable[[float, float], Any]] = {
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
}


def _lift(op: Callable[[float, float], Any]) -> Callable[[Point, Point], Point]:
    return lambda a, b: None if a is None or b is None else float(op(a, b))


def _math(expression: str, lookup: Callable[[str], Fn]) -> Fn:
    """Metric math, for the functions watch.py writes, compiled to a function of the period's
    index (no value: None). Its syntax is a subset of Python's expressions: Python parses it."""

    def compiled(node: ast.expr) -> Fn:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            value = float(node.value)
            return lambda t: value
        if isinstance(node, ast.Name):
            return lookup(node.id)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            node = ast.BinOp(node.left, node.ops[0], node.comparators[0])
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            a, b, op = compiled(node.left), compiled(node.right), _lift(_OPERATORS[type(node.op)])
            return lambda t: op(a(t), b(t))
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
            raise ValueError(f"cannot read {ast.unparse(node)!r} in {expression!r}")
        name = node.func.id
        if name == "MIN" and len(node.args) == 1 and isinstance(node.args[0], ast.List):
            series = [compiled(e) for e in node.args[0].elts]

            def least(t: int) -> Point:
                values = [v for v in (s(t) for s in series) if v is not None]
                return min(values) if values else None

            return least
        args = [compiled(a) for a in node.args]
        if name == "IF" and len(args) in (2, 3):
            condition, then = args[0], args[1]
            otherwise = args[2] if len(args) == 3 else (lambda t: None)

            def choose(t: int) -> Point:
                c = condition(t)
                return None if c is None else then(t) if c else otherwise(t)

            return choose
        if name == "FILL" and len(args) == 2:
            found, default = args
            return lambda t: default(t) if found(t) is None else found(t)
        if name == "DIFF" and len(args) == 1:
            (arg,) = args
            minus = _lift(operator.sub)

            # From the preceding value: a period without data is no value of the series.
            def earlier(t: int) -> Point:
                return next((v for s in range(t - 1, -1, -1) if (v := arg(s)) is not None), None)

            return lambda t: minus(arg(t), earlier(t))
        raise ValueError(f"{name}() is not a function watch.py may use, in {expression!r}")

    return compiled(ast.parse(expression.strip(), mode="eval").body)


@dataclass(frozen=True)
class Search:
    namespace: str
    dimensions: tuple[str, ...]
    terms: dict[str, str]
    stat: str
    period: int


_SEARCH = re.compile(r"SEARCH\('\{([^}]*)\} ([^']*)', '(\w+)', (\d+)\)")


def _search(expression: str) -> Search:
    match = _SEARCH.fullmatch(expression)
    assert match, f"not a SEARCH(schema terms, stat, period): {expression}"
    schema, terms, stat, period = match.groups()
    namespace, *dimensions = schema.split(",")
    found = dict(re.findall(r'(\w+)="([^"]*)"', terms))
    return Search(namespace, tuple(dimensions), found, stat, int(period))


@dataclass(frozen=True)
class Insights:
    function: str
    metric: str
    namespace: str
    dimensions: tuple[str, ...]
    where: tuple[str, str]


_SELECT = re.compile(
    r"SELECT (MIN|MAX|SUM|AVG)\((\w+)\) FROM SCHEMA\(\"([^\"]+)\", ([\w, ]+)\) "
    r"WHERE (\w+) = '([^']*)'"
)


def _insights(expression: str) -> Insights:
    match = _SELECT.fullmatch(expression)
    assert match, f"not the Metrics Insights query form: {expression}"
    function, metric, namespace, dims, key, value = match.groups()
    return Insights(function, metric, namespace, tuple(dims.split(", ")), (key, value))


def _widget_lines(widget: dict[str, Any], store: Store) -> dict[str, list[Point]]:
    """What a metric widget draws: each visible line's label (or id), its value per period."""
    props = widget["properties"]
    rows = _rows(widget)
    by_id = {row.options["id"]: row for row in rows if "id" in row.options}
    points = store.minutes * 60 // props["period"]

    def fn_for(row: Row) -> Fn:
        if row.expression is not None:
            return _math(row.expression, lambda i: fn_for(by_id[i]))
        stat = row.options.get("stat", props.get("stat", "Average"))
        period = row.options.get("period", props["period"])
        values = store.series(row.namespace or "", row.name or "", stat, period, row.dimensions)
        return lambda t: values[t]

    lines: dict[str, list[Point]] = {}
    for row in rows:
        if not row.visible:
            continue
        if row.expression is not None and row.expression.startswith("SEARCH("):
            found = _search(row.expression)
            for dims, raw in store.matching(
                found.namespace, found.terms["MetricName"], found.dimensions
            ).items():
                labels = dict(dims)
                if all(labels.get(k) == v for k, v in found.terms.items() if k != "MetricName"):
                    # A label's `${PROP('Dim.<name>')}` is the series' dimension value
                    # (CloudWatch dynamic labels); without a label, the dimensions name it.
                    name = re.sub(
                        r"\$\{PROP\('Dim\.(\w+)'\)\}",
                        lambda m, labels=labels: labels[m[1]],
                        row.options.get("label") or " ".join(labels[k] for k in found.dimensions),
                    )
                    lines[name] = store.aggregate(raw, found.stat, found.period)
            continue
        fn = fn_for(row)
        label = row.options.get("label") or row.options.get("id") or row.name or ""
        lines[label] = [fn(t) for t in range(points)]
    return lines


def _alarm_fires(args: Mapping[str, Any], store: Store) -> bool:
    """Whether an alarm is in ALARM at the end of the store's minutes (PutMetricAlarm's
    evaluation: the last `evaluation_periods` values, `datapoints_to_alarm` of them breaching,
    missing values as `treat_missing_data` says)."""
    return _alarm_state(args, store) == "ALARM"


def _ending(store: Store, period: int) -> Store:
    """The store with its minutes moved on so that its periods end where it ends: an alarm
    evaluates every minute over the periods that end then (a sliding window), not over the
    clock's periods."""
    pad = -store.minutes % (period // 60)
    moved = {key: [(m + pad, v) for m, v in raw] for key, raw in store.points.items()}
    return Store(store.minutes + pad, defaultdict(list, moved))


def _alarm_state(args: Mapping[str, Any], store: Store) -> str:
    """ALARM, OK, or INSUFFICIENT_DATA where `treat_missing_data` is `missing` and the window
    holds no value at all (CloudWatch's missing-data table, AlarmThatSendsEmail.html)."""
    store = _ending(store, _evaluated_seconds(args) // args["evaluation_periods"])
    if "metric_queries" in args:
        queries = {q["id"]: q for q in args["metric_queries"]}
        (result,) = [q for q in args["metric_queries"] if q.get("return_data")]
        periods = {q.get("period") or q.get("metric", {}).get("period") for q in queries.values()}
        (period,) = periods - {None}

        def fn_for(query: Mapping[str, Any]) -> Fn:
            if "metric" in query:
                found = store.series(**query["metric"])
            elif query["expression"].startswith("SELECT "):
                q = _insights(query["expression"])
                raw = [
                    point
                    for dims, series in store.matching(q.namespace, q.metric, q.dimensions).items()
                    if q.where in dims
                    for point in series
                ]
                stat = {"MIN": "Minimum", "MAX": "Maximum", "SUM": "Sum", "AVG": "Average"}
                found = store.aggregate(raw, stat[q.function], query["period"])
            else:
                return _math(query["expression"], lambda i: fn_for(queries[i]))
            return lambda t: found[t]

        fn = fn_for(result)
        values = [fn(t) for t in range(store.minutes * 60 // period)]
    else:
        stat, period = args["statistic"], args["period"]
        metric = (args["namespace"], args["metric_name"], stat, period, args.get("dimensions"))
        values = store.series(*metric)
    compare = COMPARE[args["comparison_operator"]]
    window = values[-args["evaluation_periods"] :]
    missing = args.get("treat_missing_data", "missing") == "missing"
    if missing and all(value is None for value in window):
        return "INSUFFICIENT_DATA"
    breaching = [
        MISSING_BREACHES[args.get("treat_missing_data", "missing")]
        if value is None
        else compare(value, args["threshold"])
        for value in window
    ]
    fires = sum(breaching) >= args.get("datapoints_to_alarm", args["evaluation_periods"])
    return "ALARM" if fires else "OK"


# ---------------------------------------------------------------------------------------------
# The leaders and the collector, emulated.

Sample = tuple[str, dict[str, str], float]
#: Prometheus writes the overflow bucket's bound as `+Inf` (text exposition format).
PROMETHEUS_INF = "+Inf"


@dataclass
class Leader:
    """What one group's leader exports: vLLM's gauges, counters and histograms."""

    started: float
    #: Its LWS group index, and its own record (`watch.SELF_SAMPLES`): the step and stall bound
    #: its startup probe took (None: not measured yet) and whether vLLM fell back.
    group: str = "0"
    step: float | None = None
    stall: float | None = None
    fell_back: float = 0.0
    generated: float = 0.0
    preempted: float = 0.0
    running: float = 0.0
    waiting: float = 0.0
    kv: float = 0.0
    latencies: dict[str, list[float]] = field(
        default_factory=lambda: {family: [] for family in watch.BUCKETS}
    )

    def restart(self, at: float) -> None:
        self.started, self.generated, self.preempted = at, 0.0, 0.0
        self.latencies = {family: [] for family in watch.BUCKETS}

    def samples(self) -> list[Sample]:
        labels = {"engine": "0", "model_name": "google/gemma-4-12B-it"}
        out: list[Sample] = [
            (watch.RUNNING, labels, self.running),
            (watch.WAITING, labels, self.waiting),
            (watch.KV_USAGE, labels, self.kv),
            (watch.PREEMPTIONS, labels, self.preempted),
            (watch.GENERATION_TOKENS, labels, self.generated),
            (watch.STARTED, {}, self.started),
            ("vllm:prompt_tokens_total", labels, 12345.0),
        ]
        for family, bounds in watch.BUCKETS.items():
            seen = self.latencies[family]
            for bound in (*bounds, PROMETHEUS_INF):
                count = sum(1 for v in seen if bound == PROMETHEUS_INF or v <= float(bound))
                out.append((f"{family}_bucket", {**labels, "le": bound}, float(count)))
            out.append((f"{family}_count", labels, float(len(seen))))
            out.append((f"{family}_sum", labels, float(sum(seen))))
        return out

    def record(self) -> list[Sample]:
        """What its gatekeeper serves at `/metrics/self`: nothing before the probe measured."""
        if self.step is None:
            return []
        out: list[Sample] = [(watch.MEASURED_STEP, {}, self.step)]
        if self.stall is not None:
            out.append((watch.STALL_BOUND, {}, self.stall))
        return [*out, (watch.PREFILL_FALLBACK, {}, self.fell_back)]


def _expand(template: str, match: re.Match[str]) -> str:
    return re.sub(
        r"\$(?:\{(\w+)\}|(\d+))",
        lambda g: match.group(int(g.group(1) or g.group(2))) or "",
        template,
    )


def _relabel(configs: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str] | None:
    """Prometheus relabelling (keep, replace), as `relabel_config` defines it
    (prometheus/model/relabel): anchored regexes, source labels joined with `;`, `replace` of
    `$1` by default, an empty result removing the label; None when the target or sample goes."""
    labels = dict(labels)
    for config in configs:
        action = config.get("action", "replace")
        source = ";".join(labels.get(s, "") for s in config.get("source_labels", []))
        match = re.fullmatch(config.get("regex", "(.*)"), source)
        if action == "keep" and match is None:
            return None
        if action == "replace" and match is not None:
            value = _expand(config.get("replacement", "$1"), match)
            if value:
                labels[config["target_label"]] = value
            else:
                labels.pop(config["target_label"], None)
        elif action not in {"keep", "replace"}:
            raise NotImplementedError(action)
    return labels


def leader_target(group: str) -> dict[str, str]:
    """The discovered target of a leader's gatekeeper metrics port."""
    return {
        "__meta_kubernetes_pod_container_port_name": gatekeeper.METRICS_PORT_NAME,
        "__meta_kubernetes_pod_label_leaderworkerset_sigs_k8s_io_group_index": group,
    }


def _collect(config: dict[str, Any], store: Store, minute: int, leader: Leader) -> None:
    """One scrape of one leader by the collector, and the EMF metrics CloudWatch makes of it."""
    served = {"/metrics": leader.samples, gatekeeper.SELF_METRICS_ROUTE: leader.record}
    meta = leader_target(leader.group)
    emf = config["exporters"]["awsemf"]
    for scrape in config["receivers"]["prometheus"]["config"]["scrape_configs"]:
        target = _relabel(scrape["relabel_configs"], meta)
        assert target is not None, f"{scrape['job_name']}: the leader's metrics port is not scraped"
        target = {k: v for k, v in target.items() if not k.startswith("__")}
        for name, labels, value in served[scrape["metrics_path"]]():
            kept = _relabel(
                scrape["metric_relabel_configs"], {**labels, **target, "__name__": name}
            )
            if kept is None:
                continue
            metric = kept.pop("__name__")
            for declaration in emf["metric_declarations"]:
                if any(re.search(s, metric) for s in declaration["metric_name_selectors"]):
                    for dims in declaration["dimensions"]:
                        if all(d in kept for d in dims):
                            store.put(
                                emf["namespace"], metric, {d: kept[d] for d in dims}, minute, value
                            )


Scrapes = Callable[[int, list[Leader]], list[Leader]]


def _run(
    config: dict[str, Any],
    minutes: int,
    step: Callable[[int, list[Leader]], None],
    scraped: Scrapes = lambda minute, leaders: leaders,
) -> Store:
    """Two groups' leaders over `minutes`: `step` changes them, then the collector scrapes the
    leaders `scraped` gives (each once by default; one twice is two scrapes in the minute, one
    left out a scrape missed)."""
    store = Store(minutes)
    leaders = [Leader(started=1_767_000_000.0), Leader(started=1_767_000_100.0, group="1")]
    for minute in range(minutes):
        step(minute, leaders)
        for leader in scraped(minute, leaders):
            _collect(config, store, minute, leader)
    return store


def _widget(spec: watch.WatchSpec, title_start: str) -> dict[str, Any]:
    (widget,) = [
        w for w in watch.dashboard_widgets(spec) if w["properties"]["title"].startswith(title_start)
    ]
    return widget


def _alarm(spec: watch.WatchSpec, key: str) -> dict[str, Any]:
    (alarm,) = [a for a in watch.alarms(spec) if a.key == key]
    return alarm.args


# ---------------------------------------------------------------------------------------------
# What the panels draw.


def _estimate(latencies: list[float], bounds: tuple[str, ...], q: float) -> Point:
    """The README's estimate: the upper bound of the first bucket holding q of the minute's
    requests; beyond the last finite bound, that bound (at least); nothing in a quiet minute."""
    if not latencies:
        return None
    for bound in bounds:
        if sum(1 for v in latencies if v <= float(bound)) >= q * len(latencies):
            return float(bound)
    return float(bounds[-1])


@pytest.mark.parametrize(("family", "title"), [(watch.TTFT, "Time to"), (watch.ITL, "Inter")])
def test_percentiles_are_the_first_bucket_reaching_the_share_over_all_groups(
    spec: watch.WatchSpec, collector_config: dict[str, Any], family: str, title: str
) -> None:
    # Per minute: (leader 0's new latencies, leader 1's); minute 4 restarts leader 1.
    minutes: list[tuple[list[float], list[float]]] = [
        ([0.03] * 10, [0.3] * 5),  # the first minute has no increase yet
        ([0.003] * 50, [0.3] * 45 + [3.0] * 5),
        ([0.07] * 3, [9.0]),
        ([], []),  # quiet
        ([0.6] * 10, [0.2]),  # leader 1 restarts: its counts start again from 0
        ([5000.0] * 20, [3000.0] * 20),  # beyond every finite bound
        ([0.012] * 94, [0.045] * 6),
        ([0.012] * 95, [0.045] * 5),
    ]
    new: list[list[float]] = []

    def step(minute: int, leaders: list[Leader]) -> None:
        if minute == 4:
            leaders[1].restart(leaders[1].started + 240)
        for leader, latencies in zip(leaders, minutes[minute], strict=True):
            leader.latencies[family] += latencies
        new.append(minutes[minute][0] + minutes[minute][1])

    store = _run(collector_config, len(minutes), step)
    lines = _widget_lines(_widget(spec, title), store)
    bounds = watch.BUCKETS[family]
    for q in watch.PERCENTILES:
        expected: list[Point] = [None]
        for minute in range(1, len(minutes)):
            # At a restart the restarted leader's counts drop: that minute shows nothing.
            expected.append(None if minute == 4 else _estimate(new[minute], bounds, q))
        assert lines[f"p{round(q * 100)}"] == expected, (family, q)


def test_tokens_per_second_and_preemptions_count_every_group_per_minute(
    spec: watch.WatchSpec, collector_config: dict[str, Any]
) -> None:
    def step(minute: int, leaders: list[Leader]) -> None:
        if minute == 3:
            leaders[1].restart(leaders[1].started + 180)
        leaders[0].generated += 600
        leaders[1].generated += 1200
        leaders[0].preempted += minute % 2
        leaders[1].preempted += 2

    store = _run(collector_config, 6, step)
    tokens = _widget_lines(_widget(spec, "Generation tokens/s"), store)
    assert tokens == {"tokens/s": [None, 30.0, 30.0, 0.0, 30.0, 30.0]}
    preemptions = _widget_lines(_widget(spec, "Preemptions per minute"), store)
    assert preemptions == {"preemptions": [None, 3.0, 2.0, 0.0, 2.0, 3.0]}


def test_queue_and_kv_cache_panels_show_all_groups_and_the_fullest_leader(
    spec: watch.WatchSpec, collector_config: dict[str, Any]
) -> None:
    def step(minute: int, leaders: list[Leader]) -> None:
        leaders[0].running, leaders[1].running = 4, 2 + minute
        leaders[0].waiting, leaders[1].waiting = minute, 1
        leaders[0].kv, leaders[1].kv = 0.25, (0.5, 0.6, 0.7)[minute]

    store = _run(collector_config, 3, step)
    assert _widget_lines(_widget(spec, "Requests running and waiting"), store) == {
        "running": [6.0, 7.0, 8.0],
        "waiting": [1.0, 2.0, 3.0],
    }
    kv = _widget(spec, "KV cache usage")
    assert _widget_lines(kv, store) == {"KV cache used": [0.5, 0.6, 0.7]}
    # A fraction: the axis is the whole of 0 to 1, as the README says.
    assert kv["properties"]["yAxis"] == {"left": {"min": 0, "max": 1}}
    node = _widget(spec, "Node memory and CPU")
    assert node["properties"]["yAxis"] == {"left": {"min": 0, "max": 100}}


def test_group_restarts_mark_and_alarm_the_minute_a_leader_started_again(
    spec: watch.WatchSpec, collector_config: dict[str, Any]
) -> None:
    def step(minute: int, leaders: list[Leader]) -> None:
        if minute in (7, 20):  # leader 0, then leader 1, each then holding the newest start
            leader = leaders[minute // 10 - 1]
            leader.restart(leader.started + 60 * minute)

    store = _run(collector_config, 30, step)
    lines = _widget_lines(_widget(spec, "Group restarts"), store)
    assert lines == {"restarted": [None, *[0.0] * 6, 1.0, *[0.0] * 12, 1.0, *[0.0] * 9]}
    # The alarm, at the end of each minute: it fires while its 5-minute window holds a restart
    # and clears after; nothing restarted, or no data, fires nothing.
    args = _alarm(spec, "group-restart")
    fired = [_alarm_fires(args, store.until(end)) for end in range(1, 31)]
    assert fired == [False] * 7 + [True] * 5 + [False] * 8 + [True] * 5 + [False] * 5
    assert not _alarm_fires(args, Store(4))
    (restarted,) = [q for q in args["metric_queries"] if q.get("return_data")]
    assert restarted["label"] == "group restarted"


#: Minute 3's scrapes, as the collector can write them. A collector restart (Recreate, a new
#: config, OOM) can put the old pod's last scrape and the new pod's first in one minute:
#: Prometheus sets each scrape's phase from the pod's hostname (scrape/manager.go
#: setOffsetSeed), and awsemf stamps each event with its scrape's time. Another leader's scrape
#: can be missing from a minute (a slow answer, the collector busy).
SCRAPES_IN_MINUTE_3: dict[str, Scrapes] = {
    "one leader scraped twice": lambda m, leaders: [leaders[0], *leaders] if m == 3 else leaders,
    "every leader scraped twice": lambda m, leaders: [*leaders, *leaders] if m == 3 else leaders,
    "an older leader's scrape missing": lambda m, leaders: leaders[1:] if m == 3 else leaders,
    "the newest leader's scrape missing": lambda m, leaders: leaders[:1] if m == 3 else leaders,
}


@pytest.mark.parametrize("scrapes", SCRAPES_IN_MINUTE_3.values(), ids=SCRAPES_IN_MINUTE_3)
def test_group_restarts_ignore_a_scrape_written_twice_or_missing(
    spec: watch.WatchSpec, collector_config: dict[str, Any], scrapes: Scrapes
) -> None:
    """Leader 1 started last; minute 3's scrapes are doubled or miss a leader: no restart is
    paged; leader 0 restarting in minute 6 (it then holds the newest start time) is, in the
    alarm's 5-minute period that holds it, and marked on the dashboard in its minute. A minute
    without the newest leader's scrape reads an older start time: the dashboard marks the
    minute after it, the alarm's period does not."""

    def step(minute: int, leaders: list[Leader]) -> None:
        if minute == 6:
            leaders[0].restart(leaders[1].started + 600)

    store = _run(collector_config, 15, step, scrapes)
    lines = _widget_lines(_widget(spec, "Group restarts"), store)["restarted"]
    newest_missing = scrapes is SCRAPES_IN_MINUTE_3["the newest leader's scrape missing"]
    marked = [None, 0.0, 0.0, 0.0, 1.0 if newest_missing else 0.0, 0.0, 1.0, *[0.0] * 8]
    assert lines == marked
    args = _alarm(spec, "group-restart")
    fired = [_alarm_fires(args, store.until(end)) for end in range(1, 16)]
    assert fired == [False] * 6 + [True] * 5 + [False] * 4


def test_every_leader_s_measurement_is_drawn_beside_the_plan_s_range(
    spec: watch.WatchSpec, collector_config: dict[str, Any]
) -> None:
    """Each leader's record, through the collector's second job, is its own line; a leader that
    has not measured yet draws nothing; the plan's slow-end step and stall ceiling are lines
    across."""
    planned = dataclasses.replace(spec, plan_step_s=37.91, plan_stall_s=85)

    def step(minute: int, leaders: list[Leader]) -> None:
        if minute >= 1:
            leaders[0].step, leaders[0].stall = 21.4, 36.0
        if minute >= 2:
            leaders[1].step, leaders[1].stall, leaders[1].fell_back = 30.2, 51.0, 1.0

    store = _run(collector_config, 3, step)
    panel = _widget(planned, "Leaders' measured step")
    assert _widget_lines(panel, store) == {
        "step, group 0": [None, 21.4, 21.4],
        "stall bound, group 0": [None, 36.0, 36.0],
        "fell back, group 0": [None, 0.0, 0.0],
        "step, group 1": [None, None, 30.2],
        "stall bound, group 1": [None, None, 51.0],
        "fell back, group 1": [None, None, 1.0],
    }
    assert panel["properties"]["annotations"] == {
        "horizontal": [
            {"label": "plan: slow end's step", "value": 37.91},
            {"label": "plan: stall ceiling", "value": 85},
        ]
    }
    # Behind a door no leader serves its record: no panel for it.
    elastic = dataclasses.replace(planned, elastic=True)
    titles = [w["properties"]["title"] for w in watch.dashboard_widgets(elastic)]
    assert not any(t.startswith("Leaders' measured step") for t in titles)


def _log_lines(statuses: Iterable[int], conf: str = "", **values: str) -> list[str]:
    """Access log lines in the gatekeeper's own `log_format` (that of `conf`, the plain
    gatekeeper's by default), nginx filling the variables; `values` set the ones a test is about."""
    conf = conf or gatekeeper.nginx_conf(builders.gatekeeper_limits())
    match = re.search(r"log_format gatekeeper escape=json((?:\s*'[^']*')+);", conf)
    assert match, "the gatekeeper has no JSON log format"
    template = "".join(re.findall(r"'([^']*)'", match.group(1)))
    lines = []
    for status in statuses:
        filled = {
            "time_iso8601": "2026-12-01T10:00:00+00:00",
            "remote_addr": "10.0.1.7",
            "gatekeeper_method": "POST",
            "gatekeeper_route": "/v1/chat/completions",
            "uri": "/v1/chat/completions",
            "status": str(status),
            "body_bytes_sent": "512",
            "gatekeeper_upstream": "127.0.0.1:8000",
            "gatekeeper_upstream_status": str(status),
            "request_time": "0.250",
            **values,
        }
        lines.append(re.sub(r"\$(\w+)", lambda m, filled=filled: filled[m.group(1)], template))
    return lines


def _record(line: str, container: str) -> dict[str, Any]:
    """A container log line as the logs add-on's Fluent Bit ships it: the JSON line parsed under
    `log_processed` (Merge_Log_Key), the pod's Kubernetes metadata under `kubernetes`."""
    return {
        "log": line,
        "log_processed": json.loads(line),
        "stream": "stdout",
        "kubernetes": {"container_name": container, "namespace_name": wiring.NAMESPACE},
    }


_TERM = re.compile(r'\$\.([\w.]+) (=|!=|>=|<=|>|<) ("[^"]*"|-?\d+(?:\.\d+)?)')
_FILTER_OPS = {"=": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge}
_FILTER_OPS |= {"<": operator.lt, "<=": operator.le}


def _filter_matches(pattern: str, event: dict[str, Any]) -> bool:
    """A CloudWatch Logs JSON filter pattern `{ term && term ... }` on one event."""
    assert pattern.startswith("{ ") and pattern.endswith(" }"), pattern
    for term in pattern[2:-2].split(" && "):
        match = _TERM.fullmatch(term)
        assert match, f"not a JSON filter term: {term!r} in {pattern!r}"
        path, op, literal = match.groups()
        value: Any = event
        for key in path.split("."):
            if not isinstance(value, dict) or key not in value:
                return False
            value = value[key]
        if literal.startswith('"'):
            matched = isinstance(value, str) and op in ("=", "!=")
            matched = matched and _FILTER_OPS[op](value, literal[1:-1])
        else:
            matched = isinstance(value, (int, float)) and not isinstance(value, bool)
            matched = matched and _FILTER_OPS[op](value, float(literal))
        if not matched:
            return False
    return True


def _answer_class(label: str, status: int) -> bool:
    """The README's classes: `Nxx` is every status of that hundred, a number is itself."""
    return status // 100 == int(label[0]) if label.endswith("xx") else status == int(label)


def test_answers_by_status_count_the_gatekeepers_own_log_lines(spec: watch.WatchSpec) -> None:
    statuses = [200, 200, 201, 299, 301, 304, 400, 401, 401, 404, 413, 429, 429, 429, 499]
    statuses += [500, 502, 504, 504]
    gatekeeper_lines = _log_lines(statuses)
    # vLLM's own JSON-looking lines with a status must not be counted.
    other_lines = _log_lines([200, 500, 401])
    assert watch.GATEKEEPER_CONTAINER == gatekeeper.CONTAINER
    store = Store(minutes=1)
    events = [_record(line, gatekeeper.CONTAINER) for line in gatekeeper_lines]
    events += [_record(line, "vllm") for line in other_lines]
    for status in watch.ANSWER_CLASSES:
        pattern = watch.answer_filter_pattern(status)
        for event in events:
            # `Monitoring`'s metric filter: value 1 per matching event, in the stack's namespace.
            if _filter_matches(pattern, event):
                store.put(spec.namespace, watch.answers_metric(status), {}, 0, 1)
    lines = _widget_lines(_widget(spec, "Front-door answers by status"), store)
    expected = {
        label: [float(sum(1 for s in statuses if _answer_class(label, s))) or None]
        for label in watch.ANSWER_CLASSES
    }
    assert lines == expected
    assert all(values != [None] for values in lines.values())


def test_healthy_targets_and_nodes_are_read_from_the_stacks_nlb_and_cluster(
    spec: watch.WatchSpec,
) -> None:
    store = Store(minutes=2)
    ours = {"LoadBalancer": spec.load_balancer, "TargetGroup": TARGET_GROUP}
    by_zone = {**ours, "AvailabilityZone": "a"}
    for minute, (healthy, az) in enumerate(((2, 1), (0, 0))):
        for dims, count in ((ours, healthy), (by_zone, az), (OTHER_NLB, 5), (ours, healthy + 1)):
            store.put("AWS/NetworkELB", "HealthyHostCount", dims, minute, count)
    lines = _widget_lines(_widget(spec, "Healthy load balancer targets"), store)
    # The worst of the minute: a target that was unhealthy at all is not counted healthy.
    assert lines == {f"{spec.load_balancer} {TARGET_GROUP}": [2.0, 0.0]}
    ours, other = {"ClusterName": spec.cluster_name}, {"ClusterName": "another"}
    for metric, utilisation in (("node_memory_utilization", 71.0), ("node_cpu_utilization", 35.0)):
        for minute in range(2):
            for dims, value in ((ours, 10), (ours, utilisation), (other, 99)):
                store.put("ContainerInsights", metric, dims, minute, value)
    lines = _widget_lines(_widget(spec, "Node memory and CPU"), store)
    # The busiest node: the one that runs out first.
    assert lines == {"memory": [71.0, 71.0], "cpu": [35.0, 35.0]}


# ---------------------------------------------------------------------------------------------
# The alarms.


def _check_alarm(key: str, args: Mapping[str, Any]) -> None:
    """Fails on anything PutMetricAlarm or `aws.cloudwatch.MetricAlarm` would refuse: the keyword
    arguments it takes, and the keys of its metric queries and of a query's metric, are
    pulumi_aws's own signatures."""
    import pulumi_aws.cloudwatch as cloudwatch

    init = inspect.signature(cloudwatch.MetricAlarmArgs.__init__).parameters
    top = {name for name in init if not name.startswith("__") and name != "self"}
    query_keys = set(cloudwatch.MetricAlarmMetricQueryArgsDict.__annotations__)
    metric_keys = set(cloudwatch.MetricAlarmMetricQueryMetricArgsDict.__annotations__)
    assert set(args) <= top, f"{key}: not MetricAlarm arguments: {sorted(set(args) - top)}"
    assert args["comparison_operator"] in COMPARE, key
    assert args.get("treat_missing_data", "missing") in MISSING_BREACHES, key
    evaluations = args["evaluation_periods"]
    assert isinstance(evaluations, int) and evaluations >= 1, key
    assert 1 <= args.get("datapoints_to_alarm", evaluations) <= evaluations, key
    assert isinstance(args["threshold"], (int, float)), key
    single = {"metric_name", "namespace", "statistic", "period", "dimensions"}
    if "metric_queries" not in args:
        assert single - {"dimensions"} <= set(args), f"{key}: a metric alarm needs {single}"
        assert args["statistic"] in STATISTICS and _alarm_period(args["period"]), key
        return
    assert not single & set(args), f"{key}: metric_queries with {sorted(single & set(args))}"
    queries = args["metric_queries"]
    ids = [q.get("id") for q in queries]
    assert len(set(ids)) == len(ids) and all(QUERY_ID.fullmatch(str(i)) for i in ids), ids
    returned = [bool(q.get("return_data")) for q in queries]
    assert returned.count(True) == 1, f"{key}: exactly one query returns the alarm's data"
    for q in queries:
        assert set(q) <= query_keys and ("metric" in q) != ("expression" in q), q
        if "metric" in q:
            m = q["metric"]
            assert set(m) <= metric_keys and {"metric_name", "namespace"} <= set(m), m
            assert m.get("stat") in STATISTICS and _alarm_period(m.get("period")), m
        elif q["expression"].startswith("SELECT "):
            assert _alarm_period(q.get("period")), f"a Metrics Insights query needs a period: {q}"
        else:
            assert _referenced_ids(q["expression"]) <= set(ids), f"{q}: an id that is no query"


def _alarm_period(period: Any) -> bool:
    """PutMetricAlarm: 10, 30 or a multiple of 60 seconds."""
    return isinstance(period, int) and (period in (10, 30) or (period > 0 and period % 60 == 0))


def _evaluated_seconds(args: Mapping[str, Any]) -> int:
    period = args.get("period") or next(
        q.get("period") or q.get("metric", {}).get("period")
        for q in args["metric_queries"]
        if q.get("period") or "metric" in q
    )
    return args["evaluation_periods"] * period


ELASTIC_ONLY = ("not-waking", "idle-nodes")
FIXED_ONLY = ("group-restart", "no-metrics")


def test_every_alarm_is_a_valid_metric_alarm(spec: watch.WatchSpec) -> None:
    specs = watch.alarms(spec)
    documented = list(_readme_alarms())
    assert [a.key for a in specs] == [k for k in documented if k not in ELASTIC_ONLY]
    # An elastic stack: not-waking in place of group-restart (a wake-up restarts a group), and
    # idle-nodes in place of no-metrics (it sleeps with no samples).
    elastic = watch.alarms(elastic_spec(spec))
    assert [a.key for a in elastic] == [k for k in documented if k not in FIXED_ONLY]
    for alarm in [*specs, *elastic]:
        _check_alarm(alarm.key, alarm.args)
        # PutMetricAlarm: evaluation periods times the period is at most a day.
        assert _evaluated_seconds(alarm.args) <= 86_400, alarm.key
    # idle-nodes counts model nodes with no Ready leader for the bound it waits out:
    # kedacore/keda v2.20.2 pkg/scaling/executor/scale_scaledobjects.go (zero groups within
    # cooldownPeriod + pollingInterval once the queue floor keeps the trigger answering) and
    # cluster-autoscaler 1.35.0 --scale-down-unneeded-time (the nodes after).
    (idle,) = [a for a in elastic if a.key == "idle-nodes"]
    assert (idle.args["evaluation_periods"], idle.args["datapoints_to_alarm"]) == (18, 18)
    queries = {q["id"]: q for q in idle.args["metric_queries"]}
    nodes = queries["nodes"]["metric"]
    assert (nodes["namespace"], nodes["metric_name"]) == ("ContainerInsights", "cluster_node_count")
    assert nodes["dimensions"] == {"ClusterName": spec.cluster_name}
    assert queries["up"]["metric"]["metric_name"] == metrics.exported_name(watch.WAITING)
    assert queries["idle"]["expression"] == "IF(nodes > 2, IF(FILL(up, 0) == 0, 1, 0), 0)"
    assert "18 minutes" in idle.description


def test_alarm_descriptions_say_what_the_readme_says(spec: watch.WatchSpec) -> None:
    readme = _readme_alarms()
    described = {alarm.key: alarm.description for alarm in watch.alarms(spec)}
    for alarm in watch.alarms(spec):
        text = alarm.description
        assert _sentence_case(text) and text.endswith("."), text
        duration = re.search(r"\b(?:for|in) (\d+) minutes", readme[alarm.key])
        if duration:
            # A description that gives a duration gives the README's.
            stated = re.findall(r"(\d+) minutes", text)
            assert set(stated) <= {duration.group(1)}, (alarm.key, text)
            assert _evaluated_seconds(alarm.args) == 60 * int(duration.group(1)), alarm.key
        else:
            assert _evaluated_seconds(alarm.args) == watch.PERIOD, alarm.key
    assert f"More than {spec.waiting_threshold} requests" in described["requests-waiting"]
    assert f"More than {spec.server_errors_threshold} 5xx" in described["server-errors"]
    assert "KV cache above 90%" in readme["kv-cache-full"]
    assert "above 90% for 10 minutes" in described["kv-cache-full"]
    assert "waiting for 5 minutes" in described["requests-waiting"]
    assert "in 5 minutes." in described["server-errors"]
    assert "restarted" in described["group-restart"]
    assert "No healthy target" in described["no-healthy-target"]
    collector = f"`kubectl -n {spec.collector_namespace} logs deploy/{metrics.NAME}`"
    assert collector in described["no-metrics"]
    assert f"logs deploy/{metrics.NAME}" in _readme_alarm_actions()["no-metrics"]


def _readme_minutes(key: str) -> int:
    found = re.search(r"\b(?:for|in) (\d+) minutes", _readme_alarms()[key])
    assert found, key
    return int(found.group(1))


def test_no_healthy_target_fires_after_two_minutes_without_one(spec: watch.WatchSpec) -> None:
    args = _alarm(spec, "no-healthy-target")
    minutes = _readme_minutes("no-healthy-target")

    ours = {"LoadBalancer": spec.load_balancer, "TargetGroup": TARGET_GROUP}

    def fires(healthy: list[int | None], elsewhere: int = 0) -> bool:
        store = Store(len(healthy))
        for minute, count in enumerate(healthy):
            if count is not None:
                store.put("AWS/NetworkELB", "HealthyHostCount", ours, minute, count)
            store.put("AWS/NetworkELB", "HealthyHostCount", OTHER_NLB, minute, elsewhere)
        return _alarm_fires(args, store)

    assert fires([2, 2, 2] + [0] * minutes)
    assert not fires([2, 2, 2] + [0] * (minutes - 1) + [1])
    assert not fires([0, 0, 0] + [1] * minutes)
    assert not fires([2, 2, 2] + [0] * (minutes - 1))
    # Another load balancer's targets are not ours.
    assert fires([1, 1] + [0] * minutes, elsewhere=3)
    # No data at all: nothing is reported healthy (the target group is empty or gone).
    assert fires([None] * (minutes + 1))
    assert args["threshold"] == 1 and args["comparison_operator"] == "LessThanThreshold"


def test_requests_waiting_fires_above_the_threshold_for_five_minutes(
    spec: watch.WatchSpec, collector_config: dict[str, Any]
) -> None:
    args = _alarm(spec, "requests-waiting")
    minutes = _readme_minutes("requests-waiting")
    assert args["threshold"] == spec.waiting_threshold

    def fires(waiting: list[tuple[float, float] | None]) -> bool:
        def step(minute: int, leaders: list[Leader]) -> None:
            now = waiting[minute]
            leaders[0].waiting, leaders[1].waiting = now if now else (0.0, 0.0)

        store = _run(collector_config, len(waiting), step)
        for key in list(store.points):  # a scrape that did not happen
            store.points[key] = [(m, v) for m, v in store.points[key] if waiting[m] is not None]
        return _alarm_fires(args, store)

    over = (spec.waiting_threshold - 1.0, 2.0)  # over the threshold only together
    at = (spec.waiting_threshold - 1.0, 1.0)
    assert fires([(0, 0)] * 2 + [over] * minutes)
    assert not fires([(0, 0)] * 3 + [over] * (minutes - 1))
    assert not fires([(0, 0)] * 2 + [over] * (minutes - 1) + [at])
    assert not fires([over] * 2 + [None] * minutes)


def test_kv_cache_full_fires_above_90_percent_for_ten_minutes(
    spec: watch.WatchSpec, collector_config: dict[str, Any]
) -> None:
    args = _alarm(spec, "kv-cache-full")
    minutes = _readme_minutes("kv-cache-full")
    assert args["threshold"] == 0.9

    def fires(fullest: list[float]) -> bool:
        def step(minute: int, leaders: list[Leader]) -> None:
            leaders[0].kv, leaders[1].kv = 0.1, fullest[minute]

        return _alarm_fires(args, _run(collector_config, len(fullest), step))

    assert fires([0.5] + [0.95] * minutes)
    assert not fires([0.5] * 2 + [0.95] * (minutes - 1))
    assert not fires([0.5] + [0.95] * (minutes - 1) + [0.9])
    assert not _alarm_fires(args, Store(minutes))


def test_server_errors_fires_on_more_5xx_than_the_threshold_in_five_minutes(
    spec: watch.WatchSpec,
) -> None:
    args = _alarm(spec, "server-errors")
    minutes = _readme_minutes("server-errors")
    threshold = spec.server_errors_threshold
    assert args["threshold"] == threshold
    readme = _readme_alarms()["server-errors"]
    assert f"more than {plan_monitoring.SERVER_ERRORS_PER_5_MINUTES} answers" in readme

    def fires(per_minute: list[int]) -> bool:
        store = Store(len(per_minute))
        for minute, count in enumerate(per_minute):
            for _ in range(count):
                store.put(spec.namespace, watch.answers_metric("5xx"), {}, minute, 1)
        return _alarm_fires(args, store)

    spread = [1] * (minutes - 1) + [threshold + 1 - (minutes - 1)]
    assert fires([0] * minutes + spread)
    assert not fires([0] * minutes + [1] * (minutes - 1) + [threshold - (minutes - 1)])
    assert not fires([0] * (2 * minutes))


def test_no_metrics_pages_when_nothing_is_written_for_the_start_up_timeout(
    spec: watch.WatchSpec, collector_config: dict[str, Any]
) -> None:
    """A fixed stack's vLLM alarms see no data as fine: with the collector down or its writes
    refused, only no-metrics tells, turning INSUFFICIENT_DATA (which pages) once a whole
    start-up timeout passed without a sample. A new alarm starts INSUFFICIENT_DATA, so a first
    deploy pages nothing before the group serves; a minute's missed scrape does not page;
    writing again turns it OK."""
    alarm = next(a for a in watch.alarms(spec) if a.key == "no-metrics")
    args = alarm.args
    assert alarm.pages_on_no_data and args["treat_missing_data"] == "missing"
    minutes = _readme_minutes("no-metrics")
    assert minutes * 60 == spec.startup_s, "the README quotes dev's start-up timeout"
    total = 3 * minutes

    def pages(written: Callable[[int], bool]) -> list[tuple[int, str]]:
        """The minute ends at which the alarm turns ALARM or INSUFFICIENT_DATA from another
        state (each pages), with the collector writing the minutes `written` gives; a new alarm
        is INSUFFICIENT_DATA."""
        store = _run(
            collector_config,
            total,
            lambda minute, leaders: None,
            lambda minute, leaders: leaders if written(minute) else [],
        )
        states = ["INSUFFICIENT_DATA"]
        states += [_alarm_state(args, store.until(end)) for end in range(1, total + 1)]
        return [
            (end, state)
            for end, (before, state) in enumerate(itertools.pairwise(states), start=1)
            if state != before and state != "OK"
        ]

    # Cold start: the first samples in the timeout's last minute; scrapes missed now and then.
    assert pages(lambda m: m >= minutes - 1 and m % 7 != 0) == []
    # Serving, then the collector stops writing at minute 40: it pages once, at the end of the
    # timeout's last minute without data (and turns OK when writing resumes).
    stop, resume = 40, 40 + minutes + 5
    assert pages(lambda m: not stop <= m < resume) == [(stop + minutes, "INSUFFICIENT_DATA")]
    # Never a sample: it stays as it was made (the first deploy is watched by `pulumi up` and
    # no-healthy-target).
    assert pages(lambda m: False) == []


def _alarm_metrics(specs: list[watch.AlarmSpec]) -> int:
    """The metrics the alarms read, as CloudWatch bills them: each metric query and Metrics
    Insights query, not the math made of them."""
    read = 0
    for alarm in specs:
        queries = alarm.args.get("metric_queries", [alarm.args])
        read += sum(1 for q in queries if "expression" not in q or "SELECT " in q["expression"])
    return read


@pytest.mark.parametrize("elastic", [False, True], ids=["fixed", "elastic"])
def test_the_plan_prices_the_alarms_the_stack_creates(spec: watch.WatchSpec, elastic: bool) -> None:
    watched = elastic_spec(spec) if elastic else spec
    specs = watch.alarms(watched)
    read = _alarm_metrics(specs)
    assert plan_monitoring.alarm_count(elastic) == (len(specs), read)
    (line,) = [
        c for c in plan_monitoring.monitoring_costs(1, elastic) if c.item == "cloudwatch alarms"
    ]
    assert line.basis.startswith(f"{len(specs)} alarms reading {read} metrics")
    assert line.usd_per_month == read * line.price.usd


def test_the_custom_metrics_are_the_ones_the_plan_prices(spec: watch.WatchSpec) -> None:
    # Every custom metric the stack pays for is one the dashboard reads, and the README's figure.
    own = {
        (name, tuple(sorted(dims.items())))
        for namespace, name, dims in _metrics_read(spec)
        if namespace == spec.namespace
    }
    # The leaders' own records are read by SEARCH, one metric per series and group.
    searched = {
        (found.terms["MetricName"], found.dimensions)
        for widget in watch.dashboard_widgets(spec)
        for row in _rows(widget)
        if row.expression and row.expression.startswith("SEARCH(")
        for found in [_search(row.expression)]
        if found.namespace == spec.namespace
    }
    assert searched == {
        (metrics.exported_name(s), (metrics.STACK_DIMENSION, metrics.GROUP_DIMENSION))
        for s in watch.SELF_SAMPLES
    }
    assert watch.custom_metric_count(groups=1) == len(own) + len(searched)
    assert watch.custom_metric_count(groups=3) == len(own) + 3 * len(searched)
    stated = re.search(r"(\d+) custom metrics", _watching_it())
    assert stated and int(stated.group(1)) == watch.custom_metric_count(groups=1)


def test_the_dashboard_url_opens_the_dashboard_in_its_region() -> None:
    assert watch.dashboard_url("eu-west-1", "gemma-graviton-dev") == (
        "https://eu-west-1.console.aws.amazon.com/cloudwatch/home?region=eu-west-1"
        "#dashboards/dashboard/gemma-graviton-dev"
    )
