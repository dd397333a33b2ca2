"""How the static tx-outside-transaction pass reaches code the framework calls: Django
class-based views' ``dispatch``, DRF's pre-3.8 ``@list_route``/``@detail_route``, signal
receivers, DRF serializers' ``create``/``update``; and receivers whose class is known from
an assignment (``x = M.objects.get(...)``, ``M.query...first_or_404()``,
``get_object_or_404(M, ...)``) or from a model's manager (``M.objects.custom()``)."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.test_static import analyze_source, reported


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
    assert found[("shop/views.py", "CloseView.dispatch")].severity == "critical"
    bulk = found[("shop/views.py", "TicketViewSet.bulk")]
    assert "drf @list_route" in bulk.chain[0].note
    assert ("shop/views.py", "TicketViewSet.copy") in found
    receiver = found[("shop/signals.py", "on_ticket_saved")]
    assert "django signal receiver" in receiver.chain[0].note
    assert ("shop/signals.py", "on_ticket_deleted") in found  # post_save.connect(handler)
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
