"""A model's "changed since built" tests (mediacms's ``Media.save``): ``__init__`` keeps
``self.__original_media_file = self.media_file`` and ``save`` runs its extra writes only when
``self.media_file != self.__original_media_file``. Django builds every instance through
``__init__`` (django/db/models/query.py ``QuerySet.create``: ``obj = self.model(**kwargs)``;
django/db/models/base.py ``Model.from_db``: ``cls(*values)``), so right after a manager's
``create`` or a read, each snapshot equals its field: those arms run only where the caller
set the field in between. A ``create`` also saves a new instance: ``if self.pk:`` arms do
not run (``QuerySet.create`` saves ``force_insert=True``)."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = """
from django.db import models


class Job(models.Model):
    pass


class Media(models.Model):
    media_file = models.FileField()
    sprites = models.FileField()
    poster = models.FileField()
    whisper = models.BooleanField()

    def __init__(self, *args, **kwargs):
        super(Media, self).__init__(*args, **kwargs)
        self.__original_media_file = self.media_file
        self.__original_poster = self.poster
        self.__original_whisper = self.whisper

    def save(self, *args, **kwargs):
        if self.pk:
            if self.media_file != self.__original_media_file:
                self.__original_media_file = self.media_file
                Job.objects.create(kind="init")
            changed = (
                self.whisper != self.__original_whisper
            )
            if changed:
                Job.objects.create(kind="transcribe")
        super(Media, self).save(*args, **kwargs)
        if self.poster and self.poster != self.__original_poster:
            self.__original_poster = self.poster
            Job.objects.create(kind="thumbnail")
"""


def _tasks(body: str) -> dict[str, str]:
    return {
        "media/models.py": MODELS,
        "media/tasks.py": "from celery import shared_task\nfrom .models import Media\n\n\n@shared_task\n" + body,
    }


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _path_lines(found, key) -> list[int]:
    """The lines of the effects on the finding's path (``line N: ...``)."""
    events = found[key].explanation.split("On one path: ", 1)[1].split(". Each")[0].split("; ")
    return [int(event.split(":", 1)[0].removeprefix("line ")) for event in events]


# Media.save's lines (the models file as analysed, dedented): 24 the init job, 29 the
# transcription job, 30 super().save(), 33 the thumbnail job.
INIT, TRANSCRIBE, SAVE, THUMBNAIL = 24, 29, 30, 33


def test_a_manager_s_create_runs_no_changed_or_existing_only_arm(rule: Rule):
    files = _tasks("def upload(user, upload):\n    Media.objects.create(media_file=upload, poster=upload)\n")
    found = reported(analyze_source(files, rule))
    assert _path_lines(found, ("media/models.py", "Media.save")) == [SAVE]  # one INSERT: no arm of save runs
    assert found[("media/models.py", "Media.save")].severity == "low"
    assert ("media/tasks.py", "upload") not in found


def test_a_read_object_saved_with_its_fields_untouched_runs_no_changed_arm(rule: Rule):
    body = (
        "def sprite(token, content):\n"
        "    media = Media.objects.get(token=token)\n"
        "    paths = [media.media_file.path]\n"
        "    media.sprites.save(content=content, name='s.jpg', save=False)\n"
        "    media.save(update_fields=['sprites'])\n"
    )
    found = reported(analyze_source(_tasks(body), rule))
    assert _path_lines(found, ("media/models.py", "Media.save")) == [SAVE]  # the changed test, the local and the and-chain all false
    assert ("media/tasks.py", "sprite") not in found


def test_a_field_set_before_the_save_runs_its_changed_arm(rule: Rule):
    body = (
        "def replace(token, upload):\n"
        "    media = Media.objects.get(token=token)\n"
        "    media.media_file = upload\n"
        "    media.save()\n"
    )
    found = reported(analyze_source(_tasks(body), rule))
    key = ("media/models.py", "Media.save")
    assert [step.function for step in found[key].chain] == ["replace", "Media.save"]
    assert _path_lines(found, key) == [INIT, SAVE]  # the whisper flag untouched: no transcription job


def test_an_object_handed_to_a_helper_may_have_changed(rule: Rule):
    body = (
        "def touched(token, upload):\n"
        "    media = Media.objects.get(token=token)\n"
        "    prepare(media, upload)\n"
        "    media.save()\n"
    )
    found = reported(analyze_source(_tasks(body), rule))
    assert _path_lines(found, ("media/models.py", "Media.save")) == [INIT, TRANSCRIBE, SAVE, THUMBNAIL]


def test_a_field_written_through_its_file_is_changed(rule: Rule):
    body = (
        "def repost(token, content):\n"
        "    media = Media.objects.get(token=token)\n"
        "    media.poster.save(content=content, name='p.jpg', save=False)\n"
        "    media.save()\n"
    )
    found = reported(analyze_source(_tasks(body), rule))
    assert _path_lines(found, ("media/models.py", "Media.save")) == [SAVE, THUMBNAIL]


def test_a_save_that_sets_a_snapshot_to_another_value_keeps_its_test(rule: Rule):
    # save() itself breaks the snapshot's equality: its transcription test may be true
    files = _tasks(
        "def sprite(token):\n"
        "    media = Media.objects.get(token=token)\n"
        "    media.save(update_fields=['sprites'])\n"
    )
    files["media/models.py"] = MODELS.replace("        if self.pk:\n", "        self.__original_whisper = None\n        if self.pk:\n")
    found = reported(analyze_source(files, rule))
    assert _path_lines(found, ("media/models.py", "Media.save")) == [TRANSCRIBE + 1, SAVE + 1]


def test_a_create_given_its_primary_key_may_run_the_existing_only_arm(rule: Rule):
    # create(id=...) builds an instance with a pk: save's "if self.pk:" arm runs (its snapshot
    # tests stay false: the instance was just built)
    files = _tasks("def upload(user, upload):\n    Media.objects.create(media_file=upload)\n")
    files["media/models.py"] = MODELS.replace("        changed = (", "        Job.objects.create(kind='seen')\n        changed = (")
    assert _path_lines(reported(analyze_source(files, rule)), ("media/models.py", "Media.save")) == [SAVE + 1]  # no pk: no 'seen' job
    files["media/tasks.py"] = files["media/tasks.py"].replace("create(media_file=upload)", "create(id=1, media_file=upload)")
    assert _path_lines(reported(analyze_source(files, rule)), ("media/models.py", "Media.save")) == [25, SAVE + 1]
