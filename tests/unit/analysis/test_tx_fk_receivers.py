"""Receivers typed through a Django model's ``ForeignKey``/``OneToOneField`` and through
getters whose return is read precisely (an annotation, or a body that is one ``return``
of a typed expression), on the planted app ``fixtures/django_invites``."""

from __future__ import annotations

import pytest

from auditor.analysis.transactions import analyze_tx_outside_transaction
from auditor.findings.model import Finding
from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, ALL_SEVERITIES, FIXTURES, load_app, reported

VIEWS = "talks/views.py"


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


@pytest.fixture(scope="module")
def found(rule: Rule) -> dict[tuple[str, str], Finding]:
    indexes, texts = load_app(FIXTURES / "django_invites")
    return reported(analyze_tx_outside_transaction(indexes, texts, rule, options=ALL_SEVERITIES))


def test_a_foreign_key_read_through_a_cached_property_and_a_single_return_types_the_receiver(rule: Rule):
    # ``talk = self.invitation.talk``: the cached property returns ``self.get_invitation()``,
    # which returns ``get_object_or_404(Invitation, ...)``; ``Invitation.talk`` is a
    # ForeignKey to "talks.Talk", so ``talk.add_speaker`` runs Talk's (not Workshop's).
    indexes, texts = load_app(FIXTURES / "django_invites")
    default = reported(analyze_tx_outside_transaction(indexes, texts, rule))
    finding = default[(VIEWS, "AcceptInvitation.post")]
    assert finding.severity in SHOWN
    assert "Talk.add_speaker" in finding.explanation
    assert "Workshop.add_speaker" not in finding.explanation


def test_a_one_to_one_field_to_an_unquoted_model_types_the_variable(found: dict[tuple[str, str], Finding]):
    finding = found[(VIEWS, "promote_speaker")]
    assert "Speaker.promote" in finding.explanation
    assert "Talk.promote" not in finding.explanation


def test_a_foreign_key_to_self_types_the_variable_it_is_read_into(found: dict[tuple[str, str], Finding]):
    finding = found[(VIEWS, "close_talk")]
    assert "Talk.archive" in finding.explanation
    assert finding.severity in SHOWN
    # Written as one expression, ``talk.series.archive()`` is not followed (kept narrow).
    inline = found[(VIEWS, "close_series_inline")]
    assert inline.severity == "low" and "archive" not in inline.explanation


def test_conditional_getters_plain_attributes_and_the_user_model_type_nothing(found: dict[tuple[str, str], Finding]):
    # A getter returning a Workshop or a Talk, a class attribute ``talk = None`` and a
    # foreign key to settings.AUTH_USER_MODEL: no receiver class, so only the view's own
    # write is seen, not ``add_speaker``'s or ``archive``'s.
    finding = found[(VIEWS, "RetargetInvitation.post")]
    assert finding.severity == "low"
    assert "add_speaker" not in finding.explanation and "archive" not in finding.explanation
