"""Session-staged deletes, decided over the whole project: an argument-less ``x.delete()``/
``x.update()`` on an unknown receiver in a SQLAlchemy session module (marked
:data:`~.sqlalchemy.STAGED` by the per-file facts) is set aside as staged work, unless a
method of the project with that name commits itself (Flask's ``CRUDMixin.delete``:
``db.session.delete(self)`` then ``db.session.commit()``): the receiver may be of that class.

Input: every file's facts. Output: :func:`drop_staged`, which changes them in place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.sqlalchemy import QUERY_METHODS, STAGED

_COMMITS = re.compile(r"\.commit\(")


def drop_staged(facts: Mapping[str, FileFacts]) -> None:
    """Set aside the sites :data:`STAGED` marks, unless a method of the project with the
    call's name commits (Flask's ``CRUDMixin.delete``: ``db.session.delete(self)`` then
    ``db.session.commit()``): an unknown receiver may be of that class, and its call commits."""
    committing = {
        definition.name
        for item in facts.values()
        for definition in item.index.definitions
        if definition.parent is not None and definition.name in QUERY_METHODS
        and any(_COMMITS.search(item.line_text(number)) for number in range(definition.body_start_line, definition.end_line + 1))
    }  # fmt: skip
    for item in facts.values():
        item.set_aside(lambda site: site.orm == STAGED and site.call.name not in committing)
