"""A call whose result decides an immediate return or raise (round 5, an "infeasible path"
cause): a helper that writes only on the paths handing back a response (or True, or a
limit hit) and a caller that returns or raises at once on that result carry on only with
the helper's other outcome, so its writes never join the caller's later ones. Kept
conservative: writes on both outcomes, a caller that carries on either way, a result
tested later, an unknown value."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported

MODELS = """
    from django.db import models

    class Shelf(models.Model):
        name = models.CharField(max_length=20)

    class Book(models.Model):
        title = models.CharField(max_length=20)

    class Visit(models.Model):
        note = models.CharField(max_length=20)
    """

HELPERS = """
    from django.http import HttpResponse, HttpResponseRedirect
    from django.shortcuts import render
    from .models import Book, Shelf, Visit

    def relabel(request, shelf):
        Shelf.objects.create(name="moved")
        if request.next:
            return HttpResponseRedirect(request.next)
        return render(request, "moved.html")

    def prepare(request, shelf_id):
        shelf = Shelf.objects.get(pk=shelf_id)
        if shelf.name != request.name:
            return HttpResponseRedirect("/elsewhere")
        if shelf.parent:
            return relabel(request, shelf.parent)
        return request.user, shelf

    def prepare_both(request, shelf_id):
        shelf = Shelf.objects.get(pk=shelf_id)
        Visit.objects.create(note="seen")
        if shelf.parent:
            return relabel(request, shelf.parent)
        return request.user, shelf

    def reset_requested(request):
        if "reset" in request.POST:
            Visit.objects.create(note="reset")
            return True
        return False

    def reset_always(request):
        Visit.objects.create(note="reset")
        if "reset" in request.POST:
            return True
        return False

    def limited(request):
        if request.user.is_staff:
            request.limited = False
            return False
        if hit := request.counter.over():
            Visit.objects.create(note="limited")
        request.limited = getattr(request, "limited", False) or hit
        return request.limited

    def limited_emptied(request):
        hits = request.counter.hits()
        if hits:
            Visit.objects.create(note="limited")
        hits.clear()
        return hits

    def limited_loop(request):
        hit = False
        for counter in request.counters:
            if hit := counter.over():
                Visit.objects.create(note="limited")
        return hit

    def reset_then_parse(request):
        if "reset" in request.POST:
            Visit.objects.create(note="reset")
            int(request.POST["n"])
            return True
        return False

    def limited_aliased(request):
        hits = request.counter.hits()
        pending = hits
        if hits:
            Visit.objects.create(note="limited")
        pending.clear()
        return hits

    def limited_each(request):
        for hit in request.counter.hits():
            if hit:
                Visit.objects.create(note="limited")
        return hit
    """


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _findings(views: str, rule: Rule) -> dict:
    """The findings shown by default (a single write alone is graded low)."""
    files = {"library/models.py": MODELS, "library/helpers.py": HELPERS, "library/views.py": views}
    return {key: finding for key, finding in reported(analyze_source(files, rule)).items() if finding.severity in ("critical", "high")}


def _view(prelude: str) -> str:
    return f"""
        from django.http import HttpResponse
        from django.shortcuts import redirect
        from .helpers import limited, limited_emptied, limited_loop, prepare, prepare_both, reset_always, reset_requested
        from .models import Book, Shelf

        def edit(request, shelf_id):
{prelude}
            Book.objects.create(title="new")
            Shelf.objects.create(name="new")
            return redirect("/done")
        """


def _indented(text: str) -> str:
    return "\n".join("            " + line for line in text.strip("\n").splitlines())


@pytest.mark.parametrize(
    "prelude",
    [
        # A: the helper writes only through the delegation that hands back a response.
        "checked = prepare(request, shelf_id)\nif isinstance(checked, HttpResponse):\n    return checked\nuser, shelf = checked",
        # A: the helper writes only on the paths returning True; the view redirects on them.
        'if reset_requested(request):\n    return redirect("/settings")',
        'if not reset_requested(request):\n    pass\nelse:\n    return redirect("/settings")',
        # B: the helper writes only when the limit is hit, and returns a true value then.
        "if limited(request):\n    raise PermissionError(429)",
    ],
)
def test_a_helper_writing_only_on_the_outcome_that_returns_adds_nothing_to_the_path_that_carries_on(prelude: str, rule: Rule):
    # The view's own two writes alone: one finding, but graded on them, without the helper's.
    findings = _findings(_view(_indented(prelude)), rule)
    finding = findings.get(("library/views.py", "edit"))
    assert finding is not None
    lines = {step.line for step in finding.sequence if step.path == "library/helpers.py"}
    assert not lines, finding.sequence


def _edit_writes_helper(prelude: str, rule: Rule) -> bool:
    views = f"""
        from django.http import HttpResponse
        from django.shortcuts import redirect
        from .helpers import limited, limited_emptied, limited_loop, prepare, prepare_both, reset_always, reset_requested
        from .models import Book

        def edit(request, shelf_id):
{_indented(prelude)}
            Book.objects.create(title="new")
            return redirect("/done")
        """
    finding = _findings(views, rule).get(("library/views.py", "edit"))
    return finding is not None and any(step.path == "library/helpers.py" for step in finding.sequence)


@pytest.mark.parametrize(
    "prelude",
    [
        "checked = prepare(request, shelf_id)\nif isinstance(checked, HttpResponse):\n    return checked",
        'if reset_requested(request):\n    return redirect("/settings")',
        "if limited(request):\n    raise PermissionError(429)",
    ],
)
def test_the_single_write_left_is_no_finding(prelude: str, rule: Rule):
    assert ("library/views.py", "edit") not in _findings(
        f"""
        from django.http import HttpResponse
        from django.shortcuts import redirect
        from .helpers import limited, prepare, reset_requested
        from .models import Book

        def edit(request, shelf_id):
{_indented(prelude)}
            Book.objects.create(title="new")
            return redirect("/done")
        """,
        rule,
    )


@pytest.mark.parametrize(
    "prelude",
    [
        # Writes on both outcomes.
        "checked = prepare_both(request, shelf_id)\nif isinstance(checked, HttpResponse):\n    return checked",
        'if reset_always(request):\n    return redirect("/settings")',
        # The caller does not return on the result.
        "checked = prepare(request, shelf_id)\nif isinstance(checked, HttpResponse):\n    print(checked)",
        "reset_requested(request)",
        'if reset_requested(request):\n    print("reset")',
        # The result stored, and tested only after another statement.
        'reset = reset_requested(request)\nprint("checked")\nif reset:\n    return redirect("/settings")',
        # The opposite test: the view carries on on the writing outcome.
        'if not reset_requested(request):\n    return redirect("/settings")',
        # The limit's flag bound in a loop: its value at the return is not the one tested.
        "if limited_loop(request):\n    raise PermissionError(429)",
        # The flag emptied after its test: a false value returned says nothing of the test.
        "if limited_emptied(request):\n    raise PermissionError(429)",
    ],
)
def test_a_helper_whose_writes_may_precede_the_path_that_carries_on_keeps_them(prelude: str, rule: Rule):
    assert _edit_writes_helper(prelude, rule)


def test_the_returning_path_keeps_the_helpers_writes_with_those_before_the_call(rule: Rule):
    views = """
        from django.shortcuts import redirect
        from .helpers import reset_requested
        from .models import Book

        def edit(request, shelf_id):
            Book.objects.create(title="first")
            if reset_requested(request):
                return redirect("/settings")
            return redirect("/done")
        """
    finding = _findings(views, rule).get(("library/views.py", "edit"))
    assert finding is not None
    assert any(step.path == "library/helpers.py" for step in finding.sequence)


def test_a_decorated_helper_keeps_its_writes(rule: Rule):
    # A decorator may hand back another value than the helper's own (a swallowed error).
    helpers = HELPERS.replace("    def reset_requested(request):", "    @swallow_errors\n    def reset_requested(request):")
    views = """
        from django.shortcuts import redirect
        from .helpers import reset_requested
        from .models import Book

        def edit(request, shelf_id):
            if reset_requested(request):
                return redirect("/settings")
            Book.objects.create(title="new")
            return redirect("/done")
        """
    files = {"library/models.py": MODELS, "library/helpers.py": helpers, "library/views.py": views}
    finding = reported(analyze_source(files, rule)).get(("library/views.py", "edit"))
    assert finding is not None and any(step.path == "library/helpers.py" for step in finding.sequence)


@pytest.mark.parametrize(
    "prelude",
    [
        # The view's own raise caught at once: the path carries on with the helper's write.
        'try:\n    if reset_requested(request):\n        raise Http404\nexcept Http404:\n    pass',
        'try:\n    if reset_requested(request):\n        raise ValueError("reset")\nexcept Exception:\n    pass',
        # The helper may raise after its write (no ``raise`` of its own), and the view catches it.
        'try:\n    if reset_then_parse(request):\n        return redirect("/settings")\nexcept Exception:\n    pass',
        # A ``finally`` writes on the returning path too.
        'try:\n    if reset_requested(request):\n        return redirect("/settings")\nfinally:\n    Shelf.objects.create(name="seen")',
        # A context manager may swallow the view's raise (``contextlib.suppress``).
        'with suppress(Http404):\n    if reset_requested(request):\n        raise Http404',
        # The flag emptied through an alias after its test.
        "if limited_aliased(request):\n    raise PermissionError(429)",
        # The flag is the loop's last item: an earlier one may have written.
        "if limited_each(request):\n    raise PermissionError(429)",
    ],
)
def test_a_decision_the_caller_may_not_keep_keeps_the_helpers_writes(prelude: str, rule: Rule):
    views = f"""
        from contextlib import suppress

        from django.http import Http404
        from django.shortcuts import redirect
        from .helpers import limited_aliased, limited_each, reset_requested, reset_then_parse
        from .models import Book, Shelf

        def edit(request, shelf_id):
{_indented(prelude)}
            Book.objects.create(title="new")
            return redirect("/done")
        """
    finding = _findings(views, rule).get(("library/views.py", "edit"))
    assert finding is not None
    assert finding.severity in SHOWN
    assert any(step.path == "library/helpers.py" for step in finding.sequence), finding.sequence
