"""Irreversible side effects outside the database: sending mail, HTTP calls that change
something, enqueueing a task, writing to file or object storage. An HTTP POST to a URL,
written in the call, whose path names a search endpoint is a read (MISP's
``/attributes/restSearch`` takes its query as a POST body: MISP app/Controller
AttributesController ``restSearch``; so do Elasticsearch's ``_search``/``_msearch``/``_count``).

A database write followed by one of these cannot be undone as a whole: when the write is
an autocommit write (or a commit) and something fails after it, the mail is sent or the
task queued for state that may be half there. Django ``transaction.on_commit`` callbacks
run after the commit and are excluded by the analysis before this model is asked.
"""

from __future__ import annotations

import re

from auditor.callgraph.names import strip_arguments
from auditor.analysis.entrypoints import compile_patterns, split_arguments
from auditor.analysis.transactions.base import CallContext, Classification, Effect
from auditor.index.model import CallSite

_SIDE_EFFECTS = (
    # mail
    "send_mail", "*.send_mail", "send_mass_mail", "*.send_mass_mail", "mail_admins", "mail_managers",
    "*.send_messages", "*Email*.send", "*email*.send", "*msg.send", "*message.send", "*Message.send",
    "*mailSender.send", "*MailSender.send",
    # HTTP calls that change something
    "requests.post", "requests.put", "requests.patch", "requests.delete", "httpx.post", "httpx.put",
    "httpx.patch", "httpx.delete", "*.urlopen", "urlopen", "http.Post", "http.PostForm",
    "*restTemplate.postForObject", "*restTemplate.postForEntity", "*restTemplate.put", "*restTemplate.delete",
    # enqueueing
    "*.delay", "*.apply_async", "*.send_task", "*.enqueue", "*kafkaTemplate.send", "*KafkaTemplate.send",
    "*rabbitTemplate.convertAndSend",
    # storage
    "*storage.save", "*storage.delete", "*.put_object", "*.upload_file", "*.upload_fileobj", "*.delete_object",
)  # fmt: skip
_PATTERN = compile_patterns(_SIDE_EFFECTS)
_UPLOADS = frozenset({"put_object", "upload_file", "upload_fileobj"})
_CACHE_RECEIVER = re.compile(r"(?:^|\.)(?:cache|caches|\w+_cache)$")
_STORAGE_RECEIVER = re.compile(r"(?:^|\.)\w*storage(?:\.|$)")
# A URL written in the call whose path names a search endpoint (MISP's
# ``/attributes/restSearch``, Elasticsearch's ``/_search``/``/_msearch``/``/_count``): the POST
# carries the query in its body and changes nothing.
_URL_LITERAL = re.compile(r"""^[rbfu]*["']([^"']*)["']$""", re.IGNORECASE)
_HOST = re.compile(r"^(?:[a-z][\w+.-]*://[^/]*|\{[^}]*\})", re.IGNORECASE)  # a scheme and host, or a leading ``{base}``
_SEARCH_SEGMENTS = frozenset({"restsearch", "_search", "_msearch", "_count", "search"})
_SIGNAL_RECEIVER = re.compile(r"(?i)signal|^(pre|post)_\w+$")


class SideEffectModel:
    """Mail, HTTP, queue and storage calls (any framework); cache calls are no effect."""

    name = "side-effects"
    names = frozenset(
        {pattern.rsplit(".", 1)[-1] for pattern in _SIDE_EFFECTS} | {"delete", "set", "save"}
    )

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        if call.name not in self.names:
            return None
        stripped = strip_arguments(call.callee)
        receiver = stripped.rsplit(".", 1)[0] if "." in stripped else ""
        if receiver and _CACHE_RECEIVER.search(receiver):
            return Classification(None, "cache call")
        if receiver and call.name in ("save", "delete") and _STORAGE_RECEIVER.search(receiver):
            return Classification(Effect.UPLOAD if call.name == "save" else Effect.SIDE_EFFECT, f"storage {call.name}")
        if _PATTERN is None or _PATTERN.match(stripped) is None:
            return None
        if call.name in _UPLOADS:
            return Classification(Effect.UPLOAD, f"file stored ({call.name})")
        if call.name == "send" and _SIGNAL_RECEIVER.search(receiver.rsplit(".", 1)[-1]):
            return None
        if call.name == "post" and _search_url(split_arguments(call.arguments)[0] if call.arguments.strip() else ""):
            return Classification(None, "an HTTP POST to a search endpoint: a read")
        return Classification(Effect.SIDE_EFFECT, f"irreversible side effect ({call.name})")


def _search_url(argument: str) -> bool:
    """Whether a call's first argument is a URL literal whose path, after its scheme and host
    (or a leading ``{base}``), has a segment that names a search endpoint exactly (``restSearch``,
    ``_search``, ``_msearch``, ``_count``, ``search``): not a host named ``search`` or
    ``elasticsearch``, nor ``/saved_search`` or ``/research``."""
    literal = _URL_LITERAL.match(argument.strip())
    if literal is None:
        return False
    path = _HOST.sub("", literal.group(1), count=1).split("?", 1)[0]
    return any(segment.lower() in _SEARCH_SEGMENTS for segment in path.split("/"))
