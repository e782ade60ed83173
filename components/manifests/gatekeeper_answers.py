"""The answers the front door writes itself: an OpenAI-style JSON error for every status it
produces (`ERRORS`; nginx's own HTML pages never reach a client) and the messages of how it
answers for vLLM: a failed request, a dead engine, every slot taken. The internal pages that write
them are in `gatekeeper.conf.tmpl`.

vLLM's own errors (400 for a bad field) pass through as vLLM wrote them; its 500 is the retryable
503 for an engine fault and a 400 for a request's own (`@vllm_500`); a 502 is the restart's 503,
the busy 503 when every slot of `all_requests` is taken, or at an elastic stack's door the asleep
answer (`@vllm_unreachable`).
"""

from __future__ import annotations

import json

#: Every status the front door can produce, with its OpenAI error type and message. 408: nginx
#: closes a connection whose header or body timed out without writing anything
#: (ngx_http_finalize_request terminates on NGX_HTTP_REQUEST_TIME_OUT), so no page is possible
#: and the entry is here for completeness. 494 is nginx's code for a header too large; it is
#: answered as 431. 502 (vLLM unreachable) is the retryable 503; vLLM's 500, `@vllm_500`.
ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "The request could not be read"),
    401: ("authentication_error", "Missing or invalid API key"),
    404: ("not_found_error", "Not found: this endpoint serves only the API"),
    405: ("invalid_request_error", "Method not allowed"),
    408: ("timeout_error", "The request was not sent in time"),
    413: ("invalid_request_error", "Request body too large"),
    414: ("invalid_request_error", "Request URI too long"),
    429: ("rate_limit_error", "Too many requests from this address; retry later"),
    431: ("invalid_request_error", "Request headers too large"),
    500: ("server_error", "The gatekeeper failed; retry later"),
    501: ("invalid_request_error", "Transfer encoding not supported"),
    502: ("service_unavailable_error", "The model is restarting or unavailable; retry later"),
    503: ("service_unavailable_error", "The model is restarting or unavailable; retry later"),
    504: ("timeout_error", "The model did not answer in time"),
    505: ("invalid_request_error", "HTTP version not supported"),
}


def page(status: int) -> str:
    """The internal URI that answers `status`."""
    return f"/.gatekeeper/e{status}"


def error_body(status: int, message: str | None = None) -> str:
    """The OpenAI-style error body of `status`, quoted for an nginx `return` line."""
    kind, default = ERRORS[status]
    body = json.dumps({"error": {"message": message or default, "type": kind, "code": status}})
    return "'" + body.replace("'", "") + "\\n'"


#: The API upstream at its `all_requests`: 503, and a message saying so.
BUSY_PAGE = "/.gatekeeper/busy"
BUSY_MESSAGE = "The model is serving all the requests it holds at once; retry later"
#: The gatekeeper's pools of keyed requests in progress full (`keyed_requests`, `keyed_large`).
KEYED_BUSY_MESSAGE = "The gatekeeper is taking in all the requests it holds at once; retry later"
#: Seconds a client told the model is busy waits: the shortest replies end within a few.
BUSY_RETRY_SECONDS = 5
#: vLLM's 500 for a request that would fail again (the gatekeeper asked the engine's /health:
#: it lives), answered as a 400 that says not to retry. It quotes vLLM's own message for a
#: generation that ends in error (serving `_raise_if_error`).
VLLM_FAILED_MESSAGE = (
    "vLLM failed this request (Internal server error) and would fail it again (a schema no "
    "text satisfies does this); change the request, do not retry"
)
