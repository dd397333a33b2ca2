"""A task decorator bound to a module-level name with its options on the lines below
(``retrying = shared_task(\\n    autoretry_for=...,\\n)``) makes the functions it decorates
tasks, as the one-line form does (kitsune's account-event tasks)."""

from __future__ import annotations

from auditor.rules.loader import load_rule
from tests.support import analyze_source, reported

FILES = {
    "accounts/models.py": "from django.db import models\n\nclass Notice(models.Model):\n    pass\n\nclass Member(models.Model):\n    pass\n",
    "accounts/tasks.py": """
        from celery import shared_task

        from .models import Member, Notice

        retrying = shared_task(
            acks_late=True,
            autoretry_for=(Exception,),
        )

        @retrying
        def apply_notice(notice_id):
            notice = Notice.objects.get(id=notice_id)
            notice.member.active = False
            notice.member.save()
            notice.status = "done"
            notice.save()
        """,
}


def test_a_multiline_task_alias_decorates_a_task():
    found = reported(analyze_source(FILES, load_rule("tx-outside-transaction")))
    task = found[("accounts/tasks.py", "apply_notice")]
    assert "task entry point" in task.explanation, task.explanation
