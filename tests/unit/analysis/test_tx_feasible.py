"""Feasible chains (issue 25, cause 3 and 4): a base method's ``self.save()`` runs the
override of the class the chain came through, not every subclass's."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported


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
    findings = [finding for finding in analyze_source(_files(views), rule).findings if finding.severity == "critical"]
    assert len(findings) == 1, [f.title for f in findings]
    assert [step.function for step in findings[0].chain][:2] == ["order", "BaseCheckout.process"]
