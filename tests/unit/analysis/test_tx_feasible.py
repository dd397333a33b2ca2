"""Feasible chains (issue 25, cause 3 and 4): a base method's ``self.save()`` runs the
override of the class the chain came through, not every subclass's."""

from __future__ import annotations

import textwrap

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


BASE = """
    from .models import Line, Order

    class BaseCheckout:
        def process(self, request):
            self.validate(request)
            self.save(request)

        def validate(self, request):
            return request

        def save(self, request):
            return None

    class QuoteCheckout(BaseCheckout):
        def save(self, request):
            return Order.objects.filter(pk=request.pk).exists()

    class OrderCheckout(BaseCheckout):
        def save(self, request):
            order = Order.objects.create(total=request.total)
            Line.objects.create(order=order)
    """


def _files(views: str) -> dict[str, str]:
    return {"shop/checkout.py": BASE, "shop/views.py": views, "shop/models.py": "class Order:\n    pass\n\nclass Line:\n    pass\n"}


def test_a_chain_through_the_harmless_subclass_reports_no_other_subclass_writes(rule: Rule):
    views = """
        from .checkout import QuoteCheckout

        def quote(request):
            QuoteCheckout().process(request)
            return None

        def quote_twice(request):
            QuoteCheckout.process(QuoteCheckout(), request)
        """
    findings = analyze_source(_files(views), rule).findings
    assert not [finding for finding in findings if finding.severity in ("critical", "high")], [f.title for f in findings]


def test_a_chain_through_the_subclass_that_writes_twice_is_reported(rule: Rule):
    views = """
        from .checkout import OrderCheckout, QuoteCheckout

        def quote(request):
            QuoteCheckout.process(QuoteCheckout(), request)

        def order(request):
            OrderCheckout.process(OrderCheckout(), request)
        """
    findings = [finding for finding in analyze_source(_files(views), rule).findings if finding.severity in SHOWN]
    assert len(findings) == 1, [f.title for f in findings]
    assert [step.function for step in findings[0].chain][:2] == ["order", "BaseCheckout.process"]


TICKET_MODELS = """
    from django.db import models

    class Counter(models.Model):
        pass

    class Ticket(models.Model):
        def save(self, *args, **kwargs):
            if self._state.adding:
                Counter.objects.create(kind="ticket")
                Counter.objects.create(kind="queue")
            super().save(*args, **kwargs)

        def apply(self, request):
            if self.pk is None:
                Counter.objects.create(kind="a")
                Counter.objects.create(kind="b")
            Counter.objects.filter(kind="x").update(n=1)
            if self.pk:
                Counter.objects.filter(kind="y").delete()
    """


def _ticket_findings(rule: Rule, views: str) -> dict:
    return reported(analyze_source({"shop/views.py": views, "shop/models.py": TICKET_MODELS}, rule))


def test_new_object_writes_are_not_on_the_edit_path(rule: Rule):
    views = """
        from .models import Ticket

        def rename_ticket(request, pk):
            ticket = Ticket.objects.get(pk=pk)
            ticket.title = request.title
            ticket.save()
        """
    found = _ticket_findings(rule, views)[("shop/models.py", "Ticket.save")]
    assert found.severity == "low", found.explanation  # only super().save() runs for an existing row


def test_new_object_writes_count_when_the_chain_creates_the_row(rule: Rule):
    views = """
        from .models import Ticket

        def open_ticket(request):
            Ticket.objects.create(title=request.title)
        """
    found = _ticket_findings(rule, views)[("shop/models.py", "Ticket.save")]
    assert found.severity in SHOWN
    assert found.title.startswith("3 database writes")


def test_new_object_and_existing_object_arms_never_run_together(rule: Rule):
    views = """
        from .models import Ticket

        def apply_ticket(request, pk):
            ticket = Ticket.objects.get(pk=pk)
            ticket.apply(request)
        """
    found = _ticket_findings(rule, views)[("shop/models.py", "Ticket.apply")]
    # pk is None: two creates and the update, never also the delete that runs when pk is set
    assert found.title.startswith("3 database writes"), found.explanation
    assert "delete" not in found.explanation


@pytest.mark.parametrize(
    "body",
    [
        """
        qs = Stock.objects.filter(sku=request.sku)
        if qs.exists():
            qs.update(count=request.count)
        else:
            Stock.objects.create(sku=request.sku, count=request.count)
        """,
        """
        stock = Stock.objects.filter(sku=request.sku).first()
        if stock:
            stock.count = request.count
            stock.save()
        else:
            Stock.objects.create(sku=request.sku)
        """,
        """
        stock = Stock.objects.filter(sku=request.sku).first()
        if stock:
            stock.save()
            return stock
        return Stock.objects.create(sku=request.sku)
        """,
    ],
)
def test_update_else_create_is_one_write(rule: Rule, body: str):
    lines = textwrap.dedent(body).strip("\n").splitlines()
    views = "from .models import Stock\n\ndef upsert_stock(request):\n" + "\n".join("    " + line for line in lines) + "\n"
    found = reported(analyze_source({"shop/views.py": views, "shop/models.py": "class Stock:\n    pass\n"}, rule))
    assert found[("shop/views.py", "upsert_stock")].severity == "low"


def test_a_loop_of_get_or_create_and_create_is_not_graded_re_runnable(rule: Rule):
    views = """
        from .models import Tag, Label

        def label_items(request):
            for name in request.names:
                tag, _ = Tag.objects.get_or_create(name=name)
                Label.objects.create(tag=tag)

        def label_once(request):
            tag, _ = Tag.objects.get_or_create(name=request.name)
            Label.objects.create(tag=tag)
        """
    found = reported(analyze_source({"shop/views.py": views, "shop/models.py": "class Tag:\n    pass\n\nclass Label:\n    pass\n"}, rule))
    assert found[("shop/views.py", "label_items")].severity in SHOWN  # a re-run creates the earlier labels again
    assert found[("shop/views.py", "label_once")].severity == "medium"  # the control: a re-run completes it


def test_a_chain_over_an_edge_the_pass_could_not_prove_is_not_verified(rule: Rule):
    views = """
        from .handlers import Handler

        def dispatch_view(request):
            Handler().handle(request)
        """
    handlers = """
        from .models import Order, Line

        class Handler:
            def handle(self, request):
                return getattr(self, "handle_%s" % request.action)(request)

            def handle_order(self, request):
                order = Order.objects.create(total=1)
                Line.objects.create(order=order)
        """
    files = {"shop/views.py": views, "shop/handlers.py": handlers, "shop/models.py": "class Order:\n    pass\n\nclass Line:\n    pass\n"}
    found = reported(analyze_source(files, rule))[("shop/handlers.py", "Handler.handle_order")]
    verified = {step.function: step.verified for step in found.chain}
    assert verified == {"dispatch_view": True, "Handler.handle": True, "Handler.handle_order": False}, found.chain


def test_registry_lookups_are_not_counted_as_business_writes(rule: Rule):
    views = """
        from django.contrib.auth.models import Group, Permission
        from django.contrib.contenttypes.models import ContentType

        from .models import Order, Line

        def grant(request):
            content_type, _ = ContentType.objects.get_or_create(app_label="shop", model="order")
            permission, _ = Permission.objects.get_or_create(codename="view_order", content_type=content_type)
            group, _ = Group.objects.get_or_create(name="staff")
            order = Order.objects.create(total=1)

        def grant_and_order(request):
            ContentType.objects.get_or_create(app_label="shop", model="order")
            order = Order.objects.create(total=1)
            Line.objects.create(order=order)
        """
    files = {"shop/views.py": views, "shop/models.py": "class Order:\n    pass\n\nclass Line:\n    pass\n"}
    found = reported(analyze_source(files, rule))
    assert found[("shop/views.py", "grant")].severity == "low"  # one business write
    both = found[("shop/views.py", "grant_and_order")]
    assert both.title.startswith("2 database writes"), both.title
    assert [site.effect for site in both.sequence] == ["write", "write"]  # no lookup among them


def test_the_registry_rows_name_their_proof_in_django():
    from auditor.analysis.transactions.framework_facts import Kind, builtin_facts

    facts = builtin_facts()
    lookups = facts.calls(Kind.LOOKUP)
    assert {"ContentType.objects.get_or_create", "Permission.objects.get_or_create", "Site.objects.get_or_create"} <= set(lookups)
    assert all(fact.proof is not None for fact in facts.facts if fact.kind is Kind.LOOKUP)
