"""A small evaluator of one identity policy: is this action on this resource, in this request
context, allowed?

It follows IAM's rules for what the project's policies use, and refuses anything else rather than
guess: an explicit Deny that matches wins; otherwise a matching Allow allows; otherwise the request
is denied. A statement matches when an `Action` matches (case-insensitive, `*` and `?` wildcards),
a `Resource` matches (case-sensitive, same wildcards, each of an ARN's six colon-separated parts on
its own) and every condition holds. In a condition block the operators are ANDed, their keys are
ANDed, a key's values are ORed, and a key missing from the request fails the condition, except
under a negated operator (`StringNotEquals`), which it satisfies; `Null` tests whether a key is
present. `ArnLike` takes wildcards, part by part (IAM User Guide, "IAM JSON policy elements:
Condition operators", ARN condition operators: "Each of the six colon-delimited components of the
ARN is checked separately",
docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html, read
2026-12-03).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any


def _equals(wanted: str, given: str) -> bool:
    return wanted == given


#: Operator -> how a policy value matches a request value.
_OPERATORS = {
    "StringEquals": _equals,
    "StringLike": lambda w, g: _glob(w, g),
    "ArnLike": lambda w, g: _arn_like(w, g),
    # A multivalued key (`aws:TagKeys`): true when any request value matches any policy value,
    # false when the key is absent (IAM User Guide, "Set operators for multivalued context
    # keys", read 2026-12-03), which is how the single-valued operators are matched here too.
    "ForAnyValue:StringEquals": _equals,
    "ForAnyValue:StringEqualsIgnoreCase": lambda w, g: w.lower() == g.lower(),
}
#: Negated operator -> the operator it negates. It holds when no request value matches any
#: policy value, and when the key is absent from the request (IAM User Guide, "IAM JSON policy
#: elements: Condition operators", String condition operators and "negated matching condition
#: operators", read 2026-12-03).
_NEGATED = {"StringNotEquals": "StringEquals"}
_STATEMENT_KEYS = {"Sid", "Effect", "Action", "Resource", "Condition"}


def listed(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _glob(pattern: str, value: str, case_sensitive: bool = True) -> bool:
    """IAM's wildcards: `*` any run of characters (none included), `?` one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    flags = 0 if case_sensitive else re.IGNORECASE
    return re.fullmatch(regex, value, flags) is not None


def _arn_like(pattern: str, arn: str) -> bool:
    """`pattern` matches `arn` part by part (`*` alone matches any ARN)."""
    if pattern == "*":
        return True
    wanted, given = pattern.split(":", 5), arn.split(":", 5)
    return len(wanted) == len(given) == 6 and all(map(_glob, wanted, given))


def _condition_holds(block: Mapping[str, Mapping[str, Any]], context: Mapping[str, Any]) -> bool:
    lowered = {key.lower(): value for key, value in context.items()}
    for operator, keys in block.items():
        if operator == "Null":
            # "true": the key is absent from the request; "false": it is present (same page,
            # "Condition operator to check existence of condition keys").
            for key, absent in keys.items():
                if (key.lower() not in lowered) != (str(absent).lower() == "true"):
                    return False
            continue
        negated = operator in _NEGATED
        if operator not in _OPERATORS and not negated:
            raise ValueError(f"the evaluator does not know the condition operator {operator}")
        match = _OPERATORS[_NEGATED.get(operator, operator)]
        for key, wanted in keys.items():
            if key.lower() not in lowered:
                if negated:
                    continue
                return False
            given = listed(lowered[key.lower()])
            matched = any(match(w, g) for w in listed(wanted) for g in given)
            if matched == negated:
                return False
    return True


def _matches(statement: Mapping[str, Any], action: str, resource: str, context: Mapping) -> bool:
    unknown = set(statement) - _STATEMENT_KEYS
    if unknown:
        raise ValueError(f"the evaluator does not know the statement element(s) {sorted(unknown)}")
    return (
        any(_glob(a, action, case_sensitive=False) for a in listed(statement["Action"]))
        and any(_arn_like(r, resource) for r in listed(statement["Resource"]))
        and _condition_holds(statement.get("Condition", {}), context)
    )


def allowed(
    policy: Mapping[str, Any],
    action: str,
    resource: str,
    context: Mapping[str, Any] | None = None,
) -> bool:
    """Whether `policy` alone allows `action` on `resource` with the request's `context` keys."""
    context = context or {}
    matching = [s for s in policy["Statement"] if _matches(s, action, resource, context)]
    if any(s["Effect"] == "Deny" for s in matching):
        return False
    return any(s["Effect"] == "Allow" for s in matching)
