"""The gemma-graviton policy pack: each pure rule of `rules.py` as a resource validation policy.

Pulumi starts a Python policy pack as `python -m pulumi.policy <engine> .` from this folder, which
runs this file with `runpy.run_path(".", run_name="__main__")`; that puts this folder first on
`sys.path`, hence the top-level `import rules`. `PolicyPack(...)` then serves the analyzer over
gRPC until the engine stops it, so it is built only when run as the entry point.
"""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)
from rules import RULES, Rule

PACK_NAME = "gemma-graviton"


def as_policy(rule: Rule) -> ResourceValidationPolicy:
    """A policy that reports every message of `rule.validate` on the resource being checked."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rule.validate(args.resource_type, args.props):
            report_violation(message, None)

    return ResourceValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=EnforcementLevel(rule.enforcement_level),
    )


def main() -> None:
    """Serve the pack to the Pulumi engine (blocks until the engine ends the process)."""
    PolicyPack(
        name=PACK_NAME,
        policies=[as_policy(rule) for rule in RULES],
        enforcement_level=EnforcementLevel.MANDATORY,
    )


if __name__ == "__main__":
    main()
