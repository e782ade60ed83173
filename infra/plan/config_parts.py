"""The pieces of the stack configuration model (`infra.plan.config`) that stand on their own:
the project's constants, the one error every refusal is (`ConfigError`), and the nested models
(`modelProfile`, `schedule`)."""

from __future__ import annotations

import difflib
import ipaddress
import re
import zoneinfo
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

PROJECT = "gemma-graviton"

#: Keys that hold secrets. They live in the stack file only as `secure:` values.
SECRET_KEYS = ("hfToken", "apiKey", "apiKeyPrevious")

Auto = Literal["auto"]
PositiveInt = Annotated[int, Field(gt=0)]

#: RFC 1918 ranges: clients there reach the load balancer through a VPN, Direct Connect or a
#: peered network, never across the public internet. (`IPv4Network.is_private` is no use here:
#: it also counts the documentation ranges such as 203.0.113.0/24 as private.)
#: RFC 1122 section 3.2.1.3's "this host on this network" (RFC 6890 table 1): never a source
#: address a client's packets arrive from.
THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
PRIVATE_RANGES = (
    ipaddress.IPv4Network("10.0.0.0/8"),
    ipaddress.IPv4Network("172.16.0.0/12"),
    ipaddress.IPv4Network("192.168.0.0/16"),
)
#: A Hugging Face repository id. The model name reaches vLLM's command line and an environment
#: value, where Kubernetes expands `$(VAR)`: letters, digits, `.`, `_` and `-` only.
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


class ConfigError(ValueError):
    """A stack value that cannot be used: one line naming the key, the rule and the fix."""

    def __init__(self, key: str, rule: str, fix: str) -> None:
        self.key, self.rule, self.fix = key, rule, fix
        super().__init__(f"`{key}` {rule}; {fix}")


def _fix(text: str) -> dict[str, str]:
    return {"fix": text}


#: An IAM role or user ARN, as access entries take them (not an assumed-role session).
IAM_PRINCIPAL_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+")
_IAM_FIX = "list IAM role or user ARNs such as arn:aws:iam::123456789012:role/platform-admin"
#: A zone name (us-west-2a) or zone ID (usw2-az1, apne1-az4, usgw1-az1).
ZONE_NAME = re.compile(r"[a-z]{2}(-gov)?-[a-z]+-\d[a-z]")
ZONE_ID = re.compile(r"[a-z]{3,6}\d-az\d{1,2}")
#: The digest part of a pinned image reference.
IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class ModelProfileConfig(BaseModel):
    """A model described by the stack itself instead of by a catalogue name.

    The fields mirror `catalog.ModelProfile`; see there for what each one means.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel)

    layers: PositiveInt
    sliding_per_full: Annotated[int, Field(ge=0)]
    sliding_kv_heads: Annotated[int, Field(gt=0)]
    sliding_head_dim: Annotated[int, Field(gt=0)]
    full_kv_heads: Annotated[int, Field(gt=0)]
    full_head_dim: Annotated[int, Field(gt=0)]
    sliding_window: Annotated[int, Field(gt=0)]
    hidden_size: Annotated[int, Field(gt=0)]
    vocab_size: Annotated[int, Field(gt=0)]
    checkpoint_bytes: Annotated[int, Field(gt=0)]
    non_text_bytes: Annotated[int, Field(ge=0)] = 0
    max_context: Annotated[int, Field(gt=0)]
    tied_embeddings: bool = True
    attention_heads: Annotated[int | None, Field(gt=0)] = None
    intermediate_size: Annotated[int | None, Field(gt=0)] = None
    #: A mixture of experts (0 experts: dense). Its decode is the measured MoE/dense ratio
    #: applied to `decodeReference`, a dense catalogue model (`infra.plan.moe`).
    experts: Annotated[int, Field(ge=0)] = 0
    experts_per_token: Annotated[int, Field(ge=0)] = 0
    expert_intermediate_size: Annotated[int, Field(ge=0)] = 0
    decode_reference: str | None = None

    @model_validator(mode="after")
    def _experts_agree(self) -> ModelProfileConfig:
        """Experts, experts per token and their width come together, top-k within the experts."""
        if self.experts and not 0 < self.experts_per_token <= self.experts:
            raise ConfigError(
                "modelProfile.expertsPerToken",
                f"is {self.experts_per_token}, and a mixture of {self.experts} experts needs "
                "1 to that many per token",
                "set it to the model's top-k, such as 8 for gemma-4-26B-A4B-it",
            )
        if self.experts and self.expert_intermediate_size == 0:
            raise ConfigError(
                "modelProfile.expertIntermediateSize",
                "is 0 for a mixture of experts",
                "set it to one expert's MLP width, such as 704 for gemma-4-26B-A4B-it",
            )
        if not self.experts and (self.experts_per_token or self.expert_intermediate_size):
            raise ConfigError(
                "modelProfile.experts",
                "is 0 (dense) while expertsPerToken or expertIntermediateSize is set",
                "set experts to the expert count, or drop the other two",
            )
        return self


#: Day names a schedule's `days` are written with, Monday first (ISO and cron order).
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_CLOCK = re.compile(r"([01]\d|2[0-3]):[0-5]\d")
#: The day a window ends: an end at "00:00" is midnight, the start of the next day.
DAY_MINUTES = 24 * 60


def span(start: str, end: str) -> tuple[int, int]:
    """A window's start and end in minutes of its day; an end at 00:00 is `DAY_MINUTES`."""
    (h0, m0), (h1, m1) = (map(int, t.split(":")) for t in (start, end))
    return h0 * 60 + m0, (h1 * 60 + m1) or DAY_MINUTES


def weekdays(text: str) -> tuple[int, ...]:
    """The ISO weekdays (Mon = 0) of a `days` value such as "Mon-Fri" or "Mon,Wed,Fri"; raises
    ValueError for anything else (a range runs forward, Mon-Sun at most)."""
    days: set[int] = set()
    for part in text.replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if first not in WEEKDAYS or (last and last not in WEEKDAYS):
            raise ValueError(part)
        start, end = WEEKDAYS.index(first), WEEKDAYS.index(last or first)
        if end < start:
            raise ValueError(part)
        days.update(range(start, end + 1))
    return tuple(sorted(days))


class ScheduleConfig(BaseModel):
    """Office hours: one window a day on the listed days, in a named time zone, with the groups
    held inside it and outside it (`infra.plan.elastic` turns it into KEDA's cron trigger)."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel)

    time_zone: Annotated[
        str,
        Field(
            description="IANA name of the window's time zone, such as Europe/Berlin.",
        ),
    ]
    days: Annotated[
        str,
        Field(description="Days the window opens: a range (Mon-Fri) or a list (Mon,Wed,Fri)."),
    ] = "Mon-Fri"
    start: Annotated[
        str,
        Field(
            description='When the window opens, as HH:MM in quotes ("08:00"): YAML reads an '
            "unquoted 8:00 as a number."
        ),
    ]
    end: Annotated[
        str,
        Field(
            description='When the window closes, as HH:MM in quotes ("19:00"), after `start` '
            'the same day; "00:00" is midnight, the start of the next day.'
        ),
    ]
    groups_inside: Annotated[
        int,
        Field(
            ge=1,
            le=16,
            description="Groups held inside the window: above `minGroups`, at most `maxGroups`.",
        ),
    ] = 1
    groups_outside: Annotated[
        int | None,
        Field(
            ge=0,
            le=16,
            description="Groups outside the window: `minGroups`, the floor, whether written or "
            "left out.",
        ),
    ] = None

    @field_validator("time_zone")
    @classmethod
    def _iana_zone(cls, value: str) -> str:
        names = zoneinfo.available_timezones()
        if value not in names:
            # Only a really close spelling (Europe/Berln, Asia/Tokio) is suggested: at difflib's
            # default 0.6 Europe/Atlantis would be told to use Europe/Athens.
            folded = {n.lower(): n for n in names}
            close = [folded[value.lower()]] if value.lower() in folded else []
            close = close or difflib.get_close_matches(value, sorted(names), n=1, cutoff=0.85)
            raise ConfigError(
                "schedule.timeZone",
                f"{value!r} is not an IANA time zone name",
                f"use {close[0]}"
                if close
                else 'use one such as Europe/Berlin (`python -c "import zoneinfo; '
                'print(sorted(zoneinfo.available_timezones()))"` lists them)',
            )
        return value

    @field_validator("days")
    @classmethod
    def _days(cls, value: str) -> str:
        try:
            weekdays(value)
        except ValueError:
            raise ConfigError(
                "schedule.days",
                f"{value!r} is not a list of days (Mon to Sun, ranges forward)",
                "write them as Mon-Fri or Mon,Wed,Fri",
            ) from None
        return value

    @field_validator("start", "end", mode="before")
    @classmethod
    def _clock(cls, value: Any, info: ValidationInfo) -> Any:
        example = "08:00" if info.field_name == "start" else "19:00"
        if not isinstance(value, str):
            # YAML 1.1 readers take an unquoted 8:00 for the sexagesimal number 480.
            raise ConfigError(
                f"schedule.{info.field_name}",
                f"{value} was read as a number, not a time of day",
                f'quote it as HH:MM, such as "{example}"',
            )
        if value.startswith("24:") and info.field_name == "end":
            raise ConfigError(
                "schedule.end",
                f"{value!r} is not a time of day as HH:MM (00:00 to 23:59)",
                'write "23:59" for a minute before midnight, or "00:00", which as an end means '
                "midnight, the start of the next day",
            )
        if not _CLOCK.fullmatch(value):
            raise ConfigError(
                f"schedule.{info.field_name}",
                f"{value!r} is not a time of day as HH:MM",
                f'write it as "{example}"',
            )
        return value

    @model_validator(mode="after")
    def _window(self) -> ScheduleConfig:
        start, end = span(self.start, self.end)
        if end <= start:
            raise ConfigError(
                "schedule.end",
                f"{self.end} is not after `schedule.start` {self.start} (a window ends the day it "
                "starts)",
                'use an end such as "23:59", or "00:00" for midnight',
            )
        return self

    @property
    def weekdays(self) -> tuple[int, ...]:
        """The window's ISO weekdays (Mon = 0)."""
        return weekdays(self.days)

    @property
    def hours_a_week(self) -> float:
        """Hours inside the window in one week."""
        start, end = span(self.start, self.end)
        return len(self.weekdays) * (end - start) / 60
