"""The gatekeeper's keys (`frontDoor: gatekeeper`): its per-client limits, request checks, chat
page and key rotation. `StackConfig` takes them from here; with `frontDoor: vllm-key` nothing
would apply them, and each is refused (`_check_vllm_key`)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from infra.plan.config_parts import Auto, ConfigError, PositiveInt, _fix


class GatekeeperKeys(BaseModel):
    """The keys only the gatekeeper reads."""

    max_request_bytes: Annotated[
        Annotated[int, Field(ge=1024)] | Auto,
        Field(
            description="Largest request body the gatekeeper passes to vLLM (413 above it); "
            "auto = enough JSON for a prompt of `maxModelLen` tokens.",
            json_schema_extra=_fix("use auto or a number of bytes of at least 1024"),
        ),
    ] = "auto"
    client_requests_per_minute: Annotated[
        PositiveInt | Auto,
        Field(
            description="Requests per minute one client address may send (429 with "
            "Retry-After above it); auto follows the plan's concurrency.",
            json_schema_extra=_fix("use auto or a positive number of requests such as 120"),
        ),
    ] = "auto"
    client_concurrent_requests: Annotated[
        PositiveInt | Auto,
        Field(
            description="Requests one client address may have in flight (429 above it); "
            "auto = the number of full-length requests the KV cache holds at once.",
            json_schema_extra=_fix("use auto or a positive number of requests such as 2"),
        ),
    ] = "auto"
    client_tokens_in_flight: Annotated[
        Annotated[int, Field(ge=1, le=100_000_000)] | Auto,
        Field(
            description="KV-cache tokens one client address may hold at vLLM at once, each "
            "request counted at the large end of what it can hold (its body's bytes plus the "
            "longest reply, at most `maxModelLen`), enforced in tiers (429 above it); auto = "
            "half the KV cache, so one client at its limit leaves the other half to the others. "
            "At least one full-length request beside the client's others, at most the KV cache "
            "less one full-length request.",
            json_schema_extra=_fix("use auto or a number of tokens such as 40000"),
        ),
    ] = "auto"
    chat_page: Annotated[
        bool,
        Field(
            description="The gatekeeper also serves a small chat page at the endpoint's root "
            "(`https://<endpoint>/`; three static files, same-origin CSP, no new pod); the page "
            "loads without "
            "the key and sends the key the person types with each call. false: only the API.",
            json_schema_extra=_fix("use true or false"),
        ),
    ] = True
    client_connections: Annotated[
        PositiveInt | Auto,
        Field(
            description="TCP connections one client address may hold at the gatekeeper, "
            "counted when a connection opens, before a request is read (idle keep-alives and "
            "slow senders included); auto = one per request it may have in flight + 2; at "
            "most half of the connections the gatekeeper's memory holds.",
            json_schema_extra=_fix("use auto or a positive number of connections such as 16"),
        ),
    ] = "auto"
    max_sequences_per_request: Annotated[
        PositiveInt | Auto,
        Field(
            description="Sequences one request may ask for (`n`, `best_of`, a list of "
            "prompts); more get 400 naming the field. The per-client limits count sequences, "
            "so a higher value lets fewer requests in flight. auto = 1.",
            json_schema_extra=_fix("use auto or a positive number of sequences such as 2"),
        ),
    ] = "auto"
    max_schema_bytes: Annotated[
        Annotated[int, Field(ge=0)] | Auto,
        Field(
            description="Largest grammar input (JSON schemas, tools, regexes) in bytes of "
            "JSON; vLLM compiles each before generating, one at a time, so one such request is "
            "in flight per client address. 0 turns structured outputs off; auto = about a "
            "second of compile.",
            json_schema_extra=_fix("use auto, 0 or a number of bytes such as 8192"),
        ),
    ] = "auto"
    api_key_overlap_until: Annotated[
        dt.datetime | None,
        Field(
            description="During a key rotation, when the previous key (`apiKeyPrevious`) stops "
            "being accepted, as an RFC 3339 UTC time; until then both keys work.",
            json_schema_extra=_fix("use a UTC time such as 2026-12-09T00:00:00Z"),
        ),
    ] = None

    @field_validator("api_key_overlap_until")
    @classmethod
    def _utc(cls, value: dt.datetime | None) -> dt.datetime | None:
        if value is not None and value.utcoffset() != dt.timedelta(0):
            raise ConfigError(
                "apiKeyOverlapUntil",
                f"{value.isoformat()} is not a UTC time (RFC 3339 with Z or +00:00)",
                "write it in UTC, such as 2026-12-09T00:00:00Z",
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _no_page_without_gatekeeper(cls, data: Any) -> Any:
        """The chat page is the gatekeeper's: with `frontDoor: vllm-key` its default is off."""
        if isinstance(data, dict) and data.get("frontDoor") == "vllm-key":
            return {"chatPage": False, **data}
        return data

    def _check_vllm_key(self) -> None:
        """With `frontDoor: vllm-key`, a key of the gatekeeper that is set is refused, and so is
        the chat page it serves (an elastic stack too: `elastic_keys.check`)."""
        if self.gatekeeper:
            return
        for name in sorted(self.model_fields_set & set(GatekeeperKeys.model_fields)):
            if name == "chat_page" and not self.chat_page:
                continue
            key = to_camel(name)
            rule = {
                "apiKeyOverlapUntil": "keeps a previous key during a rotation, but vLLM reads one "
                "key (VLLM_API_KEY) when it starts",
                "chatPage": "is served by the gatekeeper",
            }.get(key, "is a limit of the gatekeeper")
            fix = "set `chatPage: false`" if key == "chatPage" else "remove it"
            raise ConfigError(
                key,
                f"{rule}, which `frontDoor: vllm-key` does not run",
                f"{fix}, or set `frontDoor: gatekeeper`",
            )
