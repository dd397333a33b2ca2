"""A row saved again counts once per path, not once per function: ``notice.save()`` in an
early-return arm and ``notice.save()`` after the main path's other write are on exclusive
paths, so the main path holds two rows (kitsune made such account-event tasks atomic:
benchmarks/real_fixes, kitsune-event-password-change and kitsune-event-profile-change).
The same object saved twice on one path is still one row's state."""

from __future__ import annotations

from auditor.rules.loader import load_rule
from tests.support import SHOWN, analyze_source, reported

MODELS = "from django.db import models\n\nclass Notice(models.Model):\n    pass\n"

EARLY_RETURN = {
    "accounts/models.py": MODELS,
    "accounts/tasks.py": """
        from celery import shared_task

        from .models import Notice

        @shared_task
        def apply_notice(notice_id, stamp):
            notice = Notice.objects.get(id=notice_id)
            if notice.member.stamp > stamp:
                notice.status = "ignored"
                notice.save()
                return
            notice.member.stamp = stamp
            notice.member.save()
            notice.status = "done"
            notice.save()
        """,
}

ONE_PATH = {
    "accounts/models.py": MODELS,
    "accounts/tasks.py": """
        from celery import shared_task

        from .models import Notice

        @shared_task
        def touch_notice(notice_id):
            notice = Notice.objects.get(id=notice_id)
            notice.status = "started"
            notice.save()
            notice.status = "done"
            notice.save()
        """,
}


def test_a_save_in_an_early_return_arm_does_not_hide_the_main_paths_save():
    finding = reported(analyze_source(EARLY_RETURN, load_rule("tx-outside-transaction")))[("accounts/tasks.py", "apply_notice")]
    assert finding.severity in SHOWN, finding.explanation
    assert [site.line for site in finding.sequence] == [13, 15], finding.sequence
    assert "2 database writes" in finding.title


def test_the_same_row_saved_twice_on_one_path_is_one_write():
    found = reported(analyze_source(ONE_PATH, load_rule("tx-outside-transaction")))
    finding = found.get(("accounts/tasks.py", "touch_notice"))
    assert finding is None or finding.severity not in SHOWN
    assert finding is None or len(finding.sequence) == 1, finding.sequence
