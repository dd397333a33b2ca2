"""Call graph resolution and queries, and entry-point detection, on small in-memory repos."""

from __future__ import annotations

import gc
import textwrap
import time

import pytest

from auditor.analysis.entrypoints import find_entry_points, split_arguments
from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.callgraph.names import MAIN_FUNCTION, python_module_name
from auditor.index.extract import index_source
from auditor.index.model import FileIndex
from auditor.languages import language_for_path
from auditor.rules.loader import load_rule


def build(files: dict[str, str]) -> tuple[dict[str, FileIndex], dict[str, str], CallGraph]:
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in files.items()}
    indexes = {}
    for path, text in texts.items():
        language = language_for_path(path)
        assert language is not None, path
        indexes[path] = index_source(path, text, language)
    return indexes, texts, CallGraph.build(indexes)


def edge_pairs(graph: CallGraph) -> set[tuple[str, str, bool]]:
    return {(f"{e.caller.path}:{e.caller.qualname}", f"{e.callee.path}:{e.callee.qualname}", e.approximate) for e in graph.edges}


PY_APP = {
    "app/__init__.py": "",
    "app/services/__init__.py": "from .billing import charge as charge_card\n",
    "app/services/billing.py": """
        def charge(order):
            return _gateway_call(order)

        def _gateway_call(order):
            return order
        """,
    "app/services/orders.py": """
        import app.services.billing
        import app.services.billing as bill
        from app.services import billing
        from . import billing as rel_billing
        from ..util import tools

        def place(order):
            app.services.billing.charge(order)
            bill.charge(order)
            billing.charge(order)
            rel_billing.charge(order)
            tools.slugify(order)
            helper(order)

        def helper(order):
            def inner():
                return order
            return inner()
        """,
    "app/util/__init__.py": "",
    "app/util/tools.py": """
        def slugify(value):
            return str(value)
        """,
    "app/views.py": """
        from app.services import charge_card
        from app.services.orders import place as place_order
        from django.shortcuts import render

        def checkout(request):
            place_order(request.order)
            charge_card(request.order)
            render(request, "done.html")
            return audit_trail(request)
        """,
    "app/audit.py": """
        def audit_trail(request):
            return request
        """,
}


def test_python_module_names_follow_paths():
    assert python_module_name("app/services/orders.py") == "app.services.orders"
    assert python_module_name("app/services/__init__.py") == "app.services"
    assert python_module_name("stubs/mod.pyi") == "stubs.mod"


def test_imports_aliases_relative_and_package_reexports_resolve_exactly():
    _, _, graph = build(PY_APP)
    pairs = edge_pairs(graph)
    charge = "app/services/billing.py:charge"
    place = "app/services/orders.py:place"
    # import x.y.z / import x.y.z as alias / from package import module / from . import module as alias
    assert (place, charge, False) in pairs
    callers = [e for e in graph.callers(FunctionRef("app/services/billing.py", "charge")) if e.caller.qualname == "place"]
    assert sorted(e.line for e in callers) == [8, 9, 10, 11]
    # relative parent import of a sibling package, same-module call, nested function
    assert (place, "app/util/tools.py:slugify", False) in pairs
    assert (place, "app/services/orders.py:helper", False) in pairs
    assert ("app/services/orders.py:helper", "app/services/orders.py:helper.inner", False) in pairs
    # from-import alias and a re-export through the package __init__
    assert ("app/views.py:checkout", place, False) in pairs
    assert ("app/views.py:checkout", charge, False) in pairs


def test_external_imports_are_not_resolved_and_unique_names_are_approximate():
    _, _, graph = build(PY_APP)
    pairs = edge_pairs(graph)
    assert not any(callee.endswith(":render") for _, callee, _ in pairs)
    # audit_trail is never imported: found by its unique name and flagged as such
    assert ("app/views.py:checkout", "app/audit.py:audit_trail", True) in pairs
    assert [approximate for caller, _, approximate in pairs if caller != "app/views.py:checkout"] == [False] * (len(pairs) - 3)


def test_self_cls_super_and_inherited_methods():
    _, _, graph = build(
        {
            "shop/base.py": """
                class Repository:
                    def persist(self, item):
                        return item

                    @classmethod
                    def build(cls):
                        return cls.default_options()

                    @classmethod
                    def default_options(cls):
                        return {}
                """,
            "shop/repos.py": """
                from shop.base import Repository as BaseRepository

                class OrderRepository(BaseRepository):
                    def persist(self, item):
                        self.validate(item)
                        return super().persist(item)

                    def validate(self, item):
                        return item

                class ArchiveRepository(OrderRepository):
                    def archive(self, item):
                        self.persist(item)
                        ArchiveRepository.build()
                """,
        }
    )
    pairs = edge_pairs(graph)
    assert ("shop/repos.py:OrderRepository.persist", "shop/repos.py:OrderRepository.validate", False) in pairs
    assert ("shop/repos.py:OrderRepository.persist", "shop/base.py:Repository.persist", False) in pairs
    assert ("shop/repos.py:ArchiveRepository.archive", "shop/repos.py:OrderRepository.persist", False) in pairs
    assert ("shop/repos.py:ArchiveRepository.archive", "shop/base.py:Repository.build", False) in pairs
    assert ("shop/base.py:Repository.build", "shop/base.py:Repository.default_options", False) in pairs
    assert graph.base_classes(FunctionRef("shop/repos.py", "ArchiveRepository")) == (
        FunctionRef("shop/repos.py", "OrderRepository"),
    )


def test_a_class_declared_in_a_type_stub_is_no_repository_base():
    # ``models.Model`` resolves through the stub package's ``*`` re-export to the stub's
    # class; its bodiless methods never run, so neither ``self.save()`` nor a manager's
    # ``create()`` (receivers) may reach them.
    _, _, graph = build(
        {
            "stubs/django/db/models/__init__.pyi": "from django.db.models.base import *\n",
            "stubs/django/db/models/base.pyi": "class Model:\n    def save(self): ...\n",
            "shop/models.py": """
                from django.db import models

                class Line(models.Model):
                    def touch(self):
                        self.save()
                """,
        }
    )
    assert graph.resolve("shop/models.py", "models.Model") == FunctionRef("stubs/django/db/models/base.pyi", "Model")
    line = FunctionRef("shop/models.py", "Line")
    assert graph.base_classes(line) == ()
    assert graph.class_member(line, "save") is None
    assert not graph.callees(FunctionRef("shop/models.py", "Line.touch"))


def test_ambiguous_and_common_names_get_no_edge():
    _, _, graph = build(
        {
            "a.py": "def refresh_cache(x):\n    return x\n\ndef get(x):\n    return x\n",
            "b.py": "def refresh_cache(x):\n    return x\n",
            "c.py": "def run(client):\n    client.refresh_cache(1)\n    client.session.get(2)\n",
        }
    )
    assert graph.callees(FunctionRef("c.py", "run")) == ()


def test_a_method_call_on_an_object_is_never_resolved_by_name_to_a_module_function():
    _, _, graph = build(
        {
            "accounts/views.py": "def set_password(request):\n    request.user.save()\n",
            "accounts/models.py": "class Profile:\n    def send_report(self):\n        return 1\n",
            "accounts/admin.py": "def reset(user, profile):\n    user.set_password('x')\n    profile.send_report()\n",
        }
    )
    callees = {edge.callee.qualname for edge in graph.callees(FunctionRef("accounts/admin.py", "reset"))}
    assert callees == {"Profile.send_report"}  # Django's User.set_password is not the view


def test_main_block_and_module_level_calls_get_pseudo_functions():
    _, _, graph = build(
        {
            "tool.py": """
                from helpers import prepare

                CONFIG = prepare()

                def main():
                    return CONFIG

                if __name__ == "__main__":
                    main()
                """,
            "helpers.py": "def prepare():\n    return {}\n",
        }
    )
    assert graph.callees(FunctionRef("tool.py", MAIN_FUNCTION))[0].callee == FunctionRef("tool.py", "main")
    assert graph.callees(FunctionRef("tool.py", "<module>"))[0].callee == FunctionRef("helpers.py", "prepare")


def test_paths_components_neighbours_and_plausible_edges():
    _, _, graph = build(
        {
            "a.py": "from b import step_one, step_two\n\ndef start():\n    step_one()\n    step_two()\n",
            "b.py": "from c import finish\n\ndef step_one():\n    step_two()\n\ndef step_two():\n    finish()\n",
            "c.py": "def finish():\n    return 1\n",
            "lonely.py": "def alone():\n    return 2\n",
        }
    )
    start, finish = FunctionRef("a.py", "start"), FunctionRef("c.py", "finish")
    paths = graph.paths(start, finish)
    assert [[edge.callee.qualname for edge in path] for path in paths] == [
        ["step_two", "finish"],
        ["step_one", "step_two", "finish"],
    ]
    assert all(isinstance(edge, Edge) for path in paths for edge in path)
    assert graph.paths(start, finish, max_depth=1) == ()
    assert graph.paths(finish, start) == ()
    assert graph.components() == (("a.py", "b.py", "c.py"), ("lonely.py",))
    assert graph.file_neighbors("b.py") == ("a.py", "c.py")
    assert graph.file_neighbors("lonely.py") == ()
    assert graph.plausible_edge("a.py", "start", "b.py", "step_one")
    assert graph.plausible_edge("b.py", "step_two", "c.py", "finish")
    assert not graph.plausible_edge("a.py", "start", "c.py", "finish")
    assert not graph.plausible_edge("a.py", "start", "b.py", "no_such_function")
    assert graph.resolve("a.py", "step_one") == FunctionRef("b.py", "step_one")
    assert graph.resolve("a.py", "does_not_exist") is None


def test_plausible_edge_accepts_bare_method_names():
    _, _, graph = build(
        {
            "svc.py": "class Billing:\n    def charge(self):\n        self.record()\n\n    def record(self):\n        return 1\n",
        }
    )
    assert graph.plausible_edge("svc.py", "charge", "svc.py", "record")
    assert graph.plausible_edge("svc.py", "Billing.charge", "svc.py", "Billing.record")
    assert not graph.plausible_edge("svc.py", "record", "svc.py", "charge")


def test_suffix_module_match_when_scan_root_is_above_import_root():
    _, _, graph = build(
        {
            "src/shop/orders.py": "from shop.payments import capture\n\ndef pay(order):\n    capture(order)\n",
            "src/shop/payments.py": "def capture(order):\n    return order\n",
        }
    )
    assert graph.callees(FunctionRef("src/shop/orders.py", "pay"))[0] == Edge(
        FunctionRef("src/shop/orders.py", "pay"), FunctionRef("src/shop/payments.py", "capture"), 4, False
    )


def test_javascript_go_and_java_resolution():
    _, _, graph = build(
        {
            "web/routes.js": """
                import { createOrder } from './orders';
                import * as audit from './audit.js';
                function handle(req, res) {
                  createOrder(req.body);
                  audit.record(req.body);
                }
                """,
            "web/orders.js": "export function createOrder(body) { return body; }\n",
            "web/audit.js": "export function record(body) { return body; }\n",
            "go/api/handlers.go": """
                package api

                import "example.com/shop/go/store"

                func Save(id int) error {
                    validate(id)
                    return store.Insert(id)
                }
                """,
            "go/api/validate.go": "package api\n\nfunc validate(id int) bool {\n\treturn id > 0\n}\n",
            "go/store/store.go": "package store\n\nfunc Insert(id int) error {\n\treturn nil\n}\n",
            "java/OrderService.java": """
                public class OrderService {
                    public void place(Order order) {
                        this.persist(order);
                        audit(order);
                    }
                    void persist(Order order) {}
                    void audit(Order order) {}
                }
                """,
        }
    )
    pairs = edge_pairs(graph)
    assert ("web/routes.js:handle", "web/orders.js:createOrder", False) in pairs
    assert ("web/routes.js:handle", "web/audit.js:record", False) in pairs
    assert ("go/api/handlers.go:Save", "go/api/validate.go:validate", False) in pairs
    assert ("go/api/handlers.go:Save", "go/store/store.go:Insert", False) in pairs
    assert ("java/OrderService.java:OrderService.place", "java/OrderService.java:OrderService.persist", False) in pairs
    assert ("java/OrderService.java:OrderService.place", "java/OrderService.java:OrderService.audit", False) in pairs


MIXED_LANGUAGES = {
    "app/views.py": """
        from .models import Order

        def archive(request):
            others = Order.objects.filter(name=request.POST["name"])
            others.exclude(pk=1)
            request.session_store.purge_rows()
            return Selection()
        """,
    "app/models.py": "class Order:\n    def archive_all(self):\n        return 1\n",
    "frontend/src/selection.ts": """
        export class Selection {
          private ids = new Set<number>();
          exclude(id: number): void {
            this.ids.delete(id);
          }
          purge_rows(): void {
            this.ids.clear();
          }
          refresh(order: any): void {
            order.archive_all();
            this.chart.redrawChart();
          }
        }
        """,
    "frontend/src/chart.js": "export class Chart {\n  redrawChart() {\n    return 1;\n  }\n}\n",
    "go/api/handlers.go": "package api\n\nfunc Save(id int) error {\n\tnormalise(id)\n\treturn nil\n}\n",
    "go/api/normalise.py": "def normalise(value):\n    return value\n",
    "java/OrderService.java": """
        import com.shop.Money;

        public class OrderService {
            public void place(Order order) {
                Money.of(order);
            }
        }
        """,
    "java/money.py": "class Money:\n    def of(self, order):\n        return order\n",
}


def test_calls_resolve_only_within_their_language_family():
    indexes, _, graph = build(MIXED_LANGUAGES)
    family = {"python": "python", "typescript": "javascript", "javascript": "javascript", "go": "go", "java": "java"}
    language = {path: family[index.language] for path, index in indexes.items()}
    crossing = [edge for edge in graph.edges if language[edge.caller.path] != language[edge.callee.path]]
    assert crossing == []
    assert graph.callees(FunctionRef("app/views.py", "archive")) == ()
    assert graph.callees(FunctionRef("go/api/handlers.go", "Save")) == ()
    assert graph.callees(FunctionRef("java/OrderService.java", "OrderService.place")) == ()
    assert graph.resolve("app/views.py", "Selection") is None
    # TypeScript and JavaScript are one program: a unique name still links them.
    pairs = edge_pairs(graph)
    assert ("frontend/src/selection.ts:Selection.refresh", "frontend/src/chart.js:Chart.redrawChart", True) in pairs
    assert graph.resolve("frontend/src/selection.ts", "Chart") == FunctionRef("frontend/src/chart.js", "Chart")


def test_build_is_deterministic():
    indexes, _, first = build(PY_APP)
    second = CallGraph.build(dict(reversed(list(indexes.items()))))
    assert first.edges == second.edges
    assert first.components() == second.components()


def test_edges_are_sorted_distinct_and_indexed_both_ways():
    _, _, graph = build(
        {
            "a.py": "from b import g, h\n\ndef f():\n    h(); g(); g()\n    g()\n",
            "b.py": "def g():\n    pass\n\ndef h():\n    pass\n",
        }
    )
    caller = FunctionRef("a.py", "f")

    assert list(graph.edges) == sorted(graph.edges)
    assert [(edge.callee.qualname, edge.line) for edge in graph.callees(caller)] == [("g", 4), ("g", 5), ("h", 4)]
    assert [(edge.caller, edge.line) for edge in graph.callers(FunctionRef("b.py", "g"))] == [(caller, 4), (caller, 5)]
    assert graph.file_neighbors("b.py") == ("a.py",)
    assert gc.isenabled()  # paused only while building


def test_graph_build_is_fast_on_a_thousand_files():
    files: dict[str, FileIndex] = {}
    for number in range(1000):
        text = (
            f"from pkg.mod{(number + 1) % 1000} import work_{(number + 1) % 1000}\n"
            f"from django.db import transaction\n\n"
            f"class Service{number}:\n"
            f"    def run(self, item):\n"
            f"        self.check(item)\n"
            f"        return work_{(number + 1) % 1000}(item)\n\n"
            f"    def check(self, item):\n"
            f"        item.save()\n"
            f"        return transaction.atomic()\n\n"
            f"def work_{number}(item):\n"
            f"    return Service{number}().run(item)\n"
        )
        path = f"pkg/mod{number}.py"
        files[path] = index_source(path, text, "python")
    started = time.perf_counter()
    graph = CallGraph.build(files)
    elapsed = time.perf_counter() - started
    assert len(graph.edges) == 4000
    assert len(graph.components()) == 1
    assert elapsed < 5.0


# ------------------------------------------------------------------ entry points


def entry_points(files: dict[str, str]) -> dict[str, tuple[str, str]]:
    indexes, texts, graph = build(files)
    found = find_entry_points(indexes, graph, load_rule("tx-outside-transaction"), texts)
    assert list(found) == sorted(found)
    return {f"{entry.ref.path}:{entry.ref.qualname}": (entry.kind, entry.detail) for entry in found}


def test_split_arguments_respects_brackets_and_strings():
    assert split_arguments('"a, b", views.x, name=f(1, 2)') == ['"a, b"', "views.x", "name=f(1, 2)"]
    assert split_arguments("") == []


def test_django_entry_points():
    found = entry_points(
        {
            "shop/views.py": """
                from rest_framework import viewsets
                from rest_framework.decorators import action, api_view
                from django.views.generic import View

                def order_list(request):
                    return _render(request)

                def _render(request):
                    return request

                def format_price(value):
                    return value

                class BaseShopView(View):
                    pass

                class CartView(BaseShopView):
                    def post(self, request):
                        return request

                    def helper(self):
                        return 1

                class ReviewViewSet(viewsets.ModelViewSet):
                    def perform_create(self, serializer):
                        serializer.save()

                    @action(detail=True, methods=["post"])
                    def approve(self, request, pk=None):
                        return pk

                @api_view(["POST"])
                def ping(request):
                    return request
                """,
            "shop/handlers.py": "def refund(request, order_id):\n    return order_id\n",
            "shop/urls.py": """
                from django.urls import path, re_path, include
                from . import views
                from .handlers import refund

                urlpatterns = [
                    re_path(r"^refund/(?P<order_id>\\d+)/$", refund, name="refund"),
                    path("cart/", views.CartView.as_view()),
                    path("api/", include("shop.api.urls")),
                ]
                """,
            "shop/management/commands/rebuild_index.py": """
                from django.core.management.base import BaseCommand

                class Command(BaseCommand):
                    def handle(self, *args, **options):
                        return None
                """,
        }
    )
    assert found["shop/views.py:order_list"] == ("http", "django view")
    assert "shop/views.py:_render" not in found
    assert "shop/views.py:format_price" not in found
    assert found["shop/views.py:CartView.post"] == ("http", "django urlconf 'cart/'")
    assert "shop/views.py:CartView.helper" not in found
    assert found["shop/views.py:ReviewViewSet.perform_create"] == ("http", "django class-based view")
    assert found["shop/views.py:ReviewViewSet.approve"][0] == "http"
    assert found["shop/views.py:ping"] == ("http", "drf @api_view")
    assert found["shop/handlers.py:refund"] == ("http", r"django urlconf '^refund/(?P<order_id>\d+)/$'")
    assert found["shop/management/commands/rebuild_index.py:Command.handle"] == ("cli", "django management command")


def test_a_class_based_view_keeps_its_own_route_when_a_subclass_is_routed_first():
    found = entry_points(
        {
            "notes/views.py": """
                from django.views import View

                class SystemNotificationsView(View):
                    def get(self, request):
                        return request

                    def post(self, request):
                        return request

                class PersonalNotificationsView(SystemNotificationsView):
                    def post(self, request):
                        return request

                class SettingsBase:
                    def post(self, request):
                        return request

                class SettingsView(SettingsBase):
                    pass
                """,
            "notes/urls.py": """
                from django.urls import re_path
                from . import views

                urlpatterns = [
                    re_path(r"^notifications$", views.PersonalNotificationsView.as_view()),
                    re_path(r"^notifications/system$", views.SystemNotificationsView.as_view()),
                    re_path(r"^settings$", views.SettingsView.as_view()),
                ]
                """,
        }
    )
    assert found["notes/views.py:SystemNotificationsView.get"] == ("http", "django urlconf '^notifications/system$'")
    assert found["notes/views.py:SystemNotificationsView.post"] == ("http", "django urlconf '^notifications/system$'")
    assert found["notes/views.py:PersonalNotificationsView.post"] == ("http", "django urlconf '^notifications$'")
    # Reached only through a subclass's row: the label says which class the route is of.
    assert found["notes/views.py:SettingsBase.post"] == ("http", "django urlconf '^settings$' via SettingsView")


def test_a_url_row_never_takes_a_method_matched_by_name_for_its_view():
    found = entry_points(
        {
            "pages/__init__.py": "",
            "pages/views/__init__.py": "from .home import *\nfrom . import about\nabout_page = about.about_page\n",
            "pages/views/home.py": "def landing(request):\n    return request\n",
            "pages/views/about.py": "def about_page(request):\n    return request\n",
            "pages/urls.py": """
                from django.urls import path
                from pages import views

                urlpatterns = [path("", views.landing), path("about/", views.about_page)]
                """,
            "shop/cart.py": """
                class Banner:
                    def landing(self):
                        return 1

                    def about_page(self):
                        return 2
                """,
        }
    )
    # ``views.landing`` is the function the package re-exports with ``*``.
    assert found["pages/views/home.py:landing"] == ("http", "django urlconf ''")
    # ``views.about_page`` is bound by an assignment the resolver cannot follow: the row
    # names no view then, not another class's method of that name.
    assert found["pages/views/about.py:about_page"] == ("http", "django view")
    assert "shop/cart.py:Banner.landing" not in found
    assert "shop/cart.py:Banner.about_page" not in found


def test_flask_fastapi_tasks_cli_and_main_entry_points():
    found = entry_points(
        {
            "svc/app.py": """
                import click
                import typer
                from celery import shared_task
                from fastapi import APIRouter
                from flask import Blueprint
                from rq.decorators import job

                bp = Blueprint("pay", __name__)
                router = APIRouter()
                cli = typer.Typer()

                @bp.route("/pay", methods=["POST"])
                def pay():
                    return 1

                @router.post("/items")
                async def create_item():
                    return 2

                @shared_task(bind=True)
                def settle(self):
                    return 3

                @celery_app.task
                def nightly():
                    return 4

                @job("default")
                def resize():
                    return 5

                @click.command()
                def migrate():
                    return 6

                @cli.command()
                def seed():
                    return 7

                def plain():
                    return 8

                if __name__ == "__main__":
                    plain()
                """,
        }
    )
    assert found["svc/app.py:pay"] == ("http", "flask route '/pay'")
    assert found["svc/app.py:create_item"] == ("http", "route POST '/items'")
    assert found["svc/app.py:settle"] == ("task", "celery task")
    assert found["svc/app.py:nightly"] == ("task", "celery task")
    assert found["svc/app.py:resize"][0] == "task"
    assert found["svc/app.py:migrate"] == ("cli", "cli command @click.command")
    assert found["svc/app.py:seed"][0] == "cli"
    assert found[f"svc/app.py:{MAIN_FUNCTION}"] == ("main", "__main__ block")
    assert "svc/app.py:plain" not in found


def test_tornado_handlers_verbs_hooks_and_websocket_callbacks_are_entry_points():
    # tornado/web.py RequestHandler._execute runs prepare(), the method named by the request's
    # verb, then on_finish(); tornado/websocket.py WebSocketHandler runs open() per connection,
    # on_message() per message, on_close() at the end
    found = entry_points(
        {
            "hub/handlers/base.py": """
                from tornado.web import RequestHandler

                class BaseHandler(RequestHandler):
                    def prepare(self):
                        return 0

                    def user_for(self, name):
                        return 1
                """,
            "hub/apihandlers/users.py": """
                from tornado import web, websocket
                from ..handlers.base import BaseHandler

                class UserAPIHandler(BaseHandler):
                    async def post(self, name):
                        return self.user_for(name)

                    def delete(self, name):
                        return 2

                class Events(websocket.WebSocketHandler):
                    def open(self):
                        return 3

                    def on_message(self, message):
                        return 4

                class Plain:
                    def post(self):
                        return 5
                """,
            # a project's own class of that name is no library handler
            "hub/client.py": """
                class RequestHandler:
                    def get(self, url):
                        return url

                class GithubClient(RequestHandler):
                    def post(self, url):
                        return url
                """,
        }
    )
    assert found["hub/apihandlers/users.py:UserAPIHandler.post"] == ("http", "tornado request handler")
    assert found["hub/apihandlers/users.py:UserAPIHandler.delete"] == ("http", "tornado request handler")
    assert found["hub/handlers/base.py:BaseHandler.prepare"] == ("http", "tornado request handler")
    assert found["hub/apihandlers/users.py:Events.open"] == ("consumer", "tornado websocket handler")
    assert found["hub/apihandlers/users.py:Events.on_message"] == ("consumer", "tornado websocket handler")
    for helper in ("hub/handlers/base.py:BaseHandler.user_for", "hub/apihandlers/users.py:Plain.post",
                   "hub/client.py:RequestHandler.get", "hub/client.py:GithubClient.post"):
        assert helper not in found


def test_a_request_handler_base_counts_only_when_imported_from_a_handler_library():
    # the file that names the base imports it: tornado's, cyclone's or webapp2's; aiohttp's
    # web_protocol.RequestHandler is a connection protocol, not a handler a request runs
    found = entry_points({
        "app/loop.py": "import tornado.ioloop\n\ndef serve():\n    tornado.ioloop.IOLoop.current().start()\n",
        "app/proto.py": "from aiohttp.web_protocol import RequestHandler\n\nclass Proto(RequestHandler):\n    def get(self):\n        return 1\n",
        "gae/main.py": "import webapp2\n\nclass Page(webapp2.RequestHandler):\n    def get(self):\n        return 1\n",
        "app/live.py": """
            import tornado.web
            import tornado.websocket

            class Done(tornado.web.RequestHandler):
                def on_finish(self):
                    return 1

            class Feed(tornado.websocket.WebSocketHandler):
                def on_close(self):
                    return 2
            """,
    })
    assert "app/proto.py:Proto.get" not in found
    assert found["gae/main.py:Page.get"] == ("http", "webapp2 request handler")
    assert found["app/live.py:Done.on_finish"] == ("http", "tornado request handler")
    assert found["app/live.py:Feed.on_close"] == ("consumer", "tornado websocket handler")


def test_express_go_and_spring_entry_points():
    found = entry_points(
        {
            "web/server.js": """
                const express = require('express');
                const app = express();
                function createOrder(req, res) { res.send('ok'); }
                function requireAuth(req, res, next) { next(); }
                app.post('/orders', requireAuth, createOrder);
                app.get('/health', (req, res) => res.send('ok'));
                """,
            "api/main.go": """
                package main

                import "net/http"

                func listItems(w http.ResponseWriter, r *http.Request) {}

                func main() {
                    mux := http.NewServeMux()
                    mux.HandleFunc("/items", listItems)
                    http.ListenAndServe(":8080", mux)
                }
                """,
            "app/OrderController.java": """
                @RestController
                public class OrderController {
                    @PostMapping("/orders")
                    public Order create(@RequestBody Order order) { return order; }

                    @Scheduled(fixedRate = 1000)
                    public void sweep() {}

                    @KafkaListener(topics = "orders")
                    public void consume(String message) {}

                    public void helper() {}
                }
                """,
        }
    )
    assert found["web/server.js:createOrder"] == ("http", "express POST '/orders'")
    assert "web/server.js:requireAuth" not in found
    assert found["api/main.go:listItems"] == ("http", "go handler '/items'")
    assert found["api/main.go:main"] == ("main", "go func main")
    assert found["app/OrderController.java:OrderController.create"] == ("http", "spring @PostMapping '/orders'")
    assert found["app/OrderController.java:OrderController.sweep"] == ("task", "spring @Scheduled")
    assert found["app/OrderController.java:OrderController.consume"] == ("consumer", "spring @KafkaListener")
    assert "app/OrderController.java:OrderController.helper" not in found


@pytest.mark.parametrize("with_texts", [True, False])
def test_views_without_texts_fall_back_to_uncalled_public_functions(with_texts):
    indexes, texts, graph = build(
        {"blog/views.py": "def index(request):\n    return slug(request)\n\ndef slug(value):\n    return value\n"}
    )
    found = {entry.ref.qualname for entry in find_entry_points(indexes, graph, None, texts if with_texts else None)}
    assert found == {"index"}


def test_graphql_mutations_are_entry_points_and_tests_are_not():
    found = entry_points(
        {
            "api/mutations.py": """
                import graphene

                class BaseMutation(graphene.Mutation):
                    @classmethod
                    def mutate(cls, root, info, **data):
                        return cls.perform_mutation(root, info, **data)

                class CheckoutCreate(BaseMutation):
                    @classmethod
                    def perform_mutation(cls, root, info, **data):
                        return data

                    @classmethod
                    def clean_input(cls, data):
                        return data
                """,
            "api/tests/test_mutations.py": """
                from unittest import mock

                @mock.patch("api.mutations.CheckoutCreate.clean_input")
                def test_checkout_create(clean_input):
                    return clean_input

                def main():
                    return 0

                if __name__ == "__main__":
                    main()
                """,
            "api/handlers_test.go": """
                package api

                import "net/http"

                func fake(w http.ResponseWriter, r *http.Request) {}

                func register() { http.HandleFunc("/fake", fake) }
                """,
        }
    )
    assert found["api/mutations.py:BaseMutation.mutate"] == ("http", "graphql mutation")
    assert found["api/mutations.py:CheckoutCreate.perform_mutation"] == ("http", "graphql mutation")
    assert "api/mutations.py:CheckoutCreate.clean_input" not in found
    assert not [name for name in found if "test" in name]


def test_mock_patch_decorators_are_not_patch_routes():
    found = entry_points(
        {
            "tools/replay.py": """
                from unittest import mock

                @mock.patch("tools.replay.send")
                def dry_run(send):
                    return send

                @mock.patch.object(object, "x")
                def offline(x):
                    return x
                """,
        }
    )
    assert found == {}


def test_refs_and_edges_keep_the_dataclass_hash_and_carry_none_in_pickles():
    """FunctionRef and Edge cache their hash: the value is the hash of the fields' tuple (what
    the dataclass's own ``__hash__`` gives), it is no field, and a pickle carries the fields
    only (a hash is per process: string hashes are salted)."""
    import dataclasses
    import pickle

    caller, callee = FunctionRef("a.py", "f"), FunctionRef("b.py", "C.g")
    edge = Edge(caller, callee, 3, False)
    assert hash(caller) == hash(("a.py", "f")) and hash(caller) == hash(caller)
    assert hash(edge) == hash((caller, callee, 3, False))
    assert [item.name for item in dataclasses.fields(FunctionRef)] == ["path", "qualname"]
    assert [item.name for item in dataclasses.fields(Edge)] == ["caller", "callee", "line", "approximate"]
    assert dataclasses.astuple(edge) == (("a.py", "f"), ("b.py", "C.g"), 3, False)
    assert dataclasses.replace(edge, line=4) == Edge(caller, callee, 4, False) and edge < dataclasses.replace(edge, line=4)
    _, arguments = edge.__reduce__()
    assert arguments == (caller, callee, 3, False)
    assert pickle.loads(pickle.dumps(edge)) == edge and {pickle.loads(pickle.dumps(edge)): 1}[edge] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        caller.path = "c.py"  # type: ignore[misc]


def test_a_unique_name_in_test_code_is_no_fallback_for_production_calls():
    # Round 9's zeeguu FALSE: ``client.translate(...)`` in a translation service reached the
    # test rule ``ExerciseSourceRule.translate`` (and its fixtures' commits) by its unique name.
    files = {
        "app/service.py": "def translate_word(client, word):\n    return client.translate(word)\n",
        "app/core/test/rules/source_rule.py": (
            "class SourceRule:\n    def translate(self, word):\n        return word\n\n\n"
            "def check(rule, word):\n    return rule.translate(word)\n"
        ),
    }
    _, _, graph = build(files)
    pairs = edge_pairs(graph)
    assert not any(caller.startswith("app/service.py") for caller, _, _ in pairs)
    assert ("app/core/test/rules/source_rule.py:check", "app/core/test/rules/source_rule.py:SourceRule.translate", True) in pairs


def test_a_production_module_named_like_a_test_keeps_its_fallback_edges():
    # ``ab_test.py`` (an A/B test feature) or a ``testing/`` package may be production code.
    files = {
        "app/service.py": "def run(experiment):\n    return experiment.assign_variant()\n",
        "app/ab_test.py": "class Experiment:\n    def assign_variant(self):\n        return 1\n",
    }
    _, _, graph = build(files)
    assert ("app/service.py:run", "app/ab_test.py:Experiment.assign_variant", True) in edge_pairs(graph)


def test_a_python_name_defined_twice_resolves_to_its_last_definition():
    # Python binds a name to its last ``def``: the earlier body never runs.
    _, _, graph = build({
        "app/jobs.py": """
            def sync(item):
                return item

            def sync(item):
                item.save()
                item.delete()

            def run(item):
                sync(item)
            """,
    })
    target = graph.resolve("app/jobs.py", "sync")
    assert target is not None
    definition = graph.definition(target)
    assert definition is not None and definition.start_line == 4
