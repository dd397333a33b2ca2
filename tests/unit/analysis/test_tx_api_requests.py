"""Not a database write (round 5): an API client's request object, built with keyword
arguments and run at once by ``.execute()`` (Google's ``youtube.playlistItems().delete(id=...)
.execute()``): no Django ORM call returns anything with ``execute``."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = """
    from django.db import models

    class Video(models.Model):
        name = models.CharField(max_length=20)
    """


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _sync(removal: str, rule: Rule) -> dict:
    views = f"""
        from .models import Video

        def sync(request, client, item):
            Video.objects.create(name="a")
            {removal}
            return None
        """
    found = reported(analyze_source({"media/models.py": MODELS, "media/views.py": views}, rule))
    return {key: finding for key, finding in found.items() if finding.severity in ("critical", "high")}


@pytest.mark.parametrize(
    "removal",
    [
        "client.playlistItems().delete(id=item).execute()",
        "client.playlistItems().delete(id=item, part='x') .execute()",
        "client.videos().update(part='snippet', body=item).execute()",
    ],
)
def test_an_api_request_run_by_execute_is_no_write(removal: str, rule: Rule):
    assert ("media/views.py", "sync") not in _sync(removal, rule)


@pytest.mark.parametrize(
    "removal",
    [
        "item.delete()",
        "Video.objects.filter(name=item).delete()",
        "client.playlistItems().delete(id=item)",  # not run by execute: as before
    ],
)
def test_an_orm_delete_stays_a_write(removal: str, rule: Rule):
    assert ("media/views.py", "sync") in _sync(removal, rule)
