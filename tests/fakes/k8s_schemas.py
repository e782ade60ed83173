"""Validation of rendered objects against the real schemas (test infrastructure).

Core objects: `kubernetes-validate`, strict, at the cluster's Kubernetes version. The
LeaderWorkerSet: the openAPIV3Schema of the upstream LWS v0.10.0 CRD, read from
../shared/reference when it is there; otherwise from `tests/schemas/lws-v0.10.0-structure.json`,
the same schema with its descriptions removed (a test checks the two agree). The API server prunes
or refuses unknown fields, so objects are checked with `additionalProperties: false` wherever the
CRD does not preserve unknown fields.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

TESTS = Path(__file__).resolve().parents[1]
UPSTREAM_CRD = TESTS.parent.parent / "shared" / "reference" / "lws-crd-v0.10.0.yaml"
STRUCTURE_COPY = TESTS / "schemas" / "lws-v0.10.0-structure.json"


def strip_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip_descriptions(v) for v in node]
    return node


def upstream_schema() -> dict[str, Any] | None:
    """The CRD's v1 openAPIV3Schema from the reference copy, or None where it is absent."""
    if not UPSTREAM_CRD.is_file():
        return None
    crd = yaml.safe_load(UPSTREAM_CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


def lws_schema_copy() -> dict[str, Any]:
    """The committed structure-only copy of the CRD's v1 openAPIV3Schema."""
    return json.loads(STRUCTURE_COPY.read_text())["openAPIV3Schema"]


@cache
def lws_schema() -> dict[str, Any]:
    return _closed(upstream_schema() or lws_schema_copy())


def _closed(node: Any) -> Any:
    if isinstance(node, dict):
        if (
            node.get("type") == "object"
            and "properties" in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
            and "additionalProperties" not in node
        ):
            node["additionalProperties"] = False
        for value in node.values():
            _closed(value)
    elif isinstance(node, list):
        for value in node:
            _closed(value)
    return node


def lws_errors(obj: dict[str, Any]) -> list[str]:
    """Schema violations of a LeaderWorkerSet object (empty when valid)."""
    return _errors(lws_schema(), obj)


def _errors(schema: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)
    ]


def core_errors(obj: dict[str, Any], kubernetes_version: str) -> list[str]:
    """`kubernetes-validate --strict` errors of a core object (empty when valid)."""
    try:
        kubernetes_validate.validate(obj, f"{kubernetes_version}.0", strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'/'.join(map(str, error.path))}: {error.message}"]
    return []


KEDA_STRUCTURE = TESTS / "schemas" / "keda-v2.20.2-scaledobject-structure.json"


@cache
def scaled_object_schema() -> dict[str, Any]:
    """The ScaledObject CRD's v1alpha1 schema from KEDA chart 2.20.2, descriptions removed."""
    return _closed(json.loads(KEDA_STRUCTURE.read_text())["openAPIV3Schema"])


def scaled_object_errors(obj: dict[str, Any]) -> list[str]:
    """Schema violations of a KEDA ScaledObject (empty when valid)."""
    return _errors(scaled_object_schema(), obj)


def object_errors(obj: dict[str, Any], kubernetes_version: str) -> list[str]:
    """Schema violations of any rendered object, by its kind: the LWS and KEDA CRD schemas, or
    the cluster version's built-in schemas."""
    if obj["kind"] == "LeaderWorkerSet":
        return lws_errors(obj)
    if obj["kind"] == "ScaledObject":
        return scaled_object_errors(obj)
    return core_errors(obj, kubernetes_version)
