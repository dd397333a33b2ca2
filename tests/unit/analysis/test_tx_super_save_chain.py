"""A chain of ``save`` overrides through a Django model's MRO is one row write.

``Leaf.save -> super().save() -> Mixin.save -> super().save() -> ... -> Model.save`` runs
one INSERT or UPDATE of the row (django/db/models/base.py ``Model.save`` is the only level
that touches the database; the overrides above it only prepare the instance). Whatever
the chain's shape, ``super()``, ``super(Class, self)`` or ``Parent.save(self)``, and
whether it is entered from a view or from a mixin's ``self.save()`` dispatched to the
override, it counts once. What an override writes besides it still counts: another
object's ``save()`` (even one that runs the same inherited mixin ``save``), a manager
``create``, or a second ``super().save()``.
"""

from __future__ import annotations

import pytest

from auditor.findings.model import Finding
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = """
    from django.db import models

    class TrimMixin(models.Model):
        class Meta:
            abstract = True

        def save(self, *args, **kwargs):
            self.label = self.label.strip()
            super().save(*args, **kwargs)

    class DefaultsMixin(models.Model):
        class Meta:
            abstract = True

        def save(self, *args, **kwargs):
            if self.extras is None:
                self.extras = {}
            super(DefaultsMixin, self).save(*args, **kwargs)

    class QuietSaveMixin:
        def save_quietly(self):
            self.quiet = True
            try:
                self.save()
            finally:
                self.quiet = False

    class Shelf(TrimMixin):
        def save(self, *args, **kwargs):
            self.check_label()
            super().save(*args, **kwargs)

    class Stamp(models.Model):
        pass

    class Bin(TrimMixin):
        pass

    class Crate(QuietSaveMixin, DefaultsMixin, TrimMixin):
        def save(self, **kwargs):
            self.check_owner()
            result = super().save(**kwargs)
            return result

    class StampedCrate(QuietSaveMixin, DefaultsMixin, TrimMixin):
        def save(self, **kwargs):
            super().save(**kwargs)
            Stamp.objects.create(crate_id=self.pk)

    class BinnedCrate(DefaultsMixin, TrimMixin):
        def save(self, **kwargs):
            super().save(**kwargs)
            if self.bin is None:
                bin = Bin(crate=self)
                bin.save()

    class VersionedCrate(DefaultsMixin, TrimMixin):
        def save(self, **kwargs):
            super().save(**kwargs)
            self.version += 1
            super().save(update_fields=["version"])

    class Pallet(DefaultsMixin, TrimMixin):
        def save(self, *args, **kwargs):
            self.touch()
            DefaultsMixin.save(self, *args, **kwargs)
    """

VIEWS = """
    from django.http import JsonResponse

    from .models import BinnedCrate, Crate, Pallet, Shelf, StampedCrate, VersionedCrate

    def rename_shelf(request, pk):
        shelf = Shelf.objects.get(pk=pk)
        shelf.label = request.POST["label"]
        shelf.save()
        return JsonResponse({})

    def rename_crate(request, pk):
        crate = Crate.objects.get(pk=pk)
        crate.label = request.POST["label"]
        crate.save()
        return JsonResponse({})

    def hush_crate(request, pk):
        crate = Crate.objects.get(pk=pk)
        crate.save_quietly()
        return JsonResponse({})

    def move_pallet(request, pk):
        pallet = Pallet.objects.get(pk=pk)
        pallet.save()
        return JsonResponse({})

    def stamp_crate(request, pk):
        crate = StampedCrate.objects.get(pk=pk)
        crate.save_quietly()
        return JsonResponse({})

    def bin_crate(request, pk):
        crate = BinnedCrate.objects.get(pk=pk)
        crate.save()
        return JsonResponse({})

    def bump_crate(request, pk):
        crate = VersionedCrate.objects.get(pk=pk)
        crate.save()
        return JsonResponse({})
    """

URLS = """
    from django.urls import path

    from . import views

    urlpatterns = [
        path("shelf/<int:pk>", views.rename_shelf),
        path("crate/<int:pk>", views.rename_crate),
        path("hush/<int:pk>", views.hush_crate),
        path("pallet/<int:pk>", views.move_pallet),
        path("stamp/<int:pk>", views.stamp_crate),
        path("bin/<int:pk>", views.bin_crate),
        path("bump/<int:pk>", views.bump_crate),
    ]
    """


@pytest.fixture(scope="module")
def found() -> dict[tuple[str, str], Finding]:
    rule = load_rule("tx-outside-transaction")
    return reported(analyze_source({"app/models.py": MODELS, "app/views.py": VIEWS, "app/urls.py": URLS}, rule))


def _writes(found: dict[tuple[str, str], Finding], path: str, function: str) -> int:
    """How many effects the finding for ``function`` sequences (0 when none is reported)."""
    finding = found.get((path, function))
    return len(finding.sequence) if finding is not None else 0


@pytest.mark.parametrize(("path", "function"), [
    ("app/models.py", "Shelf.save"),  # two levels: Shelf.save -> TrimMixin.save -> Model.save
    ("app/views.py", "rename_shelf"),
    ("app/models.py", "Crate.save"),  # three levels: Crate -> DefaultsMixin -> TrimMixin -> Model
    ("app/views.py", "rename_crate"),
    ("app/models.py", "QuietSaveMixin.save_quietly"),  # self.save() dispatched to the override
    ("app/views.py", "hush_crate"),
    ("app/models.py", "Pallet.save"),  # Parent.save(self) instead of super()
    ("app/views.py", "move_pallet"),
])
def test_a_save_chain_through_the_mro_is_one_write(found: dict[tuple[str, str], Finding], path: str, function: str):
    assert _writes(found, path, function) <= 1


def test_a_three_level_chain_and_another_write_are_two(found: dict[tuple[str, str], Finding]):
    # the view that reaches it (through save_quietly) is reported there, in the override
    assert found[("app/models.py", "StampedCrate.save")].title.startswith("2 database writes")
    steps = [(step.function, step.effect) for step in found[("app/models.py", "StampedCrate.save")].sequence]
    assert steps == [("DefaultsMixin.save", "write"), ("StampedCrate.save", "write")]


def test_another_object_saved_through_the_same_mixin_is_its_own_write(found: dict[tuple[str, str], Finding]):
    # bin.save() runs TrimMixin.save, a link of BinnedCrate's own chain, but on another row
    steps = [(step.function, step.effect) for step in found[("app/models.py", "BinnedCrate.save")].sequence]
    assert steps == [("DefaultsMixin.save", "write"), ("TrimMixin.save", "write")]


def test_an_override_that_saves_the_row_twice_is_two_writes(found: dict[tuple[str, str], Finding]):
    assert found[("app/models.py", "VersionedCrate.save")].title.startswith("2 database writes")
