"""The CI's policy documents, as JSON, through the field's own IAM scanners: cloudsplaining
(Salesforce) and parliament (Duo Labs), both pinned in requirements-dev.txt.

- cloudsplaining as its `scan-policy-file` reads a document: no privilege-escalation, resource-
  exposure, data-exfiltration or credentials-exposure finding, none accepted. It skips every
  statement with a resource constraint or a condition, which is how the deploy roles are
  fenced (the old `role/*` fence passed it too), so it also runs as `scan-policy-file -aR`
  (constraints and conditions ignored): each privilege-escalation method it then finds must
  be listed in iam-scanners-accepted.txt with the fence that answers it.
- parliament with its community auditors (`--include-community-auditors`): no finding at MEDIUM
  or above that is not listed there.
- Every listed finding is still found, and its reason names (`[Sid]`) each statement that grants
  the finding's actions, each of them fenced for `-aR`'s: a wider grant fails even when the
  finding's name is unchanged.

The documents: the preview role's, each deploy role's and each stack's boundary. Whether an
accepted finding is fenced is for tests/bootstrap/test_escalation.py, which tries each.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Any

import parliament
import pytest
from cloudsplaining.command.scan_policy_file import scan_policy
from cloudsplaining.shared.constants import PRIVILEGE_ESCALATION_METHODS
from cloudsplaining.shared.exclusions import DEFAULT_EXCLUSIONS_CONFIG

from infra.bootstrap.access import ci_roles
from infra.bootstrap.boundary import boundaries
from tests.bootstrap.iam_eval import listed
from tests.bootstrap.test_access import BUCKET, REGIONS, REPO

ACCEPTED = Path(__file__).with_name("iam-scanners-accepted.txt")
SERIOUS = ("MEDIUM", "HIGH", "CRITICAL")
#: A statement an accepted finding's reason names: `[Sid]`.
SID_RE = re.compile(r"\[([A-Za-z0-9]+)\]")
ALL_RISKY_PREFIX = "cloudsplaining -aR:PrivilegeEscalation:"

# What `parliament --include-community-auditors` does before it rates findings
# (parliament 1.6.4 cli.py `main`): the community auditors' findings get their severities.
parliament.override_config(
    str(Path(parliament.__file__).parent / "community_auditors" / "config_override.yaml")
)


def documents() -> dict[str, str]:
    """Document name -> the policy as the bootstrap sends it to IAM (JSON)."""
    docs: dict[str, Any] = {r.key: r.policy for r in ci_roles(REPO, REGIONS, BUCKET)}
    docs |= {f"boundary-{b.stack}": b.document for b in boundaries(REGIONS)}
    return {name: json.dumps(doc) for name, doc in docs.items()}


def _without_scoped_denies(document: str) -> dict[str, Any]:
    """The document without its Deny statements on named resources. cloudsplaining drops every
    action a Deny names, whatever the Deny's resources (cloudsplaining 0.9.1
    scan/policy_document.py `filter_deny_statements`): the CI fence (`iam:*` denied on
    `/github-ci/` only) would hide every IAM action from it. Without them it reads more than IAM
    allows, never less; a Deny on every resource (the boundaries') it reads right, and keeps."""
    policy = json.loads(document)
    policy["Statement"] = [
        s
        for s in policy["Statement"]
        if s["Effect"] == "Allow" or (s["Resource"] in ("*", ["*"]) and "Condition" not in s)
    ]
    return policy


#: The CLI's `--flag-all-risky-actions` (`-aR`): resource constraints and conditions ignored.
ALL_RISKY = {"flag_conditional_statements": True, "flag_resource_arn_statements": True}
#: The high-priority risks of `scan-policy-file --high-priority-only`, and credentials.
HIGH_PRIORITY = (
    "PrivilegeEscalation",
    "ResourceExposure",
    "DataExfiltration",
    "CredentialsExposure",
)


def cloudsplaining_findings(document: str) -> list[str]:
    """`scan-policy-file`'s findings (its `scan_policy`, default exclusions): every high-priority
    one as `cloudsplaining:<risk>:<what>`, and the privilege escalations of `-aR` as
    `cloudsplaining -aR:PrivilegeEscalation:<method>`."""
    policy = _without_scoped_denies(document)
    default = scan_policy(policy, DEFAULT_EXCLUSIONS_CONFIG)
    all_risky = scan_policy(policy, DEFAULT_EXCLUSIONS_CONFIG, **ALL_RISKY)

    def named(finding: Any) -> str:
        return finding["type"] if isinstance(finding, dict) else str(finding)

    return sorted(
        [
            f"cloudsplaining:{risk}:{named(f)}"
            for risk in HIGH_PRIORITY
            for f in default[risk]["findings"]
        ]
        + [
            f"cloudsplaining -aR:PrivilegeEscalation:{named(f)}"
            for f in all_risky["PrivilegeEscalation"]["findings"]
        ]
    )


def parliament_findings(document: str) -> list[str]:
    policy = parliament.analyze_policy_string(document, include_community_auditors=True)
    rated = [parliament.enhance_finding(f) for f in policy.findings]
    return sorted({f"parliament:{f.issue}" for f in rated if f.severity in SERIOUS})


def _accepted_rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in ACCEPTED.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        document, finding, reason = line.split("\t")
        assert reason.strip(), f"{ACCEPTED.name}: {finding} on {document} has no reason"
        rows.append((document, finding, reason))
    return rows


def _finding_actions(document: str, finding: str) -> set[str]:
    """The actions a finding is about: a cloudsplaining method's (cloudsplaining 0.9.1
    shared/constants.py `PRIVILEGE_ESCALATION_METHODS`), or those parliament lists in it."""
    if finding.startswith(ALL_RISKY_PREFIX):
        return set(PRIVILEGE_ESCALATION_METHODS[finding.removeprefix(ALL_RISKY_PREFIX)])
    issue = finding.removeprefix("parliament:")
    policy = parliament.analyze_policy_string(document, include_community_auditors=True)
    return {a for f in policy.findings if f.issue == issue for a in f.location.get("actions", [])}


def _imprecise(name: str, document: str, finding: str, reason: str) -> list[str]:
    """What an accepted row does not account for: an action of the finding granted by a
    statement its reason does not name, or, for `-aR`, by one with neither a resource constraint
    nor a condition (which the default scan would then report)."""
    named = set(SID_RE.findall(reason))
    if not named:
        return [f"{finding} on {name}: the reason names no [statement]"]
    problems = []
    statements = [s for s in json.loads(document)["Statement"] if s["Effect"] == "Allow"]
    for action in sorted(_finding_actions(document, finding)):
        granting = [
            s
            for s in statements
            if any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in listed(s["Action"]))
        ]
        if not granting:
            problems.append(f"{finding} on {name}: no statement grants {action}")
        for statement in granting:
            sid = statement.get("Sid", "<no Sid>")
            if sid not in named:
                problems.append(f"{finding} on {name}: {action} is granted by [{sid}], unnamed")
            fenced = listed(statement["Resource"]) != ["*"] or "Condition" in statement
            if finding.startswith(ALL_RISKY_PREFIX) and not fenced:
                problems.append(f"{finding} on {name}: [{sid}] grants {action} unfenced")
    return problems


def _unaccepted(name: str, findings: list[str]) -> list[str]:
    accepted = _accepted_rows()
    return [
        f
        for f in findings
        if not any(fnmatch.fnmatchcase(name, d) and f == a for d, a, _ in accepted)
    ]


@pytest.mark.parametrize("name", sorted(documents()))
def test_cloudsplaining_finds_no_escalation_exposure_or_exfiltration(name: str) -> None:
    findings = cloudsplaining_findings(documents()[name])
    # The default scan accepts nothing: only the constraint-blind one has listed findings.
    assert not [f for f in findings if f.startswith("cloudsplaining:")], findings
    assert _unaccepted(name, findings) == []


@pytest.mark.parametrize("name", sorted(documents()))
def test_parliament_finds_nothing_at_medium_or_above(name: str) -> None:
    assert _unaccepted(name, parliament_findings(documents()[name])) == []


def test_every_accepted_finding_is_still_found() -> None:
    """An entry the scanners no longer report is dropped, so the list stays minimal."""
    found = {
        (name, f)
        for name, document in documents().items()
        for f in [*cloudsplaining_findings(document), *parliament_findings(document)]
    }
    for pattern, finding, _ in _accepted_rows():
        assert any(fnmatch.fnmatchcase(n, pattern) and f == finding for n, f in found), (
            pattern,
            finding,
        )


def test_the_scanners_see_a_seeded_escalation() -> None:
    """What the deploy roles had (inline policies and new policy versions on any role or policy,
    a boundary condition on an action that has none), added to dev's document: both scanners
    report it, and nothing in the list accepts it."""
    document = json.loads(documents()["deploy-dev"])
    document["Statement"] += [
        {
            "Effect": "Allow",
            "Action": ["iam:PutRolePolicy", "iam:CreatePolicyVersion", "sts:AssumeRole"],
            "Resource": "*",
        },
        {
            "Effect": "Allow",
            "Action": ["iam:DeleteRole"],
            "Resource": "*",
            "Condition": {"ArnLike": {"iam:PermissionsBoundary": "arn:aws:iam::*:policy/x"}},
        },
    ]
    seeded = json.dumps(document)
    cloudsplaining = _unaccepted("deploy-dev", cloudsplaining_findings(seeded))
    assert "cloudsplaining:PrivilegeEscalation:CreateNewPolicyVersion" in cloudsplaining
    assert "cloudsplaining:ResourceExposure:iam:PutRolePolicy" in cloudsplaining, cloudsplaining
    assert _unaccepted("deploy-dev", parliament_findings(seeded)), parliament_findings(seeded)


def test_every_accepted_finding_names_each_statement_that_grants_it() -> None:
    """The list stays precise: a wider grant of an accepted action (another statement, or one
    without a fence) fails here even though the finding's name is unchanged."""
    problems = [
        problem
        for pattern, finding, reason in _accepted_rows()
        for name, document in documents().items()
        if fnmatch.fnmatchcase(name, pattern)
        for problem in _imprecise(name, document, finding, reason)
    ]
    assert not problems, "\n".join(problems)


def test_the_precision_rule_sees_a_launch_granted_without_its_fence() -> None:
    """Not vacuous: ec2:RunInstances granted by the region-wide statement as well as by its
    fenced one (no instance profile) is caught."""
    document = json.loads(documents()["deploy-dev"])
    regional = next(s for s in document["Statement"] if s["Sid"] == "ManageTheStackInItsRegion")
    regional["Action"] = [*regional["Action"], "ec2:RunInstances"]
    ((_, finding, reason),) = [
        row for row in _accepted_rows() if row[1].endswith(":CreateEC2WithExistingIP")
    ]
    assert _imprecise("deploy-dev", json.dumps(document), finding, reason) == [
        f"{finding} on deploy-dev: ec2:runinstances is granted by "
        "[ManageTheStackInItsRegion], unnamed"
    ]


def test_a_default_version_write_on_launch_templates_is_found_again() -> None:
    """The escalation the deploy roles no longer carry comes back with its action: granting
    ec2:ModifyLaunchTemplate beside the tagged template writes is an unaccepted finding."""
    document = json.loads(documents()["deploy-dev"])
    fenced = next(
        s for s in document["Statement"] if s["Sid"] == "ChangeOnlyTheStackLaunchTemplates"
    )
    fenced["Action"] = [*fenced["Action"], "ec2:ModifyLaunchTemplate"]
    found = _unaccepted("deploy-dev", cloudsplaining_findings(json.dumps(document)))
    assert found == [f"{ALL_RISKY_PREFIX}ModifyExistingEC2LaunchTemplate"]
