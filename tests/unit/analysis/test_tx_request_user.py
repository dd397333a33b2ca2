"""``request.user`` is a row of the project's ``AUTH_USER_MODEL`` (Django's
``AuthenticationMiddleware``): a call on it runs that model's method, and a project's
audit-log helper reached that way writes an audit row beside the view's own write."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

FILES = {
    "config/settings.py": 'AUTH_USER_MODEL = "people.Member"\n',
    "core/mixins.py": """
        class AuditTrail:
            def record_action(self, action, data=None):
                from core.models import ActionEntry

                return ActionEntry.objects.create(action=action, data=data, actor_id=self.pk)
        """,
    "core/models.py": """
        from django.db import models

        class ActionEntry(models.Model):
            action = models.CharField(max_length=50)
        """,
    "people/models.py": """
        from django.contrib.auth.models import AbstractUser

        from core.mixins import AuditTrail

        class Member(AuditTrail, AbstractUser):
            def record_action(self, action, data=None):
                return super().record_action(action, data=data)
        """,
    "people/views.py": """
        from django.shortcuts import redirect
        from django.views.generic import FormView

        class ProfileView(FormView):
            def post(self, request, *args, **kwargs):
                form = self.get_form()
                if form.is_valid():
                    form.save()
                    request.user.record_action("profile.update")
                return redirect("/")

        class NicknameView(FormView):
            def post(self, request, *args, **kwargs):
                member = self.request.user
                member.nickname = request.POST["nickname"]
                member.save()
                self.request.user.record_action("nickname.update")
                return redirect("/")
        """,
    "people/urls.py": """
        from django.urls import path

        from . import views

        urlpatterns = [path("me", views.ProfileView.as_view()), path("nick", views.NicknameView.as_view())]
        """,
}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def test_a_call_on_request_user_runs_the_user_models_method_through_its_mixin(rule: Rule):
    found = reported(analyze_source(FILES, rule))
    profile = found[("people/views.py", "ProfileView.post")]
    assert "Member.record_action" in profile.explanation, profile.explanation
    nickname = found[("people/views.py", "NicknameView.post")]
    assert "Member.record_action" in nickname.explanation, nickname.explanation


def test_the_settings_model_name_is_read_case_insensitively(rule: Rule):
    files = {**FILES, "config/settings.py": 'AUTH_USER_MODEL = "people.member"\n'}
    found = reported(analyze_source(files, rule))
    assert "Member.record_action" in found[("people/views.py", "ProfileView.post")].explanation


def test_without_a_user_model_setting_request_user_is_djangos_own(rule: Rule):
    files = {path: text for path, text in FILES.items() if path != "config/settings.py"}
    found = reported(analyze_source(files, rule))
    profile = found.get(("people/views.py", "ProfileView.post"))
    assert profile is None or "record_action" not in profile.explanation


def _audit_named(files: dict[str, str]) -> dict[str, str]:
    """The fixture with an audit-log helper named like one: ``log_action`` writing ``ActionLog`` rows."""
    return {path: text.replace("record_action", "log_action").replace("ActionEntry", "ActionLog") for path, text in files.items()}


def test_a_write_and_the_audit_log_row_recording_it_are_shown_by_default(rule: Rule):
    found = reported(analyze_source(_audit_named(FILES), rule))
    for function in ("ProfileView.post", "NicknameView.post"):
        finding = found[("people/views.py", function)]
        assert finding.severity == "high", (finding.severity, finding.explanation)
        assert "audit" in finding.explanation, finding.explanation


def test_a_pruning_delete_beside_an_audit_helper_stays_bookkeeping(rule: Rule):
    files = {
        "app/models.py": "from django.db import models\n\nclass Probe(models.Model):\n    pass\n\nclass ProbeLog(models.Model):\n    pass\n",
        "app/tasks.py": """
            from celery import shared_task

            from .models import Probe, ProbeLog

            @shared_task
            def prune(cutoff):
                Probe.objects.filter(seen__lt=cutoff).delete()
                ProbeLog.objects.create(note="pruned")
            """,
    }
    pruned = reported(analyze_source(files, rule))[("app/tasks.py", "prune")]
    assert pruned.severity == "medium", pruned.explanation
