"""A static finding's sequence: every effect on its path where it happens, so a maintainer
(and a SARIF viewer) can step to each write a nested helper makes, and a bookkeeping
callee's writes keep the kind the explanation counts them as."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from auditor.findings.model import EffectSite, Finding
from auditor.report import ReportOptions, render
from auditor.report.model import Coverage, ScanResult
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

APP = {
    "app/models.py": """
        from django.db import models

        class Credential(models.Model):
            @classmethod
            def sync(cls, user):
                cls.objects.filter(user=user).delete()
                cls.objects.create(user=user)

        class Account(models.Model):
            @classmethod
            def sync(cls, user):
                cls.objects.filter(pk=user.pk).update(name=user.name)
                Credential.sync(user)

        def record_event(user):
            Event.objects.create(user=user)
        """,
    "app/signals.py": """
        from django.db.models.signals import post_save
        from django.dispatch import receiver

        from .models import Account, record_event

        @receiver(post_save, sender="auth.User")
        def on_user_saved(sender, instance, **kwargs):
            Account.sync(instance)
            record_event(instance)
        """,
}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _result(rule: Rule, finding: Finding) -> ScanResult:
    return ScanResult(
        tool_version="0.1.0", root="app", engine="static", model=None, tokenizer_source="t", tokenizer_exact=True,
        rules=(rule,), findings=(finding,), rejected=(), windows=(), errors=(), notices=(),
        coverage=Coverage(full=(finding.path,), skeleton=(), omitted=()), injection_flags=(), prompt_tokens_sent=0,
    )


def test_the_sequence_names_each_nested_write_at_its_own_line(rule: Rule):
    finding = reported(analyze_source(APP, rule))[("app/signals.py", "on_user_saved")]
    assert finding.sequence == (
        EffectSite("app/models.py", 12, "Account.sync", "update"),
        EffectSite("app/models.py", 6, "Credential.sync", "delete"),
        EffectSite("app/models.py", 7, "Credential.sync", "write"),
        EffectSite("app/models.py", 16, "record_event", "bookkeeping write"),
    )
    # The explanation counts the same effects at the call sites.
    assert "line 8: calls Account.sync (1 update, 1 delete, 1 write)" in finding.explanation


def test_every_report_format_carries_the_nested_sites(rule: Rule):
    finding = reported(analyze_source(APP, rule))[("app/signals.py", "on_user_saved")]
    result = _result(rule, finding)
    options = ReportOptions(link_base="https://example.test/blob/abc/")
    as_json = json.loads(render(result, "json", options))
    assert as_json["findings"][0]["sequence"][1] == {
        "path": "app/models.py", "line": 6, "function": "Credential.sync", "effect": "delete",
    }
    sarif = json.loads(render(result, "sarif", options))
    related = sarif["runs"][0]["results"][0]["relatedLocations"]
    assert [(item["id"], item["physicalLocation"]["region"]["startLine"]) for item in related] == [(1, 12), (2, 6), (3, 7), (4, 16)]
    assert related[1]["message"]["text"] == "delete in Credential.sync"
    assert "where: app/models.py:12 update; app/models.py:6 delete" in " ".join(render(result, "text", options).split())
    assert "[`app/models.py:6`](https://example.test/blob/abc/app/models.py#L6) delete" in render(result, "markdown", options)


def test_a_finding_whose_effects_are_all_its_own_lists_no_where_line(rule: Rule):
    files = {"app/views.py": """
        from django.views.decorators.http import require_POST

        from .models import Order

        @require_POST
        def close(request, pk):
            Order.objects.filter(pk=pk).update(state=request.POST["state"])
            Order.objects.create(parent=pk)
        """}
    finding = reported(analyze_source(files, rule))[("app/views.py", "close")]
    assert [site.line for site in finding.sequence] == [7, 8]
    result = _result(rule, finding)
    assert "where:" not in render(result, "text", ReportOptions())


def test_text_and_markdown_list_twenty_effects_and_say_how_many_more(rule: Rule):
    finding = reported(analyze_source(APP, rule))[("app/signals.py", "on_user_saved")]
    many = replace(finding, sequence=tuple(EffectSite("app/models.py", line, "Account.sync", "write") for line in range(1, 26)))
    result = _result(rule, many)
    text = " ".join(render(result, "text", ReportOptions()).split())
    assert "app/models.py:20 write; … and 5 more (the JSON and SARIF reports list every one)" in text
    assert "app/models.py:21 write" not in text
    assert len(json.loads(render(result, "json", ReportOptions()))["findings"][0]["sequence"]) == 25
