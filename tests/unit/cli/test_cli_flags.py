"""The options pack, scan, review, scan-many and probe share are declared once
(``auditor.cli.flags``): the same spellings, limits, environment variable, default, help and
--help panel everywhere, defaults equal to the core's, each flag reaching exactly one field
of the ScanConfig a command runs with, and parse errors as usage errors (exit 64)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.core import TyperOption
from typer.main import get_command
from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.engine.base import EngineSettings
from auditor.pack.packer import PackOptions
from auditor.runs import review
from auditor.runs.many import runner as many
from auditor.runs.many.stages import ManyConfig
from auditor.runs.review import ReviewConfig
from auditor.walk.walker import WalkOptions
from tests.support import REPO_ROOT, git

COMMANDS = ("pack", "scan", "review", "scan-many")
ENGINE_COMMANDS = ("scan", "review", "scan-many")
TX = "tx-outside-transaction"
NO_CACHE_HELP = "Do not read or write the caches (file index, call graph, static analysis, token counts, relevance scores, model answers)."
# Command-specific options that share a spelling with another command's on purpose.
OWN_HELP = {
    "error": {"review"},  # new findings on the change only
    "format": {"pack"},  # pack shows windows, not a report
    "output": {"pack", "scan-many"},
}
# Engine flags and the EngineSettings field each one sets.
ENGINE_FIELDS = {
    "max_model_len": "max_model_len",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_num_seqs": "max_num_seqs",
    "tensor_parallel_size": "tensor_parallel_size",
    "temperature": "temperature",
    "seed": "seed",
    "thinking_token_budget": "thinking_token_budget",
    "timeout": "timeout_s",
    "retries": "retries",
}


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    for variable in ("AUDITOR_BASE_URL", "AUDITOR_API_KEY"):
        monkeypatch.delenv(variable, raising=False)


def options(command: str) -> dict[str, TyperOption]:
    """The command's options by parameter name, as typer builds them."""
    group = get_command(app)
    params = group.commands[command].params  # type: ignore[attr-defined]
    return {param.name: param for param in params if isinstance(param, TyperOption) and param.name}


def describe(option: TyperOption) -> dict[str, Any]:
    """Everything about an option a user meets, other than its help."""
    return {
        "opts": sorted(option.opts),
        "secondary_opts": sorted(option.secondary_opts),
        "default": option.default,
        "envvar": option.envvar,
        "type": option.type_descriptor.annotation,
        "min": option.min,
        "max": option.max,
        "multiple": option.multiple,
        "is_flag": option.is_flag,
    }


def shared_names(commands: tuple[str, ...]) -> set[str]:
    """Option names two or more of ``commands`` have."""
    seen: dict[str, int] = {}
    for command in commands:
        for name in options(command):
            seen[name] = seen.get(name, 0) + 1
    return {name for name, count in seen.items() if count > 1}


def test_the_engine_commands_share_every_engine_walk_and_pack_flag():
    in_all = set.intersection(*(set(options(command)) for command in ENGINE_COMMANDS))
    assert set(ENGINE_FIELDS) | {
        "rule", "engine", "model", "tokenizer", "base_url", "api_key", "replay", "output_tokens", "thinking",
        "include", "exclude", "max_file_bytes", "max_windows", "static", "no_cache", "error", "no_prefix_caching",
    } <= in_all


@pytest.mark.parametrize("name", sorted(shared_names(COMMANDS)))
def test_a_shared_flag_is_spelt_limited_and_defaulted_alike(name: str):
    having = {command: options(command)[name] for command in COMMANDS if name in options(command)}
    own = OWN_HELP.get(name, set())
    described = {command: describe(option) for command, option in having.items() if command not in own}
    first = next(iter(described.values()))
    assert {command: d for command, d in described.items() if d != first} == {}, (name, first)
    helps = {command: option.help for command, option in having.items() if command not in own}
    assert len(set(helps.values())) <= 1, (name, helps)
    assert all(option.help for option in having.values()), name


def test_every_option_sits_in_a_help_panel_a_user_can_scan():
    from auditor.cli.flags import CACHE_PANEL, ENGINE_PANEL, FILES_PANEL, OUTPUT_PANEL, WINDOW_PANEL

    scan = options("scan")
    assert scan["engine"].rich_help_panel == ENGINE_PANEL and scan["base_url"].rich_help_panel == ENGINE_PANEL
    assert scan["max_model_len"].rich_help_panel == WINDOW_PANEL and scan["tokenizer"].rich_help_panel == WINDOW_PANEL
    assert scan["exclude"].rich_help_panel == FILES_PANEL
    assert scan["sarif_output"].rich_help_panel == OUTPUT_PANEL and scan["no_cache"].rich_help_panel == CACHE_PANEL
    for command in (*COMMANDS, "probe"):
        unpanelled = [name for name, option in options(command).items() if option.rich_help_panel is None]
        assert unpanelled == [], command


def test_each_flag_sets_exactly_one_config_field():
    from dataclasses import fields

    from auditor.cli.flags import ScanFlags
    from auditor.cli.options import scan_config

    changed = ScanFlags(
        rule=("r",), include=("a/**",), exclude=("b/**",), max_file_bytes=7, static=False, baseline=Path("b.json"),
        model="m", tokenizer="t", max_model_len=4096, output_tokens=512, thinking=False, max_windows=2,
        engine="openai", base_url="http://h/v1", api_key="k", replay="r.jsonl", max_num_batched_tokens=256,
        gpu_memory_utilization=0.5, max_num_seqs=2, tensor_parallel_size=2, no_prefix_caching=True, temperature=0.5,
        seed=9, thinking_token_budget=64, timeout=5.0, retries=0, probes=1, recall_threshold=0.5, no_cache=True,
    )
    config = scan_config(Path("repo"), changed)
    assert (config.rules, config.walk.include, config.walk.exclude, config.walk.max_file_bytes) == (("r",), ("a/**",), ("b/**",), 7)
    assert (config.static, config.baseline, config.tokenizer, config.engine, config.use_cache) == (
        False, Path("b.json"), "t", "openai", False)
    assert (config.window.output_tokens, config.window.thinking, config.window.max_windows) == (512, False, 2)
    assert (config.probes, config.recall_threshold) == (1, 0.5)
    settings = config.engine_settings
    for flag, field in ENGINE_FIELDS.items():
        assert getattr(settings, field) == getattr(changed, flag), flag
    assert (settings.model, settings.base_url, settings.api_key, settings.replay_path) == ("m", "http://h/v1", "k", "r.jsonl")
    assert settings.enable_prefix_caching is False
    # The model and the window length live once, in the engine settings; the packer and the
    # tokenizer read them from there.
    assert config.pack.max_model_len == 4096 and config.tokenizer_request.model == "m"
    assert "max_model_len" not in {f.name for f in fields(config.window)}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["scan", ".", "--probes", "-1"], "--probes"),
        (["scan", ".", "--max-model-len", "ten"], "--max-model-len"),
        (["scan", ".", "--no-such-flag"], "--no-such-flag"),
        (["pack"], "PATH"),
    ],
)
def test_a_bad_flag_is_a_usage_error_naming_it(argv: list[str], says: str):
    completed = subprocess.run([sys.executable, "-m", "auditor", *argv], capture_output=True, text=True, check=False)
    assert completed.returncode == 64, completed.stderr
    assert says.lower() in completed.stderr.lower()


def test_engine_flag_defaults_are_the_engines_own():
    engine_defaults = EngineSettings()
    for command in ENGINE_COMMANDS:
        found = options(command)
        for flag, field in ENGINE_FIELDS.items():
            assert found[flag].default == getattr(engine_defaults, field), (command, flag)
    # The activation estimate in auditor.planning.plan assumes chunks of at most 8192 tokens.
    assert options("review")["max_num_batched_tokens"].default == 8_192


def test_pack_and_walk_flag_defaults_are_the_cores_own():
    for command in COMMANDS:
        found = options(command)
        assert found["max_model_len"].default == PackOptions().max_model_len, command
        assert found["output_tokens"].default == PackOptions().output_tokens, command
        assert found["max_windows"].default == PackOptions().max_windows, command
        assert found["max_file_bytes"].default == WalkOptions().max_file_bytes, command


def test_no_cache_says_which_caches_everywhere():
    for command in COMMANDS:
        assert options(command)["no_cache"].help == NO_CACHE_HELP, command


# --- the new flags reach the configuration ---------------------------------------------




STORE = textwrap.dedent(
    '''
    def save_order(order):
        order.save()
    '''
).lstrip("\n")
VIEWS = textwrap.dedent(
    '''
    from flask import Flask
    from app.store import save_order

    app = Flask(__name__)


    @app.route("/orders")
    def create_order(request):
        save_order(request)
        return "ok"
    '''
).lstrip("\n")
NEW_WRITE = textwrap.dedent(
    '''


    def save_invoice(invoice):
        invoice.save()
    '''
)
NEW_ROUTE = textwrap.dedent(
    '''


    @app.route("/invoices")
    def create_invoice(request):
        save_invoice(request)
        return "ok"
    '''
)


@pytest.fixture
def change(tmp_path: Path) -> tuple[Path, str]:
    """A git repository whose working tree adds a route that writes outside a transaction;
    the base revision."""
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "app" / "__init__.py").write_text("", encoding="utf-8")
    (root / "app" / "store.py").write_text(STORE, encoding="utf-8")
    (root / "app" / "views.py").write_text(VIEWS, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    completed = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True)
    (root / "app" / "store.py").write_text(STORE + NEW_WRITE, encoding="utf-8")
    views = VIEWS.replace("import save_order", "import save_invoice, save_order")
    (root / "app" / "views.py").write_text(views + NEW_ROUTE, encoding="utf-8")
    return root, completed.stdout.strip()


@pytest.fixture
def reviews(monkeypatch: pytest.MonkeyPatch) -> list[ReviewConfig]:
    """The configurations ``auditor review`` runs with (the review itself still runs)."""
    seen: list[ReviewConfig] = []
    real = review.run_review

    def recording(config: ReviewConfig, *args: Any, **kwargs: Any):
        seen.append(config)
        return real(config, *args, **kwargs)

    monkeypatch.setattr(review, "run_review", recording)
    return seen


def test_review_engine_walk_and_pack_flags_reach_the_scan(change, reviews):
    root, base = change
    flags = ["--timeout", "42", "--retries", "5", "--tensor-parallel-size", "2", "--max-windows", "3",
             "--max-file-bytes", "4096", "--max-num-batched-tokens", "4096"]
    outcome = CliRunner().invoke(
        app, ["review", str(root), "--base", base, "--engine", "static", "--min-severity", "low", "--rule", TX, "-f", "json", *flags]
    )
    assert outcome.exit_code == 0, outcome.output
    [config] = reviews
    settings = config.scan.engine_settings
    assert (settings.timeout_s, settings.retries, settings.tensor_parallel_size, settings.max_num_batched_tokens) == (
        42.0, 5, 2, 4096,
    )
    assert config.scan.window.max_windows == 3
    assert config.scan.walk.max_file_bytes == 4096


def test_review_max_file_bytes_skips_large_files(change, reviews):
    root, base = change
    common = ["review", str(root), "--base", base, "--engine", "static", "--min-severity", "low", "--rule", TX, "--error"]
    assert CliRunner().invoke(app, common).exit_code == 1  # the new write is found
    skipped = CliRunner().invoke(app, [*common, "--max-file-bytes", "16", "-f", "json"])
    # store.py is over 16 bytes: not read, so the review cannot pass
    assert skipped.exit_code == 5, skipped.output
    assert any("app/store.py was not audited" in error["message"] for error in json.loads(skipped.stdout)["errors"])


def test_review_takes_the_new_flags_from_auditor_toml(change, reviews, tmp_path: Path, monkeypatch):
    root, base = change
    (tmp_path / "auditor.toml").write_text("timeout = 1800\n[review]\nretries = 7\nmax-file-bytes = 5000\n")
    monkeypatch.chdir(tmp_path)
    outcome = CliRunner().invoke(app, ["review", str(root), "--base", base, "--engine", "static", "--min-severity", "low", "--rule", TX])
    assert outcome.exit_code == 0, outcome.output
    [config] = reviews
    assert (config.scan.engine_settings.timeout_s, config.scan.engine_settings.retries) == (1800.0, 7)
    assert config.scan.walk.max_file_bytes == 5000


def test_scan_many_engine_and_walk_flags_reach_the_run(tmp_path: Path, monkeypatch):
    repos = tmp_path / "repos" / "shop"
    (repos / "app").mkdir(parents=True)
    (repos / "app" / "store.py").write_text(STORE, encoding="utf-8")
    seen: list[ManyConfig] = []
    real = many.run_many

    def recording(config: ManyConfig, *args: Any, **kwargs: Any):
        seen.append(config)
        return real(config, *args, **kwargs)

    monkeypatch.setattr(many, "run_many", recording)
    monkeypatch.setattr(many, "ray_available", lambda: False)
    flags = ["--timeout", "42", "--retries", "5", "--max-num-batched-tokens", "4096", "--max-file-bytes", "4096"]
    outcome = CliRunner().invoke(
        app, ["scan-many", str(tmp_path / "repos"), "--out", str(tmp_path / "run"), "--engine", "static",
              "--rule", TX, *flags],
    )
    assert outcome.exit_code == 0, outcome.output
    [config] = seen
    settings = config.scan.engine_settings
    assert (settings.timeout_s, settings.retries, settings.max_num_batched_tokens) == (42.0, 5, 4096)
    assert config.scan.walk.max_file_bytes == 4096


def test_no_prefix_caching_reaches_the_engine_settings(change, monkeypatch):
    from auditor.runs import scan

    seen: list[Any] = []
    real = scan.run_scan

    def recording(config: Any, *args: Any, **kwargs: Any):
        seen.append(config)
        return real(config, *args, **kwargs)

    monkeypatch.setattr(scan, "run_scan", recording)
    root, _ = change
    for flags in ([], ["--no-prefix-caching"]):
        outcome = CliRunner().invoke(app, ["scan", str(root), "--engine", "static", "--min-severity", "low", "--rule", TX, "-f", "json", *flags])
        assert outcome.exit_code == 0, outcome.output
    assert [config.engine_settings.enable_prefix_caching for config in seen] == [True, False]


def test_single_autocommit_writes_are_hidden_by_default_and_counted(tmp_path: Path):
    fixture = REPO_ROOT / "fixtures" / "django_shop"
    command = ["scan", str(fixture), "--engine", "static", "--rule", TX, "-f", "json"]
    default = json.loads(CliRunner().invoke(app, command).stdout)
    everything = json.loads(CliRunner().invoke(app, [*command, "--min-severity", "low"]).stdout)
    assert {f["severity"] for f in default["findings"]} <= {"critical", "high"}
    lows = [f for f in everything["findings"] if f["severity"] == "low"]
    assert lows and len(everything["findings"]) > len(default["findings"])
    shown_more = len(everything["findings"]) - len(default["findings"])
    [note] = [n for n in default["notices"] if "below --min-severity high not shown" in n]
    # Hidden counts what the analysis held back, suppressed findings included.
    assert int(note.split(": ", 1)[1].split()[0]) >= shown_more
    bad = subprocess.run([sys.executable, "-m", "auditor", *command, "--min-severity", "severe"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 64 and "'severe' is not one of" in " ".join(bad.stderr.split())


def test_a_scan_names_the_sqlalchemy_series_its_grades_assume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A commit after begin_nested() is read as a savepoint release only on SQLAlchemy < 2.0,
    # read from the declared dependencies: the report says so, and says nothing without a pin.
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    (root / "app" / "views.py").write_text(textwrap.dedent("""
        from flask import Blueprint
        from .db import db

        bp = Blueprint("x", __name__)


        @bp.route("/tags", methods=["PUT"])
        def put_tag(tag):
            db.session.begin_nested()
            db.session.add(tag)
            db.session.commit()
            db.session.commit()
    """), encoding="utf-8")
    (root / "app" / "db.py").write_text("from flask_sqlalchemy import SQLAlchemy\ndb = SQLAlchemy()\n", encoding="utf-8")
    command = ["scan", str(root), "--engine", "static", "--rule", TX, "-f", "json", "--no-cache"]
    unpinned = json.loads(CliRunner().invoke(app, command).stdout)
    (root / "requirements.txt").write_text("Flask-SQLAlchemy==3.0.5\nSQLAlchemy==1.4.54\n", encoding="utf-8")
    pinned = json.loads(CliRunner().invoke(app, command).stdout)
    assert not [n for n in unpinned["notices"] if "SQLAlchemy before 2.0" in n]
    [note] = [n for n in pinned["notices"] if "SQLAlchemy before 2.0" in n]
    assert "requirements.txt: sqlalchemy==1.4.54" in note and "savepoint release" in note
