"""Server probe: what an OpenAI-compatible server (``vllm serve``) at ``--base-url`` serves,
for ``auditor doctor``.

Input: the base URL (``http://host:8000/v1``) and the optional API key. Output: a frozen
``ServerStatus``: whether ``GET <base>/models`` answered, and each listed model with the
window vLLM serves it with (``max_model_len``, which vLLM's listing carries) and the
weights behind it (``root``). Redirects are followed as the openai engine follows them
(same origin only, auditor.engine.redirects), so the key never leaves for another host.
Never raises: every failure is the status's ``detail``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from auditor.engine.redirects import RedirectRefused, SameOriginRedirects

PROBE_TIMEOUT_S = 10.0
"""How long doctor waits for the model listing."""

_MAX_LISTING_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ServedModel:
    """One model a server lists: its served name, window (None when the listing has none)
    and the weights it serves (vLLM's ``root``)."""

    id: str
    max_model_len: int | None
    root: str | None


@dataclass(frozen=True)
class ServerStatus:
    """What ``GET <base_url>/models`` gave: ``reachable`` when it answered with a listing."""

    base_url: str
    reachable: bool
    models: tuple[ServedModel, ...]
    detail: str


def probe_server(base_url: str, api_key: str | None = None, *, timeout_s: float = PROBE_TIMEOUT_S) -> ServerStatus:
    """Ask the server at ``base_url`` for its model listing; never raises."""
    base = base_url.rstrip("/")
    url = f"{base}/models"
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    opener = urllib.request.build_opener(SameOriginRedirects())
    try:
        with opener.open(urllib.request.Request(url, headers=headers, method="GET"), timeout=timeout_s) as response:
            raw = response.read(_MAX_LISTING_BYTES + 1)
    except urllib.error.HTTPError as exc:
        hint = " (the API key was refused: set AUDITOR_API_KEY)" if exc.code in (401, 403) else ""
        return ServerStatus(base, False, (), f"GET {url} answered HTTP {exc.code}{hint}")
    except RedirectRefused as exc:
        return ServerStatus(base, False, (), str(exc))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return ServerStatus(base, False, (), f"cannot reach {url}: {reason} (is `vllm serve` running and the URL right?)")
    if len(raw) > _MAX_LISTING_BYTES:
        return ServerStatus(base, False, (), f"GET {url} answered more than {_MAX_LISTING_BYTES:,} bytes: not a model listing")
    try:
        listing = json.loads(raw)
    except ValueError:
        return ServerStatus(base, False, (), f"GET {url} did not answer JSON: not an OpenAI-compatible server")
    models = _models(listing)
    if not models:
        return ServerStatus(base, True, (), f"{url} answered but lists no model")
    return ServerStatus(base, True, models, f"{url} lists {len(models)} model(s)")


def _models(listing: Any) -> tuple[ServedModel, ...]:
    """The models of an OpenAI ``/models`` listing (``{"data": [{"id": ...}, ...]}``)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    models = []
    for entry in data if isinstance(data, list) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
            continue
        window = entry.get("max_model_len")
        root = entry.get("root")
        models.append(ServedModel(
            id=entry["id"],
            max_model_len=window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None,
            root=root if isinstance(root, str) and root else None,
        ))
    return tuple(models)
