"""How the static tx-outside-transaction pass reaches code the framework calls: Django
class-based views' ``dispatch``, DRF's pre-3.8 ``@list_route``/``@detail_route``, signal
receivers, DRF serializers' ``create``/``update``; and receivers whose class is known from
an assignment (``x = M.objects.get(...)``, ``M.query...first_or_404()``,
``get_object_or_404(M, ...)``) or from a model's manager (``M.objects.custom()``)."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


MODELS = """
    from django.db import models

    class Ticket(models.Model):
        title = models.CharField(max_length=20)

    class Audit(models.Model):
        note = models.CharField(max_length=20)
    """


FRAMEWORK_ENTRIES = {
    "shop/models.py": MODELS,
    "shop/views.py": """
        from django.views.generic import View
        from rest_framework import viewsets
        from rest_framework.decorators import detail_route, list_route

        from .models import Audit, Ticket

        class CloseView(View):
            def dispatch(self, request, *args, **kwargs):
                Ticket.objects.filter(pk=kwargs["pk"]).update(title="closed")
                Audit.objects.create(note="closed")
                return super().dispatch(request, *args, **kwargs)

        class TicketViewSet(viewsets.ModelViewSet):
            @list_route(methods=["POST"])
            def bulk(self, request):
                Ticket.objects.all().delete()
                Audit.objects.create(note="bulk")

            @detail_route(methods=["POST"])
            def copy(self, request, pk=None):
                Ticket.objects.create(title="copy")
                Audit.objects.create(note="copy")
        """,
    "shop/signals.py": """
        from django.db.models.signals import post_save, pre_delete
        from django.dispatch import receiver

        from .models import Audit, Ticket

        @receiver(post_save, sender=Ticket)
        def on_ticket_saved(sender, instance, **kwargs):
            Audit.objects.create(note="saved")
            Audit.objects.create(note="twice")

        def on_ticket_deleted(sender, instance, **kwargs):
            Audit.objects.create(note="deleted")
            Audit.objects.create(note="twice")

        def never_connected(sender, instance, **kwargs):
            Audit.objects.create(note="never")
            Audit.objects.create(note="twice")

        post_save.connect(on_ticket_deleted, sender=Ticket)
        pre_delete.connect(on_ticket_deleted, sender=Ticket)
        """,
    "shop/serializers.py": """
        from rest_framework import serializers

        from .models import Audit, Ticket

        class TicketSerializer(serializers.ModelSerializer):
            def create(self, validated_data):
                ticket = Ticket.objects.create(**validated_data)
                Audit.objects.create(note="created")
                return ticket

        class Helper:
            def create(self, data):
                Ticket.objects.create(title="x")
                Audit.objects.create(note="x")
        """,
}


def test_framework_invoked_methods_are_entry_points(rule: Rule):
    found = reported(analyze_source(FRAMEWORK_ENTRIES, rule))
    assert found[("shop/views.py", "CloseView.dispatch")].severity in SHOWN
    bulk = found[("shop/views.py", "TicketViewSet.bulk")]
    assert "drf @list_route" in bulk.chain[0].note
    assert ("shop/views.py", "TicketViewSet.copy") in found
    receiver = found[("shop/signals.py", "on_ticket_saved")]
    assert "django signal receiver" in receiver.chain[0].note
    # post_save.connect(handler); also connected to pre_delete, but a save runs it outside
    # any transaction (a pre_delete-only receiver is covered: tests/unit/analysis/test_tx_deletes.py)
    assert ("shop/signals.py", "on_ticket_deleted") in found
    assert "drf serializer" in found[("shop/serializers.py", "TicketSerializer.create")].chain[0].note
    # Negative controls: a function no signal connects, a create() of a plain class.
    assert ("shop/signals.py", "never_connected") not in found
    assert ("shop/serializers.py", "Helper.create") not in found


def test_a_project_signal_connects_its_receivers_but_other_connect_calls_do_not(rule: Rule):
    files = {
        "shop/models.py": MODELS,
        "shop/hooks.py": """
            from django.dispatch import Signal

            from .models import Audit

            ticket_closed = Signal()

            def on_closed(sender, **kwargs):
                Audit.objects.create(note="a")
                Audit.objects.create(note="b")

            def on_message(payload):
                Audit.objects.create(note="a")
                Audit.objects.create(note="b")

            ticket_closed.connect(on_closed)
            websocket.connect(on_message)
            """,
    }
    found = reported(analyze_source(files, rule))
    assert ("shop/hooks.py", "on_closed") in found
    assert ("shop/hooks.py", "on_message") not in found


RECEIVERS = {
    "shop/models.py": """
        from django.db import models

        class Audit(models.Model):
            note = models.CharField(max_length=20)

        class TicketManager(models.Manager):
            def reopen_all(self, note):
                self.update(title="open")
                Audit.objects.create(note=note)

            def count_open(self):
                return self.filter(title="open").count()

        class Ticket(models.Model):
            title = models.CharField(max_length=20)
            objects = TicketManager()

            def save(self, *args, **kwargs):
                super().save(*args, **kwargs)
                Audit.objects.create(note="saved")

            def close(self):
                self.title = "closed"
                self.save()
                Audit.objects.create(note="closed")

            def rename(self, title):
                self.title = title
        """,
    "shop/views.py": """
        from django.shortcuts import get_object_or_404

        from .models import Ticket

        def close_ticket(request, pk):
            ticket = Ticket.objects.get(pk=pk)
            ticket.close()

        def close_or_404(request, pk):
            found = get_object_or_404(Ticket, pk=pk)
            found.close()

        def open_ticket(request):
            Ticket.objects.create(title="new")

        def reopen(request):
            Ticket.objects.reopen_all("reopened")

        def count(request):
            return Ticket.objects.count_open()

        def rename_ticket(request, pk):
            ticket = Ticket.objects.get(pk=pk)
            ticket.rename("x")

        def rebound(request, pk, other):
            ticket = Ticket.objects.get(pk=pk)
            ticket = other
            ticket.close()
        """,
}


def test_receivers_typed_by_assignment_and_managers_reach_model_methods(rule: Rule):
    found = reported(analyze_source(RECEIVERS, rule))
    close = found[("shop/models.py", "Ticket.close")]  # reported where the writes sequence
    assert close.severity in SHOWN
    callers = {finding.chain[0].function for finding in found.values() if finding.function == "Ticket.close"}
    assert callers <= {"close_ticket", "close_or_404"} and callers
    assert "receiver's class from its assignment" in " ".join(step.note for step in close.chain)
    # objects.create() runs the model's save() override: two writes, one site.
    assert found[("shop/models.py", "Ticket.save")].severity in SHOWN
    assert found[("shop/models.py", "TicketManager.reopen_all")].severity in SHOWN
    # Negative controls: a method with no write; a variable re-bound to something unknown;
    # the view that only calls objects.create() is no second finding.
    assert ("shop/views.py", "rename_ticket") not in found
    assert ("shop/views.py", "open_ticket") not in found
    assert ("shop/views.py", "count") not in found


def test_rebound_variable_is_not_typed(rule: Rule):
    files = dict(RECEIVERS)
    files["shop/views.py"] = """
        from .models import Ticket

        def rebound(request, pk, other):
            ticket = Ticket.objects.get(pk=pk)
            ticket = other
            ticket.close()
        """
    found = reported(analyze_source(files, rule))
    assert ("shop/models.py", "Ticket.close") not in found


FLASK = {
    "forum/models.py": """
        from .db import db

        class Topic(db.Model):
            def delete(self, users=None):
                db.session.delete(self)
                db.session.commit()
                for user in users or ():
                    user.post_count -= 1
                db.session.commit()
        """,
    "forum/db.py": "from flask_sqlalchemy import SQLAlchemy\ndb = SQLAlchemy()\n",
    "forum/views.py": """
        from flask import Blueprint

        from .models import Topic

        bp = Blueprint("forum", __name__)

        @bp.route("/topic/<int:pk>/delete", methods=["POST"])
        def delete_topic(pk):
            topic = Topic.query.filter_by(
                id=pk,
            ).first_or_404()
            topic.delete(users=[])

        @bp.route("/topics/delete", methods=["POST"])
        def delete_all():
            Topic.query.filter_by(locked=True).delete()
        """,
}


def test_flask_sqlalchemy_query_rows_reach_the_model_method(rule: Rule):
    found = reported(analyze_source(FLASK, rule))
    topic = found[("forum/models.py", "Topic.delete")]
    assert topic.severity == "high" and topic.chain[0].function == "delete_topic"
    # The call is the model method, not also a one-write "delete" in the view.
    assert ("forum/views.py", "delete_topic") not in found
    assert ("forum/views.py", "delete_all") not in found


def test_manager_writes_on_self_and_a_dict_named_like_a_related_manager(rule: Rule):
    files = {
        "shop/models.py": """
            from django.db import models

            class App(models.Model):
                name = models.CharField(max_length=20)

            class Extension(models.Model):
                app = models.ForeignKey(App, related_name="extensions", on_delete=models.CASCADE)

            class NodeManager(models.Manager):
                def index(self, name):
                    self.get_or_create(name=name)
                    self.filter(name="").delete()

                def merge(self, payload):
                    self.update(payload)
                    self.update(payload)

            class Helper:
                def index(self, name):
                    self.get_or_create(name=name)
                    self.get_or_create(name=name)
            """,
        "shop/views.py": """
            from .models import App, Helper, NodeManager

            def index(request):
                NodeManager().index("x")
                Helper().index("x")
                NodeManager().merge({})

            def tag(request, result):
                result.extensions.update({"cost": 1})
                result.extensions.update({"time": 2})

            def rename(request, app):
                app.extensions.update(name="x")
                app.extensions.create(name="y")
            """,
    }
    found = reported(analyze_source(files, rule))
    assert found[("shop/models.py", "NodeManager.index")].severity in SHOWN
    assert ("shop/views.py", "rename") in found
    # Negative controls: self.get_or_create of a class that is no manager; a manager's
    # update with a positional argument; a dict named like a related manager.
    assert ("shop/models.py", "Helper.index") not in found
    assert ("shop/models.py", "NodeManager.merge") not in found
    assert ("shop/views.py", "tag") not in found


PROPERTIES = {
    "shop/models.py": """
        from django.db import models
        from django.utils.functional import cached_property

        class Version(models.Model):
            number = models.IntegerField(default=0)

        class Asset(models.Model):
            name = models.CharField(max_length=20)

            @property
            def snapshot(self):
                return self._snapshot()

            def _snapshot(self):
                Version.objects.filter(number=0).delete()
                Version.objects.create(number=1)
                return Version.objects.last()

            @cached_property
            def label(self):
                return self.name.upper()

            @property
            def latest(self):
                Version.objects.create(number=2)
                Version.objects.create(number=3)

            @latest.setter
            def latest(self, value):
                self.name = value
        """,
    "shop/views.py": """
        from .models import Asset

        def find_asset(pk) -> Asset:
            return Asset.objects.filter(pk=pk).first()

        def show(request, pk):
            asset = Asset.objects.get(pk=pk)
            return asset.snapshot.number

        def show_found(request, pk):
            asset = find_asset(pk)
            return asset.label

        def rename(request, pk):
            asset = find_asset(pk)
            asset.latest = "x"

        def untyped(request, asset):
            return asset.snapshot
        """,
}


def test_property_reads_and_return_annotations_reach_the_getter(rule: Rule):
    found = reported(analyze_source(PROPERTIES, rule))
    snapshot = found[("shop/models.py", "Asset._snapshot")]
    assert snapshot.chain[0].function == "show"
    assert "a property read runs its getter" in " ".join(step.note for step in snapshot.chain)
    # Negative controls: assigning a property runs its setter, not the getter; a variable
    # of unknown class reaches nothing.
    assert ("shop/models.py", "Asset.latest") not in found
    assert all(finding.chain[0].function != "untyped" for finding in found.values())


def test_return_annotation_types_the_variable(rule: Rule):
    files = dict(PROPERTIES)
    files["shop/views.py"] = """
        from .models import Asset

        def find_asset(pk) -> Asset:
            return Asset.objects.filter(pk=pk).first()

        def show_latest(request, pk):
            asset = find_asset(pk)
            return asset.latest
        """
    found = reported(analyze_source(files, rule))
    assert found[("shop/models.py", "Asset.latest")].chain[0].function == "show_latest"
