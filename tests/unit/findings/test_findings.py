"""Answer parsing, grounding, fingerprints and merging (auditor.findings.model), and the
built-in call-chain rules the grounding relies on."""

from __future__ import annotations

import ast
import json
from dataclasses import replace

import jsonschema
import pytest

from auditor.findings.answer import (
    ANSWER_SCHEMA,
    answer_schema,
    answer_schema_json,
    parse_answer,
)
from auditor.findings.fingerprints import fingerprint
from auditor.findings.grounding import (
    UNCONFIRMED_CHAIN_NOTE,
    VIRTUAL_FILE_REASON,
    RepositoryView,
    ground_answer,
    ground_claim,
    is_sink_line,
    same_function,
)
from auditor.findings.merge import merge_findings
from auditor.findings.model import (
    ChainStep,
    Claim,
    ClaimedStep,
    Finding,
    Rejected,
)
from auditor.rules.loader import builtin_rules

RULE = "tx-outside-transaction"

VIEWS = '''from app.orders import save_order


def checkout(request):
    order = save_order(request.user, request.POST)
    return order


def health(request):
    return "ok"
'''

ORDERS = '''from app.models import Order


def save_order(user, data):
    order = Order(user=user, total=data["total"])
    order.save()
    Order.objects.create(user=user, total=0)
    return order


class OrderService:
    def cancel(self, order):
        order.status = "cancelled"
        order.save()
'''


class AstLocator:
    """A function index for the test's Python files, built with the standard ast module."""

    def __init__(self, files: dict[str, str]) -> None:
        self.spans: dict[str, list[tuple[str, int, int]]] = {}
        for path, text in files.items():
            spans: list[tuple[str, int, int]] = []
            self._visit(ast.parse(text), "", spans)
            self.spans[path] = spans

    def _visit(self, node: ast.AST, prefix: str, spans: list[tuple[str, int, int]]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    spans.append((name, child.lineno, child.end_lineno or child.lineno))
                self._visit(child, name + ".", spans)

    def enclosing_function(self, path: str, line: int) -> str | None:
        inside = [span for span in self.spans.get(path, []) if span[1] <= line <= span[2]]
        return min(inside, key=lambda span: span[2] - span[1])[0] if inside else None

    def function_lines(self, path: str, function: str) -> tuple[int, int] | None:
        matches = [s for s in self.spans.get(path, []) if s[0] == function or s[0].rsplit(".", 1)[-1] == function]
        return (matches[0][1], matches[0][2]) if len(matches) == 1 else None


class SetEdges:
    """A call graph given as (caller, callee) qualname pairs."""

    def __init__(self, edges: set[tuple[str, str]]) -> None:
        self.edges = edges

    def plausible_edge(self, caller_path: str, caller_function: str, callee_path: str, callee_function: str) -> bool:
        return (caller_function, callee_function) in self.edges


@pytest.fixture
def rules():
    return builtin_rules()


def make_repo(files: dict[str, str] | None = None, edges: set[tuple[str, str]] | None = None, **kwargs) -> RepositoryView:
    files = files or {"app/views.py": VIEWS, "app/orders.py": ORDERS}
    return RepositoryView(
        files=files,
        locator=AstLocator(files),
        edges=SetEdges(edges if edges is not None else {("checkout", "save_order")}),
        **kwargs,
    )


def claim(
    sink: tuple[str, int | None, str] = ("app/orders.py", 6, "save_order"),
    chain: tuple[tuple[str, int | None, str], ...] = (("app/views.py", 5, "checkout"), ("app/orders.py", 4, "save_order")),
    rule: str = RULE,
    severity: str = "high",
) -> Claim:
    return Claim(
        rule=rule,
        title="Order saved outside a transaction",
        severity=severity,
        sink=ClaimedStep(*sink),
        chain=tuple(ClaimedStep(*step) for step in chain),
        explanation="checkout calls save_order which writes twice.",
    )


FINDING = {
    "rule": RULE,
    "title": "Order saved outside a transaction",
    "severity": "high",
    "sink": {"path": "app/orders.py", "line": 6, "function": "save_order"},
    "chain": [
        {"path": "app/views.py", "line": 5, "function": "checkout"},
        {"path": "app/orders.py", "line": 4, "function": "save_order"},
    ],
    "explanation": "Two writes, no atomic block.",
}


def answer_json(findings: list[dict], probes: list[dict] | None = None) -> str:
    return json.dumps({"findings": findings, "probes": probes or []}, indent=2)


# ---------------------------------------------------------------- parsing


def test_parse_clean_json_gives_claims_and_probes():
    text = answer_json([FINDING], [{"id": "p1", "answer": "4417203"}])
    parsed = parse_answer(text)
    assert parsed.complete and parsed.errors == () and parsed.salvaged == 0
    assert parsed.claims == (
        Claim(
            rule=RULE,
            title="Order saved outside a transaction",
            severity="high",
            sink=ClaimedStep("app/orders.py", 6, "save_order"),
            chain=(ClaimedStep("app/views.py", 5, "checkout"), ClaimedStep("app/orders.py", 4, "save_order")),
            explanation="Two writes, no atomic block.",
        ),
    )
    assert [(p.id, p.answer) for p in parsed.canary_answers] == [("p1", "4417203")]


def test_parse_reads_only_the_answer_after_the_trace():
    decoy = dict(FINDING, sink={"path": "decoy.py", "line": 1, "function": "x"})
    trace = "<think>Let me draft: " + answer_json([decoy]) + " hmm, no.\n</think>\n"
    parsed = parse_answer(trace + answer_json([FINDING]))
    assert parsed.complete
    assert [c.sink.path for c in parsed.claims] == ["app/orders.py"]
    # An engine that split the trace off passes the answer alone: same result.
    assert parse_answer(answer_json([FINDING])).claims == parsed.claims


def test_parse_fenced_json_inside_prose():
    text = (
        "I looked at the {views} and the orders module.\n\nHere is my answer:\n```json\n"
        + answer_json([FINDING])
        + "\n```\nLet me know if you need more."
    )
    parsed = parse_answer(text)
    assert parsed.complete and len(parsed.claims) == 1 and parsed.errors == ()


def test_parse_truncated_answer_salvages_complete_findings():
    second = dict(FINDING, sink={"path": "app/orders.py", "line": 7, "function": "save_order"})
    full = answer_json([FINDING, second, FINDING])
    cut = full[: full.rindex('"explanation"')]  # the third finding is cut off mid-object
    parsed = parse_answer(cut)
    assert not parsed.complete
    assert parsed.salvaged == 2
    assert [c.sink.line for c in parsed.claims] == [6, 7]
    assert parsed.errors[0] == "answer truncated: 2 complete findings salvaged"


def test_parse_empty_answer_after_trace_is_incomplete():
    parsed = parse_answer("<think>" + "reasoning " * 500 + "</think>\n  ")
    assert parsed == parse_answer("")
    assert not parsed.complete and parsed.claims == () and parsed.errors == ("empty answer",)


def test_parse_garbage_reports_no_json():
    parsed = parse_answer("I could not find anything interesting in this code.")
    assert not parsed.complete and parsed.claims == ()
    assert parsed.errors == ("no JSON object in answer",)
    other = parse_answer('Result: {"status": "ok"}')
    assert other.errors == ("JSON in answer has no 'findings' or 'probes' key",)


def test_parse_degenerate_deep_nesting_is_an_incomplete_answer_not_a_crash():
    # A model stuck in a repetition loop can emit brackets far past the decoder's depth limit.
    for text in ('{"findings":' + "[" * 100_000, '{"findings":[' + '{"a":' * 5_000, '{"a":' * 5_000):
        parsed = parse_answer(text)
        assert not parsed.complete and parsed.claims == () and parsed.errors


def test_parse_reports_a_second_different_answer_object_it_did_not_read():
    other = dict(FINDING, sink={"path": "app/orders.py", "line": 7, "function": "save_order"})
    text = 'The format is {"findings": [], "probes": []}.\nMy answer:\n' + answer_json([other])
    parsed = parse_answer(text)
    assert parsed.claims == ()  # the first contract object is the answer, as documented
    assert parsed.errors == ("answer holds 2 different JSON objects with 'findings' or 'probes'; only the first was read",)
    # The same object repeated is not a problem.
    assert parse_answer(answer_json([FINDING]) + "\nAgain:\n" + answer_json([FINDING])).errors == ()


def test_parse_reports_invalid_findings_without_dropping_them_silently():
    no_sink = {k: v for k, v in FINDING.items() if k != "sink"}
    bad_line = dict(FINDING, sink={"path": "app/orders.py", "line": "somewhere", "function": "f"})
    bad_step = dict(FINDING, chain=["app/views.py:5 checkout", {"path": "app/orders.py", "line": "L4", "function": "save_order"}])
    parsed = parse_answer(answer_json([no_sink, FINDING, bad_line, "oops", bad_step]))
    # Findings that cannot be read break the contract: the window is incomplete, not clean.
    assert not parsed.complete
    assert len(parsed.claims) == 2
    assert parsed.claims[1].chain == (ClaimedStep("app/orders.py", 4, "save_order"),)
    assert parsed.errors == (
        "finding 1: 'sink' is missing",
        "finding 3: sink: 'line' must be a number, got 'somewhere'",
        "finding 4: not an object",
        "finding 5: chain step 1 is not an object (step left out of the chain)",
    )


def test_a_malformed_chain_step_alone_keeps_the_answer_complete():
    bad_step = dict(FINDING, chain=["app/views.py:5 checkout", {"path": "app/orders.py", "line": "L4", "function": "save_order"}])
    parsed = parse_answer(answer_json([bad_step]))
    assert parsed.complete and len(parsed.claims) == 1
    assert parsed.errors == ("finding 1: chain step 1 is not an object (step left out of the chain)",)


@pytest.mark.parametrize(
    "text, error",
    [
        ('{"findings": {"a": 1}, "probes": []}', "'findings' is not a list"),
        ('{"findings": [1, "two", null], "probes": []}', "finding 1: not an object"),
        ('{"findings": [], "probes": "p-1"}', "'probes' is not a list"),
        ('{"findings": [], "probes": [{"answer": "4417203"}]}', "probe 1: 'id' is missing or not a string"),
    ],
)
def test_an_answer_that_breaks_the_contract_is_not_complete(text: str, error: str):
    parsed = parse_answer(text)
    assert not parsed.complete
    assert error in parsed.errors


def test_think_close_quoted_inside_the_answer_does_not_cut_it():
    quoted = dict(FINDING, explanation="the model wrote </think> in a comment")
    answer = answer_json([quoted])
    for text in (answer, "a trace</think>" + answer, "<think>trace</think>\n" + answer):
        parsed = parse_answer(text)
        assert parsed.complete, text
        assert parsed.claims[0].explanation == "the model wrote </think> in a comment"


def test_parse_tolerates_trailing_commas_and_string_lines():
    text = '{"findings": [{"rule": "r", "sink": {"path": "a.py", "line": "12", "function": "f"}, "chain": [],},], "probes": []}'
    parsed = parse_answer(text)
    assert parsed.complete and parsed.claims[0].sink == ClaimedStep("a.py", 12, "f")


def test_answer_schema_accepts_the_contract_and_rejects_a_missing_sink():
    document = {"findings": [FINDING], "probes": [{"id": "p", "answer": "x"}]}
    jsonschema.Draft202012Validator(ANSWER_SCHEMA).validate(document)
    broken = {"findings": [{k: v for k, v in FINDING.items() if k != "sink"}], "probes": []}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(ANSWER_SCHEMA).validate(broken)
    assert json.loads(answer_schema_json()) == ANSWER_SCHEMA
    assert answer_schema_json() == json.dumps(ANSWER_SCHEMA, sort_keys=True, separators=(",", ":"))
    pinned = answer_schema(["b-rule", "a-rule"])
    assert pinned["properties"]["findings"]["items"]["properties"]["rule"]["enum"] == ["a-rule", "b-rule"]


# ---------------------------------------------------------------- grounding


def test_grounded_claim_becomes_a_finding_with_a_verified_chain(rules):
    finding = ground_claim(claim(), make_repo(), rules, window=2)
    assert isinstance(finding, Finding)
    assert (finding.path, finding.line, finding.function, finding.window) == ("app/orders.py", 6, "save_order", 2)
    assert finding.found_by == ("model",)
    assert finding.chain == (
        ChainStep("app/views.py", 5, "checkout", True, ""),
        ChainStep("app/orders.py", 6, "save_order", True, ""),  # the last step's line is the sink
    )
    assert finding.fingerprint == fingerprint(RULE, "app/orders.py", "save_order", ("_.save()",))


def test_hallucinated_file_is_rejected(rules):
    outcome = ground_claim(claim(sink=("app/ghost.py", 3, "save_order")), make_repo(), rules, window=1)
    assert outcome == Rejected("path not in the packed repository: app/ghost.py", claim(sink=("app/ghost.py", 3, "save_order")), 1)


def test_line_out_of_range_is_rejected(rules):
    outcome = ground_claim(claim(sink=("app/orders.py", 99, "save_order")), make_repo(), rules)
    assert isinstance(outcome, Rejected)
    assert outcome.reason == "line 99 out of range (file has 14 lines)"


def test_unknown_rule_is_rejected(rules):
    outcome = ground_claim(claim(rule="made-up-rule"), make_repo(), rules)
    assert isinstance(outcome, Rejected) and outcome.reason == "unknown rule: made-up-rule"


def test_claim_citing_a_probe_virtual_file_is_rejected(rules):
    repo = make_repo(virtual_paths=frozenset({"notes/needle.txt"}))
    chain = (("notes/needle.txt", 1, "x"), ("app/orders.py", 4, "save_order"))
    outcome = ground_claim(claim(chain=chain), repo, rules)
    assert isinstance(outcome, Rejected) and outcome.reason == VIRTUAL_FILE_REASON


def test_hallucinated_chain_step_stays_unverified_with_a_note(rules):
    chain = (("app/views.py", 5, "checkout"), ("app/helpers.py", 3, "validate"), ("app/orders.py", 4, "save_order"))
    finding = ground_claim(claim(chain=chain), make_repo(), rules)
    assert isinstance(finding, Finding)
    assert [step.verified for step in finding.chain] == [False, False, False]
    assert "path not in the packed repository: app/helpers.py" in finding.chain[1].note
    assert UNCONFIRMED_CHAIN_NOTE in finding.chain[-1].note


def test_chain_step_naming_a_missing_function_is_unverified(rules):
    chain = (("app/views.py", 5, "process_payment"), ("app/orders.py", 4, "save_order"))
    finding = ground_claim(claim(chain=chain), make_repo(), rules)
    assert isinstance(finding, Finding)
    assert finding.chain[0].verified is False
    assert "function process_payment not found in app/views.py" in finding.chain[0].note


def test_edge_the_call_graph_does_not_have_is_unverified(rules):
    chain = (("app/views.py", 10, "health"), ("app/orders.py", 4, "save_order"))
    finding = ground_claim(claim(chain=chain), make_repo(), rules)
    assert isinstance(finding, Finding)
    assert [step.verified for step in finding.chain] == [False, False]
    assert "the call graph has no call from health to save_order" in finding.chain[1].note


def test_chain_is_completed_with_the_sink_function(rules):
    finding = ground_claim(claim(chain=(("app/views.py", 5, "checkout"),)), make_repo(), rules)
    assert isinstance(finding, Finding)
    assert [(s.function, s.verified) for s in finding.chain] == [("checkout", True), ("save_order", True)]
    assert "step added" in finding.chain[-1].note


def test_without_call_graph_steps_are_unverified(rules):
    files = {"app/views.py": VIEWS, "app/orders.py": ORDERS}
    repo = RepositoryView(files=files, locator=AstLocator(files))
    finding = ground_claim(claim(), repo, rules)
    assert isinstance(finding, Finding)
    assert not any(step.verified for step in finding.chain)
    assert "no call graph" in finding.chain[1].note


def test_off_target_line_inside_the_function_moves_to_the_nearest_sink(rules):
    finding = ground_claim(claim(sink=("app/orders.py", 5, "save_order")), make_repo(), rules)
    assert isinstance(finding, Finding)
    assert finding.line == 6
    assert "sink moved from line 5 to 6" in finding.chain[-1].note


def test_line_in_another_function_relocates_into_the_named_function(rules):
    finding = ground_claim(claim(sink=("app/orders.py", 13, "save_order")), make_repo(), rules)
    assert isinstance(finding, Finding)
    assert (finding.line, finding.function) == (7, "save_order")


def test_line_outside_a_function_that_does_not_exist_is_rejected(rules):
    outcome = ground_claim(claim(sink=("app/orders.py", 13, "refund_order")), make_repo(), rules)
    assert isinstance(outcome, Rejected)
    assert outcome.reason == "function refund_order does not contain line 13"


def test_function_without_any_sink_line_cannot_absorb_a_foreign_line(rules):
    outcome = ground_claim(claim(sink=("app/views.py", 5, "health")), make_repo(), rules)
    assert isinstance(outcome, Rejected)
    assert outcome.reason == "function health does not contain line 5"


def test_function_name_resolves_to_the_qualified_name(rules):
    finding = ground_claim(claim(sink=("app/orders.py", 14, "cancel"), chain=()), make_repo(), rules)
    assert isinstance(finding, Finding)
    assert finding.function == "OrderService.cancel"
    assert finding.chain == (ChainStep("app/orders.py", 14, "OrderService.cancel", True, "no call chain given"),)


def test_sink_naming_the_class_grounds_in_the_method_that_holds_the_line(rules):
    """Models often cite the class ("OrderService") for a write inside one of its methods."""
    chain = (("app/views.py", 5, "checkout"), ("app/orders.py", 13, "OrderService"))
    finding = ground_claim(claim(sink=("app/orders.py", 14, "OrderService"), chain=chain), make_repo(), rules)
    assert isinstance(finding, Finding)
    assert (finding.line, finding.function) == (14, "OrderService.cancel")
    assert finding.chain[-1] == ChainStep("app/orders.py", 14, "OrderService.cancel", False, finding.chain[-1].note)
    assert finding.fingerprint == fingerprint(RULE, "app/orders.py", "OrderService.cancel", ("_.save()",))


def test_class_name_does_not_absorb_a_line_outside_the_class(rules):
    outcome = ground_claim(claim(sink=("app/orders.py", 6, "OrderService"), chain=()), make_repo(), rules)
    assert isinstance(outcome, Rejected)


def test_severity_is_normalised_to_the_rule_set(rules):
    warning = ground_claim(claim(severity="Warning"), make_repo(), rules)
    bogus = ground_claim(claim(severity="catastrophic"), make_repo(), rules)
    assert isinstance(warning, Finding) and warning.severity == "medium"
    assert isinstance(bogus, Finding) and bogus.severity == rules[RULE].severity


def test_fingerprint_is_stable_when_code_moves(rules):
    shifted = "# a new header\n# more\n\n" + ORDERS
    before = ground_claim(claim(), make_repo(), rules)
    after = ground_claim(
        claim(sink=("app/orders.py", 9, "save_order")),
        make_repo({"app/views.py": VIEWS, "app/orders.py": shifted}),
        rules,
    )
    assert isinstance(before, Finding) and isinstance(after, Finding)
    assert after.line == 9 and before.line == 6
    assert after.fingerprint == before.fingerprint
    # Re-indenting the line does not change it either; another function does.
    assert fingerprint(RULE, "app/orders.py", "save_order", ("_.save()",)) == before.fingerprint
    assert fingerprint(RULE, "app/orders.py", "OrderService.cancel", ("_.save()",)) != before.fingerprint


def test_ground_answer_splits_findings_and_rejections(rules):
    parsed = parse_answer(answer_json([FINDING, dict(FINDING, sink={"path": "nope.py", "line": 1, "function": "f"})]))
    findings, rejected = ground_answer(parsed, make_repo(), rules, window=0)
    assert len(findings) == 1 and len(rejected) == 1
    assert rejected[0].window == 0 and rejected[0].reason.startswith("path not in the packed repository")


def test_same_function_accepts_qualified_and_bare_names():
    assert same_function("save", "OrderService.save")
    assert same_function("OrderService::save()", "OrderService.save")
    assert same_function("app.orders.save_order", "save_order")
    assert not same_function("Other.save", "OrderService.save")
    assert not same_function("save", None)


# ---------------------------------------------------------------- merging


def test_merge_unions_found_by_and_keeps_the_static_chain(rules):
    model = ground_claim(claim(chain=(("app/views.py", 5, "checkout"),)), make_repo(edges=set()), rules, window=3)
    assert isinstance(model, Finding)
    static_chain = (ChainStep("app/views.py", 5, "checkout", True), ChainStep("app/orders.py", 4, "save_order", True))
    static = replace(model, chain=static_chain, found_by=("static",), explanation="", window=None, severity="medium")
    duplicate = replace(model, window=1)
    other = ground_claim(claim(sink=("app/orders.py", 7, "save_order")), make_repo(), rules)
    merged = merge_findings([[model, other], [static], [duplicate]])
    assert len(merged) == 2
    combined = next(f for f in merged if f.fingerprint == model.fingerprint)
    assert combined.found_by == ("model", "static")
    assert combined.chain == static_chain
    assert combined.explanation == model.explanation
    assert combined.severity == "high" and combined.window == 1
    assert list(merged) == sorted(merged, key=lambda f: f.sort_key())


def test_merge_prefers_the_chain_with_more_verified_steps(rules):
    verified = ground_claim(claim(), make_repo(), rules, window=0)
    unverified = ground_claim(claim(), make_repo(edges=set()), rules, window=1)
    assert isinstance(verified, Finding) and isinstance(unverified, Finding)
    (merged,) = merge_findings([[unverified], [verified]])
    assert all(step.verified for step in merged.chain)


# ---------------------------------------------------------------- built-in call-chain rules


@pytest.mark.parametrize(
    ("rule_id", "sink_line", "safe_line"),
    [
        ("tx-outside-transaction", "    Order.objects.filter(id=1).update(paid=True)", "    total = compute(order)"),
        ("sql-injection", '    cursor.execute("SELECT * FROM t WHERE id = " + user_id)', "    rows = list(items)"),
        ("missing-authorization", "    document.delete()", "    if not owner: return None"),
        ("network-call-in-transaction", "    requests.post(WEBHOOK_URL, json=payload)", "    payload = build(order)"),
    ],
)
def test_builtin_call_chain_rules_load_and_recognise_their_sinks(rules, rule_id, sink_line, safe_line):
    rule = rules[rule_id]
    assert rule.sinks and rule.entry_points and rule.boundaries and rule.relevance
    assert "entry point" in rule.body.lower() and "chain" in rule.body.lower()
    assert rule.relevance_patterns()
    assert is_sink_line(sink_line, rule)
    assert not is_sink_line(safe_line, rule)


def test_sink_detection_stays_fast_on_minified_lines(rules):
    minified = "a.b(c);" * 30_000 + "x.save();"
    assert is_sink_line(minified, rules[RULE])
    assert not is_sink_line("a.b(c);" * 30_000, rules[RULE])


def test_new_rules_have_relevance_patterns_that_find_their_code(rules):
    samples = {
        "sql-injection": 'cur.execute(f"SELECT * FROM users WHERE name = \'{name}\'")',
        "missing-authorization": "@login_required\ndef delete_doc(request, pk):\n    Doc.objects.get(pk=pk).delete()",
        "network-call-in-transaction": "with transaction.atomic():\n    requests.post(url)",
    }
    for rule_id, sample in samples.items():
        assert any(pattern.search(sample) for pattern in rules[rule_id].relevance_patterns()), rule_id


def test_a_path_copied_from_the_prompt_matches_the_repository_path():
    from auditor.findings.grounding import normalise_path
    from auditor.pack.prompt import neutralise_control_tokens

    path = "templates/<s>/page.py"
    shown = neutralise_control_tokens(path)
    assert shown != path  # the prompt breaks the control-token text ...
    assert normalise_path("./" + shown) == path  # ... and a claim citing it still names the file


def test_chain_lines_follow_the_rule_each_step_at_its_call_to_the_next_the_last_at_the_sink(rules):
    """The model cites checkout's def line (4) and save_order's def line (4): grounding puts
    checkout on its call to save_order (5) and save_order on the sink (6)."""
    chain = (("app/views.py", 4, "checkout"), ("app/orders.py", 4, "save_order"))
    finding = ground_claim(claim(chain=chain), make_repo(), rules)
    assert isinstance(finding, Finding)
    entry, last = finding.chain
    assert (entry.line, entry.verified) == (5, True)
    assert entry.note == "line moved from 4 to 5, where it calls save_order"
    assert (last.line, last.function) == (finding.line, finding.function) == (6, "save_order")


def test_a_step_whose_function_never_calls_the_next_keeps_the_models_line(rules):
    chain = (("app/views.py", 10, "health"), ("app/orders.py", 4, "save_order"))
    finding = ground_claim(claim(chain=chain), make_repo(), rules)
    assert isinstance(finding, Finding)
    assert finding.chain[0].line == 10 and not finding.chain[0].verified
