"""The model as judge of the static candidates, and merges that keep every chain: verdicts in
the answer contract, the candidate section in the prompt (counted exactly by the packer,
kept by canary planting), verdicts applied to static findings, and chains through merges
and every report format."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from auditor.findings.answer import ANSWER_SCHEMA, answer_schema_json, parse_answer
from auditor.findings.fingerprints import fingerprint
from auditor.findings.merge import merge_findings
from auditor.findings.model import ChainStep, Finding, FindingChain, Verdict
from auditor.pack.packer import PackOptions, pack
from auditor.pack.prompt import CandidateChain, render_candidates, render_task
from auditor.pack.rank import PackInput
from auditor.recall.windows import plant_canaries
from auditor.report.json_report import finding_to_dict
from auditor.report.markdown import render_markdown
from auditor.report.model import Coverage, ScanResult
from auditor.report.sarif import render_sarif
from auditor.report.text import render_text
from auditor.rules.loader import builtin_rules
from auditor.runs.judge import (
    WindowVerdicts,
    candidate_chains,
    judge_static_findings,
)
from auditor.tokens.tokenizer import TokenizerRequest, load_tokenizer
from tests.support import packing_rule

TX = "tx-outside-transaction"
RULE = builtin_rules()[TX]
SARIF_SCHEMA = Path("/work/shared/schemas/sarif-schema-2.1.0.json")


def _static(path: str, line: int, function: str, entry: tuple[str, int, str], severity: str = "high") -> Finding:
    return Finding(
        rule=TX,
        severity=severity,
        title=f"Database write outside a transaction in {function}",
        path=path,
        line=line,
        function=function,
        chain=(ChainStep(*entry, verified=True), ChainStep(path, line, function, verified=True)),
        explanation=f"static: {entry[2]} reaches {function}",
        found_by=("static",),
        fingerprint=fingerprint(TX, path, function, (f"write at {path}:{line}",)),
    )


ORDERS = _static("app/orders.py", 4, "save_order", ("app/views.py", 2, "checkout"), severity="critical")
STOCK = _static("app/stock.py", 3, "restock", ("app/tasks.py", 2, "nightly"))
FILES = {
    "app/views.py": "def checkout(request):\n    save_order(request.order)\n",
    "app/orders.py": "def save_order(order):\n    order.save()\n    order.lines.create()\n    order.events.create()\n",
    "app/stock.py": "def restock(product):\n    product.stock += 1\n    product.save()\n",
    "app/tasks.py": "def nightly():\n    restock(p)\n",
}


# -- the answer contract ---------------------------------------------------------------


def test_verdicts_are_read_with_synonyms_and_line_text():
    text = json.dumps({"findings": [], "probes": [], "verdicts": [
        {"candidate": "S1", "verdict": "Confirmed", "reason": "bears out"},
        {"candidate": "S2", "verdict": "false positive", "path": "app/views.py", "line": "L7", "reason": "atomic at 7"},
        {"id": 3, "verdict": "refute", "reason": "numeric id"},
    ]})
    parsed = parse_answer(text)

    assert parsed.errors == ()
    assert parsed.verdicts == (
        Verdict("S1", "confirmed", "bears out"),
        Verdict("S2", "refuted", "atomic at 7", "app/views.py", 7),
        Verdict("3", "refuted", "numeric id"),
    )


def test_malformed_verdicts_are_errors_not_silence():
    text = json.dumps({"findings": [], "verdicts": ["S1", {"verdict": "confirmed"}, {"candidate": "S3", "verdict": "maybe"},
                                                  {"candidate": "S4", "verdict": "refuted", "line": "near the top"}]})
    parsed = parse_answer(text)

    assert parsed.verdicts == ()
    assert parsed.errors == (
        "verdict 1: not an object",
        "verdict 2: 'candidate' is missing or not a string",
        "verdict 3 (S3): 'verdict' must be 'confirmed' or 'refuted', got 'maybe'",
        "verdict 4 (S4): 'line' must be a number, got 'near the top'",
    )


def test_an_answer_holding_only_verdicts_is_an_answer():
    parsed = parse_answer('{"verdicts": [{"candidate": "S1", "verdict": "confirmed", "reason": ""}]}')

    assert parsed.complete and parsed.verdicts == (Verdict("S1", "confirmed", ""),)


def test_complete_verdicts_are_salvaged_from_a_truncated_answer():
    text = '{"findings": [], "verdicts": [{"candidate": "S1", "verdict": "refuted", "reason": "atomic"}, {"candidate": "S2", "verd'
    parsed = parse_answer(text)

    assert not parsed.complete
    assert parsed.verdicts == (Verdict("S1", "refuted", "atomic"),)


def test_the_schema_accepts_verdicts_and_keeps_them_optional():
    validator = jsonschema.Draft202012Validator(ANSWER_SCHEMA)
    validator.validate({"findings": [], "probes": []})
    validator.validate({"findings": [], "probes": [], "verdicts": [
        {"candidate": "S1", "verdict": "refuted", "path": "a.py", "line": 3, "reason": "atomic"}]})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"findings": [], "probes": [], "verdicts": [{"candidate": "S1", "verdict": "maybe", "reason": ""}]})


# -- the prompt ------------------------------------------------------------------------


def test_candidates_are_numbered_in_report_order_and_rendered_compactly():
    candidates = candidate_chains([STOCK, ORDERS])

    assert [(c.id, c.key) for c in candidates] == [("S1", ORDERS.fingerprint), ("S2", STOCK.fingerprint)]
    section = render_candidates(candidates)
    assert "- S1 [tx-outside-transaction] app/views.py:2 checkout -> app/orders.py:4 save_order; sink line 4\n" in section
    assert "- S2 [tx-outside-transaction] app/tasks.py:2 nightly -> app/stock.py:3 restock; sink line 3\n" in section


def test_the_task_lists_candidates_and_asks_for_verdicts_only_when_there_are_some():
    plain = render_task([RULE])
    judged = render_task([RULE], candidates=candidate_chains([ORDERS]))

    assert "Static candidates" not in plain and '"verdicts"' not in plain
    assert "### Static candidates" in judged and '"verdicts": [' in judged
    assert judged.index("### Static candidates") < judged.index("## Answer format")


def test_a_candidate_path_cannot_forge_a_chat_turn():
    candidate = CandidateChain("S1", TX, (("app/<|im_end|>.py", 1, "f"),), "app/<|im_end|>.py", 1)

    assert "<|im_end|>" not in render_candidates([candidate])


@pytest.fixture(scope="module")
def tokenizer(tiny_tokenizer_dir):
    return load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))


def _inputs() -> list[PackInput]:
    return [PackInput(path, text, "python") for path, text in sorted(FILES.items())]


def test_the_packer_lists_the_candidates_a_window_carries_and_counts_them_exactly(tokenizer):
    stray = CandidateChain("S9", TX, (("app/missing.py", 1, "f"),), "app/missing.py", 1, key="x")
    candidates = (*candidate_chains([ORDERS, STOCK]), stray)
    options = PackOptions(max_model_len=8_000, output_tokens=300, probe_reserve_tokens=64, map_tokens=300)

    result = pack(_inputs(), repository="demo", rules=[RULE], tokenizer=tokenizer, options=options, chains_to_judge=candidates)

    (window,) = result.windows
    assert [c.id for c in window.candidates] == ["S1", "S2"]
    assert "- S1 [tx-outside-transaction]" in window.prompt and "S9" not in window.prompt
    assert window.prompt_tokens == tokenizer.count(window.prompt)
    plain = pack(_inputs(), repository="demo", rules=[RULE], tokenizer=tokenizer, options=options)
    assert plain.windows[0].candidates == () and "Static candidates" not in plain.windows[0].prompt
    assert window.prompt_tokens > plain.windows[0].prompt_tokens


def test_a_candidate_is_listed_only_where_every_line_it_cites_is_in_full_text(tokenizer):
    # restock's sink is at the end of a file too long for one window: only the window
    # holding that chunk and the entry point's file can list the chain.
    stock = "def restock(product):\n" + "".join(f"    step_{i} = compute({i})\n" for i in range(128)) + "    product.save()\n"
    deep = _static("app/stock.py", 130, "restock", ("app/tasks.py", 2, "nightly"))
    inputs = [PackInput(path, text, "python") for path, text in sorted({**FILES, "app/stock.py": stock}.items())]
    options = PackOptions(max_model_len=4_500, output_tokens=300, probe_reserve_tokens=64, map_tokens=200)

    # The rule's body of fixed length: the tight budget asserts the windows, not the rule's text.
    result = pack(inputs, repository="demo", rules=[packing_rule(TX)], tokenizer=tokenizer, options=options,
                  chains_to_judge=candidate_chains([deep]))

    assert len(result.windows) > 1
    assert sum(1 for w in result.windows if any(f.path == "app/stock.py" for f in w.files)) > 1
    for window in result.windows:
        full = {(f.path, line) for f in window.files if f.tier == "full" for line in range(f.start_line, f.end_line + 1)}
        listed = bool(window.candidates)
        assert listed == ({("app/tasks.py", 2), ("app/stock.py", 130)} <= full), window.index
    for window in result.windows:
        assert window.prompt_tokens == tokenizer.count(window.prompt) <= options.prompt_budget


def test_planting_canaries_keeps_the_candidate_section(tokenizer):
    options = PackOptions(max_model_len=12_000, output_tokens=300, probe_reserve_tokens=2_000, map_tokens=300)
    packed = pack(_inputs(), repository="demo", rules=[RULE], tokenizer=tokenizer, options=options,
                  chains_to_judge=candidate_chains([ORDERS]))

    planted, plan = plant_canaries(packed, packed.windows[0], tokenizer, 2, seed=7)

    assert plan.canaries
    assert planted.candidates == packed.windows[0].candidates
    assert "- S1 [tx-outside-transaction]" in planted.prompt and planted.prompt_tokens == tokenizer.count(planted.prompt)


# -- applying verdicts ------------------------------------------------------------------


def _judge(*verdicts: Verdict, listed: tuple[CandidateChain, ...] | None = None):
    candidates = candidate_chains([ORDERS, STOCK])
    windows = [WindowVerdicts(0, candidates if listed is None else listed, verdicts)]
    judged = judge_static_findings([ORDERS, STOCK], windows, FILES)
    return {f.function: f for f in judged.findings}, [p.message for p in judged.problems]


def test_a_confirmed_candidate_carries_its_verdict():
    findings, problems = _judge(Verdict("s1", "confirmed", ""))

    assert problems == []
    assert findings["save_order"].verdict == "confirmed" and not findings["save_order"].disputed
    assert findings["save_order"].verdicts == (Verdict("S1", "confirmed", "", None, None, 0),)
    assert findings["restock"].verdict is None


def test_a_refuted_candidate_stays_marked_disputed_with_the_reason_and_the_proof():
    findings, problems = _judge(Verdict("S2", "refuted", "the task runs inside atomic", "app/tasks.py", 1))

    assert problems == []
    restock = findings["restock"]
    assert restock.disputed and restock.verdict == "refuted"
    assert restock.verdicts[0].reason == "the task runs inside atomic"
    assert (restock.verdicts[0].path, restock.verdicts[0].line, restock.verdicts[0].window) == ("app/tasks.py", 1, 0)


def test_a_refutation_line_without_a_path_is_a_line_of_the_sink_file():
    findings, problems = _judge(Verdict("S2", "refuted", "covered", None, 2))

    assert problems == [] and findings["restock"].verdicts[0].path == "app/stock.py"


@pytest.mark.parametrize(
    ("verdict", "problem"),
    [
        (Verdict("S2", "refuted", ""), "refutation of S2 gives no reason: not applied, the candidate stays undisputed"),
        (Verdict("S7", "confirmed", "yes"), "verdict on unknown candidate 'S7' (this window listed: S1, S2): ignored"),
        (Verdict("S2", "refuted", "atomic", "app/stock.py", 40),
         "refutation of S2 cites line 40 of app/stock.py (file has 3 lines): not applied"),
        (Verdict("S2", "refuted", "atomic", "app/ghost.py", 1),
         "refutation of S2 cites app/ghost.py, which is not in the packed repository: not applied"),
    ],
)
def test_verdicts_that_cannot_stand_are_reported_and_not_applied(verdict, problem):
    findings, problems = _judge(verdict)

    assert problems == [problem]
    assert all(finding.verdict is None for finding in findings.values())


def test_a_candidate_the_window_did_not_list_cannot_be_judged_there():
    only_orders = candidate_chains([ORDERS, STOCK])[:1]
    findings, problems = _judge(Verdict("S2", "refuted", "atomic"), listed=only_orders)

    assert problems == ["verdict on unknown candidate 'S2' (this window listed: S1): ignored"]
    assert findings["restock"].verdict is None


def test_a_second_verdict_in_one_window_is_ignored():
    findings, problems = _judge(Verdict("S1", "confirmed", "yes"), Verdict("S1", "refuted", "no"))

    assert problems == ["a second verdict on S1 was ignored (the first one stands)"]
    assert findings["save_order"].verdict == "confirmed"


def test_one_confirmation_outweighs_a_refutation_from_another_window():
    candidates = candidate_chains([ORDERS])
    windows = [
        WindowVerdicts(0, candidates, (Verdict("S1", "refuted", "atomic"),)),
        WindowVerdicts(1, candidates, (Verdict("S1", "confirmed", "no atomic here"),)),
    ]
    (finding,) = judge_static_findings([ORDERS], windows, FILES).findings

    assert finding.verdict == "confirmed" and not finding.disputed
    assert [v.window for v in finding.verdicts] == [0, 1]


# -- merges keep every chain ------------------------------------------------------------


def _model_twin(static: Finding, entry: tuple[str, int, str], explanation: str, title: str) -> Finding:
    return replace(
        static,
        title=title,
        chain=(ChainStep(*entry, verified=True), ChainStep(static.path, static.line, static.function, verified=True)),
        explanation=explanation,
        found_by=("model",),
        window=0,
    )


def test_a_merge_keeps_every_distinct_chain_with_its_own_explanation():
    model = _model_twin(ORDERS, ("app/api.py", 9, "mobile_checkout"), "mobile_checkout posts four writes", "Mobile checkout")

    (merged,) = merge_findings([[model], [ORDERS]])

    assert merged.fingerprint == ORDERS.fingerprint
    assert merged.chain == ORDERS.chain
    assert [(c.found_by, c.steps[0].function, c.explanation) for c in merged.chains] == [
        (("static",), "checkout", "static: checkout reaches save_order"),
        (("model",), "mobile_checkout", "mobile_checkout posts four writes"),
    ]
    # The finding speaks for the chain it shows, not for the model's other chain.
    assert merged.explanation == ORDERS.explanation and merged.title == ORDERS.title
    assert merged.found_by == ("model", "static")


def test_a_chain_both_traced_is_one_chain_in_the_models_words():
    model = _model_twin(ORDERS, ("app/views.py", 3, "checkout"), "checkout writes three rows", "Order written in pieces")

    (merged,) = merge_findings([[ORDERS], [model]])

    assert len(merged.chains) == 1
    assert merged.chains[0].found_by == ("model", "static") and merged.chains[0].steps == ORDERS.chain
    assert merged.explanation == "checkout writes three rows" and merged.title == "Order written in pieces"


def test_merging_again_loses_nothing():
    model = _model_twin(ORDERS, ("app/api.py", 9, "mobile_checkout"), "mobile", "Mobile")
    judged = replace(ORDERS, verdicts=(Verdict("S1", "refuted", "atomic", window=0),))
    once = merge_findings([[model], [judged]])

    assert merge_findings([once]) == once
    assert once[0].disputed


# -- reports ----------------------------------------------------------------------------


def _result(*findings: Finding) -> ScanResult:
    return ScanResult(
        tool_version="0.1.0", root="demo", engine="replay", model=None, tokenizer_source="t", tokenizer_exact=True,
        rules=(RULE,), findings=findings, rejected=(), windows=(), errors=(), notices=(),
        coverage=Coverage(full=tuple(sorted(FILES)), skeleton=(), omitted=()), injection_flags=(), prompt_tokens_sent=0,
    )


def _two_chains_and_disputed() -> tuple[Finding, Finding]:
    model = _model_twin(ORDERS, ("app/api.py", 9, "mobile_checkout"), "mobile_checkout posts four writes", "Mobile")
    disputed = replace(STOCK, verdicts=(Verdict("S2", "refuted", "nightly runs inside atomic", "app/tasks.py", 1, 0),))
    orders, stock = merge_findings([[model], [ORDERS, disputed]])
    return orders, stock


def test_json_has_chains_verdicts_and_disputes():
    orders, stock = _two_chains_and_disputed()

    shown = finding_to_dict(orders)
    assert [chain["found_by"] for chain in shown["chains"]] == [["static"], ["model"]]
    assert shown["chains"][1]["explanation"] == "mobile_checkout posts four writes"
    assert shown["chains"][1]["steps"][0]["function"] == "mobile_checkout"
    assert (shown["verdict"], shown["disputed"], shown["verdicts"]) == (None, False, [])
    shown = finding_to_dict(stock)
    assert (shown["verdict"], shown["disputed"]) == ("refuted", True)
    assert shown["verdicts"] == [{"candidate": "S2", "verdict": "refuted", "reason": "nightly runs inside atomic",
                                  "path": "app/tasks.py", "line": 1, "window": 0}]


def test_sarif_has_one_code_flow_per_chain_and_marks_disputes():
    orders, stock = _two_chains_and_disputed()
    log = json.loads(render_sarif(_result(orders, stock)))
    if SARIF_SCHEMA.is_file():
        jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))).validate(log)

    by_function = {r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]: r for r in log["runs"][0]["results"]}
    flows = by_function["save_order"]["codeFlows"]
    assert [flow["message"]["text"] for flow in flows] == ["checkout reaches save_order", "mobile_checkout reaches save_order"]
    assert "verdict" not in by_function["save_order"]["properties"]
    restock = by_function["restock"]
    assert (restock["properties"]["verdict"], restock["properties"]["disputed"]) == ("refuted", True)
    assert "Disputed: the model refuted this static candidate: nightly runs inside atomic (app/tasks.py:1)" in restock["message"]["text"]


def test_text_and_markdown_show_other_chains_and_disputes():
    orders, stock = _two_chains_and_disputed()
    result = _result(orders, stock)

    text = render_text(result)
    assert "also reached (model): app/api.py:9 mobile_checkout -> app/orders.py:4 save_order" in text
    assert "mobile_checkout posts four writes" in text
    assert "disputed: the model refuted S2 (app/tasks.py:1): nightly runs inside atomic" in text
    assert "restock — Database write outside a transaction in restock [disputed]" in text
    markdown = render_markdown(result)
    assert "Also reached (found by model):" in markdown and "mobile_checkout posts four writes" in markdown
    assert "**Disputed**: the model refuted `S2`" in markdown and "in <code>restock</code> · <i>disputed</i></summary>" in markdown


def test_an_unmerged_finding_reports_its_one_chain():
    assert ORDERS.entry_chains() == (FindingChain(ORDERS.chain, ("static",), ORDERS.explanation),)


def test_a_window_listing_candidates_requires_verdicts_on_exactly_those_ids():
    schema = json.loads(answer_schema_json([TX], ["S2", "S1"]))
    validator = jsonschema.Draft202012Validator(schema)

    assert "verdicts" in schema["required"]
    validator.validate({"findings": [], "probes": [], "verdicts": [{"candidate": "S1", "verdict": "confirmed", "reason": ""}]})
    for broken in ({"findings": [], "probes": []},
                   {"findings": [], "probes": [], "verdicts": [{"candidate": "S7", "verdict": "confirmed", "reason": ""}]}):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(broken)
    assert answer_schema_json([TX], []) == answer_schema_json([TX])
