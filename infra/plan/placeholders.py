"""Stack values that are still the shipped placeholders, which AWS accepts and nothing can use.

The committed stacks hold documentation values where an account's own belong: address ranges
reserved for documentation (RFC 5737's three IPv4 /24s, RFC 3849's IPv6 2001:db8::/32), which no
operator or client ever comes from, an all-zero certificate ARN, and kubectl principals in the
account AWS's documentation uses for its examples. AWS takes the ranges, so a `pulumi up` would
build a cluster whose API admits nobody (`endpointPublicAccessCidrs`) or stop at the listener; EKS
refuses an access entry for a principal that does not exist, after the cluster exists
(`CreateAccessEntry`: "InvalidParameterException: The specified principalArn is invalid: invalid
principal", as terraform-aws-modules/terraform-aws-eks#2969 quotes it, read 2026-12-03), so the
update fails half built. `make plan` names them in its first lines; the program refuses them at
`pulumi up` and lets a preview (and the CLI) run with them, so a new stack can be planned before
it is filled in. The bootstrap project's stack file holds placeholders of its own (its example
repository, which every CI role would trust); `infra.bootstrap.config` finds those and names and
refuses them through `notice` and `refusal` here.

The pin file's own vLLM image is one too until `make pin-images` reads its digest from the
registry: no public source gave the digest of `vllm/vllm-openai-cpu:v0.31.0-arm64` (read
2026-12-01), and an image pinned by a tag alone can be moved under the same name.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from infra.plan.config import StackConfig

#: Documentation ranges: RFC 5737 (IPv4 TEST-NET-1, -2, -3) and RFC 3849 (IPv6).
DOCUMENTATION_RANGES = (
    ipaddress.ip_network("192.0.2.0/24"),
    ipaddress.ip_network("198.51.100.0/24"),
    ipaddress.ip_network("203.0.113.0/24"),
    ipaddress.ip_network("2001:db8::/32"),
)
#: The account IDs AWS's documentation writes in its example ARNs: 123456789012 in the EKS and IAM
#: guides' examples (the shipped stacks' own), 111122223333 in the IAM User Guide's cross-account
#: examples, 012345678901 in the Account Management Reference's "View AWS account identifiers"
#: (read 2026-12-03). A principal there is never the operator's own.
DOCUMENTATION_ACCOUNTS = ("123456789012", "111122223333", "012345678901")
#: An ARN whose account or resource ID is all zeros (`.../00000000-0000-0000-0000-000000000000`).
ZERO_ARN = re.compile(r"arn:[^:]*:[^:]*:[^:]*:(0{12}:.*|[^:]*:[^/]*/[0-]+)")


@dataclass(frozen=True)
class Placeholder:
    """One stack key that still holds a placeholder."""

    key: str
    value: str
    what: str
    """What kind of placeholder it is, for the message."""

    def line(self) -> str:
        return f"`{self.key}` {self.value}, {self.what}"


def _documentation(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str | None:
    if network.prefixlen == 0:
        return None  # the whole internet is a choice (allowed with a certificate), not a sample
    for doc in DOCUMENTATION_RANGES:
        if network.version == doc.version and network.overlaps(doc):
            rfc = "RFC 3849" if doc.version == 6 else "RFC 5737"
            return f"an {rfc} documentation range"
    return None


def documentation_account(arn: str) -> str | None:
    account = arn.split(":")[4] if arn.count(":") >= 5 else ""
    if account in DOCUMENTATION_ACCOUNTS:
        return f"a principal in AWS's documentation account {account}"
    return None


def find(cfg: StackConfig) -> list[Placeholder]:
    """Every key of `cfg` that holds a documentation range, an all-zero ARN or a principal in a
    documentation account, in key order."""
    found = []
    for key, networks in (
        ("endpointPublicAccessCidrs", cfg.endpoint_public_access_cidrs),
        ("allowedCidrs", cfg.allowed_cidrs),
    ):
        for network in networks:
            what = _documentation(network)
            if what:
                found.append(Placeholder(key, str(network), what))
                break
    for key, arns in (
        ("tlsCertificateArn", (cfg.tls_certificate_arn,) if cfg.tls_certificate_arn else ()),
        ("clusterAdminArns", cfg.cluster_admin_arns),
        ("clusterViewerArns", cfg.cluster_viewer_arns),
    ):
        for arn in arns:
            what = "an all-zero ARN" if ZERO_ARN.fullmatch(arn) else None
            if key != "tlsCertificateArn":
                # kubectl principals only: EKS looks each one up when it creates the access entry.
                what = what or documentation_account(arn)
            if what:
                found.append(Placeholder(key, arn, what))
                break
    if "@" not in cfg.vllm_image:
        found.append(
            Placeholder(
                "vllmImage",
                cfg.vllm_image,
                "pinned by a tag only; run `make pin-images`, or set "
                "repository:tag@sha256:<the index's digest>",
            )
        )
    return found


def notice(found: Sequence[Placeholder], up: str = "`pulumi up`", where: str = "") -> str | None:
    """The plan's first line when a stack holds placeholders (`find`'s, or the bootstrap's with
    the file `where` they are): which keys, each with its value, and that `up` refuses them."""
    if not found:
        return None
    listed = "; ".join(p.line() for p in found)
    return f"PLACEHOLDERS{where}, which {up} refuses (set your own): {listed}"


def refusal(
    found: Sequence[Placeholder],
    up: str = "`pulumi up`",
    fix: str = "set it to your own value with `pulumi config set`",
) -> str | None:
    """The one line `up` ends with when a key still holds a placeholder."""
    if not found:
        return None
    first = found[0]
    more = f" ({len(found) - 1} more key(s) too: `make plan` lists them)" if len(found) > 1 else ""
    return (
        f"`{first.key}` still holds the placeholder {first.value}, {first.what}{more}; "
        f"{fix}; a preview runs with it, {up} does not"
    )
