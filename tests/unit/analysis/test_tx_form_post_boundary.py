"""A form view's ``form_valid`` runs inside the boundary on the ``post`` that calls it, and a
decorator factory that returns ``atomic`` is ``atomic``. Round 10's tendenci FALSE: the forum's
``PostEditMixin.post`` is ``@method_decorator(get_atomic_func())``, where ``get_atomic_func``
imports and returns ``django.db.transaction.atomic``; Django's ``ProcessFormView.post`` calls
``form_valid`` (django/views/generic/edit.py), so the form's writes are covered. Counter-tests:
the same mixin with an undecorated ``post``, or a factory returning something else, still
reports them."""

from __future__ import annotations

from auditor.rules.loader import load_rule
from tests.support import analyze_source, reported

COMPAT = """
    def get_atomic_func():
        try:
            from django.db.transaction import atomic as atomic_func
        except ImportError:
            from django.db.transaction import commit_on_success as atomic_func
        return atomic_func


    def get_timer_func():
        from time import perf_counter as timer
        return timer
"""

VIEWS = """
    from django.utils.decorators import method_decorator
    from django.views.generic.edit import CreateView

    from .compat import get_atomic_func, get_timer_func
    from .models import Attachment, Post


    class PostEditMixin:
        @method_decorator(get_atomic_func())
        def post(self, request, *args, **kwargs):
            return super().post(request, *args, **kwargs)

        def form_valid(self, form):
            post = Post.objects.create(body=form.cleaned_data["body"])
            Attachment.objects.create(post=post)
            return super().form_valid(form)


    class PlainEditMixin:
        def post(self, request, *args, **kwargs):
            return super().post(request, *args, **kwargs)

        def form_valid(self, form):
            post = Post.objects.create(body=form.cleaned_data["body"])
            Attachment.objects.create(post=post)
            return super().form_valid(form)


    class TimedEditMixin:
        @method_decorator(get_timer_func())
        def post(self, request, *args, **kwargs):
            return super().post(request, *args, **kwargs)

        def form_valid(self, form):
            post = Post.objects.create(body=form.cleaned_data["body"])
            Attachment.objects.create(post=post)
            return super().form_valid(form)


    class AddPostView(PostEditMixin, CreateView):
        pass


    class AddPlainView(PlainEditMixin, CreateView):
        pass


    class AddTimedView(TimedEditMixin, CreateView):
        pass
"""


def _found() -> set[str]:
    files = {"forums/compat.py": COMPAT, "forums/views.py": VIEWS}
    return {function for _, function in reported(analyze_source(files, load_rule("tx-outside-transaction")))}


def test_form_valid_under_an_atomic_post_from_a_factory_is_covered():
    found = _found()
    assert not any(function.startswith(("PostEditMixin.", "AddPostView.")) for function in found)


def test_form_valid_under_a_plain_post_or_another_factory_is_reported():
    found = _found()
    assert any(function.startswith(("PlainEditMixin.", "AddPlainView.")) for function in found)
    assert any(function.startswith(("TimedEditMixin.", "AddTimedView.")) for function in found)
