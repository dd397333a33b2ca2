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


ORDER = "from django.db import models\n\nclass Order(models.Model):\n    status = models.CharField(max_length=10)\n    total = models.IntegerField(default=0)\n"
URLS = 'from django.urls import path\nfrom shop import views\n\nurlpatterns = [path("s/", views.split), path("l/", views.loops), path("n/<int:pk>/", views.narrowed)]\n'
VIEWS = """
from django.http import JsonResponse
from shop.models import Order


def split(request):
    order = Order(status="first")
    order.save()
    order = Order(status="second")
    order.save()
    return JsonResponse({})


def loops(request):
    for line in Order.objects.filter(status="a"):
        line.total += 1
        line.save()
    for line in Order.objects.filter(status="b"):
        line.total -= 1
        line.save()
    return JsonResponse({})


def narrowed(request, pk):
    order = Order.objects.get(pk=pk)
    order.status = "paid"
    order.save(update_fields=["status"])
    order.total = int(request.POST["total"])
    order.save()
    return JsonResponse({})
"""


def _saves() -> dict:
    files = {"shop/models.py": ORDER, "shop/urls.py": URLS, "shop/views.py": VIEWS}
    return reported(analyze_source(files, load_rule("tx-outside-transaction")))


def test_a_name_rebound_between_two_saves_saves_two_rows():
    # ``order = Order(...)`` again: the second save inserts a second row (Python rebinds the
    # name; django/db/models/base.py ``Model.save`` inserts an instance still ``_state.adding``),
    # so neither counts once nor grades as one object's row.
    finding = _saves()[("shop/views.py", "split")]
    assert finding.severity in SHOWN, finding.explanation
    assert [site.line for site in finding.sequence] == [7, 9], finding.sequence
    assert "2 database writes" in finding.title


def test_saves_of_one_name_in_two_loops_are_different_rows():
    # Each ``for line in ...`` binds ``line`` to another queryset's rows.
    finding = _saves()[("shop/views.py", "loops")]
    assert finding.severity == "high", finding.explanation
    assert [site.line for site in finding.sequence] == [16, 19], finding.sequence


def test_a_save_narrowed_by_update_fields_does_not_hide_the_next_full_save():
    # django/db/models/base.py ``Model.save``: "only the fields named in update_fields are
    # updated", so ``total`` set after it is written by the later full save only.
    finding = _saves()[("shop/views.py", "narrowed")]
    assert finding.severity == "high", finding.explanation
    assert [site.line for site in finding.sequence] == [26, 28], finding.sequence
