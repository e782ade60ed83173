"""The schema compile probe: what a JSON schema of a given size costs vLLM 0.31 to compile against
a vocabulary of Gemma 4's size, for the shapes that cost the most, found by trying.

`maxSchemaBytes: auto` (`infra.plan.frontdoor.SCHEMA_COMPILE_BYTES_PER_S`) rests on these
figures. The probe reproduces vLLM 0.31's default structured-output path exactly as the engine
runs it (`v1/structured_output/backend_xgrammar.py` `XgrammarBackend.__post_init__` and
`compile_grammar`): `xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=...)`, one
`xgr.GrammarCompiler(info, max_threads=8, cache_enabled=True, cache_limit_bytes=512 MiB)`
(`VLLM_XGRAMMAR_CACHE_MB`'s default) and `compile_json_schema(schema, any_whitespace=True)`. The
cache is cleared before each compile, so every figure is a first compile, what a new schema costs.

The vocabulary is the project's own, not Gemma's: Hugging Face is out of reach here, so
`vocabulary()` builds 262,144 tokens (Gemma 4's size, `catalog.MODELS[...].vocab_size`) shaped like
a SentencePiece byte-fallback vocabulary: specials, the 256 `<0xNN>` byte pieces, whitespace runs,
digits, English-like and code subwords with and without the `▁` word mark, accented Latin, and
multilingual pieces (every CJK ideograph, Hangul, kana, Cyrillic, Greek, Arabic, Devanagari, Thai).
Its tokenizer has Gemma's decoder (`▁` to space, byte fallback, fuse), so xgrammar reads it as a
byte-fallback vocabulary, as it reads Gemma's. A compile's cost depends mainly on the vocabulary's
size and its tokens' shapes (how many tokens each grammar state must test, and how far their
prefixes are shared), which this vocabulary carries; the figures are not Gemma's own.

Each shape in `SHAPES` grows with one count (`build(shape, n)`); `sized(shape, target)` finds the
count whose schema is closest to `target` bytes of compact JSON. Counted repetitions are the
exception: their cost grows with the number in the schema, not its bytes, so they are measured by
count (`COUNTED`).

Run in the rehearsal virtualenv (vLLM 0.31 with xgrammar):
`.rehearsal/venv/bin/python -m tools.rehearse.measure.schema_compile [--sizes 1000,3000,6000]`;
`--vocab-size 512` compiles against the first 512 tokens, the tiny rehearsal model's size.
Pure apart from `tokenizer_info` and `measure`; never imported by the planner or the program.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

VOCAB_SIZE = 262_144
SPECIALS = ("<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>")
UNUSED_SPECIALS = 96
SEED = 43
#: Array levels a schema may nest inside a request: the gatekeeper refuses bodies nested deeper than
#: `gatekeeper_conf.MAX_JSON_DEPTH` (30), and the body, `response_format`, `json_schema`, `schema`
#: and the field take five of them.
ADMITTED_ARRAY_DEPTH = 24
REPEATS = 3

_SYLLABLE_TEXT = (
    "a e i o u th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou "
    "io le ve co me de hi ri ro ic ne ea ra ce li ch ll be ma si om ur ca el ta la ns di fo ho pe "
    "ec pr no ct us ac ot il tr ly nc et ut ss so rs un lo wa ge ie wh ee wi em ad ol rt po we na "
    "ul ni ts mo ow pa im mi ai sh ir su id os iv ia am fi ci vi pl ig tu ev ld ry mp fe bl ab gh "
    "ty op wo sa ay ex ke fr oo av ag if ap gr od bo sp rd do uc bu ei ov by rm ep tt oc fa ef cu "
    "rn sc gi da yo cr cl du ga qu ue ff ba ey ls va um pp ua up lu go ht ru ug ds lt pi rc rr eg "
    "au ck ew mu br bi pt ak pu ui rg ib tl ny ki rk ys ob mm fu ph og ms ye ud mb ip ub oi rl gu "
    "dr hr cc tw ft wn nu af hu nn eo vo rv nf xp gn sm fl iz ok nl my gl aw ju oa eq sy sl ps jo"
)
_SYLLABLES = _SYLLABLE_TEXT.split()
_CODE_TEXT = (
    "def class return import from self None True False if else elif for while in not and or try "
    "except finally with as lambda yield async await function const let var this new null "
    "undefined typeof switch case break continue public private static void int float string bool "
    "struct enum impl fn mut pub use mod match println printf include namespace template std "
    "vector map list dict set get put post http json xml html div span id src href"
)
_CODE = _CODE_TEXT.split()
_PUNCT = list("{}[]()<>;:,.=+-*/%!?&|^~@#$\\\"'`_")
_ACCENTED = "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßœ"
_SCRIPTS = {
    "cyrillic": "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
    "greek": "αβγδεζηθικλμνξοπρστυφχψω",
    "arabic": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "devanagari": "अआइईउऊएऐओऔकखगघचछजझटठडढणतथदधनपफबभमयरलवशषसह",
    "thai": "กขคฆงจฉชซฌญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮ",
}


def vocabulary(size: int = VOCAB_SIZE, seed: int = SEED) -> list[str]:
    """`size` distinct token strings in SentencePiece byte-fallback form (`▁` marks a word start),
    deterministic for a seed. See the module docstring for what it holds and why."""
    rng = random.Random(seed)
    tokens: dict[str, None] = {}

    def add(token: str) -> None:
        if len(tokens) < size:
            tokens.setdefault(token, None)

    for special in SPECIALS:
        add(special)
    for i in range(UNUSED_SPECIALS):
        add(f"<unused{i}>")
    for byte in range(256):
        add(f"<0x{byte:02X}>")
    for char in "\n\t ":
        for run in range(1, 32):
            add(char * run if char != " " else "▁" * run)
    for run in range(1, 17):
        add("\n" + "▁" * (2 * run))
    for digit in "0123456789":
        add(digit)
    for char in _PUNCT:
        add(char)
        add("▁" + char)
    for a in _PUNCT:
        for b in _PUNCT:
            add(a + b)
    for word in _CODE:
        for form in (word, word.capitalize(), word.upper()):
            add(form)
            add("▁" + form)
    for code in range(0x4E00, 0xA000):  # every CJK unified ideograph
        add(chr(code))
    for code in range(0xAC00, 0xAC00 + 6000):  # common Hangul syllables
        add(chr(code))
    for code in range(0x3041, 0x30FF):  # kana
        add(chr(code))
    latin = size * 55 // 100
    while len(tokens) < latin:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((1, 1, 2, 2, 2, 3, 3, 4))))
        if rng.random() < 0.15:
            word = word.replace(rng.choice(word), rng.choice(_ACCENTED), 1)
        if rng.random() < 0.2:
            word = word.capitalize()
        add("▁" + word if rng.random() < 0.55 else word)
    scripts = list(_SCRIPTS.values())
    while len(tokens) < size * 80 // 100:
        letters = rng.choice(scripts)
        word = "".join(rng.choice(letters) for _ in range(rng.randint(1, 7)))
        add("▁" + word if rng.random() < 0.5 else word)
    while len(tokens) < size:
        kind = rng.random()
        if kind < 0.4:  # identifiers: snake_case, camelCase, dotted
            parts = [rng.choice(_SYLLABLES + _CODE) for _ in range(rng.randint(2, 3))]
            sep = rng.choice(("_", "", "."))
            word = sep.join(parts) if sep else parts[0] + "".join(p.capitalize() for p in parts[1:])
        elif kind < 0.7:  # a word with punctuation: `("`, `":`, `.get(`, `);\n`
            word = rng.choice(_PUNCT) + rng.choice(_SYLLABLES + _CODE) + rng.choice(_PUNCT)
        else:  # two CJK ideographs
            word = chr(rng.randrange(0x4E00, 0xA000)) + chr(rng.randrange(0x4E00, 0xA000))
        add("▁" + word if rng.random() < 0.3 else word)
    return list(tokens)


def _word(i: int) -> str:
    return f"{_SYLLABLES[i % len(_SYLLABLES)]}{_SYLLABLES[(i // len(_SYLLABLES)) % 100]}{i}"


def _nesting(n: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for i in range(n):
        key = _word(i)
        schema = {"type": "object", "properties": {key: schema}, "required": [key]}
    return schema


def _nested_arrays(n: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(n):
        schema = {"type": "array", "items": schema}
    return schema


def _deep_array_fields(n: int) -> dict[str, Any]:
    """`n` properties, each arrays nested `ADMITTED_ARRAY_DEPTH` deep: the nesting the gatekeeper's
    depth bound admits, repeated."""
    names = [_word(i) for i in range(n)]
    field = _nested_arrays(ADMITTED_ARRAY_DEPTH)
    return {"type": "object", "properties": {name: field for name in names}, "required": names}


def _enum(n: int) -> dict[str, Any]:
    return {"type": "string", "enum": [_word(i) for i in range(n)]}


def _properties(n: int) -> dict[str, Any]:
    kinds = ({"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "number"})
    names = [_word(i) for i in range(n)]
    return {
        "type": "object",
        "properties": {name: kinds[i % len(kinds)] for i, name in enumerate(names)},
        "required": names,
    }


def _optional_properties(n: int) -> dict[str, Any]:
    names = [_word(i) for i in range(n)]
    return {"type": "object", "properties": {name: {"type": "string"} for name in names}}


def _recursive_refs(n: int) -> dict[str, Any]:
    """`n` definitions, each holding the next and an array of the first: mutual recursion."""
    defs = {}
    for i in range(n):
        nxt = f"#/$defs/d{(i + 1) % n}"
        defs[f"d{i}"] = {
            "type": "object",
            "properties": {
                _word(i): {"$ref": nxt},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/d0"}},
            },
        }
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def _any_of(n: int) -> dict[str, Any]:
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": _word(i)}, _word(i + n): {"type": "integer"}},
                "required": ["kind", _word(i + n)],
            }
            for i in range(n)
        ]
    }


def _max_length(n: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": n}


def _min_length(n: int) -> dict[str, Any]:
    return {"type": "string", "minLength": n}


def _min_max_items(n: int) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "integer"}, "minItems": n // 2, "maxItems": n}


def _pattern_count(n: int) -> dict[str, Any]:
    return {"type": "string", "pattern": f"^[a-z0-9]{{1,{n}}}$"}


#: Shapes whose size grows with their bytes: name -> schema of count n.
SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    "nested objects": _nesting,
    "nested arrays": _nested_arrays,
    "arrays 24 deep side by side": _deep_array_fields,
    "long enum": _enum,
    "many required properties": _properties,
    "many optional properties": _optional_properties,
    "recursive $ref": _recursive_refs,
    "anyOf fan-out": _any_of,
}
#: Counted repetitions: a few bytes whatever the count, so measured by count, not bytes.
COUNTED: dict[str, Callable[[int], dict[str, Any]]] = {
    "string maxLength": _max_length,
    "string minLength": _min_length,
    "array minItems/maxItems": _min_max_items,
    "pattern counted range": _pattern_count,
}


def schema_bytes(schema: dict[str, Any]) -> int:
    """The schema's size as the gatekeeper counts it: compact JSON, UTF-8."""
    return len(json.dumps(schema, separators=(",", ":")).encode())


def sized(build: Callable[[int], dict[str, Any]], target: int) -> tuple[int, dict[str, Any]]:
    """The largest count whose schema is at most `target` bytes, and that schema."""
    low, high = 1, 1
    while schema_bytes(build(high)) <= target:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if schema_bytes(build(mid)) <= target else (low, mid)
    return low, build(low)


def load() -> float:
    """The one-minute load average: the machine is shared, so it goes beside every figure."""
    return os.getloadavg()[0]


def tokenizer_info(size: int = VOCAB_SIZE) -> Any:
    """xgrammar's view of the project's own vocabulary, built as vLLM builds it from a Hugging Face
    tokenizer. Needs tokenizers, transformers and xgrammar (the rehearsal virtualenv)."""
    import xgrammar as xgr
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(vocabulary(size))}
    model = models.BPE(vocab=vocab, merges=[], byte_fallback=True, unk_token="<unk>")
    tokenizer = Tokenizer(model)
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
    )
    return xgr.TokenizerInfo.from_huggingface(fast, vocab_size=size)


def measure(compiler: Any, schema: dict[str, Any], repeats: int = REPEATS) -> dict[str, Any]:
    """Median wall and CPU seconds (all threads) of `repeats` first compiles of `schema`, with the
    load average at each; an xgrammar refusal is reported as its message."""
    walls, cpus, loads = [], [], []
    text = json.dumps(schema)
    for _ in range(repeats):
        compiler.clear_cache()
        loads.append(load())
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        try:
            compiler.compile_json_schema(text, any_whitespace=True)
        except RuntimeError as err:
            return {"error": str(err).strip().splitlines()[-1][:160], "load": loads}
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {
        "wall_s": round(statistics.median(walls), 3),
        "cpu_s": round(statistics.median(cpus), 3),
        "load": [round(x, 1) for x in loads],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,6000", help="schema bytes, comma-separated")
    parser.add_argument("--counts", default="100,300,1000", help="counts for COUNTED shapes")
    parser.add_argument("--shapes", default="", help="only these shapes (comma-separated names)")
    parser.add_argument(
        "--vocab-size", type=int, default=VOCAB_SIZE, help="the first N tokens of the vocabulary"
    )
    args = parser.parse_args(argv)
    import xgrammar as xgr

    start = time.perf_counter()
    info = tokenizer_info(args.vocab_size)
    print(
        json.dumps(
            {
                "vocabulary": info.vocab_size,
                "type": str(info.vocab_type),
                "build_s": round(time.perf_counter() - start, 1),
                "date": dt.date.today().isoformat(),
                "cpus": os.cpu_count(),
            }
        ),
        flush=True,
    )
    compiler = xgr.GrammarCompiler(
        info, max_threads=8, cache_enabled=True, cache_limit_bytes=512 * 1024 * 1024
    )
    only = set(filter(None, args.shapes.split(",")))
    for name, build in SHAPES.items():
        if only and name not in only:
            continue
        for target in (int(s) for s in args.sizes.split(",")):
            count, schema = sized(build, target)
            row = {"shape": name, "count": count, "bytes": schema_bytes(schema)}
            print(json.dumps(row | measure(compiler, schema)), flush=True)
    for name, build in COUNTED.items():
        if only and name not in only:
            continue
        for count in (int(s) for s in args.counts.split(",")):
            schema = build(count)
            row = {"shape": name, "count": count, "bytes": schema_bytes(schema)}
            print(json.dumps(row | measure(compiler, schema)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
