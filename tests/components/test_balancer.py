"""The drain's target-group attributes: `components/target_groups.sh` run by the real AWS CLI
against moto's ELBv2 API (both from `.venv-tools`, which `make unit` puts on PATH), and the
command the program registers for it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.manifests.access import target_group_attributes
from tests.builders import drain_spec
from tests.fakes.pulumi_mocks import RecordingMocks
from tests.program.harness import run_program

SCRIPT = Path(__file__).resolve().parents[2] / "components" / "target_groups.sh"
REGION = "us-west-2"
DRAIN = drain_spec()


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, (
        f"{name} is missing: `make unit` puts .venv-tools/bin (requirements-tools.txt) on PATH"
    )
    return found


@pytest.fixture(scope="module")
def elb() -> Iterator[dict[str, str]]:
    """An environment whose AWS CLI talks to a fresh moto server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [_tool("moto_server"), "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    env = {
        "PATH": os.environ["PATH"],
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": url,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
    }
    try:
        yield env
    finally:
        server.terminate()
        server.wait(timeout=10)


def _aws(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [_tool("aws"), *args, "--output", "text"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _nlb(env: dict[str, str]) -> tuple[str, str]:
    """An NLB with one TCP target group behind a listener, as the cloud controller makes it:
    (its DNS name, the target group's ARN)."""
    vpc = _aws(env, "ec2", "create-vpc", "--cidr-block", "10.0.0.0/16", "--query", "Vpc.VpcId")
    subnet = _aws(
        env, "ec2", "create-subnet", "--vpc-id", vpc, "--cidr-block", "10.0.0.0/24",
        "--query", "Subnet.SubnetId",
    )  # fmt: skip
    lb_arn, dns = _aws(
        env, "elbv2", "create-load-balancer", "--name", "a1b2c3", "--type", "network",
        "--subnets", subnet, "--query", "LoadBalancers[0].[LoadBalancerArn,DNSName]",
    ).split()  # fmt: skip
    group = _aws(
        env, "elbv2", "create-target-group", "--name", "k8s-gemma-gemma-0a1b2c3d4e",
        "--protocol", "TCP", "--port", "30080", "--vpc-id", vpc, "--target-type", "instance",
        "--query", "TargetGroups[0].TargetGroupArn",
    )  # fmt: skip
    _aws(
        env, "elbv2", "create-listener", "--load-balancer-arn", lb_arn, "--protocol", "TCP",
        "--port", "80", "--default-actions", f"Type=forward,TargetGroupArn={group}",
    )  # fmt: skip
    return dns, group


def _run(env: dict[str, str], hostname: str) -> subprocess.CompletedProcess[str]:
    attributes = " ".join(f"{k}={v}" for k, v in target_group_attributes(DRAIN).items())
    return subprocess.run(
        ["/bin/sh", "-c", SCRIPT.read_text()],
        env={**env, "NLB_HOSTNAME": hostname, "TARGET_GROUP_ATTRIBUTES": attributes},
        capture_output=True,
        text=True,
    )


def test_the_script_sets_the_drains_attributes_on_the_nlbs_target_group(
    elb: dict[str, str],
) -> None:
    dns, group = _nlb(elb)
    query = "Attributes[?Key=='target_health_state.unhealthy.connection_termination.enabled'].Value"
    before = _aws(elb, "elbv2", "describe-target-group-attributes", "--target-group-arn", group)
    done = _run(elb, dns)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{group}: deregistration_delay.timeout_seconds=35 ")
    read = _aws(
        elb, "elbv2", "describe-target-group-attributes", "--target-group-arn", group,
        "--query", "Attributes[].[Key,Value]",
    )  # fmt: skip
    got = dict(line.split("\t") for line in read.splitlines())
    assert {k: got[k] for k in target_group_attributes(DRAIN)} == {
        "deregistration_delay.timeout_seconds": "35",
        "target_health_state.unhealthy.connection_termination.enabled": "false",
        "target_health_state.unhealthy.draining_interval_seconds": str(DRAIN.unhealthy_draining_s),
    }
    assert before != read
    # Again: nothing changes, nothing fails (every `up` whose triggers changed runs it).
    assert _run(elb, dns).returncode == 0
    assert _aws(elb, "elbv2", "describe-target-group-attributes", "--target-group-arn", group,
                "--query", query) == "false"  # fmt: skip


def test_the_script_fails_in_one_line_when_no_nlb_has_the_hostname(elb: dict[str, str]) -> None:
    done = _run(elb, "nowhere-0123456789.elb.us-west-2.amazonaws.com")
    assert done.returncode == 1
    assert done.stderr == (
        "no load balancer in us-west-2 has the DNS name "
        "nowhere-0123456789.elb.us-west-2.amazonaws.com\n"
    )


def test_the_program_sets_the_attributes_after_the_service_has_its_nlb() -> None:
    mocks = RecordingMocks()
    run_program(mocks, "minimal")
    (cmd,) = [r for r in mocks.records if r.type_ == "command:local:Command"]
    (svc,) = [r for r in mocks.records if r.type_ == "kubernetes:core/v1:Service"]
    assert cmd.inputs["create"] == cmd.inputs["update"] == SCRIPT.read_text()
    assert "delete" not in cmd.inputs  # the target groups go with the Service
    env = cmd.inputs["environment"]
    assert env["AWS_REGION"] == "us-west-2"
    assert env["NLB_HOSTNAME"] == svc.outputs["status"]["loadBalancer"]["ingress"][0]["hostname"]
    pairs = dict(pair.split("=") for pair in env["TARGET_GROUP_ATTRIBUTES"].split(" "))
    assert list(pairs) == [
        "deregistration_delay.timeout_seconds",
        "target_health_state.unhealthy.connection_termination.enabled",
        "target_health_state.unhealthy.draining_interval_seconds",
    ]
    assert pairs["target_health_state.unhealthy.connection_termination.enabled"] == "false"
    assert svc.urn in mocks.monitor.dependencies[cmd.urn]
    # A new NLB, node port or health-check interval is a new target group: run again.
    triggers = cmd.inputs["triggers"]
    assert triggers[0] == env["NLB_HOSTNAME"]
    assert any("aws-load-balancer-healthcheck-interval=" in str(t) for t in triggers[2:])
