"""A merge is no re-runnable maintenance run: a command that re-points other tables' rows
from one object to another and then deletes that object leaves, when it stops between the
writes, the object's data split between two owners (les-emplois fixed exactly this in a
management command, benchmarks/real_fixes: lesemplois-merge-organizations). Updates and a
bulk delete of stale rows stay graded re-runnable."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

RERUN_REASON = "every write updates or deletes existing rows to values a re-run with the same input writes again"

FILES = {
    "clubs/models.py": """
        from django.db import models

        class Club(models.Model):
            name = models.CharField(max_length=50)

        class Seat(models.Model):
            club = models.ForeignKey(Club, on_delete=models.CASCADE)

        class Booking(models.Model):
            club = models.ForeignKey(Club, on_delete=models.CASCADE)
            stale = models.BooleanField(default=False)
        """,
    "clubs/management/commands/fold_clubs.py": """
        from django.core.management.base import BaseCommand

        from clubs.models import Booking, Club, Seat

        def fold_club(source_id, target_id):
            source = Club.objects.get(pk=source_id)
            Seat.objects.filter(club_id=source_id).update(club_id=target_id)
            Booking.objects.filter(club_id=source_id).update(club_id=target_id)
            source.delete()

        class Command(BaseCommand):
            def handle(self, *args, **options):
                fold_club(options["source"], options["target"])
        """,
    "clubs/management/commands/tidy_bookings.py": """
        from django.core.management.base import BaseCommand

        from clubs.models import Booking

        def tidy(club_id, note):
            Booking.objects.filter(club_id=club_id).update(note=note)
            Booking.objects.filter(stale=True, club_id=club_id).delete()

        class Command(BaseCommand):
            def handle(self, *args, **options):
                tidy(options["club"], options["note"])
        """,
}


@pytest.fixture(scope="module")
def found(rule: Rule):
    return reported(analyze_source(FILES, rule))


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def test_moving_rows_off_an_object_and_deleting_it_is_not_rerunnable(found):
    merge = found[("clubs/management/commands/fold_clubs.py", "fold_club")]
    assert merge.severity in ("critical", "high"), merge.explanation
    assert RERUN_REASON not in merge.explanation


def test_updates_then_a_bulk_delete_of_stale_rows_stay_rerunnable(found):
    tidy = found[("clubs/management/commands/tidy_bookings.py", "tidy")]
    assert tidy.severity == "medium" and RERUN_REASON in tidy.explanation, tidy.explanation
