"""Registry rows (issue 25, "lookup/registry rows are not the business writes a title
counts"): an idempotent get-or-create whose lookup keys are all constants finds or makes
the same row on every call and holds no request data (``update_or_create`` is none: it
changes an existing row on every call). It is set aside: not counted in the
title, never a multi-write sequence of its own, named in the explanation. A get-or-create
keyed by request data stays a business write."""

from __future__ import annotations

import textwrap

import pytest

from auditor.analysis.transactions import TxOptions
from auditor.analysis.transactions.explain import REGISTRY_ROW, AnalysisInputs, explain
from auditor.index.extract import index_source
from auditor.languages import language_for_path
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


DJANGO_MODELS = """
    from django.db import models

    class Kind(models.Model):
        SEARCHES = "searches"
        code = models.CharField(max_length=20)

    class Metric(models.Model):
        kind = models.ForeignKey(Kind, on_delete=models.CASCADE)
        value = models.IntegerField()

    class Shelf(models.Model):
        name = models.CharField(max_length=20)

    class Book(models.Model):
        title = models.CharField(max_length=20)
        shelf = models.ForeignKey(Shelf, on_delete=models.CASCADE)
    """


def _django(views: str, rule: Rule) -> dict:
    files = {"library/models.py": DJANGO_MODELS, "library/views.py": views}
    return reported(analyze_source(files, rule))


def test_a_constant_get_or_create_before_one_write_is_no_sequence(rule: Rule):
    views = """
        from .models import Kind, Metric

        VISITS = "visits"

        def record(request):
            kind = Kind.objects.get_or_create(code=VISITS)[0]
            Metric.objects.create(kind=kind, value=request.POST["value"])
            return None
        """
    finding = _django(views, rule)[("library/views.py", "record")]
    assert finding.severity == "low"
    assert finding.title == "Database write outside a transaction in record"
    assert "registry row" in finding.explanation
    assert "Kind.objects.get_or_create" in finding.explanation


def test_two_constant_registry_rows_alone_are_no_finding(rule: Rule):
    views = """
        from .models import Kind

        def kinds(request):
            clicks, _ = Kind.objects.get_or_create(code="clicks")
            searches, _ = Kind.objects.get_or_create(code=Kind.SEARCHES, defaults={"code": Kind.SEARCHES})
            return [clicks, searches]
        """
    assert ("library/views.py", "kinds") not in _django(views, rule)


def test_a_constant_update_or_create_changes_a_row_and_stays_a_business_write(rule: Rule):
    """``update_or_create`` with constant ``defaults`` writes them into the existing row on
    every call: a failure after it leaves that change behind, so it is no registry row."""
    views = """
        from .models import Book, Shelf

        def close_shelf(request):
            Shelf.objects.update_or_create(name="main", defaults={"name": "closed"})
            Book.objects.filter(title="draft").update(title="archived")
            return None
        """
    finding = _django(views, rule)[("library/views.py", "close_shelf")]
    assert finding.severity != "low"
    assert finding.title == "2 database writes outside a transaction in close_shelf"
    assert "registry row" not in finding.explanation


def test_registry_rows_are_not_counted_in_the_title_of_a_real_sequence(rule: Rule):
    views = """
        from .models import Book, Kind, Metric, Shelf

        def shelve(request):
            kind = Kind.objects.get_or_create(code="shelved")[0]
            shelf = Shelf.objects.create(name=request.POST["shelf"])
            Book.objects.create(title=request.POST["title"], shelf=shelf)
            Metric.objects.create(kind=kind, value=1)
            return None
        """
    finding = _django(views, rule)[("library/views.py", "shelve")]
    assert finding.severity == "critical"
    assert finding.title == "3 database writes outside a transaction in shelve"
    assert "Set aside, not counted: registry rows" in finding.explanation
    assert "library/views.py:4: Kind.objects.get_or_create" in finding.explanation


@pytest.mark.parametrize(
    "lookup",
    [
        'Shelf.objects.get_or_create(name=request.POST["shelf"])',  # a name from the form
        "Shelf.objects.get_or_create(name=name)",  # a variable
        'Shelf.objects.get_or_create(name="main", defaults={"owner": request.user})',  # request data in the row
        'Shelf.objects.update_or_create(name="main", defaults={"title": title})',
        "Shelf.objects.get_or_create(name=f\"{request.user}-shelf\")",
        'request.user.shelf_set.get_or_create(name="main")',  # a row of its owner's
    ],
)
def test_a_get_or_create_keyed_or_filled_by_request_data_stays_a_business_write(lookup: str, rule: Rule):
    views = f"""
        from .models import Book, Shelf

        def add(request, name="x", title="y"):
            shelf = {lookup}
            shelf = shelf[0]
            Book.objects.create(title=request.POST["title"], shelf=shelf)
            return None
        """
    finding = _django(views, rule)[("library/views.py", "add")]
    assert finding.title == "2 database writes outside a transaction in add"
    assert "registry row" not in finding.explanation


SQLALCHEMY_MODELS = """
    from .db import db

    class Base:
        @classmethod
        def get_by(cls, **kw):
            return db.session.query(cls).filter_by(**kw).first()

        @classmethod
        def create(cls, **kw):
            instance = cls(**kw)
            db.session.add(instance)
            db.session.commit()
            return instance

    class Category(Base):
        pass

    class Item(Base):
        pass
    """

SQLALCHEMY_SERVICES = """
    from .models import Category, Item

    def category_named(name):
        category = Category.get_by(name=name)
        if category is None:
            category = Category.create(name=name)
        return category

    def category_relayed(name):
        found = category_named(name)
        if found is None:
            found = category_named(name)
        return found

    def default_category():
        return category_relayed("Default")

    def is_default(item):
        return item.category_id == default_category().id

    def add_item(title):
        category = default_category()
        return Item.create(title=title, category_id=category.id)

    def add_item_in(title, category_name):
        category = category_named(category_name)
        return Item.create(title=title, category_id=category.id)
    """


def _sqlalchemy(routes: str, rule: Rule) -> dict:
    files = {
        "app/db.py": "db = None\n",
        "app/models.py": SQLALCHEMY_MODELS,
        "app/services.py": SQLALCHEMY_SERVICES,
        "app/routes.py": routes,
    }
    return reported(analyze_source(files, rule))


ROUTES_HEAD = """
    from flask import Blueprint, request

    from .models import Item
    from .services import add_item, add_item_in, default_category, is_default

    bp = Blueprint("items", __name__)
    """


def test_a_helper_that_gets_or_creates_a_constant_row_is_set_aside(rule: Rule):
    routes = ROUTES_HEAD + """
        @bp.route("/items", methods=["POST"])
        def post_item():
            return add_item(request.json["title"]).id

        @bp.route("/check", methods=["GET"])
        def check():
            first = default_category()
            second = is_default(Item.get_by(id=request.args["id"]))
            return [first, second]
        """
    found = _sqlalchemy(routes, rule)
    assert ("app/routes.py", "check") not in found  # two registry lookups: reads to the request
    assert ("app/services.py", "category_relayed") not in found
    assert ("app/services.py", "category_named") not in found
    heavy = [finding for finding in found.values() if finding.severity in ("critical", "high")]
    assert heavy == []  # one business write (Item.create) beside a registry row
    add = found.get(("app/services.py", "add_item")) or found.get(("app/routes.py", "post_item"))
    assert add is None or "registry row" in add.explanation


def test_a_helper_called_with_request_data_stays_a_business_write(rule: Rule):
    routes = ROUTES_HEAD + """
        @bp.route("/items-in", methods=["POST"])
        def post_item_in():
            return add_item_in(request.json["title"], request.json["category"]).id
        """
    found = _sqlalchemy(routes, rule)
    finding = found[("app/services.py", "add_item_in")]
    assert finding.severity in ("critical", "high")
    assert "registry row" not in finding.explanation


def test_a_helper_whose_create_holds_data_beyond_its_constant_key_is_no_registry(rule: Rule):
    files = {
        "app/db.py": "db = None\n",
        "app/models.py": SQLALCHEMY_MODELS,
        "app/services.py": """
            from .models import Category, Item

            def category_for(name, owner):
                category = Category.get_by(name=name)
                if not category:
                    category = Category.create(name=name, owner=owner)
                return category

            def add_owned(title, owner):
                category = category_for("Default", owner)
                return Item.create(title=title, category_id=category.id)
            """,
        "app/routes.py": """
            from flask import Blueprint, request

            from .services import add_owned

            bp = Blueprint("items", __name__)

            @bp.route("/owned", methods=["POST"])
            def post_owned():
                return add_owned(request.json["title"], request.json["owner"]).id
            """,
    }
    found = reported(analyze_source(files, rule))
    finding = found[("app/services.py", "add_owned")]
    assert finding.severity in ("critical", "high")
    assert "registry row" not in finding.explanation


def test_a_write_on_the_line_of_a_registry_call_stays_a_write(rule: Rule):
    views = """
        from .models import Book, Shelf

        def main_shelf():
            return Shelf.objects.get_or_create(name="main")[0]

        def add_two(request):
            Book.objects.create(title=request.POST["first"], shelf=main_shelf())
            Book.objects.create(title=request.POST["second"], shelf=main_shelf())
            return None
        """
    found = _django(views, rule)
    finding = found[("library/views.py", "add_two")]
    assert finding.title == "2 database writes outside a transaction in add_two"
    assert "library/views.py:7: calls main_shelf" in finding.explanation
    assert ("library/views.py", "main_shelf") not in found


def test_a_singleton_created_when_its_table_is_empty_is_a_registry_row(rule: Rule):
    files = {
        "app/db.py": "db = None\n",
        "app/models.py": SQLALCHEMY_MODELS + "\nclass Site(Base):\n    pass\n",
        "app/services.py": """
            from .models import Item, Site

            def current_site():
                site = Site.query.first()
                if site is None:
                    site = Site.create(name="Main")
                return site

            def add_to_site(title):
                site = current_site()
                return Item.create(title=title, site_id=site.id)

            def add_to_filtered(title, name):
                site = Site.query.filter(Site.name == name).first()
                if site is None:
                    site = Site.create(name="Main")
                return Item.create(title=title, site_id=site.id)
            """,
        "app/routes.py": """
            from flask import Blueprint, request

            from .services import add_to_filtered, add_to_site

            bp = Blueprint("items", __name__)

            @bp.route("/site-items", methods=["POST"])
            def post_site_item():
                return add_to_site(request.json["title"]).id

            @bp.route("/filtered-items", methods=["POST"])
            def post_filtered_item():
                return add_to_filtered(request.json["title"], request.json["name"]).id
            """,
    }
    found = reported(analyze_source(files, rule))
    heavy = {key for key, finding in found.items() if finding.severity in ("critical", "high")}
    assert ("app/services.py", "add_to_site") not in heavy
    assert ("app/routes.py", "post_site_item") not in heavy
    assert found[("app/services.py", "add_to_filtered")].severity in ("critical", "high")  # which row: not known


def test_explain_says_a_registry_helper_is_set_aside_and_where(rule: Rule):
    views = """
        from .models import Book, Shelf

        def main_shelf():
            return Shelf.objects.get_or_create(name="main")[0]

        def add(request):
            Book.objects.create(title=request.POST["title"], shelf=main_shelf())
            return None
        """
    files = {"library/models.py": DJANGO_MODELS, "library/views.py": views}
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in files.items()}
    indexes = {path: index_source(path, text, language_for_path(path) or "") for path, text in texts.items()}
    explanation = explain(AnalysisInputs(indexes, texts, rule), "library/views.py", "main_shelf", TxOptions(min_severity="low"))
    assert explanation.outcome == REGISTRY_ROW
    assert "library/views.py:7: the callee's only effect is a registry row" in explanation.describe()
