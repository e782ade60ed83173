"""Tests for `tools.bench.args`: endpoint normalisation, the target from Pulumi."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tools.bench.args import API_KEY_ENV, UsageError, normalize_base_url, resolve_endpoint


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://lb.example.com", "http://lb.example.com/v1"),
        ("http://lb.example.com/", "http://lb.example.com/v1"),
        ("http://lb.example.com/v1", "http://lb.example.com/v1"),
        ("https://lb.example.com/v1/", "https://lb.example.com/v1"),
        ("http://lb.example.com:8000/gemma", "http://lb.example.com:8000/gemma/v1"),
    ],
)
def test_endpoint_is_accepted_with_or_without_v1(given: str, expected: str) -> None:
    assert normalize_base_url(given) == expected


def _fake_pulumi(outputs: dict[str, tuple[int, str, str]]) -> tuple[Any, list[list[str]]]:
    calls: list[list[str]] = []

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        code, stdout, stderr = outputs[command[-1]]
        return subprocess.CompletedProcess(command, code, stdout, stderr)

    return run, calls


def test_pulumi_outputs_fill_endpoint_and_key() -> None:
    run, calls = _fake_pulumi(
        {"endpoint": (0, "http://lb.example.com\n", ""), "apiKey": (0, "s3cret\n", "")}
    )
    endpoint, key = resolve_endpoint(None, None, {}, which=lambda _: "/bin/pulumi", run=run)
    assert (endpoint, key) == ("http://lb.example.com/v1", "s3cret")
    assert calls == [
        ["pulumi", "stack", "output", "endpoint"],
        ["pulumi", "stack", "output", "--show-secrets", "apiKey"],
    ]


def test_environment_key_wins_over_the_stack_key() -> None:
    run, calls = _fake_pulumi({"endpoint": (0, "http://lb.example.com/v1", "")})
    endpoint, key = resolve_endpoint(
        None, None, {API_KEY_ENV: "from-env"}, which=lambda _: "/bin/pulumi", run=run
    )
    assert (endpoint, key) == ("http://lb.example.com/v1", "from-env")
    assert len(calls) == 1


def test_failing_pulumi_names_the_command_and_the_fix() -> None:
    run, _ = _fake_pulumi({"endpoint": (255, "", "error: no stack selected\n")})
    with pytest.raises(UsageError) as caught:
        resolve_endpoint(None, None, {}, which=lambda _: "/bin/pulumi", run=run)
    assert str(caught.value) == (
        "`pulumi stack output endpoint` failed (error: no stack selected); pass --endpoint "
        "http://<load-balancer>/v1, or run from the project with a stack selected"
    )
