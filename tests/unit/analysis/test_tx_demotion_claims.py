"""A demotion is a claim (issue 25): on a request's path, "a re-run completes it" and its
kin yield to a failure point between the writes; a bookkeeping-named method that saves an
object the caller just changed writes that change."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported

MODELS = "from django.db import models\n\nclass Email(models.Model):\n    pass\n\nclass Track(models.Model):\n    pass\n"
URLS = """
    from django.urls import path

    from . import views

    urlpatterns = [path("a", views.reset), path("b", views.retag), path("c", views.move_tracks), path("d", views.touch_tracks)]
    """


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


@pytest.fixture(scope="module")
def found(rule: Rule):
    files = {
        "app/models.py": MODELS,
        "app/urls.py": URLS,
        "app/views.py": """
            from .models import Email, Track

            def reset(request, pk):
                track = Track.objects.get(pk=pk)
                track.title = "new"
                track.save()
                Email.objects.get(track=track).delete()

            def retag(request, pk):
                track = Track.objects.get(pk=pk)
                track.title = "new"
                track.save()
                Email.objects.filter(track=track).delete()

            def move_tracks(request, album):
                for track in Track.objects.filter(album=album):
                    track.album = None
                    track.mark_dirty()
                album.save()

            def touch_tracks(request, album):
                for track in Track.objects.filter(album=album):
                    track.mark_dirty()
                album.save()
            """,
    }
    files["app/models.py"] = MODELS + "\n    def mark_dirty(self):\n        self.dirty = True\n        self.save()\n"
    return reported(analyze_source(files, rule))


def test_a_lookup_that_raises_between_the_writes_lifts_the_re_run_grade(found):
    reset = found[("app/views.py", "reset")]
    assert reset.severity in SHOWN, reset.explanation
    assert "not demoted for 'every write updates or deletes existing rows" in reset.explanation
    assert "looks up a row or key that may be missing" in reset.explanation


def test_without_a_failure_point_the_re_run_grade_stands(found):
    assert found[("app/views.py", "retag")].severity == "medium"


def test_a_bookkeeping_save_of_an_object_just_changed_is_a_write(found):
    moved = found[("app/views.py", "move_tracks")]
    assert "bookkeeping" not in moved.explanation.split("Graded")[0], moved.explanation
    touched = found[("app/views.py", "touch_tracks")]
    assert "bookkeeping" in touched.explanation.split("Graded")[0], touched.explanation
