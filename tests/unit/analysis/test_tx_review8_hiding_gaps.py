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
- store_clients: a ``for`` target shadowing a module-level Elasticsearch client, and a
  local bound on two branches, are not proven search clients.
- read_commits: a commit helper after a callee that commits then sets an attribute
  (staged work after its own commit) is a second commit.
- boundaries.dispatch_boundary: a subclass ``dispatch`` override that calls ``View.dispatch``
  directly bypasses the base's ``method_decorator(transaction.atomic, name="dispatch")``
  (django/utils/decorators.py ``method_decorator`` with ``name`` wraps only the attribute
  of the decorated class; a subclass's own ``dispatch`` shadows it in the MRO).
- snapshots: ``store.lat, store.lng = ...`` sets ``lat``; its "changed" arm runs.
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


CRM_MODELS = '''
from django.db import models


class Agency(models.Model):
    name = models.CharField(max_length=10)


class Client(models.Model):
    agency = models.ForeignKey(Agency, on_delete=models.CASCADE)
    name = models.CharField(max_length=10)
'''


def test_a_loop_target_shadowing_a_search_client_is_a_row(rule: Rule):
    files = {
        "crm/models.py": CRM_MODELS,
        "crm/search.py": 'from elasticsearch import Elasticsearch\n\nclient = Elasticsearch("http://localhost:9200")\n',
        "crm/views.py": '''
            from django.http import JsonResponse
            from crm.models import Agency, Client
            from crm.search import client


            def close_agency(request, pk):
                agency = Agency.objects.get(pk=pk)
                for client in Client.objects.filter(agency=agency):
                    client.delete()
                agency.delete()
                return JsonResponse({"ok": True})
            ''',
        "crm/urls.py": DJANGO_URLS.format(app="crm", view="close_agency"),
    }
    assert _severity(rule, files, ("crm/views.py", "close_agency")) in ("critical", "high")


def test_a_local_bound_on_two_branches_may_be_a_row(rule: Rule):
    files = {
        "crm/models.py": CRM_MODELS,
        "crm/views.py": '''
            from django.http import JsonResponse
            from elasticsearch import Elasticsearch
            from crm.models import Agency, Client


            def purge(request, pk):
                if request.GET.get("db"):
                    target = Agency.objects.get(pk=pk)
                else:
                    target = Elasticsearch("http://localhost:9200")
                target.delete()
                Client.objects.filter(agency_id=pk).delete()
                return JsonResponse({"ok": True})
            ''',
        "crm/urls.py": DJANGO_URLS.format(app="crm", view="purge"),
    }
    # 3383945 grades it medium (two deletes, one of them maybe not the database's); 0782e04 low.
    assert _severity(rule, files, ("crm/views.py", "purge")) in ("critical", "high", "medium")


def test_a_commit_helper_after_a_callee_that_staged_after_its_commit_is_a_second_commit(rule: Rule):
    files = {
        "app/db.py": '''
            from flask_sqlalchemy import SQLAlchemy

            db = SQLAlchemy()


            def safe_commit():
                try:
                    db.session.commit()
                except Exception:
                    db.session.rollback()
                    raise
            ''',
        "app/models.py": '''
            from app.db import db


            class Order(db.Model):
                id = db.Column(db.Integer, primary_key=True)
                user_id = db.Column(db.Integer)
                number = db.Column(db.String(20))
            ''',
        "app/orders.py": '''
            from app.db import db, safe_commit
            from app.models import Order


            def create_order(user_id):
                order = Order(user_id=user_id)
                db.session.add(order)
                safe_commit()
                order.number = "ORD-%06d" % order.id
                return order
            ''',
        "app/views.py": '''
            from flask import Blueprint, jsonify, request
            from app.db import safe_commit
            from app.orders import create_order

            bp = Blueprint("orders", __name__)


            @bp.route("/orders", methods=["POST"])
            def new_order():
                order = create_order(request.json["user_id"])
                safe_commit()
                return jsonify(id=order.id)
            ''',
    }
    assert _severity(rule, files, ("app/views.py", "new_order")) in ("critical", "high")


def test_a_dispatch_override_that_skips_the_atomic_base_is_not_covered(rule: Rule):
    files = {
        "shop/models.py": '''
            from django.db import models


            class Export(models.Model):
                status = models.CharField(max_length=10)


            class ExportLog(models.Model):
                export = models.ForeignKey(Export, on_delete=models.CASCADE)
            ''',
        "shop/views.py": '''
            from django.db import transaction
            from django.http import JsonResponse
            from django.utils.decorators import method_decorator
            from django.views import View
            from shop.models import Export, ExportLog


            @method_decorator(transaction.atomic, name="dispatch")
            class AtomicView(View):
                pass


            class ExportView(AtomicView):
                def dispatch(self, request, *args, **kwargs):
                    return View.dispatch(self, request, *args, **kwargs)

                def post(self, request, pk):
                    export = Export.objects.create(status="running")
                    ExportLog.objects.create(export=export)
                    return JsonResponse({"id": export.pk})
            ''',
        "shop/urls.py": 'from django.urls import path\nfrom shop import views\n\nurlpatterns = [path("export/", views.ExportView.as_view())]\n',
    }
    assert _severity(rule, files, ("shop/views.py", "ExportView.post")) in ("critical", "high")


def test_a_field_set_by_tuple_unpacking_has_changed(rule: Rule):
    files = {
        "shop/models.py": '''
            from django.db import models


            class Store(models.Model):
                lat = models.FloatField()
                lng = models.FloatField()

                def __init__(self, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    self.__original_lat = self.lat

                def save(self, *args, **kwargs):
                    if self.lat != self.__original_lat:
                        MoveLog.objects.create(store=self, lat=self.lat)
                    super().save(*args, **kwargs)


            class MoveLog(models.Model):
                store = models.ForeignKey(Store, on_delete=models.CASCADE)
                lat = models.FloatField()
            ''',
        "shop/geo.py": "def geocode(address):\n    return 1.0, 2.0\n",
        "shop/views.py": '''
            from django.http import JsonResponse
            from shop.geo import geocode
            from shop.models import Store


            def move(request, pk):
                store = Store.objects.get(pk=pk)
                store.lat, store.lng = geocode(request.POST["address"])
                store.save()
                return JsonResponse({"ok": True})
            ''',
        "shop/urls.py": DJANGO_URLS.format(app="shop", view="move"),
    }
    assert _severity(rule, files, ("shop/models.py", "Store.save")) in ("critical", "high")


def test_a_dispatch_override_nearer_in_the_mro_than_the_atomic_class_is_not_covered(rule: Rule):
    """The view's MRO (C3, as ``type.__mro__``) is ``ExportView, Audited, Plain, AtomicRoot``:
    ``Plain``'s own ``dispatch`` is found before the one ``AtomicRoot``'s decorator wraps,
    though a depth-first walk meets ``AtomicRoot`` first."""
    files = {
        "shop/models.py": '''
            from django.db import models


            class Export(models.Model):
                status = models.CharField(max_length=10)


            class ExportLog(models.Model):
                export = models.ForeignKey(Export, on_delete=models.CASCADE)
            ''',
        "shop/views.py": '''
            from django.db import transaction
            from django.http import JsonResponse
            from django.utils.decorators import method_decorator
            from django.views import View
            from shop.models import Export, ExportLog


            @method_decorator(transaction.atomic, name="dispatch")
            class AtomicRoot(View):
                pass


            class Audited(AtomicRoot):
                pass


            class Plain(AtomicRoot):
                def dispatch(self, request, *args, **kwargs):
                    return View.dispatch(self, request, *args, **kwargs)


            class ExportView(Audited, Plain):
                def post(self, request, pk):
                    export = Export.objects.create(status="running")
                    ExportLog.objects.create(export=export)
                    return JsonResponse({"id": export.pk})
            ''',
        "shop/urls.py": 'from django.urls import path\nfrom shop import views\n\nurlpatterns = [path("export/", views.ExportView.as_view())]\n',
    }
    assert _severity(rule, files, ("shop/views.py", "ExportView.post")) in ("critical", "high")


def test_a_commit_helper_after_a_callee_that_only_returns_after_its_commit_is_no_second_commit(rule: Rule):
    """``create_order`` commits last and returns its row: the next ``safe_commit()`` finds
    the session clean (sqlalchemy/orm/session.py ``Session.flush`` returns at once when
    ``_is_clean()``) and commits nothing."""
    files = {
        "app/db.py": '''
            from flask_sqlalchemy import SQLAlchemy

            db = SQLAlchemy()


            def safe_commit():
                try:
                    db.session.commit()
                except Exception:
                    db.session.rollback()
                    raise
            ''',
        "app/models.py": '''
            from app.db import db


            class Order(db.Model):
                id = db.Column(db.Integer, primary_key=True)
                user_id = db.Column(db.Integer)
            ''',
        "app/orders.py": '''
            from app.db import db, safe_commit
            from app.models import Order


            def create_order(user_id):
                order = Order(user_id=user_id)
                db.session.add(order)
                safe_commit()
                return order
            ''',
        "app/views.py": '''
            from flask import Blueprint, jsonify, request
            from app.db import safe_commit
            from app.orders import create_order

            bp = Blueprint("orders", __name__)


            @bp.route("/orders", methods=["POST"])
            def new_order():
                order = create_order(request.json["user_id"])
                safe_commit()
                return jsonify(id=order.id)
            ''',
    }
    assert _severity(rule, files, ("app/views.py", "new_order")) is None

