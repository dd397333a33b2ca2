"""Django's request transaction (auditor/analysis/transactions/django_settings.py).

Django reads ``ATOMIC_REQUESTS`` from each ``DATABASES`` alias (``django/db/utils.py``
``ConnectionHandler.configure_settings`` defaults it to False) and wraps a view in
``atomic(using=alias)`` for each alias that sets it, less those ``non_atomic_requests``
names (``django/core/handlers/base.py`` ``BaseHandler.make_view_atomic``). A top-level
``ATOMIC_REQUESTS`` is read by nothing. pyhermes runs its subscribers from a plain Django
view (``pyhermes/apps/django/views.py`` ``subscriber_view``), so they are covered too. A
plugin with no settings of its own declares its host's with a ``host-setting`` row."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from auditor.analysis.transactions import TxOptions
from auditor.analysis.transactions.django_settings import RequestSettings, request_settings
from auditor.analysis.transactions.explain import AnalysisInputs, explain
from auditor.analysis.transactions.framework_facts import Kind, ModelsFileError, builtin_facts, parse_facts
from auditor.index.indexer import index_source
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

VIEWS = """
    from django.db import transaction
    from .models import Room, Booking

    def book(request):
        room = Room.objects.create(name="a")
        Booking.objects.create(room=room)

    @transaction.non_atomic_requests
    def book_outside(request):
        room = Room.objects.create(name="b")
        Booking.objects.create(room=room)
    """
MODELS = "class Room:\n    pass\n\n\nclass Booking:\n    pass\n"


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _app(settings: dict[str, str]) -> dict[str, str]:
    return {"hotel/views.py": VIEWS, "hotel/models.py": MODELS, **settings}


def _settings(files: dict[str, str]) -> RequestSettings:
    texts = {path: text for path, text in files.items()}
    indexes = {path: index_source(path, text, "python") for path, text in texts.items()}
    return request_settings(indexes, texts)


@pytest.mark.parametrize(
    "text",
    [
        # the key in the DATABASES literal (ralph's form)
        'DATABASES = {\n    "default": {\n        "ENGINE": "x",\n        "ATOMIC_REQUESTS": True,\n    },\n}\n',
        # dict(...) for the alias
        'DATABASES = {"default": dict(ENGINE="x", ATOMIC_REQUESTS=True)}\n',
        # set on the alias afterwards, the alias built by a helper
        'import env\nDATABASES = {"default": env.db()}\nDATABASES["default"]["ATOMIC_REQUESTS"] = True\n',
        # update() with keywords, and with a dict
        'import env\nDATABASES = {"default": env.db()}\nDATABASES["default"].update(ATOMIC_REQUESTS=True)\n',
        'import env\nDATABASES = {"default": env.db()}\nDATABASES["default"].update({"ATOMIC_REQUESTS": True})\n',
        # the alias assigned whole, under an if
        'import os\nDATABASES = {}\nif os.environ.get("PG"):\n    DATABASES["default"] = {"ATOMIC_REQUESTS": True}\n',
    ],
)
def test_the_forms_of_atomic_requests_in_databases_cover_the_views(rule: Rule, text: str):
    found = reported(analyze_source(_app({"hotel/settings.py": text}), rule))
    assert ("hotel/views.py", "book") not in found
    # non_atomic_requests takes the view back out, and its explanation says so
    outside = found[("hotel/views.py", "book_outside")]
    assert "opts out of ATOMIC_REQUESTS" in outside.explanation


def test_a_later_module_that_replaces_databases_drops_the_option(rule: Rule):
    files = _app({
        "manage.py": 'import os\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "hotel.settings.prod")\n',
        "hotel/settings/__init__.py": "",
        "hotel/settings/base.py": 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n',
        "hotel/settings/prod.py": 'from .base import *\nDATABASES = {"default": {"ENGINE": "pg"}}\n',
    })  # fmt: skip
    assert ("hotel/views.py", "book") in reported(analyze_source(files, rule))
    # settings split over modules: the chosen module star-imports the one that sets it
    files["hotel/settings/prod.py"] = "from .base import *\nDEBUG = False\n"
    assert ("hotel/views.py", "book") not in reported(analyze_source(files, rule))
    # a package's __init__ star-importing its sibling (ralph: ralph.settings -> .base)
    files["manage.py"] = 'import os\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "hotel.settings")\n'
    files["hotel/settings/__init__.py"] = "from .base import *\n"
    assert _settings(files) == RequestSettings(atomic=True, source="hotel/settings/base.py")


def test_a_top_level_atomic_requests_is_ignored_and_the_explanation_says_so(rule: Rule):
    files = _app({"hotel/settings.py": 'ATOMIC_REQUESTS = True\nDATABASES = {"default": {"ENGINE": "pg"}}\n'})
    found = reported(analyze_source(files, rule))[("hotel/views.py", "book")]
    assert "settings read: hotel/settings.py" in found.explanation
    assert "top-level ATOMIC_REQUESTS = True in hotel/settings.py is no DATABASES option, and Django ignores it" in found.explanation


def test_another_alias_does_not_cover_the_default_databases_writes():
    text = 'DATABASES = {"default": {"ENGINE": "pg"}, "replica": {"ATOMIC_REQUESTS": True}}\n'
    assert not _settings({"hotel/settings.py": text}).atomic


def test_demo_settings_never_count(rule: Rule):
    files = _app({"examples/demo/settings.py": 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n'})
    found = reported(analyze_source(files, rule))[("hotel/views.py", "book")]
    assert "Assumes requests are not atomic (no settings module with DATABASES found)." in found.explanation


def test_a_non_view_entry_point_carries_no_request_note(rule: Rule):
    files = {
        "hotel/tasks.py": """
            from celery import shared_task
            from .models import Room, Booking

            @shared_task
            def nightly():
                room = Room.objects.create(name="a")
                Booking.objects.create(room=room)
            """,
        "hotel/models.py": MODELS,
        "hotel/settings.py": 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n',
    }
    found = reported(analyze_source(files, rule))[("hotel/tasks.py", "nightly")]
    assert "ATOMIC_REQUESTS" not in found.explanation and "atomic (" not in found.explanation


# ----------------------------------------------------------------- pyhermes subscribers

SUBSCRIBERS = """
    import pyhermes
    from .models import Room, Booking

    @pyhermes.subscriber(topic="rooms.create")
    def on_room(data):
        room = Room.objects.create(name=data["name"])
        Booking.objects.create(room=room)
    """


def test_pyhermes_subscribers_run_in_the_request_transaction(rule: Rule):
    files = {"hotel/subscribers.py": SUBSCRIBERS, "hotel/models.py": MODELS}
    found = reported(analyze_source(files, rule))[("hotel/subscribers.py", "on_room")]
    assert "Assumes requests are not atomic" in found.explanation
    files["hotel/settings.py"] = 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n'
    assert ("hotel/subscribers.py", "on_room") not in reported(analyze_source(files, rule))


def test_the_pyhermes_row_names_its_proof():
    rows = [fact for fact in builtin_facts().facts if fact.kind is Kind.IN_REQUEST]
    assert [row.call for row in rows] == ["pyhermes.subscriber"]
    assert rows[0].proof is not None and rows[0].proof.file == "pyhermes/apps/django/views.py"


# ----------------------------------------------------------------- a host's declared setting


def test_a_host_setting_row_covers_a_plugins_views(rule: Rule, tmp_path: Path):
    files = _app({})
    found = reported(analyze_source(files, rule))[("hotel/views.py", "book")]
    assert "Assumes requests are not atomic (no settings module with DATABASES found)." in found.explanation
    models = tmp_path / "host.yaml"
    models.write_text("framework: lms\nfacts:\n  - setting: ATOMIC_REQUESTS\n    kind: host-setting\n", encoding="utf-8")
    declared = reported(analyze_source(files, rule, TxOptions(min_severity="low", models=(models,))))
    assert ("hotel/views.py", "book") not in declared
    assert f"ATOMIC_REQUESTS declared for the host in {models}" in declared[("hotel/views.py", "book_outside")].explanation


def test_a_host_setting_row_names_a_setting_the_pass_reads():
    with pytest.raises(ModelsFileError, match="'setting'"):
        parse_facts("framework: lms\nfacts:\n  - setting: DEBUG\n    kind: host-setting\n", "host.yaml", builtin=False)
    with pytest.raises(ModelsFileError, match="'call'"):
        parse_facts("framework: lms\nfacts:\n  - call: x\n    kind: host-setting\n", "host.yaml", builtin=False)


def test_a_base_class_dispatch_that_opts_out_takes_its_subclasses_views_out(rule: Rule):
    # View.as_view() copies dispatch's decorator attributes (django/views/generic/base.py)
    files = {
        "hotel/views.py": """
            from django.db import transaction
            from django.utils.decorators import method_decorator
            from django.views import View
            from .models import Room, Booking

            class NonAtomicView(View):
                @method_decorator(transaction.non_atomic_requests)
                def dispatch(self, request, *args, **kwargs):
                    return super().dispatch(request, *args, **kwargs)

            class EnrolView(NonAtomicView):
                def post(self, request):
                    room = Room.objects.create(name="a")
                    Booking.objects.create(room=room)

            class PlainView(View):
                def post(self, request):
                    room = Room.objects.create(name="b")
                    Booking.objects.create(room=room)
            """,
        "hotel/models.py": MODELS,
        "hotel/settings.py": 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n',
    }
    found = reported(analyze_source(files, rule))
    assert ("hotel/views.py", "PlainView.post") not in found
    assert "opts out of ATOMIC_REQUESTS" in found[("hotel/views.py", "EnrolView.post")].explanation


@pytest.mark.parametrize("path", ["hotel/settings/test.py", "hotel/test_settings.py", "hotel/settings_tests.py"])
def test_settings_for_tests_are_not_the_ones_the_project_runs_with(path: str):
    found = _settings({path: 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n'})
    assert found == RequestSettings()
    assert found.note() == "Assumes requests are not atomic (no settings module with DATABASES found)."


def test_a_launcher_naming_test_settings_is_not_read():
    # a plugin's manage.py that runs its test suite: no settings the project runs with
    files = {
        "manage.py": 'import os\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "hotel.settings.test")\n',
        "hotel/settings/test.py": 'DATABASES = {"default": {"ENGINE": "sqlite"}}\n',
    }
    assert _settings(files) == RequestSettings()


def test_class_based_settings_are_read_and_their_top_level_option_is_ignored():
    files = {
        "manage.py": 'import os\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "hotel.settings.docker")\n',
        "hotel/settings/base.py": "class BaseSettings:\n    ATOMIC_REQUESTS = True\n",
        "hotel/settings/docker.py": """from .base import BaseSettings


class DockerSettings(BaseSettings):
    @property
    def DATABASES(self):
        return {"default": {"ENGINE": "pg"}}


DockerSettings.load_settings(__name__)
""",
    }
    found = _settings(files)
    assert found == RequestSettings(source="hotel/settings/docker.py", ignored="hotel/settings/base.py")
    files["hotel/settings/docker.py"] = files["hotel/settings/docker.py"].replace('"pg"}', '"pg", "ATOMIC_REQUESTS": True}')
    assert _settings(files) == RequestSettings(atomic=True, source="hotel/settings/docker.py")


def test_explain_says_where_a_covered_views_transaction_comes_from(rule: Rule):
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in _app({"hotel/settings.py": 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n'}).items()}
    indexes = {path: index_source(path, text, "python") for path, text in texts.items()}
    found = explain(AnalysisInputs(indexes, texts, rule), "hotel/views.py", "book")
    boundaries = [text for path in found.entry_paths for text in path.boundaries]
    assert boundaries == ["Django runs the view book in a transaction (ATOMIC_REQUESTS of DATABASES['default'] in hotel/settings.py)"]


def test_a_flask_method_view_is_named_as_flask_and_no_django_setting_covers_it(rule: Rule):
    # flask/views.py MethodView dispatches to the method named by the request's verb; Django's
    # ATOMIC_REQUESTS (a project that ships both) wraps Django views only
    files = {
        "portal/views.py": """
            from flask.views import MethodView
            from .model import Session, Config

            class ResetConfigView(MethodView):
                def post(self):
                    Session.add(Config(key="a"))
                    Session.commit()
                    Session.add(Config(key="b"))
                    Session.commit()
            """,
        "portal/model.py": "class Config:\n    pass\n\n\nclass Session:\n    pass\n",
        "portal/settings.py": 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n',
    }
    finding = reported(analyze_source(files, rule))[("portal/views.py", "ResetConfigView.post")]
    assert finding.chain[0].note.startswith("entry point: flask class-based view")
    assert "ATOMIC_REQUESTS" not in finding.explanation
