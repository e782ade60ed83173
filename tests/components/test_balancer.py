"""The drain's target-group attributes: `components/target_groups.sh` run by the real AWS CLI
against moto's ELBv2 API (both from `.venv-tools`, which `make unit` puts on PATH), and the
command the program registers for it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
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


def _nlb(env: dict[str, str], name: str) -> tuple[str, str, str]:
    """An NLB with one TCP target group (node port 30080, health checks every 10 s) behind a
    listener, as the cloud controller makes it: (its DNS name, its ARN, the VPC's ID)."""
    vpc = _aws(env, "ec2", "create-vpc", "--cidr-block", "10.0.0.0/16", "--query", "Vpc.VpcId")
    subnet = _aws(
        env, "ec2", "create-subnet", "--vpc-id", vpc, "--cidr-block", "10.0.0.0/24",
        "--query", "Subnet.SubnetId",
    )  # fmt: skip
    lb_arn, dns = _aws(
        env, "elbv2", "create-load-balancer", "--name", name, "--type", "network",
        "--subnets", subnet, "--query", "LoadBalancers[0].[LoadBalancerArn,DNSName]",
    ).split()  # fmt: skip
    _listen(env, lb_arn, _group(env, vpc, f"{name}-30080", 30080, 10))
    return dns, lb_arn, vpc


def _group(env: dict[str, str], vpc: str, name: str, port: int, interval: int) -> str:
    return _aws(
        env, "elbv2", "create-target-group", "--name", name, "--protocol", "TCP",
        "--port", str(port), "--vpc-id", vpc, "--target-type", "instance",
        "--health-check-interval-seconds", str(interval),
        "--query", "TargetGroups[0].TargetGroupArn",
    )  # fmt: skip


def _listen(env: dict[str, str], lb_arn: str, group: str) -> str:
    return _aws(
        env, "elbv2", "create-listener", "--load-balancer-arn", lb_arn, "--protocol", "TCP",
        "--port", "80", "--default-actions", f"Type=forward,TargetGroupArn={group}",
        "--query", "Listeners[0].ListenerArn",
    )  # fmt: skip


def _groups(env: dict[str, str], lb_arn: str) -> list[str]:
    listed = _aws(
        env, "elbv2", "describe-target-groups", "--load-balancer-arn", lb_arn,
        "--query", "TargetGroups[].TargetGroupArn",
    )  # fmt: skip
    return listed.split()


def _attributes() -> str:
    return " ".join(f"{k}={v}" for k, v in target_group_attributes(DRAIN).items())


def _run(
    env: dict[str, str], hostname: str, wait_s: int = 30, interval: int = 10
) -> subprocess.CompletedProcess[str]:
    attributes = _attributes()
    given = {
        "NLB_HOSTNAME": hostname,
        "NODE_PORTS": "30080",
        "HEALTH_CHECK_INTERVAL": str(interval),
        "WAIT_SECONDS": str(wait_s),
        "TARGET_GROUP_ATTRIBUTES": attributes,
    }
    return subprocess.run(
        ["/bin/sh", "-c", SCRIPT.read_text()],
        env={**env, **given},
        capture_output=True,
        text=True,
    )


def test_the_script_sets_the_drains_attributes_on_the_nlbs_target_group(
    elb: dict[str, str],
) -> None:
    dns, lb_arn, _ = _nlb(elb, "a1b2c3")
    (group,) = _groups(elb, lb_arn)
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


def test_the_script_waits_for_the_target_group_the_controller_makes_anew(
    elb: dict[str, str],
) -> None:
    # A new health-check interval: `pulumi up` has updated the Service, the controller then
    # makes a target group, points the listener at it and deletes the old one
    # (cloud-provider-aws v1.35.2 aws_loadbalancer.go `ensureLoadBalancerv2`).
    dns, lb_arn, vpc = _nlb(elb, "d4e5f6")
    (old,) = _groups(elb, lb_arn)
    listener = _aws(
        elb, "elbv2", "describe-listeners", "--load-balancer-arn", lb_arn,
        "--query", "Listeners[0].ListenerArn",
    )  # fmt: skip
    made: list[str] = []

    def reconcile() -> None:
        time.sleep(3)
        made.append(_group(elb, vpc, "d4e5f6-30080-30s", 30080, 30))
        # The controller modifies the listener; moto ties a target group to its load balancer
        # only when a listener is created, so the listener is made again here.
        _aws(elb, "elbv2", "delete-listener", "--listener-arn", listener)
        _aws(elb, "elbv2", "delete-target-group", "--target-group-arn", old)
        _listen(elb, lb_arn, made[0])

    controller = threading.Thread(target=reconcile)
    controller.start()
    done = _run(elb, dns, wait_s=60, interval=30)
    controller.join()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{made[0]}: {_attributes()}"]
    assert _aws(
        elb, "elbv2", "describe-target-group-attributes", "--target-group-arn", made[0],
        "--query", "Attributes[?Key=='deregistration_delay.timeout_seconds'].Value",
    ) == "35"  # fmt: skip


def test_the_script_gives_up_loudly_when_the_new_target_group_never_comes(
    elb: dict[str, str],
) -> None:
    dns, lb_arn, _ = _nlb(elb, "a7b8c9")
    (old,) = _groups(elb, lb_arn)
    done = _run(elb, dns, wait_s=6, interval=30)
    assert done.returncode == 1
    assert done.stderr == (
        f"after 6s the load balancer {lb_arn} still has target groups of another node port or "
        f"health check ({old}) or none for node ports (); the cloud controller has not "
        "reconciled the Service: kubectl describe service shows its events\n"
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
    assert cmd.inputs["interpreter"] == ["/bin/sh", "-c"]
    assert env["HEALTH_CHECK_INTERVAL"] == "10" and env["WAIT_SECONDS"] == "600"
    assert env["AWS_PAGER"] == "" and env["AWS_CLI_AUTO_PROMPT"] == "off"
    # What a target group's name hashes (ports, node port, health check) is a new target group:
    # run again. The mocks give no node port.
    hostname, ports, policy, annotations = cmd.inputs["triggers"]
    assert hostname == env["NLB_HOSTNAME"]
    assert ports == ["80/TCP/None"] and policy == "Local"
    assert "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval=10" in annotations
