"""Severity by what a path's writes are: the grades below critical/high, each with the
sequence that stays critical beside it (docs in the rule file and the analysis module)."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


VIEWS = {
    "app/models.py": """
        from django.db import models

        class Tag(models.Model):
            pass

        class Channel(models.Model):
            checks = models.ManyToManyField("Check", related_name="channels")

            def assign_all_checks(self):
                self.checks.add(*Check.objects.all())

        class Check(models.Model):
            tags = models.ManyToManyField(Tag, related_name="checks")

        class Stock(models.Model):
            pass

        class TokenBucket(models.Model):
            @staticmethod
            def authorize_login(email):
                bucket, _ = TokenBucket.objects.get_or_create(value=email)
                bucket.tokens = 1
                bucket.save()
                return True
        """,
    "app/views.py": """
        from django.db.models import F
        from django.views.decorators.http import require_POST

        from .models import Channel, Check, Stock, Tag, TokenBucket

        @require_POST
        def add_channel(request):
            channel = Channel(kind="email")
            channel.save()
            channel.assign_all_checks()

        @require_POST
        def copy_check(request, check):
            check.save()
            check.tags.set(request.POST.getlist("tags"))

        @require_POST
        def check_with_flip(request, check):
            check.save()
            check.flip_set.create(kind="up")

        @require_POST
        def move_tags(request, check, other):
            check.save()
            other.tags.set(request.POST.getlist("tags"))

        @require_POST
        def retire(request, ids):
            Check.objects.filter(pk__in=ids).update(status="retired")
            Tag.objects.filter(check__in=ids).update(active=False)

        @require_POST
        def retire_and_count(request, ids):
            Stock.objects.filter(pk=1).update(count=F("count") - len(ids))
            Check.objects.filter(pk__in=ids).update(status="retired")

        @require_POST
        def retire_then_create(request, ids):
            Check.objects.filter(pk__in=ids).update(status="retired")
            Tag.objects.create(name="retired")

        @require_POST
        def retire_then_delete(request, ids):
            Check.objects.filter(pk__in=ids).update(status="retired")
            Tag.objects.filter(check__in=ids).delete()

        @require_POST
        def upsert_then_save(request, check):
            tag, _ = Tag.objects.get_or_create(name=request.POST["tag"])
            check.kind = "tagged"
            check.save()

        @require_POST
        def save_then_upsert(request, check):
            check.save()
            Tag.objects.get_or_create(name=request.POST["tag"])

        @require_POST
        def login(request, user):
            if TokenBucket.authorize_login(request.POST["email"]):
                user.save()
        """,
}


def test_one_objects_row_and_its_relations_are_graded_medium(rule: Rule):
    found = reported(analyze_source(VIEWS, rule))
    # The object, then its many-to-many links (through one of its own methods too).
    for function in ("add_channel", "copy_check"):
        assert found[("app/views.py", function)].severity == "medium", function
        assert "one object's row and its relations" in found[("app/views.py", function)].explanation
    # Another object's relations, or a new row of the object's own: a failure leaves two
    # objects (two rows) out of step.
    assert found[("app/views.py", "move_tags")].severity == "critical"
    assert found[("app/views.py", "check_with_flip")].severity == "critical"


def test_only_idempotent_writes_are_graded_medium_and_relative_updates_are_not_idempotent(rule: Rule):
    found = reported(analyze_source(VIEWS, rule))
    retire = found[("app/views.py", "retire")]
    assert retire.severity == "medium" and "a re-run completes them" in retire.explanation
    assert "(idempotent write)" in retire.explanation
    # A constant update changes rows others read: another write after it is not a re-run's.
    assert found[("app/views.py", "retire_then_create")].severity == "critical"
    # count=F("count") - n applied twice is not applied once; a delete beside an update is
    # not a re-run's to finish either.
    assert found[("app/views.py", "retire_and_count")].severity == "critical"
    assert found[("app/views.py", "retire_then_delete")].severity == "critical"
    # An upsert and then one write: a re-run finds the row and completes the path. The
    # other way round a failure leaves the write done and the upsert missing.
    rerun = found[("app/views.py", "upsert_then_save")]
    assert rerun.severity == "medium" and "only upserts or links before the last write" in rerun.explanation
    assert found[("app/views.py", "save_then_upsert")].severity == "critical"


def test_rate_limit_counters_are_bookkeeping(rule: Rule):
    found = reported(analyze_source(VIEWS, rule))
    login = found[("app/views.py", "login")]
    assert login.severity == "medium" and "bookkeeping" in login.explanation


MAIL = {
    "app/views.py": """
        from django.core.files.storage import default_storage
        from django.core.mail import send_mail
        from django.views.decorators.http import require_POST

        from .models import Order, OrderLine

        @require_POST
        def mail_after(request, order):
            order.save()
            send_mail("placed", "", "a@example.com", ["b@example.com"])

        @require_POST
        def mail_between(request, order):
            order.save()
            send_mail("placed", "", "a@example.com", ["b@example.com"])
            OrderLine.objects.create(order=order)

        @require_POST
        def file_after(request, order, upload):
            order.save()
            default_storage.save(upload.name, upload)
        """,
    "app/models.py": "class Order:\n    pass\n\nclass OrderLine:\n    pass\n",
}


def test_a_side_effect_after_the_last_write_is_the_right_order_but_a_stored_file_is_not(rule: Rule):
    found = reported(analyze_source(MAIL, rule))
    after = found[("app/views.py", "mail_after")]
    assert after.severity == "medium" and "the right order" in after.explanation
    assert found[("app/views.py", "mail_between")].severity == "critical"
    # The row names a file that may never reach storage.
    assert found[("app/views.py", "file_after")].severity == "critical"


DERIVED = {
    "shop/tasks.py": """
        from celery import shared_task

        from .models import Order, OrderLine

        @shared_task
        def recalculate_order_prices(order):
            for line in order.lines.all():
                line.save(update_fields=["price"])
            order.save(update_fields=["total"])

        @shared_task
        def reprice(order):
            recalculate_order_prices(order)
            order.status = "repriced"
            order.save()

        @shared_task
        def split(order):
            OrderLine.objects.create(order=order)
            Order.objects.filter(pk=order.pk).update(total=0)
        """,
    "shop/models.py": "class Order:\n    pass\n\nclass OrderLine:\n    pass\n",
}


def test_derived_data_a_recalculation_rewrites_is_bookkeeping(rule: Rule):
    found = reported(analyze_source(DERIVED, rule))
    # Called from a task of its own, the recalculation is graded by its name.
    own = found[("shop/tasks.py", "recalculate_order_prices")]
    assert own.severity == "medium" and "derived data" in own.explanation
    # At the caller the recalculation is bookkeeping beside the one real write.
    reprice = found[("shop/tasks.py", "reprice")]
    assert reprice.severity == "medium" and "bookkeeping" in reprice.explanation
    assert found[("shop/tasks.py", "split")].severity == "critical"


OWN_TRANSACTIONS = {
    "shop/services.py": """
        from django.db import transaction

        from .models import Order, Payment, Reservation

        @transaction.atomic
        def place(order):
            order.save()
            Payment.objects.create(order=order)

        @transaction.atomic
        def reserve(order):
            Reservation.objects.create(order=order)
        """,
    "shop/views.py": """
        from django.db import transaction
        from django.views.decorators.http import require_POST

        from .services import place, reserve

        @require_POST
        def checkout(request, order):
            place(order)
            reserve(order)

        @require_POST
        def checkout_once(request, order):
            place(order)

        @require_POST
        def checkout_atomic(request, order):
            with transaction.atomic():
                place(order)
                reserve(order)
        """,
    "shop/models.py": "class Order:\n    pass\n\nclass Payment:\n    pass\n\nclass Reservation:\n    pass\n",
}


def test_calls_into_functions_with_their_own_transaction_are_one_commit_each(rule: Rule):
    found = reported(analyze_source(OWN_TRANSACTIONS, rule))
    checkout = found[("shop/views.py", "checkout")]
    assert checkout.severity == "high"
    assert "calls place (its own transaction)" in checkout.explanation
    assert "calls reserve (its own transaction)" in checkout.explanation
    # One transaction is fine; both inside an outer one are one unit.
    assert ("shop/views.py", "checkout_once") not in found
    assert ("shop/views.py", "checkout_atomic") not in found
    assert ("shop/services.py", "place") not in found


BANK = {
    "bank/models.py": """
        from django.db import models

        class Account(models.Model):
            balance = models.IntegerField()

        def get_account(pk):
            return Account.objects.get(pk=pk)
        """,
    "bank/views.py": """
        from django.db.models import F
        from django.views.decorators.http import require_POST

        from .models import Account, get_account

        @require_POST
        def transfer_update(request, src, dst, amount):
            Account.objects.filter(pk=src.pk).update(balance=src.balance - amount)
            Account.objects.filter(pk=dst.pk).update(balance=dst.balance + amount)

        @require_POST
        def transfer_upsert(request, src, dst, amount):
            Account.objects.update_or_create(pk=src.pk, defaults={"balance": src.balance - amount})
            Account.objects.filter(pk=dst.pk).update(balance=F("balance") + amount)

        @require_POST
        def transfer_indexed(request, amount):
            accounts = list(Account.objects.filter(pk__in=[1, 2]))
            accounts[0].save()
            accounts[1].save(update_fields=["balance"])

        @require_POST
        def process_stripe_events(request, order):
            order.save()
            Account.objects.create(balance=0)
        """,
}


def test_what_looks_idempotent_or_one_object_and_is_not_stays_critical(rule: Rule):
    found = reported(analyze_source(BANK, rule))
    # Values computed from what was read are not constants; an upsert's computed defaults
    # are not a re-run's to repeat; two items of a list are two rows; a function's own name
    # (``_events``) says nothing about the writes it sequences.
    for function in ("transfer_update", "transfer_upsert", "transfer_indexed", "process_stripe_events"):
        assert found[("bank/views.py", function)].severity == "critical", function
