"""A library that calls the project's code: mozilla-django-oidc's callback view
(mozilla_django_oidc/views.py ``OIDCAuthenticationCallbackView.get``) authenticates the
login, and its backend (mozilla_django_oidc/auth.py ``OIDCAuthenticationBackend.authenticate``
-> ``get_or_create_user``) calls the subclass's ``update_user`` or ``create_user``
(models/mozilla_django_oidc.yaml, rows ``kind: runs-in-request``). A subclass's override is
an entry point of a request, in no transaction unless ``ATOMIC_REQUESTS`` opens one (kitsune
made its ``FXAAuthBackend.update_user`` atomic: benchmarks/real_fixes, kitsune-fxa-update-user)."""

from __future__ import annotations

from auditor.analysis.transactions.framework_facts import builtin_facts, Kind
from auditor.rules.loader import load_rule
from tests.support import SHOWN, analyze_source, reported

BACKEND = """
    from mozilla_django_oidc.auth import OIDCAuthenticationBackend

    class AccountsBackend(OIDCAuthenticationBackend):
        def update_user(self, user, claims):
            user.email = claims.get("email")
            user.save()
            profile = user.profile
            profile.name = claims.get("name")
            profile.save()
            return user

        def describe(self, user):
            user.save()
            user.profile.save()
    """


def _files(settings: str = "") -> dict[str, str]:
    files = {"accounts/__init__.py": "", "accounts/auth.py": BACKEND}
    if settings:
        files["manage.py"] = 'import os\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "accounts.settings")\n'
        files["accounts/settings.py"] = settings
    return files


def test_an_oidc_backends_update_user_is_a_request_entry_point():
    found = reported(analyze_source(_files(), load_rule("tx-outside-transaction")))
    finding = found[("accounts/auth.py", "AccountsBackend.update_user")]
    assert finding.severity in SHOWN, finding.explanation
    assert "http entry point AccountsBackend.update_user (mozilla-django-oidc OIDCAuthenticationBackend.update_user)" in finding.explanation
    # A method the library does not call is no entry point.
    assert ("accounts/auth.py", "AccountsBackend.describe") not in found


def test_atomic_requests_covers_the_backends_hooks():
    settings = 'DATABASES = {"default": {"ENGINE": "x", "ATOMIC_REQUESTS": True}}\n'
    found = reported(analyze_source(_files(settings), load_rule("tx-outside-transaction")))
    assert ("accounts/auth.py", "AccountsBackend.update_user") not in found


def test_the_rows_name_the_librarys_source():
    rows = [fact for fact in builtin_facts().facts if fact.kind is Kind.RUNS_IN_REQUEST]
    assert {row.method for row in rows} == {"update_user", "create_user"}
    assert all(row.proof is not None and row.proof.file == "mozilla_django_oidc/auth.py" for row in rows)
