"""Which HTTP redirects the openai engine follows: same-origin ones that keep the request.

``urllib`` follows every redirect by default: to another host, with the request's headers
(``Authorization: Bearer <key>`` included), and a 301/302/303 answer to a POST turns it into
a GET without its body, so a chat request becomes a bare GET whose 404 says nothing. Here a
redirect is followed only when it stays on the same origin (scheme, host and port) and
keeps the method and body: any redirect of a GET, and 307/308 of any method. Every other
redirect is refused with :class:`RedirectRefused`, whose message names the status, the
target and why, so the key never leaves for another host and the user can pass the final
URL as ``--base-url``.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from email.message import Message
from typing import IO, Any

# Redirects whose target must be requested with the same method and body (RFC 9110 15.4).
_METHOD_KEEPING = frozenset({307, 308})


class RedirectRefused(Exception):
    """The server redirected the request where auditor will not follow; the message says why."""


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to the same origin with the same method, body and headers."""

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: Message, newurl: str
    ) -> urllib.request.Request | None:
        method = req.get_method()
        shown = f"HTTP {code} redirect of {method} {req.full_url} to {newurl}"
        if _origin(newurl) != _origin(req.full_url):
            fp.close()
            raise RedirectRefused(
                f"{shown} refused: it leaves the server's origin, and the API key is never sent to another host "
                "(pass the final URL as --base-url if it is the server)"
            )
        if method not in ("GET", "HEAD") and code not in _METHOD_KEEPING:
            fp.close()
            raise RedirectRefused(
                f"{shown} refused: HTTP {code} would turn the {method} into a GET without its body "
                "(pass the final URL as --base-url)"
            )
        fp.close()
        kept: dict[str, Any] = dict(req.header_items())
        return urllib.request.Request(
            newurl, data=req.data, headers=kept, origin_req_host=req.origin_req_host, unverifiable=True, method=method
        )
