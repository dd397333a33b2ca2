"""Likelihood and impact of a path's failure between its writes, and the report order by
severity, then strength (auditor/analysis/transactions/likelihood.py, impact.py,
assessment.py; the strength itself: test_tx_ordering.py)."""

from __future__ import annotations

import pytest

from auditor.analysis.transactions.assessment import assess
from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.grading import RERUNNABLE, Step
from auditor.analysis.transactions.impact import Impact, ImpactKind, impact
from auditor.analysis.transactions.likelihood import Likelihood, failure_points, likelihood
from auditor.callgraph.graph import FunctionRef
from auditor.findings.model import Finding
from auditor.rules.severity import Severity

PATH = "app/views.py"


def _lines(*source: str):
    lines = list(source)
    return lambda path: lines if path == PATH else []


def _write(line: int, effect: Effect = Effect.WRITE, in_loop: bool = False) -> Step:
    return Step(line, "write", (effect,), in_loop=in_loop)


@pytest.mark.parametrize(
    ("between", "kind"),
    [
        ("    raise ValueError('no')", "raise"),
        ("    form.full_clean()", "validation"),
        ("    serializer.is_valid(raise_exception=True)", "validation"),
        ("    item = Item.objects.get(pk=pk)", "lookup"),
        ("    code = request.POST['code']", "lookup"),
        ("    quantity = int(value)", "parsing"),
        ("    payload = json.loads(body)", "parsing"),
        ("    requests.post(url, json=payload)", "external call"),
        ("    notify_task.delay(order.pk)", "external call"),
    ],
)
def test_a_failure_point_between_the_writes_makes_a_failure_likely(between: str, kind: str):
    lines = _lines("    order.save()", between, "    line.save()")
    evidence = failure_points(PATH, (_write(1), _write(3)), lines)
    assert [(piece.line, piece.kind) for piece in evidence] == [(2, kind)]
    assert likelihood(evidence) == Likelihood.LIKELY
    assert evidence[0].describe(PATH).startswith("line 2 ")


@pytest.mark.parametrize(
    "between", ["    if total > Decimal(0):", "    count = int()", "    rate = float('0.5')", "    limit = int(-1)"]
)
def test_a_conversion_of_a_literal_is_no_failure_point(between: str):
    lines = _lines("    order.save()", between, "    line.save()")
    assert failure_points(PATH, (_write(1), _write(3)), lines) == ()


def test_writes_in_a_loop_are_possible_and_nothing_between_is_unlikely():
    lines = _lines("    order.save()", "    total = 1", "    line.save()")
    assert likelihood(failure_points(PATH, (_write(1), _write(3)), lines)) == Likelihood.UNLIKELY
    looped = failure_points(PATH, (_write(1), _write(3, in_loop=True)), lines)
    assert [piece.kind for piece in looped] == ["loop"] and likelihood(looped) == Likelihood.POSSIBLE


def test_a_failure_point_before_the_first_write_or_after_the_last_does_not_count():
    lines = _lines("    x = int(v)", "    order.save()", "    line.save()", "    raise Oops()")
    assert failure_points(PATH, (_write(2), _write(3)), lines) == ()


def test_a_delete_then_a_write_of_the_same_kind_destroys_before_it_replaces():
    lines = _lines("    view.rules.all().delete()", "    Rule.objects.create(view=view)")
    found = impact(PATH, (_write(1, Effect.DELETE), _write(2)), lines, "")
    assert found.impact == Impact.HIGH
    assert found.evidence.startswith("line 1 deletes") and "line 2 writes the same kind again" in found.evidence


@pytest.mark.parametrize(
    "text",
    ["    Wallet.objects.filter(pk=a).update(balance=F('balance') - amount)", "    product.stock -= 1", "    stock = 3"],
)
def test_counters_and_amounts_are_high_impact(text: str):
    lines = _lines("    order.save()", text)
    assert impact(PATH, (_write(1), _write(2)), lines, "").impact == Impact.HIGH


def test_a_new_object_then_a_write_that_names_it_is_left_half_configured():
    lines = _lines("    gateway = Gateway.objects.create(name=name)", "    Option.objects.create(gateway=gateway, key=key)")
    found = impact(PATH, (_write(1), _write(2)), lines, "")
    assert found.impact == Impact.HIGH and "leaves gateway half-configured" in found.evidence


def test_bookkeeping_rows_and_re_runnable_grades_are_low_impact_and_the_rest_medium():
    lines = _lines("    order.save()", "    OrderEvent.objects.create(order_id=pk)", "    other.save()")
    assert impact(PATH, (_write(1), _write(2)), lines, "").impact == Impact.LOW
    assert impact(PATH, (_write(1, Effect.UPDATE), _write(3, Effect.UPDATE)), lines, RERUNNABLE).impact == Impact.LOW
    assert impact(PATH, (_write(1), _write(3)), lines, "").impact == Impact.MEDIUM


def test_the_grade_states_its_evidence_and_a_high_impact_makes_it_critical():
    lines = _lines("    view.rules.all().delete()", "    n = int(raw)", "    Rule.objects.create(view=view, n=n)")
    ref = FunctionRef(PATH, "save_view")
    assessment = assess(ref, (_write(1, Effect.DELETE), _write(3)), (Severity.CRITICAL, ""), lines, entry_kind="http")
    assert assessment.severity == Severity.CRITICAL
    assert assessment.impact == Impact.HIGH and assessment.likelihood == Likelihood.LIKELY
    assert "line 2 parses input (n = int(raw))" in assessment.reason and "line 1 deletes" in assessment.reason
    plain = assess(ref, (_write(1), _write(3)), (Severity.CRITICAL, ""), _lines("    a.save()", "", "    b.save()"), entry_kind="http")
    assert (assessment.impact_kind, plain.impact_kind) == (ImpactKind.REPLACED, ImpactKind.PLAIN)  # ordering.py ranks them


def _finding(path: str, severity: Severity, strength: int) -> Finding:
    return Finding("tx-outside-transaction", severity, "t", path, 1, "f", (), "", ("static",), path, strength=strength)


def test_the_report_orders_by_severity_then_strength_then_path():
    findings = [_finding("a.py", Severity.CRITICAL, 0), _finding("z.py", Severity.CRITICAL, 26), _finding("b.py", Severity.HIGH, 30), _finding("c.py", Severity.CRITICAL, 26)]
    ordered = [finding.path for finding in sorted(findings, key=Finding.sort_key)]
    assert ordered == ["c.py", "z.py", "a.py", "b.py"]


def _update(line: int, in_loop: bool = False) -> Step:
    return Step(line, "update", (Effect.UPDATE,), in_loop=in_loop)


def test_a_failure_point_on_a_request_path_lifts_a_re_run_demotion():
    # An update, a lookup that raises, an update: "a re-run completes it" does not hold for
    # a request, whose re-run meets the same missing row.
    lines = _lines("    user.save()", "    code = Code.objects.get(user=user)", "    code.delete()")
    ref = FunctionRef(PATH, "reset_email")
    steps = (_update(1), Step(3, "delete", (Effect.DELETE,)))
    lifted = assess(ref, steps, (Severity.MEDIUM, RERUNNABLE), lines, entry_kind="http")
    assert lifted.severity == Severity.HIGH
    assert "not demoted for 'every write updates or deletes" in lifted.reason
    assert "line 2 looks up a row or key that may be missing" in lifted.reason
    # A command keeps the demotion: its operator re-runs it.
    kept = assess(ref, steps, (Severity.MEDIUM, RERUNNABLE), lines, entry_kind="cli")
    assert kept.severity == Severity.MEDIUM and "not demoted" not in kept.reason


def test_a_loop_lifts_an_upserts_first_demotion_but_nothing_lifts_one_without_a_failure_point():
    from auditor.analysis.transactions.grading import UPSERTS_FIRST

    ref = FunctionRef(PATH, "configure")
    looped = (Step(1, "link", (Effect.UPSERT,), in_loop=True), _update(3, in_loop=True))
    lines = _lines("    team.jobs.add(job)", "", "    through.save()")
    assert assess(ref, looped, (Severity.MEDIUM, UPSERTS_FIRST), lines, entry_kind="http").severity == Severity.HIGH
    straight = (Step(1, "link", (Effect.UPSERT,)), _update(3))
    assert assess(ref, straight, (Severity.MEDIUM, UPSERTS_FIRST), lines, entry_kind="http").severity == Severity.MEDIUM


def test_only_idempotent_writes_keep_their_grade():
    from auditor.analysis.transactions.grading import ONLY_IDEMPOTENT

    ref = FunctionRef(PATH, "enroll")
    lines = _lines("    Pending.objects.get_or_create(user=user)", "    n = int(raw)", "    Enrollment.objects.update_or_create(n=n)")
    steps = (Step(1, "upsert", (Effect.UPSERT,)), Step(3, "upsert", (Effect.UPSERT,)))
    assert assess(ref, steps, (Severity.MEDIUM, ONLY_IDEMPOTENT), lines, entry_kind="http").severity == Severity.MEDIUM


def test_a_discarded_result_is_no_new_object_and_half_configured_ranks_before_a_counter():
    from auditor.analysis.transactions.impact import ImpactKind

    go = _lines(
        '    _, err := db.ExecContext(ctx, "UPDATE items SET quantity = quantity + $1", delta)',
        "    if err != nil {",
        '    _, err = db.ExecContext(ctx, "INSERT INTO movements (sku) VALUES ($1)", sku)',
    )
    found = impact(PATH, (_write(1), _write(3)), go, "")
    assert found.kind == ImpactKind.COUNTER and "half-configured" not in found.evidence
    python = _lines("    order = Order.objects.create(total=total)", "", "    order.lines.create(quantity=2)")
    assert impact(PATH, (_write(1), _write(3)), python, "").kind == ImpactKind.HALF_CONFIGURED


SERVICES = "app/services.py"


def _files(files: dict[str, list[str]]):
    return lambda path: files.get(path, [])


def test_an_impact_in_a_callee_s_file_names_that_file():
    lines = _files({PATH: ["    replace_rules(view)"],
                    SERVICES: ["    view.rules.all().delete()", "    Rule.objects.create(view=view)"]})
    call = Step(1, "replace_rules(view)", (Effect.DELETE, Effect.WRITE), callee=FunctionRef(SERVICES, "replace_rules"),
                inner=(_write(1, Effect.DELETE), _write(2)))
    found = impact(PATH, (call,), lines, "")
    assert found.impact == Impact.HIGH
    assert found.evidence.startswith(f"{SERVICES}:1 deletes") and f"{SERVICES}:2 writes the same kind again" in found.evidence


def test_a_half_configured_object_in_a_callee_s_file_names_that_file():
    lines = _files({PATH: ["    setup(name)"],
                    SERVICES: ["    gateway = Gateway.objects.create(name=name)",
                               "    Option.objects.create(gateway=gateway, key=key)"]})
    call = Step(1, "setup(name)", (Effect.WRITE, Effect.WRITE), callee=FunctionRef(SERVICES, "setup"),
                inner=(_write(1), _write(2)))
    found = impact(PATH, (call,), lines, "")
    assert found.evidence.startswith(f"in setup, {SERVICES}:1 creates gateway and {SERVICES}:2 writes")


@pytest.mark.parametrize(("written", "half_configured"), [
    ("    Notification.objects.create(created_for=user, kind=kind)", False),
    ("    AuditLog(actor=user, action=kind).save()", False),
    ("    Option.objects.create(gateway=gateway, key=key)", True),
    # the model written decides, not a name elsewhere on the line; a RuleNotification is the
    # object's own setting (whom to notify), not a notice
    ("    Reminder.objects.create(gateway=gateway, channel=Notification.EMAIL)", True),
    ("    RuleNotification.objects.create(rule=gateway, email=email)", True),
])
def test_a_call_that_only_writes_notices_about_a_new_object_does_not_configure_it(written: str, half_configured: bool):
    # ChiefOnboarding's ``item = form.save()`` then ``item.send_notification_new_message()``,
    # whose one row is a ``Notification``: word of the object, not part of it
    lines = _files({PATH: ["    item = form.save()", "    item.send_notification(kind)"], SERVICES: [written]})
    call = Step(2, "item.send_notification(kind)", (Effect.SIDE_EFFECT, Effect.WRITE),
                callee=FunctionRef(SERVICES, "send_notification"), inner=(_write(1),))
    found = impact(PATH, (_write(1), call), lines, "")
    assert (found.kind == ImpactKind.HALF_CONFIGURED) is half_configured


def test_the_arguments_of_a_multi_line_first_write_are_no_failure_between_the_writes():
    lines = _lines("    Order.objects.create(", "        total=int(value),", "        note=(a, b),", "    )",
                   "    line.save()")
    assert failure_points(PATH, (_write(1), _write(5)), lines) == ()
    # What follows the first write's call still counts.
    after = _lines("    Order.objects.create(", "        total=total)", "    code = int(value)", "    line.save()")
    assert [(piece.line, piece.kind) for piece in failure_points(PATH, (_write(1), _write(4)), after)] == [(3, "parsing")]


@pytest.mark.parametrize(("band", "level", "shown"), [
    (Severity.CRITICAL, Impact.HIGH, Severity.CRITICAL),
    (Severity.HIGH, Impact.HIGH, Severity.CRITICAL),
    (Severity.CRITICAL, Impact.MEDIUM, Severity.HIGH),
    (Severity.CRITICAL, Impact.LOW, Severity.HIGH),
    (Severity.HIGH, Impact.MEDIUM, Severity.HIGH),
    (Severity.MEDIUM, Impact.HIGH, Severity.MEDIUM),
    (Severity.LOW, Impact.HIGH, Severity.LOW),
])
def test_the_impact_sets_the_severity_within_the_shown_bands_and_never_moves_a_finding_across_them(band, level, shown):
    from auditor.analysis.transactions.assessment import shown_severity

    assert shown_severity(band, level) == shown


def test_a_new_object_left_half_configured_is_critical_and_a_plain_pair_of_updates_high():
    ref = FunctionRef(PATH, "signup")
    lines = _lines("    team = Team.objects.create(name=name)", "    team.members.add(user)", "    user.save()")
    created = (_write(1), Step(2, "link", (Effect.UPSERT,)), _update(3))
    assert assess(ref, created, (Severity.CRITICAL, ""), lines, entry_kind="http").severity == Severity.CRITICAL
    plain = (_update(1), _update(3))
    updates = _lines("    user.save()", "", "    profile.save()")
    assert assess(ref, plain, (Severity.CRITICAL, ""), updates, entry_kind="http").severity == Severity.HIGH


def test_a_subscript_stored_to_is_no_lookup_that_may_fail():
    # Round 10's Argus: ``request.session["selected_filter"] = selected`` stores a key.
    lines = _lines("    order.save()", '    request.session["selected"] = selected', "    line.save()")
    assert failure_points(PATH, (_write(1), _write(3)), lines) == ()
    read = _lines("    order.save()", '    request.session["selected"] = request.POST["code"]', "    line.save()")
    assert [piece.kind for piece in failure_points(PATH, (_write(1), _write(3)), read)] == ["lookup"]


def test_an_object_saved_holding_a_new_row_is_what_belongs_to_it():
    # Round 10's Argus ``AddSourceSystemForm.save``: the user is created, set on the source
    # system, which is saved after it.
    lines = _lines(
        "    user = User.objects.create(username=name)", "    instance.user = user", "    if commit:", "        instance.save()"
    )
    found = impact(PATH, (_write(1), _write(4)), lines, "")
    assert found.kind == ImpactKind.HALF_CONFIGURED and "leaves user half-configured" in found.evidence
    unrelated = _lines("    user = User.objects.create(username=name)", "    instance.owner = owner", "    instance.save()")
    assert impact(PATH, (_write(1), _write(3)), unrelated, "").kind == ImpactKind.PLAIN


def test_a_manager_create_through_the_model_s_save_override_creates_its_row():
    # Round 10's Argus ``Incident.create_ack``: ``Event.objects.create`` runs ``Event.save``.
    lines = _lines("    event = Event.objects.create(incident=self)", "    ack = Acknowledgement.objects.create(event=event)")
    save = Step(1, "calls Event.save", (Effect.WRITE, Effect.WRITE), FunctionRef("app/models.py", "Event.save"))
    found = impact(PATH, (save, _write(2)), lines, "")
    assert found.kind == ImpactKind.HALF_CONFIGURED and "leaves event half-configured" in found.evidence
    other = Step(1, "calls notify", (Effect.WRITE,), FunctionRef("app/models.py", "notify"))
    assert impact(PATH, (other, _write(2)), _lines("    event = notify(self)", "    Ack.objects.create(event=event)"), "").kind != ImpactKind.HALF_CONFIGURED
