"""The report's order within a severity (auditor/analysis/transactions/ordering.py, the
rule file's **Order**): the entry kind, then whether the chain is proven, then the impact
kind, then the likelihood; path, line and fingerprint only break the remaining ties.

Each fixture puts the finding that should come first at the path or line that sorts last, so
the order the test asserts is the signals', not the locations'. A Django management command is the
``handle`` of a ``Command(BaseCommand)`` in ``<app>/management/commands/`` (django/core/
management/base.py, ``BaseCommand.execute``); a getattr-string dispatch is an edge the
pass cannot prove (auditor/analysis/transactions/findings.py, ``proven``); a serializer's
save with no view seen is entered by a caller the pass did not see (``path_proven``)."""

from __future__ import annotations

import pytest

from auditor.analysis.transactions.impact import ImpactKind
from auditor.analysis.transactions.likelihood import Likelihood
from auditor.analysis.transactions.ordering import lexicographic, strength
from auditor.findings.model import Finding
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source

# ``Handler.handle`` reaches ``handle_order`` only through a ``getattr`` string.
HANDLERS = """
        from .models import Line, Order

        class Handler:
            def handle(self, request):
                return getattr(self, "handle_%s" % request.action)(request)

            def handle_order(self, request):
                order = Order.objects.create(total=1)
                Line.objects.create(order=order)
        """
MODELS = "class Order:\n    pass\n\nclass Line:\n    pass\n\nclass Rule:\n    pass\n"


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _findings(files: dict[str, str], rule: Rule) -> tuple[Finding, ...]:
    return analyze_source({**files, "shop/models.py": MODELS}, rule).findings


def _order(files: dict[str, str], rule: Rule) -> list[tuple[str, str, str]]:
    """(severity, path, function) of every finding, in the order the report lists them."""
    ordered = sorted(_findings(files, rule), key=Finding.sort_key)
    return [(finding.severity, finding.path, finding.function) for finding in ordered]


def test_a_partial_create_on_a_request_comes_before_a_re_runnable_command_of_its_severity(rule: Rule):
    command = """
        from django.core.management.base import BaseCommand
        from shop.models import Line, Order

        class Command(BaseCommand):
            def handle(self, *args, **options):
                order = Order.objects.create(total=1)
                Line.objects.create(order=order)
        """
    views = """
        from .models import Line, Order

        def create_order(request):
            order = Order.objects.create(total=1)
            Line.objects.create(order=order)
        """
    order = _order({"shop/management/commands/import_orders.py": command, "shop/views.py": views}, rule)
    assert order == [
        ("critical", "shop/views.py", "create_order"),
        ("critical", "shop/management/commands/import_orders.py", "Command.handle"),
    ]


def test_a_helper_a_request_reaches_too_ranks_with_requests_and_keeps_its_shortest_chain(rule: Rule):
    # the command calls place() directly, a request through a service: the chain shown is
    # the command's (the shortest), but a request's user meets the half-made order, so it
    # ranks before tidy(), which only a command reaches, though tidy's path sorts first
    helper = """
        from shop.models import Line, Order

        def place(total):
            order = Order.objects.create(total=total)
            Line.objects.create(order=order)
        """
    command_only = """
        from shop.models import Line, Order

        def tidy(total):
            order = Order.objects.create(total=total)
            Line.objects.create(order=order)
        """
    service = "from shop.helpers import place\n\ndef checkout(total):\n    place(total)\n"
    command = """
        from django.core.management.base import BaseCommand
        from shop.{module} import {function}

        class Command(BaseCommand):
            def handle(self, *args, **options):
                {function}(1)
        """
    views = "from shop.service import checkout\n\ndef buy(request):\n    checkout(2)\n"
    files = {"shop/helpers.py": helper, "shop/a_helpers.py": command_only, "shop/service.py": service, "shop/views.py": views,
             "shop/management/commands/import_orders.py": command.format(module="helpers", function="place"),
             "shop/management/commands/tidy_orders.py": command.format(module="a_helpers", function="tidy")}
    findings = {found.function: found for found in _findings(files, rule)}
    assert [step.function for step in findings["place"].chain] == ["Command.handle", "place"]
    assert "The http entry point buy (django view) reaches it too, over proven calls" in findings["place"].explanation
    assert "reaches it too" not in findings["tidy"].explanation
    order = [function for _, _, function in _order(files, rule)]
    assert order.index("place") < order.index("tidy")


def test_a_receiver_class_only_a_command_brings_still_weighs_when_a_request_reaches_too(rule: Rule):
    # the request runs Light's after() (no write), the command Heavy's (a second write):
    # preferring the request's chain must not drop the state that makes the sequence
    importers = """
        from shop.models import Line, Order

        class Base:
            def run(self, total):
                order = Order.objects.create(total=total)
                self.after(order)

            def after(self, order):
                return None

        class Light(Base):
            def after(self, order):
                return order

        class Heavy(Base):
            def after(self, order):
                Line.objects.create(order=order)
        """
    views = "from shop.importers import Light\n\ndef buy(request):\n    Light().run(2)\n"
    command = """
        from django.core.management.base import BaseCommand
        from shop.importers import Heavy

        class Command(BaseCommand):
            def handle(self, *args, **options):
                Heavy().run(1)
        """
    files = {"shop/importers.py": importers, "shop/views.py": views, "shop/management/commands/import_orders.py": command}
    finding = next(found for found in _findings(files, rule) if found.function == "Base.run")
    assert finding.severity == "critical"
    assert [step.function for step in finding.chain] == ["Command.handle", "Base.run"]


@pytest.mark.parametrize("request_side", ["getattr", "serializer"])
def test_a_request_chain_is_preferred_only_when_it_is_sound(rule: Rule, request_side: str):
    # a request reaching the writes only through a getattr string, or a serializer's save()
    # whose view the pass never saw, may not run as drawn: the command's proven chain is shown
    requests = {
        "getattr": {"shop/views.py": "from shop.handlers import Handler\n\ndef dispatch_view(request):\n    Handler().handle(request)\n"},
        "serializer": {"shop/serializers.py": """
            from rest_framework import serializers
            from shop.handlers import Handler

            class OrderSerializer(serializers.ModelSerializer):
                def create(self, validated_data):
                    Handler().handle_order(None)
            """},
    }[request_side]
    command = """
        from django.core.management.base import BaseCommand
        from shop.handlers import Handler

        class Command(BaseCommand):
            def handle(self, *args, **options):
                Handler().handle_order(None)
        """
    files = {"shop/handlers.py": HANDLERS, "shop/management/commands/import_orders.py": command, **requests}
    finding = next(found for found in _findings(files, rule) if found.function == "Handler.handle_order")
    assert [step.function for step in finding.chain] == ["Command.handle", "Handler.handle_order"]
    assert all(step.verified for step in finding.chain)
    assert "reaches it too" not in finding.explanation  # nor is it ordered as a request's


def test_a_proven_two_step_chain_comes_before_a_getattr_dispatch_chain(rule: Rule):
    views = """
        from .handlers import Handler
        from .services import place_order

        def dispatch_view(request):
            Handler().handle(request)

        def order_view(request):
            place_order(request)
        """
    services = """
        from .models import Line, Order

        def place_order(request):
            order = Order.objects.create(total=1)
            Line.objects.create(order=order)
        """
    files = {"shop/views.py": views, "shop/handlers.py": HANDLERS, "shop/services.py": services}
    findings = {finding.function: finding for finding in _findings(files, rule)}
    assert all(step.verified for step in findings["place_order"].chain)
    assert not all(step.verified for step in findings["Handler.handle_order"].chain)
    assert _order(files, rule) == [
        ("critical", "shop/services.py", "place_order"),
        ("critical", "shop/handlers.py", "Handler.handle_order"),
    ]


def test_a_request_path_comes_before_a_serializer_save_whose_view_the_pass_did_not_see(rule: Rule):
    # DRF opens no transaction (rest_framework/mixins.py, CreateModelMixin.create): whether
    # a serializer's create is covered depends on the view that calls it, here not seen.
    serializers = """
        from rest_framework import serializers
        from .models import Line, Order

        class OrderSerializer(serializers.ModelSerializer):
            def create(self, validated_data):
                order = Order.objects.create(total=1)
                Line.objects.create(order=order)
                return order
        """
    views = """
        from .models import Line, Order

        def create_order(request):
            order = Order.objects.create(total=1)
            Line.objects.create(order=order)
        """
    files = {"shop/serializers.py": serializers, "shop/views.py": views}
    found = {finding.function: finding for finding in _findings(files, rule)}
    assert found["OrderSerializer.create"].chain[0].note == "entry point: drf serializer save()"
    assert _order(files, rule) == [
        ("critical", "shop/views.py", "create_order"),
        ("critical", "shop/serializers.py", "OrderSerializer.create"),
    ]


def test_a_half_configured_object_comes_before_rows_deleted_and_rewritten(rule: Rule):
    # A repeat of the replacing view with the same input rewrites the set in full; a repeat
    # of the creating one makes a second order, and the first stays without its line.
    views = """
        from .models import Line, Order, Rule

        def save_rules(request, view):
            view.rules.all().delete()
            Rule.objects.create(view=view, field=request.POST.get("field"))

        def create_order(request):
            order = Order.objects.create(total=1)
            Line.objects.create(order=order)
        """
    order = _order({"shop/views.py": views}, rule)
    assert order == [("critical", "shop/views.py", "create_order"), ("critical", "shop/views.py", "save_rules")]


def _strength(**overrides: object) -> int:
    signals: dict[str, object] = {
        "entry_kind": "http",
        "path_proven": True,
        "impact": ImpactKind.PLAIN,
        "likelihood": Likelihood.UNLIKELY,
        "failure_points": 0,
    }
    return strength(**{**signals, **overrides})  # type: ignore[arg-type]


def test_each_signal_decides_only_where_the_ones_before_it_tie():
    strongest = {"impact": ImpactKind.HALF_CONFIGURED, "likelihood": Likelihood.LIKELY, "failure_points": 3}
    strongest_command = _strength(entry_kind="cli", **strongest)
    assert _strength() > _strength(entry_kind="task") > strongest_command
    assert _strength(entry_kind="consumer") == _strength(entry_kind="task")
    assert _strength(entry_kind="main") == _strength(entry_kind="cli") == _strength(entry_kind="an unknown kind")
    unproven = _strength(path_proven=False, **strongest)
    assert _strength(impact=ImpactKind.REPAIRED) > unproven
    kinds = [ImpactKind.HALF_CONFIGURED, ImpactKind.COUNTER, ImpactKind.REPLACED, ImpactKind.PLAIN, ImpactKind.REPAIRED]
    by_kind = [_strength(impact=kind, likelihood=Likelihood.LIKELY, failure_points=3) for kind in kinds]
    assert by_kind == sorted(by_kind, reverse=True) and len(set(by_kind)) == len(kinds)
    assert _strength(impact=ImpactKind.COUNTER) > by_kind[2]
    assert _strength(likelihood=Likelihood.POSSIBLE) > _strength(failure_points=3)
    likely = Likelihood.LIKELY
    assert _strength(likelihood=likely, failure_points=5) == _strength(likelihood=likely, failure_points=3)


def test_the_integer_orders_as_the_tuple_of_ranks():
    assert lexicographic(((1, 3), (0, 2))) > lexicographic(((0, 3), (1, 2)))
    assert lexicographic(((0, 3), (1, 2))) > lexicographic(((0, 3), (0, 2)))
    with pytest.raises(ValueError):
        lexicographic(((2, 2),))
