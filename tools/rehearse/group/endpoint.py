"""Talking to a served `/v1` over HTTP: a status probe and one streamed completion.

`http_status` is the readiness probe (`ranks.RankGroup.wait_ready` polls `/health` with it) and
the keyless request of the endpoint checks; `streamed_reply` sends one fixed-length chat
completion with the `openai` client and reads how it ended and its length as the server counted
it. Both take a base URL rather than a rank, so they serve a leader or anything placed in front
of it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import openai

#: Tokens the streamed check asks for.
CHECK_TOKENS = 16


def http_status(url: str, body: Mapping[str, Any] | None = None) -> int | None:
    """The HTTP status of a keyless GET (or a JSON POST when `body` is given); None if nothing
    answers."""
    data = json.dumps(body).encode("utf-8") if body is not None else None
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return None


def json_request(url: str, api_key: str, body: Mapping[str, Any]) -> urllib.request.Request:
    """A POST of `body` as JSON to `url`, with the key."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"}
    return urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)


@dataclass(frozen=True)
class Reply:
    """One streamed reply: the failure (None when it was served), how it ended, its length."""

    error: str | None
    """The HTTP status of a refused request, else the client's error; None when served."""
    finish_reason: str | None = None
    tokens: int = 0
    """`usage.completion_tokens`, as the server counted them."""

    @property
    def full(self) -> bool:
        """Served at exactly the length asked for: neither cut off nor stopped early."""
        ended = self.finish_reason in ("length", "stop")
        return self.error is None and self.tokens == CHECK_TOKENS and ended


def streamed_reply(base_url: str, api_key: str, model: str) -> Reply:
    """One streamed chat completion of exactly `CHECK_TOKENS` tokens (vLLM's `min_tokens` and
    `ignore_eos`, so the model cannot end it early), read to its end."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
    finish, tokens = None, 0
    try:
        stream = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Say hello to the pipeline."}],
            max_tokens=CHECK_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"min_tokens": CHECK_TOKENS, "ignore_eos": True},
        )
        for chunk in stream:
            finish = next((c.finish_reason for c in chunk.choices if c.finish_reason), finish)
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
    except openai.APIStatusError as error:
        return Reply(str(error.status_code))
    except (openai.OpenAIError, OSError) as error:
        return Reply(f"{type(error).__name__}: {' '.join(str(error).split())}")
    finally:
        client.close()
    return Reply(None, finish, tokens)
