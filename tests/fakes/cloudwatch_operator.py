"""What the `amazon-cloudwatch-observability` add-on's operator would annotate for automatic
instrumentation, given the add-on's configuration values: the chart's and the operator's
decision, reduced to the inputs this project controls.

Encodes, read 2026-12-01:
- aws-observability/helm-charts 6.4.0 (commit 71a298f), charts/amazon-cloudwatch-observability:
  values.yaml `manager.applicationSignals.autoMonitor` (languages java, python, dotnet, nodejs;
  `exclude`, `customSelector`), and templates/_helpers.tpl `manager.monitorAllServices` (true
  unless the region matches ap-east-2|ap-southeast-6|cn-.*|.*-iso[a-z]*-.*) and
  `manager.modify-auto-monitor-config` (a `monitorAllServices` the user set is kept);
- aws/amazon-cloudwatch-agent-operator (main, a8d766c) pkg/instrumentation/auto/monitor.go:
  `isWorkloadAutoMonitored` (off unless monitorAllServices; skips a fixed namespace list; on
  when a Service in the workload's namespace with a non-empty selector matches the pod
  template's labels) and `MutateObject` (auto-monitored adds every configured language,
  customSelector adds its own, `exclude` removes last).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_LANGUAGES = ("java", "python", "dotnet", "nodejs")
#: monitor.go `excludedNamespaces` (the ones a cluster of this project could have).
SKIPPED_NAMESPACES = frozenset({"amazon-cloudwatch", "monitoring", "observability", "kube-system"})
_NO_APP_SIGNALS_REGIONS = re.compile(r"ap-east-2|ap-southeast-6|cn-.*|.*-iso[a-z]*-.*")


def _listed(
    section: Mapping[str, Any], language: str, namespace: str, kind: str, name: str
) -> bool:
    entry = section.get(language) or {}
    return namespace in (entry.get("namespaces") or []) or f"{namespace}/{name}" in (
        entry.get(kind) or []
    )


def annotated_languages(
    configuration: Mapping[str, Any] | None,
    region: str,
    *,
    namespace: str,
    kind: str,
    name: str,
    template_labels: Mapping[str, str],
    service_selectors: Iterable[Mapping[str, str]],
) -> set[str]:
    """The languages the operator would annotate workload `namespace/name` (`kind`:
    deployments, statefulsets or daemonsets) for, whose pod template carries
    `template_labels`, with the Services of its namespace selecting `service_selectors`."""
    auto = ((configuration or {}).get("manager") or {}).get("applicationSignals", {})
    auto = auto.get("autoMonitor") or {}
    monitor_all = auto.get("monitorAllServices")
    if monitor_all is None:
        monitor_all = not _NO_APP_SIGNALS_REGIONS.fullmatch(region)
    languages = set(auto.get("languages") or DEFAULT_LANGUAGES)
    chosen = {
        lang
        for lang in languages
        if _listed(auto.get("customSelector") or {}, lang, namespace, kind, name)
    }
    selected = any(
        selector and all(template_labels.get(k) == v for k, v in selector.items())
        for selector in service_selectors
    )
    if monitor_all and namespace not in SKIPPED_NAMESPACES and selected:
        chosen |= languages
    return {
        lang
        for lang in chosen
        if not _listed(auto.get("exclude") or {}, lang, namespace, kind, name)
    }
