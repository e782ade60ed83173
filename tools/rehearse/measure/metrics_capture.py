"""What real vLLM exports, recorded: the rehearsal scrapes the running leader's `/metrics` through
the gatekeeper's metrics listener (the path the in-cluster collector takes) and writes every
metric family, its type, its label names and a histogram's bucket bounds to a committed fixture.

The dashboard and the alarms may use only names and labels this fixture holds
(`tests/components/test_monitoring.py`), so a vLLM upgrade that renames a metric fails a test
instead of leaving an empty panel. `make rehearse` refreshes the fixture; commit the diff.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.plan.stackfile import REPO
from tools.rehearse.checks import Check
from tools.rehearse.front_door.gatekeeper_run import request

#: The fixture the tests read. One file per vLLM version: a new version gets a new fixture.
FIXTURE = REPO / "tests" / "fixtures" / "vllm" / "metrics-v0.31.json"
#: Families real vLLM must export for the dashboard to mean anything (sanity, not the subset
#: test: that one reads `components.watch`).
MUST_HAVE = ("vllm:num_requests_running", "vllm:time_to_first_token_seconds")

_TYPE = re.compile(r"^# TYPE (\S+) (\S+)$")
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
#: Sample-name suffixes of one family, by type (Prometheus text format 0.0.4).
_SUFFIXES = {
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("_sum", "_count", "_created"),
    "counter": ("_total", "_created"),
}


@dataclass(frozen=True)
class Family:
    """One metric family as scraped."""

    name: str
    type: str
    #: Every sample name of the family (`x_bucket`, `x_sum`, ...).
    samples: tuple[str, ...]
    #: Label names seen on any sample, `le` included for a histogram's buckets.
    labels: tuple[str, ...]
    #: A histogram's finite bucket bounds, as vLLM prints them.
    buckets: tuple[str, ...] = ()


def parse_exposition(text: str) -> dict[str, Family]:
    """The families of a Prometheus text exposition, by family name (as `# TYPE` names it)."""
    types: dict[str, str] = {}
    samples: dict[str, set[str]] = {}
    labels: dict[str, set[str]] = {}
    buckets: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = _TYPE.match(line)
        if match:
            types[match[1]] = match[2]
            continue
        if not line or line.startswith("#"):
            continue
        sample = _SAMPLE.match(line)
        if sample is None:
            continue
        name, label_text = sample[1], sample[3] or ""
        family = _family_of(name, types)
        pairs = _LABEL.findall(label_text)
        samples.setdefault(family, set()).add(name)
        labels.setdefault(family, set()).update(key for key, _ in pairs)
        if name.endswith("_bucket"):
            for key, value in pairs:
                if key == "le" and value != "+Inf" and value not in buckets.setdefault(family, []):
                    buckets[family].append(value)
    return {
        name: Family(
            name,
            types.get(name, "untyped"),
            tuple(sorted(samples[name])),
            tuple(sorted(labels[name])),
            tuple(sorted(buckets.get(name, []), key=float)),
        )
        for name in sorted(samples)
    }


def _family_of(sample: str, types: dict[str, str]) -> str:
    if sample in types:
        return sample
    for family, kind in types.items():
        for suffix in _SUFFIXES.get(kind, ()):
            if sample == family + suffix:
                return family
    return sample


def fixture_document(families: dict[str, Family], version: str) -> dict[str, Any]:
    return {
        "about": (
            "Metric families real vLLM exported in `make rehearse` (two ranks, pipeline "
            "parallel), scraped through the gatekeeper's metrics listener. Written by "
            "tools/rehearse/measure/metrics_capture.py; refresh with `make rehearse` and commit "
            "the diff."
        ),
        "vllm_version": version,
        "families": {
            f.name: {
                "type": f.type,
                "samples": list(f.samples),
                "labels": list(f.labels),
                **({"buckets": list(f.buckets)} if f.buckets else {}),
            }
            for f in families.values()
        },
    }


def capture_check(metrics_url: str, vllm_url: str, fixture: Path = FIXTURE) -> Check:
    """Scrape `/metrics` through the metrics listener, write the fixture, and check the listener
    passes nothing else."""
    reply = request(metrics_url, "GET", "/metrics")
    other = request(metrics_url, "GET", "/health").status
    version_reply = request(vllm_url, "GET", "/version")
    try:
        version = json.loads(version_reply.body)["version"]
    except (ValueError, KeyError, TypeError):
        version = "unknown"
    families = (
        parse_exposition(reply.body.decode("utf-8", "replace")) if reply.status == 200 else {}
    )
    missing = [name for name in MUST_HAVE if name not in families]
    if reply.status == 200 and not missing:
        document = fixture_document(families, version)
        fixture.parent.mkdir(parents=True, exist_ok=True)
        fixture.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shown = fixture.relative_to(REPO) if fixture.is_relative_to(REPO) else fixture
    return Check(
        "metrics listener",
        "/metrics 200 with vLLM's families, /health 404",
        f"/metrics {reply.status}, {len(families)} families"
        + (f" (missing {', '.join(missing)})" if missing else f", written to {shown}")
        + f"; /health {other}",
        reply.status == 200 and not missing and other == 404,
    )
