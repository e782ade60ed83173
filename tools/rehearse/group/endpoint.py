"""Talking to a served `/v1` over HTTP: a status probe and one streamed completion.

`http_status` is the readiness probe (`ranks.RankGroup.wait_ready` polls `/health` with it) and
the keyless request of the endpoint checks; `streamed_reply` sends one fixed-length completion
through the benchmark's own request code, so the check and `tools.bench` judge a reply the same
way. Both take a base URL rather than a rank, so they serve a leader or anything placed in front
of it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import openai

from tools import bench

#: Tokens the streamed check asks for.
CHECK_TOKENS = 16


def http_status(
    url: str, body: Mapping[str, Any] | None = None, api_key: str | None = None
) -> int | None:
    """The HTTP status of a GET (or a JSON POST when `body` is given); None if nothing answers."""
    headers = {"Content-Type": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    data = json.dumps(body).encode("utf-8") if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return None


def streamed_reply(base_url: str, api_key: str, model: str) -> Any:
    """One streamed fixed-length chat completion through the benchmark's own request code."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
    try:
        record = bench.RequestRecord(concurrency=1, round=1, stream=1, requested=CHECK_TOKENS)
        return bench.run_request(client, model, "Say hello to the pipeline.", record)
    finally:
        client.close()
