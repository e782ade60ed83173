"""The chat page: three static files the gatekeeper serves itself beside the API.

No new pod, no new port: the files travel in the gatekeeper's ConfigMap (`files`), and
`locations` gives the nginx `location` blocks that serve exactly them, each with a strict
Content-Security-Policy (`CSP`: same origin only, no inline script or style) and a cache policy
that makes a browser revalidate, so a new page reaches it on the next load. The page needs no key
to load; it sends the key the person types with every API call and keeps it in `sessionStorage`
only (app.js).

`index.html` is a template: the model's name, the longest reply (the plan's `maxReplyTokens`)
and the context (`max_model_len`) are written into it here, so render, program and rehearsal
serve the same bytes for the same plan.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from importlib import resources

#: URL path -> (ConfigMap key, Content-Type). ConfigMap keys cannot hold "/", hence flat names;
#: the prefix keeps them apart from nginx.conf in the same volume.
ROUTES = {
    "/": ("chat-index.html", "text/html; charset=utf-8"),
    "/app.js": ("chat-app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("chat-app.css", "text/css; charset=utf-8"),
}
#: Same origin for everything (the API calls included), nothing inline, no plugins, no framing.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
_SOURCES = {"chat-index.html": "index.html", "chat-app.js": "app.js", "chat-app.css": "app.css"}


@dataclass(frozen=True)
class ChatPage:
    """What the page is told about the endpoint behind it."""

    #: The served model name every request names.
    model: str
    #: The reply-limit control's default and maximum (the plan's `maxReplyTokens`).
    max_reply_tokens: int
    #: The context meter's full scale (vLLM's `--max-model-len`).
    max_model_len: int


def source(name: str) -> str:
    """One of the package's static files (index.html, app.js, app.css), as written."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def files(page: ChatPage) -> dict[str, str]:
    """ConfigMap key -> content of every file the gatekeeper serves for the page."""
    values = {
        "model": html.escape(page.model, quote=True),
        "max_reply_tokens": str(page.max_reply_tokens),
        "max_model_len": str(page.max_model_len),
    }
    index = source("index.html")
    for name, value in values.items():
        index = index.replace("{{" + name + "}}", value)
    return {"chat-index.html": index} | {
        key: source(name) for key, name in _SOURCES.items() if key != "chat-index.html"
    }


def locations(root: str, refuse: str, limit: str = "", max_age: int = 300) -> str:
    """nginx `location` blocks serving exactly `ROUTES` from the directory `root`; any other
    method gets the gatekeeper's own refusal directive `refuse` (its JSON 404, rate-limited per
    client like any unknown route)."""
    blocks = []
    for path, (key, content_type) in ROUTES.items():
        blocks.append(
            "\n".join(
                [
                    f"        location = {path} {{",
                    f"            if ($request_method != GET) {{ {refuse} }}",
                    f"            root {root};",
                    f"            try_files /{key} =404;",
                    "            types { }",
                    f'            default_type "{content_type}";',
                    f'            add_header Content-Security-Policy "{CSP}";',
                    "            add_header X-Content-Type-Options nosniff;",
                    "            add_header Referrer-Policy no-referrer;",
                    f"            {limit}",
                    # Kept for a few minutes, then revalidated by ETag (nginx's default for
                    # static files); the names are not versioned, so not `immutable`.
                    f'            add_header Cache-Control "public, max-age={max_age}";',
                    "            etag on;",
                    "        }",
                ]
            )
        )
    return "\n".join(blocks) + "\n"
