"""``method_decorator`` boundaries on class-based views (auditor/analysis/transactions/boundaries.py).

``django.utils.decorators.method_decorator(d)`` turns the function decorator ``d`` into a
method decorator: written on a method, the method runs inside ``d``; written on a class
with ``name="post"``, it replaces that one attribute and no other (``method_decorator`` /
``_multi_decorate`` in django/utils/decorators.py). ``View.dispatch``
(django/views/generic/base.py) and DRF's ``APIView.dispatch`` (rest_framework/views.py) call
the handler, so a transaction around ``dispatch`` covers every handler of the view.
Round 8's blind draw found six FALSE findings on taiga-back's importer, whose actions are
``@method_decorator(atomic)`` with ``from django.db.transaction import atomic``."""

from __future__ import annotations

import textwrap

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = "class Room:\n    pass\n\n\nclass Booking:\n    pass\n"
BODY = ('room = Room.objects.create(name="a")', "Booking.objects.create(room=room)")


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _views(source: str) -> dict[str, str]:
    """The views module, each ``BODY`` line replaced by the two writes at its indentation."""
    lines = []
    for line in textwrap.dedent(source).splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        if line.strip() == "BODY":
            lines.extend(indent + write for write in BODY)
        else:
            lines.append(line)
    return {"hotel/views.py": "\n".join(lines) + "\n", "hotel/models.py": MODELS}


def test_an_action_wrapped_in_method_decorator_atomic_is_covered(rule: Rule):
    files = _views("""
        from django.db.transaction import atomic
        from django.utils.decorators import method_decorator
        from rest_framework import viewsets
        from rest_framework.decorators import action
        from .models import Room, Booking

        class ImporterViewSet(viewsets.GenericViewSet):
            @action(detail=True, methods=["post"])
            @method_decorator(atomic)
            def milestone(self, request, *args, **kwargs):
                BODY

            @action(detail=True, methods=["post"])
            def plain(self, request, *args, **kwargs):
                BODY
        """)
    found = reported(analyze_source(files, rule))
    assert ("hotel/views.py", "ImporterViewSet.milestone") not in found
    assert ("hotel/views.py", "ImporterViewSet.plain") in found


def test_a_class_decorator_covers_only_the_method_it_names(rule: Rule):
    files = _views("""
        from django.db import transaction
        from django.utils.decorators import method_decorator
        from django.views import View
        from .models import Room, Booking

        @method_decorator(transaction.atomic, name="post")
        class BookView(View):
            def post(self, request):
                BODY

            def put(self, request):
                BODY

        @method_decorator(transaction.atomic, name="get")
        class OtherView(View):
            def post(self, request):
                BODY
        """)
    found = reported(analyze_source(files, rule))
    assert ("hotel/views.py", "BookView.post") not in found
    assert ("hotel/views.py", "BookView.put") in found
    assert ("hotel/views.py", "OtherView.post") in found


def test_a_transaction_around_dispatch_covers_the_handlers_of_the_view_and_its_subclasses(rule: Rule):
    files = _views("""
        from django.db import transaction
        from django.utils.decorators import method_decorator
        from django.views import View
        from .models import Room, Booking

        @method_decorator(transaction.atomic, name="dispatch")
        class AtomicView(View):
            pass

        class BookView(AtomicView):
            def post(self, request):
                BODY

        class AtomicBase(View):
            @method_decorator(transaction.atomic)
            def dispatch(self, request, *args, **kwargs):
                return super().dispatch(request, *args, **kwargs)

        class EditView(AtomicBase):
            def post(self, request):
                BODY

        class PlainView(View):
            def post(self, request):
                BODY
        """)
    found = reported(analyze_source(files, rule))
    assert ("hotel/views.py", "BookView.post") not in found
    assert ("hotel/views.py", "EditView.post") not in found
    assert ("hotel/views.py", "PlainView.post") in found


def test_a_method_decorator_that_opens_no_transaction_covers_nothing(rule: Rule):
    files = _views("""
        from django.contrib.auth.decorators import login_required
        from django.utils.decorators import method_decorator
        from django.views import View
        from .models import Room, Booking

        @method_decorator(login_required, name="dispatch")
        class BookView(View):
            @method_decorator(login_required)
            def post(self, request):
                BODY
        """)
    assert ("hotel/views.py", "BookView.post") in reported(analyze_source(files, rule))
