"""What the gatekeeper's nginx costs, measured on real nginx (1.22.1 with njs 0.7.9, Debian 12,
the rehearsal's) with dev's generated config: the figures `frontdoor` sizes the gatekeeper's
memory and CPU from. The worker's private memory (Private_Clean + Private_Dirty of
/proc/<pid>/smaps_rollup) before and after holding many requests of one shape; and what the
gatekeeper's memory holds of them (the largest body, the requests at vLLM)."""

import math

from infra.plan import catalog
from infra.plan.config import ConfigError, StackConfig

#: JSON bytes per prompt token that `maxRequestBytes: auto` allows. A token is ~4 characters of
#: English, but JSON escapes (`\\u00e9` is 6 bytes), chat framing and token-id prompts
#: (`[123456, ...]`, 8 bytes an id) can take more; 32 leaves room for all of them.
BODY_BYTES_PER_TOKEN = 32
#: Request framing beyond the prompt: model name, sampling fields, message roles.
BODY_OVERHEAD_BYTES = 64 * 1024
#: The gatekeeper's memory (`catalog.GATEKEEPER_MEMORY_MIB`) less what nginx, its zones, njs and
#: the health cache hold before any client (modelled: measured ~5 MiB of anonymous memory at
#: start, nginx 1.22.1 and njs 0.7.9 on the rehearsal machine, 2026-12-06, plus the binaries').
GATEKEEPER_BASE_MIB = 16
#: What one public connection that has shown no key costs nginx at most, in bytes, by the shape
#: of what its client sent before it stopped (never ending the head; 512-byte header buffer, one
#: 1 KiB large buffer, 256-byte pools, a 2 KiB stream buffer each way). Measured with dev's
#: generated config, 3,000 such connections from a fresh worker, its private memory: on nginx
#: 1.30.4 with njs 1.0.0 built from source (glibc, -O2), 2026-12-07, a 32-line head of 38-byte
#: names 16,772 a connection, whatever the request line or values (within 3 bytes), nothing sent
#: 6,773; on Debian's 1.22.1 the same heads 16,388 and 6,773, and 361 lines of `a:` 31,276 (the
#: worst, 2026-12-06): each line costs a list entry and a lowercase copy of its name (nginx 1.22.1
#: src/http/ngx_http_request.c `ngx_http_process_request_headers`), and 1.22 has no count of
#: lines. The pod's nginx (1.30) refuses a head past `gatekeeper_conf.MAX_HEADERS` lines
#: (`max_headers`, nginx 1.29.8 on), so its bound is the 32-line shape; rounded up.
KEYLESS_CONNECTION_BYTES, KEYLESS_WORST_122_BYTES, KEYLESS_IDLE_BYTES = 16_800, 31_300, 6_800
#: A keyed request in progress, small body (under `LARGE_BODY_BYTES`) or large: its connection,
#: the key check's njs VM, the hop to the API server and there a buffer of its Content-Length, up
#: to `maxRequestBytes` (nginx 1.22.1 ngx_http_request_body.c), so a large one is charged its
#: fixed part plus the stack's largest body. Measured with dev's config, 200 keyed POSTs, the
#: worker's private memory: 61,112 bytes each after 23 bytes of body, 73,032 after 9,900 of 9,999,
#: 397,271 after 327,000 of 327,680 (69,591 beside the buffer), 2026-12-06; rounded up. On nginx
#: 1.30.4 with njs 1.0.0 (built from source) the crowd test's 40 keyed tricklers holding 9,800
#: bytes each grew the worker 57,446 bytes apiece, against 60,518 on 1.22.1 (2026-12-07); the
#: large one is not measured there. The hop's Unix socket pair in the kernel: modelled,
#: `KERNEL_CONNECTION_BYTES`' 12,700 less its TCP 7,100.
KEYED_SMALL_BYTES, KEYED_LARGE_FIXED_BYTES, HOP_KERNEL_BYTES = 73_100, 69_700, 5_600
#: The kernel's part, charged to the container's memory: 12,700 bytes of slab per loopback
#: connection through the gatekeeper (the client's socket, nginx's, the Unix socket pair), less
#: 3,550 for the client's end (half of a plain loopback TCP pair's 7,100), measured the same day.
KERNEL_CONNECTION_BYTES = 9_150
#: An nginx connection slot (`worker_connections`), written at start: measured 432 bytes each
#: (a worker of 61,000 slots against one of 1,000), 2026-12-06.
SLOT_BYTES = 432
#: What njs holds while it parses a body, per byte, at worst: one body at a time (the check
#: server's request, and its VM, end with the verdict; `gatekeeper.conf.tmpl`). Measured on the
#: rehearsal machine (nginx 1.22.1, njs 0.7.9), 2026-12-06: twelve shapes at 327,680 bytes held
#: at a slow upstream when the VM outlived the check, the worker's private memory, nested arrays
#: at njs's depth bound the worst at 105.8x the body (text 5.4x, numbers 15.9x); with the check
#: server, one such body raises the worker's peak (VmHWM) by 34 MB and 64 at once by 41 MB, its
#: private memory after them by 14 MiB. Rounded up.
PARSE_PEAK_PER_BODY_BYTE = 106
#: What parsing a body costs njs at worst, per byte: 24 ms of CPU for a 327,680-byte body of
#: 163,840 numbers, invalid at its last byte (the worker's CPU over 10 rounds of 200, nginx 1.30.4
#: with njs 1.0.0 built from source: 15.55 to 23.25 ms, median 19.40; Debian's 1.22.1 with njs
#: 0.7.9, interleaved: 15.20 to 20.85; a chat-shaped body invalid at its last byte 5.15 to 7.80 on
#: 1.30.4) on the rehearsal machine, 2026-12-07; the highest, rounded up.
PARSE_NS_PER_BYTE = 24e6 / 327_680


def hop_bytes() -> int:
    """What a keyed request holds beyond its public connection: the Unix socket pairs to the API
    server and from it to the check server, and two slots each."""
    return 2 * (HOP_KERNEL_BYTES + 2 * SLOT_BYTES) - KEYLESS_IDLE_BYTES


def large_request_bytes(body: int) -> int:
    """A keyed request with a large body: its fixed part, the hops, and the body twice (the API
    server's buffer, and the check server's while it is judged)."""
    return KEYED_LARGE_FIXED_BYTES + 2 * body + hop_bytes()


#: The shares of the gatekeeper's memory beside nginx's own that the requests at vLLM may hold
#: at most, and the one body njs parses at a time.
HELD_SHARE, PARSE_SHARE = 0.5, 0.25


def request_body(cfg: StackConfig, max_model_len: int) -> tuple[int, int]:
    """The largest request body, and the most any stack may take: what njs parses at worst in
    `PARSE_SHARE` of the gatekeeper's memory."""
    room = (catalog.GATEKEEPER_MEMORY_MIB - GATEKEEPER_BASE_MIB) * 2**20 * PARSE_SHARE
    most = math.floor(room / PARSE_PEAK_PER_BODY_BYTE)
    if cfg.max_request_bytes == "auto":
        return min(most, max_model_len * BODY_BYTES_PER_TOKEN + BODY_OVERHEAD_BYTES), most
    if cfg.max_request_bytes > most:
        raise ConfigError(
            "maxRequestBytes",
            f"{cfg.max_request_bytes} bytes may take njs {PARSE_PEAK_PER_BODY_BYTE}x that to "
            f"parse, more than {PARSE_SHARE:g} of the gatekeeper's memory beside nginx's own",
            f"use at most {most}, or auto",
        )
    return cfg.max_request_bytes, most


def all_requests(wanted: int, body: int) -> int:
    """Requests at vLLM from every client together: what the KV cache holds (`wanted`), at most
    what `HELD_SHARE` of the gatekeeper's memory holds at the largest body each."""
    room = (catalog.GATEKEEPER_MEMORY_MIB - GATEKEEPER_BASE_MIB) * 2**20 * HELD_SHARE
    return max(1, min(wanted, math.floor(room / large_request_bytes(body))))
