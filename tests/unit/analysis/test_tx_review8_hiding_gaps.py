"""Review 8 reproductions: real uncovered two-write paths that the hiding rules of
3383945..0782e04 hide. Each test asserts the correct behaviour (the finding is shown at
high/critical) and FAILS on 0782e04; 3383945 shows each of them.

- missing_methods: a method a third-party *field* adds (django-simple-history's
  ``HistoricalRecords.contribute_to_class`` -> ``add_extra_methods`` sets
  ``save_without_historical_record`` on the model: simple_history/models.py) is taken for
  a missing one, and the path ends there.
- missing_methods: ``M.objects.values(...).get(...)`` returns a dict
  (django/db/models/query.py ``QuerySet.values`` -> ``ValuesIterable``), typed as an ``M``
  row, so ``data.items()`` "always raises".
- missing_methods/paths: ``a or q.missing()`` short-circuits; the statement does not always raise.
"""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _severity(rule: Rule, files: dict[str, str], key: tuple[str, str]) -> str | None:
    finding = reported(analyze_source(files, rule)).get(key)
    return finding.severity if finding is not None else None


DJANGO_URLS = '''
from django.urls import path
from {app} import views

urlpatterns = [path("x/<int:pk>/", views.{view})]
'''


def test_a_method_a_third_party_field_adds_is_not_missing(rule: Rule):
    files = {
        "shop/models.py": '''
            from django.db import models
            from simple_history.models import HistoricalRecords


            class Order(models.Model):
                status = models.CharField(max_length=10)
                history = HistoricalRecords()


            class Payment(models.Model):
                order = models.ForeignKey(Order, on_delete=models.CASCADE)
                amount = models.IntegerField()
            ''',
        "shop/views.py": '''
            from django.http import JsonResponse
            from shop.models import Order, Payment


            def pay(request, pk):
                order = Order.objects.get(pk=pk)
                order.status = "paid"
                order.save_without_historical_record()
                Payment.objects.create(order=order, amount=int(request.POST["amount"]))
                order.status = "settled"
                order.save()
                return JsonResponse({"ok": True})
            ''',
        "shop/urls.py": DJANGO_URLS.format(app="shop", view="pay"),
    }
    assert _severity(rule, files, ("shop/views.py", "pay")) in ("critical", "high")


def test_a_values_row_is_a_dict_whose_items_exist(rule: Rule):
    files = {
        "shop/models.py": '''
            from django.db import models


            class Order(models.Model):
                status = models.CharField(max_length=10)
                total = models.IntegerField()


            class Snapshot(models.Model):
                key = models.CharField(max_length=20)
                value = models.CharField(max_length=50)
            ''',
        "shop/views.py": '''
            from django.http import JsonResponse
            from shop.models import Order, Snapshot


            def archive(request, pk):
                data = Order.objects.values("status", "total").get(pk=pk)
                pairs = sorted(data.items())
                for key, value in pairs:
                    Snapshot.objects.create(key=key, value=str(value))
                Order.objects.filter(pk=pk).delete()
                return JsonResponse({"ok": True})
            ''',
        "shop/urls.py": DJANGO_URLS.format(app="shop", view="archive"),
    }
    assert _severity(rule, files, ("shop/views.py", "archive")) in ("critical", "high")


def test_a_short_circuited_missing_call_does_not_end_the_path(rule: Rule):
    files = {
        "shop/models.py": '''
            from django.db import models


            class Queue(models.Model):
                title = models.CharField(max_length=10)
                permission_name = models.CharField(max_length=10, blank=True)


            class Permission(models.Model):
                codename = models.CharField(max_length=10)
            ''',
        "shop/management/commands/perms.py": '''
            from django.core.management.base import BaseCommand
            from shop.models import Permission, Queue


            class Command(BaseCommand):
                def handle(self, *args, **options):
                    q = Queue.objects.get(pk=options["pk"])
                    basename = q.permission_name or q.build_permission_name()
                    q.permission_name = basename
                    q.save()
                    Permission.objects.create(codename=basename)
            ''',
    }
    assert _severity(rule, files, ("shop/management/commands/perms.py", "Command.handle")) in ("critical", "high")
