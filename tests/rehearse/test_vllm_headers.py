"""The request headers vLLM acts on: the reviewed list against the gatekeeper's config, and the
scanner that reads them out of vLLM's source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.manifests.gatekeeper import nginx_conf
from components.manifests.gatekeeper_conf import PASSED_HEADERS
from tests import door_harness
from tools.rehearse.front_door import vllm_headers
from tools.rehearse.front_door.vllm_headers import HeaderUse, scan, vendored


def test_every_header_vllm_acts_on_is_dropped_unless_reviewed_as_passed() -> None:
    reviewed = {u.header.lower() for u in vendored()}
    assert {"x-request-id", "endpoint-load-metrics-format", "x-vllm-priority", "x-session-id"} <= (
        reviewed
    )
    passed = {h.lower() for h in PASSED_HEADERS}
    # What the list says is passed is exactly what the gatekeeper passes of vLLM's headers.
    assert vllm_headers.passed() == passed & reviewed == {"authorization", "content-type"}
    conf = nginx_conf(door_harness.PLAN_LIMITS)
    assert "proxy_pass_request_headers off;" in conf
    sent = {name.lower() for name in re.findall(r"proxy_set_header (\S+) ", conf)}
    for header in reviewed - passed:
        assert header not in sent, header
    # The client's address is nginx's, never the client's own X-Forwarded-For.
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in conf


def test_the_scanner_reads_request_headers_not_response_headers(tmp_path: Path) -> None:
    package = tmp_path / "vllm"
    (package / "entrypoints" / "a").mkdir(parents=True)
    (package / "tracing").mkdir()
    (package / "entrypoints" / "a" / "serving.py").write_text(
        'SESSION_ID_HEADER = "X-Session-ID"\n'
        "def f(raw_request, response):\n"
        '    raw_request.headers.get("X-New-Header")\n'
        '    response.headers.get("content-type", "")\n'
    )
    (package / "tracing" / "utils.py").write_text('TRACE_HEADERS = ["traceparent", "tracestate"]\n')
    (package / "other.py").write_text('request.headers.get("X-Not-Served")\n')
    assert scan(package) == {
        HeaderUse("X-Session-ID", "vllm/entrypoints/a/serving.py"),
        HeaderUse("X-New-Header", "vllm/entrypoints/a/serving.py"),
        HeaderUse("traceparent", "vllm/tracing/utils.py"),
        HeaderUse("tracestate", "vllm/tracing/utils.py"),
    }
    check = vllm_headers.headers_check(package)
    assert not check.ok and "new: X-New-Header" in check.observed


INSTALLED = vllm_headers.installed_package(
    Path(__file__).resolve().parents[2] / ".rehearsal/venv/bin/python"
)


@pytest.mark.skipif(INSTALLED is None, reason="no rehearsal environment (make rehearse builds it)")
def test_the_installed_vllm_reads_exactly_the_reviewed_headers() -> None:
    assert INSTALLED is not None
    assert scan(INSTALLED) == vendored()
