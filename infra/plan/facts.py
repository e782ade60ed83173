"""Instance facts and list prices, loaded from one dated table: `instances.toml` beside this file.

Each figure there names a source that says whether it is published (a document and the day it was
read), measured (the machine and the day) or modelled (how it is derived). Loading checks every
value against the typed rows below and resolves every source; a table that breaks a rule raises
`FactsError` in one line naming the file, the row and the column.
"""

import datetime as dt
import tomllib
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from types import UnionType
from typing import Any, get_args, get_type_hints

PATH = Path(__file__).with_name("instances.toml")
KINDS = ("published", "measured", "modelled")
_NAMES = {int: "a whole number", float: "a number", str: "a string", dt.date: "a date (YYYY-MM-DD)"}


class FactsError(ValueError):
    """The facts table breaks a rule; the message names the file, the row and the column."""


@dataclass(frozen=True)
class Source:
    """Published: `read` is the day it was read, `as_of` the document's own date where older.
    Measured: the `machine` and `date` (and a decode's `pod_vcpu`). Modelled: `cite` says how."""

    kind: str
    cite: str
    read: dt.date | None = None
    as_of: str = ""
    machine: str = ""
    date: dt.date | None = None
    pod_vcpu: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column `kind`: {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == "published" and self.read is None:
            raise ValueError("column `read`: a published source needs the day it was read")
        if self.kind == "measured" and not (self.machine and self.date):
            raise ValueError("column `machine`: a measured source needs its machine and date")


@dataclass(frozen=True)
class InstanceType:
    """One EC2 type, a row of `[types]`: max pods without prefix delegation, baseline network in
    Mbit/s, on-demand $/hour in the price region, and the effective decode stream per vCPU of a
    pod in GB/s (measured on one type, modelled on the others: `catalog.decode_bandwidth`)."""

    name: str
    generation: str
    vcpu: int
    memory_gib: int
    max_pods: int
    network_mbps: int
    usd_per_hour: float
    decode_gbps_per_vcpu: float
    decode_source: str
    #: Each figure's source, by column.
    sources: dict[str, Source] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Generation:
    """A Graviton generation: its chip's DDR channels x transfer rate, the share of that a node
    streams at most (achievable fraction x an instance's share of its chip), and the assumed peak
    bf16 (fp32 on Graviton2) GFLOP/s per vCPU."""

    ddr_channels: int
    mt_per_s: int
    memory_source: str
    achievable_fraction: float
    chip_share: float
    ceiling_source: str
    peak_gflops_per_vcpu: float
    peak_source: str


@dataclass(frozen=True)
class Price:
    """One list price with its unit, source and date."""

    usd: float
    unit: str
    source: str
    as_of: str


@dataclass(frozen=True)
class EksVersion:
    """An EKS Kubernetes minor version's support calendar."""

    version: str
    released: dt.date
    end_of_standard: dt.date
    end_of_extended: dt.date


@dataclass(frozen=True)
class Facts:
    """The whole table, loaded and checked."""

    sources: dict[str, Source]
    generations: dict[str, Generation]
    types: dict[str, InstanceType]
    prices: dict[str, Price]
    price_region: str
    prices_read: dt.date
    eks_versions: dict[str, EksVersion]


def _typed(cls: type, values: dict[str, Any], where: str) -> Any:
    """`cls(**values)` once every value has its field's type; else one line naming `where`."""
    hints, kept = get_type_hints(cls), {}
    extra = sorted(set(values) - {f.name for f in fields(cls)} - {"sources"})
    if extra:
        raise FactsError(f"{where}, column `{extra[0]}`: not a column of the table; remove it")
    for f in fields(cls):
        if f.name not in values:
            if f.default is MISSING and f.default_factory is MISSING:
                raise FactsError(f"{where}, column `{f.name}`: missing; add it")
            continue
        value, hint = values[f.name], hints[f.name]
        allowed = get_args(hint) if isinstance(hint, UnionType) else (hint,)
        if isinstance(value, bool) or not (
            isinstance(value, allowed) or (float in allowed and isinstance(value, int))
        ):
            wanted = " or ".join(_NAMES[t] for t in allowed if t in _NAMES)
            raise FactsError(
                f"{where}, column `{f.name}`: {value!r} is not {wanted}; write {wanted} there"
            )
        kept[f.name] = float(value) if hint is float else value
    try:
        return cls(**kept)
    except ValueError as error:
        raise FactsError(f"{where}, {error}") from None


def _source(sources: dict[str, Source], key: Any, where: str) -> Source:
    if key not in sources:
        raise FactsError(
            f"{where}: source {key!r} is not in [sources]; add it there or fix the name"
        )
    return sources[key]


def _rows(table: dict[str, Any], cls: type, where: str) -> list[Any]:
    """A `columns` and `rows` table as typed rows."""
    columns, rows = table["columns"], []
    for number, cells in enumerate(table["rows"], start=1):
        row = f"{where} row {number}"
        if len(cells) != len(columns):
            raise FactsError(
                f"{row}: {len(cells)} values for {len(columns)} columns; give each one"
            )
        values = dict(zip(columns, cells, strict=True))
        rows.append(_typed(cls, values, f"{row} ({values[columns[0]]})"))
    return rows


def load(path: Path = PATH) -> Facts:
    """The table at `path`, every value and reference checked (`FactsError` names what is wrong)."""
    where = str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise FactsError(f"{where}: not valid TOML ({error}); fix the syntax") from None
    sources = {k: _typed(Source, v, f"{where} [sources.{k}]") for k, v in data["sources"].items()}
    gens = {}
    for key, values in data["generations"].items():
        gens[key] = _typed(Generation, values, f"{where} [generations] {key}")
        for column in ("memory_source", "ceiling_source", "peak_source"):
            _source(sources, values[column], f"{where} [generations] {key}, column `{column}`")
    types: dict[str, InstanceType] = {}
    for number, instance in enumerate(_rows(data["types"], InstanceType, f"{where} [types]"), 1):
        row = f"{where} [types] row {number} ({instance.name})"
        if instance.generation not in gens:
            raise FactsError(f"{row}, column `generation`: not in [generations]; add it there")
        if instance.name in types:
            raise FactsError(f"{row}, column `name`: a second row of {instance.name}; keep one")
        keys = {**data["types"]["sources"], "decode_gbps_per_vcpu": instance.decode_source}
        resolved = {c: _source(sources, k, f"{row}, column `{c}`") for c, k in keys.items()}
        types[instance.name] = replace(instance, sources=resolved)
    priced, prices = dict(data["prices"]), {}
    region, read_on = priced.pop("region"), priced.pop("read_on")
    for key, values in priced.items():
        row = f"{where} [prices] {key}"
        source = _source(sources, values.get("source"), f"{row}, column `source`")
        prices[key] = _typed(Price, {**values, "source": source.cite, "as_of": source.as_of}, row)
    calendar = data["eks_versions"]
    _source(sources, calendar["source"], f"{where} [eks_versions], column `source`")
    eks = {v.version: v for v in _rows(calendar, EksVersion, f"{where} [eks_versions]")}
    return Facts(sources, gens, types, prices, region, read_on, eks)


FACTS = load()
