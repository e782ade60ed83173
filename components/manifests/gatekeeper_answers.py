"""The answers the front door writes itself: an OpenAI-style JSON error for every status it
produces (`ERRORS`; nginx's own HTML pages never reach a client), the internal pages that write
them, and how it answers for vLLM: a failed request, a dead engine, every slot taken.

vLLM's own errors (400 for a bad field) pass through as vLLM wrote them; its 500 is the retryable
503 for an engine fault and a 400 for a request's own (`vllm_failed`); a 502 is the restart's 503,
the busy 503 when every slot of `all_requests` is taken, or at an elastic stack's door the asleep
answer (`vllm_unreachable`).
"""

from __future__ import annotations

import json

from components.manifests.asleep import ASLEEP_PAGE, Asleep

#: Every status the front door can produce, with its OpenAI error type and message. 408: nginx
#: closes a connection whose header or body timed out without writing anything
#: (ngx_http_finalize_request terminates on NGX_HTTP_REQUEST_TIME_OUT), so no page is possible
#: and the entry is here for completeness. 494 is nginx's code for a header too large; it is
#: answered as 431. 502 (vLLM unreachable) is the retryable 503; vLLM's 500, `vllm_failed`.
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


def upstream_errors() -> str:
    """The statuses a location that passes vLLM's own errors through still answers itself."""
    return (
        "            proxy_intercept_errors on;\n"
        f"            error_page 429 {page(429)};\n"
        "            error_page 500 = @vllm_500;\n"
        "            error_page 502 = @vllm_unreachable;\n"
        f"            error_page 503 =503 {page(503)};\n"
        f"            error_page 504 {page(504)};"
    )


#: The API upstream at its `all_requests`: 503, and a message saying so.
BUSY_PAGE = "/.gatekeeper/busy"
BUSY_MESSAGE = "The model is serving all the requests it holds at once; retry later"
#: Seconds a client told the model is busy waits: the shortest replies end within a few.
BUSY_RETRY_SECONDS = 5


def vllm_unreachable(asleep: Asleep | None) -> str:
    """A 502 from an API route: every slot of `all_requests` taken (nginx names the upstream, not
    an address, as what it tried: ngx_http_upstream_round_robin.c sets the peer's name to the
    upstream's when none can be picked), else vLLM unreachable: the restart's 503, or at the door
    of an elastic stack (no group, the Service has no endpoints) the asleep answer, which also
    raises the wake signal."""
    down = ASLEEP_PAGE if asleep else page(503)
    busy = error_body(503, BUSY_MESSAGE)
    return f"""        location @vllm_unreachable {{
            error_page 598 =503 {BUSY_PAGE};
            error_page 599 =503 {down};
            if ($upstream_addr = vllm_api) {{ return 598; }}
            return 599;
        }}
        location = {BUSY_PAGE} {{ internal; add_header Retry-After {BUSY_RETRY_SECONDS} always; \
return 503 {busy}; }}"""


def vllm_failed() -> str:
    """vLLM's 500. Empty (launcher.py `runtime_exception_handler`): an engine fault, the restart's
    503. JSON: a request that failed on its content or a dead engine alike (vLLM 0.31 serve/
    exception_handling/handlers/vllm_error.py `engine_error_handler`), so njs asks the engine's own
    /health, uncached, within 2 s (`gatekeeper.failed`; 503 once EngineDeadError, serve/
    instrumentator/health.py): 200 makes it a 400 that says not to retry, no 5xx. The message
    quotes vLLM's for a generation that ends in error (serving `_raise_if_error`)."""
    message = (
        "vLLM failed this request (Internal server error) and would fail it again (a schema no "
        "text satisfies does this); change the request, do not retry"
    )
    return f"""        location @vllm_500 {{
            if ($upstream_http_content_type !~ json) {{ return 503; }}
            js_content gatekeeper.failed;
        }}
        location @vllm_failed {{ return 400 {error_body(400, message)}; }}
        # No body and no Content-Length (vLLM would wait for the request's bytes).
        location = /.gatekeeper/engine-health {{
            internal; proxy_pass_request_body off; proxy_set_header Content-Length "";
            proxy_set_header Connection ""; proxy_connect_timeout 2s; proxy_read_timeout 2s;
            proxy_pass http://vllm/health;
        }}"""
