"""The schema compile probe's pure parts: the vocabulary it builds and the schemas it sizes.

The probe itself runs in the rehearsal virtualenv (xgrammar, tokenizers); these run in the
project's and must not need either."""

from __future__ import annotations

import json
import sys

import pytest
from jsonschema.validators import validator_for

from components.manifests.gatekeeper_conf import MAX_JSON_DEPTH
from infra.plan.catalog import MODELS
from tools.rehearse.measure import schema_compile


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@pytest.fixture(scope="module")
def vocab() -> list[str]:
    return schema_compile.vocabulary()


def test_the_vocabulary_is_gemma_4s_size_and_distinct(vocab: list[str]) -> None:
    assert len(vocab) == MODELS["google/gemma-4-12B-it"].vocab_size == 262_144
    assert len(set(vocab)) == len(vocab)


def test_the_vocabulary_is_byte_fallback_shaped(vocab: list[str]) -> None:
    # xgrammar reads a vocabulary holding the <0xNN> pieces as byte-fallback, as it reads Gemma's.
    assert {f"<0x{b:02X}>" for b in range(256)} <= set(vocab)
    assert "<eos>" in vocab and "\n" in vocab and "▁▁▁▁" in vocab
    marked = sum(token.startswith("▁") for token in vocab)
    cjk = sum(len(token) == 1 and "\u4e00" <= token <= "\u9fff" for token in vocab)
    assert 0.2 < marked / len(vocab) < 0.6
    assert cjk == 0x9FFF - 0x4E00 + 1


def test_the_vocabulary_is_the_same_for_a_seed() -> None:
    # The fixed part (specials, bytes, CJK, Hangul, kana) is ~29,000 tokens; the rest is seeded.
    assert schema_compile.vocabulary(40_000) == schema_compile.vocabulary(40_000)
    assert schema_compile.vocabulary(40_000) != schema_compile.vocabulary(40_000, seed=1)


@pytest.mark.parametrize("name", sorted(schema_compile.SHAPES))
@pytest.mark.parametrize("target", [2000, 6000])
def test_each_shape_is_a_valid_schema_of_the_stated_size(name: str, target: int) -> None:
    build = schema_compile.SHAPES[name]
    count, schema = schema_compile.sized(build, target)
    # The metaschema check recurses a few dozen frames per level of a 240-level schema.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        validator_for(schema).check_schema(schema)
    finally:
        sys.setrecursionlimit(limit)
    size = schema_compile.schema_bytes(schema)
    assert size == len(json.dumps(schema, separators=(",", ":")).encode())
    assert 0.85 * target < size <= target
    assert schema_compile.schema_bytes(build(count + 1)) > target


def test_the_deep_array_shape_stays_within_the_gatekeepers_depth() -> None:
    _, schema = schema_compile.sized(schema_compile.SHAPES["arrays 24 deep side by side"], 6000)
    body = {
        "model": "m",
        "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
    }
    assert _depth(body) == MAX_JSON_DEPTH


@pytest.mark.parametrize("name", sorted(schema_compile.COUNTED))
def test_counted_shapes_carry_their_count_in_a_few_bytes(name: str) -> None:
    schema = schema_compile.COUNTED[name](1000)
    validator_for(schema).check_schema(schema)
    assert "1000" in json.dumps(schema)
    assert schema_compile.schema_bytes(schema) < 100


def test_shape_names_survive_the_comma_separated_filter() -> None:
    names = [*schema_compile.SHAPES, *schema_compile.COUNTED]
    assert all("," not in name for name in names)
