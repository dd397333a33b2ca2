"""A flag stored from an argument (round 6, an "infeasible path" cause): ``update(x,
save=False)`` stores ``self.save = save`` at the top of the method (or through a
``self.reset(save=save)`` it calls first), and every write step it then calls on ``self``
returns early on ``if not self.save``. The preview path writes nothing. A true flag, a
second assignment of the attribute anywhere, or a test above the store keep the finding."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = """
    from django.db import models

    class Member(models.Model):
        name = models.CharField(max_length=20)

    class Proposal(models.Model):
        name = models.CharField(max_length=20)
    """


def _importer(store: str, extra: str = "") -> str:
    return f"""
    from .models import Member, Proposal

    class Importer:
        def reset(self, save=False):
            self.log = []
            self.save = save

        def update(self, source, save=True):
            {store}
            self.cleanup()
            self.propose()
            return True

        def cleanup(self):
            if not self.save:
                return
            Member.objects.filter(name="gone").delete()

        def propose(self):
            if self.save:
                Proposal.objects.create(name="new")
            return None
{extra}
    """


DIRECT = "self.save = save"
THROUGH_RESET = "self.reset(save=save)"


def _findings(importer: str, call: str, rule: Rule) -> dict:
    views = f"""
        from .importer import Importer

        def preview(request):
            importer = Importer()
            {call}
            return None
        """
    files = {"app/models.py": MODELS, "app/importer.py": importer, "app/views.py": views}
    return {key: finding for key, finding in reported(analyze_source(files, rule)).items() if finding.severity in ("critical", "high")}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


@pytest.mark.parametrize("call", ["importer.update(request.source, save=False)", "importer.update(request.source, False)"])
def test_a_false_flag_stored_through_a_reset_on_self_switches_off_the_write_steps(call: str, rule: Rule):
    assert ("app/importer.py", "Importer.update") not in _findings(_importer(THROUGH_RESET), call, rule)


def test_the_flag_stored_directly_in_the_method_switches_off_the_write_steps(rule: Rule):
    importer = _importer(DIRECT).replace("            self.log = []\n            self.save = save\n", "            self.log = []\n", 1)
    assert ("app/importer.py", "Importer.update") not in _findings(importer, "importer.update(request.source, save=False)", rule)


@pytest.mark.parametrize(
    ("importer", "call"),
    [
        (_importer(THROUGH_RESET), "importer.update(request.source, save=True)"),  # the flag is true
        (_importer(THROUGH_RESET), "importer.update(request.source)"),  # the default True
        (  # another assignment of the attribute: a later call may set it again
            _importer(THROUGH_RESET, "\n        def enable(self):\n            self.save = True\n"),
            "importer.update(request.source, save=False)",
        ),
        (_importer("if self.save:\n                pass\n            " + THROUGH_RESET), "importer.update(request.source, save=False)"),
    ],
)
def test_a_flag_that_may_be_true_keeps_the_finding(importer: str, call: str, rule: Rule):
    assert ("app/importer.py", "Importer.update") in _findings(importer, call, rule)


def test_a_method_that_stores_the_flag_again_forgets_what_its_caller_knew(rule: Rule):
    importer = _importer(THROUGH_RESET).replace(
        """        def propose(self):
            if self.save:
                Proposal.objects.create(name="new")""",
        """        def propose(self):
            self.reset(save=True)
            if self.save:
                Proposal.objects.create(name="new")
                Member.objects.create(name="new")""",
    )
    assert "self.reset(save=True)" in importer
    found = _findings(importer, "importer.update(request.source, save=False)", rule)
    assert any(path == "app/importer.py" for path, _ in found)


def test_a_parameter_bound_again_before_it_is_stored_may_be_true(rule: Rule):
    importer = _importer(DIRECT).replace("            self.log = []\n            self.save = save\n", "            self.log = []\n", 1)
    for rebinding in ("save = save or source.force", "save |= source.force", "for save in source.modes:\n                pass"):
        rebound = importer.replace("            self.save = save\n", f"            {rebinding}\n            self.save = save\n", 1)
        assert rebinding in rebound
        assert ("app/importer.py", "Importer.update") in _findings(rebound, "importer.update(request.source, save=False)", rule), rebinding


def test_a_parameter_bound_again_before_the_storing_call_may_be_true(rule: Rule):
    importer = _importer("save = save or source.force\n            " + THROUGH_RESET)
    assert ("app/importer.py", "Importer.update") in _findings(importer, "importer.update(request.source, save=False)", rule)


@pytest.mark.parametrize(
    ("store", "extra"),
    [
        (  # a method of the class stores attributes by computed names
            "\n            self.configure(source.options)",
            "\n        def configure(self, options):\n            for key, value in options.items():\n                setattr(self, key, value)\n",
        ),
        ("\n            self.__dict__.update(source.options)", ""),
        ("\n            vars(self).update(source.options)", ""),
        ("\n            self.__dict__[source.key] = True", ""),
        ("", "\n    class Loader:\n        def load(self, options):\n            setattr(self, options.key, True)\n\n    class Eager(Importer, Loader):\n        pass\n"),  # a mixin of a subclass
    ],
)
def test_a_class_that_stores_attributes_by_computed_names_keeps_the_finding(store: str, extra: str, rule: Rule):
    importer = _importer(THROUGH_RESET + store, extra)
    assert ("app/importer.py", "Importer.update") in _findings(importer, "importer.update(request.source, save=False)", rule)


def test_a_computed_store_in_an_unrelated_class_keeps_what_is_known(rule: Rule):
    extra = "\n    class Loader:\n        def load(self, options):\n            setattr(self, options.key, True)\n"
    assert ("app/importer.py", "Importer.update") not in _findings(_importer(THROUGH_RESET, extra), "importer.update(request.source, save=False)", rule)
