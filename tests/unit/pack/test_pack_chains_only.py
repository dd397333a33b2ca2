"""Full-scan packing for a rule with a static analysis (issue #24 item 3): the windows carry
what lies on its chains, whole, and a file its keywords match but no chain passes through is
filler, carried once at most, or left out with its reason."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from auditor.config.scan import ScanConfig, WindowOptions
from auditor.engine.base import EngineSettings
from auditor.pack.packer import PackOptions, pack
from auditor.pack.rank import PackInput
from auditor.pack.reasons import PackReason
from auditor.rules.loader import builtin_rules
from auditor.runs.prepare import plan_windows
from auditor.tokens.tokenizer import TokenizerRequest, load_tokenizer
from tests.support import write_source

RULE = builtin_rules()["tx-outside-transaction"]
FILLER_REASONS = {PackReason.CONTEXT, PackReason.OUTLINE}


@pytest.fixture(scope="module")
def tokenizer(tiny_tokenizer_dir):
    return load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))


def _body(name: str, lines: int) -> str:
    return "".join(f"    {name}_{i} = compute({i}, 'text')\n" for i in range(lines))


def _files() -> list[PackInput]:
    """Six entry files calling one hub, and twenty files full of ORM keywords on no chain."""
    files = [PackInput("app/hub.py", "def write(order):\n    order.save()\n" + _body("hub", 20), "python")]
    files += [
        PackInput(f"app/entry{i}.py", f"from app.hub import write\n\ndef view{i}(request):\n    write(request)\n{_body('e', 30)}", "python")
        for i in range(6)
    ]
    files += [
        PackInput(f"app/keyword{i}.py", "def helper(order):\n" + "    order.save()\n    order.delete()\n" * 12 + _body("k", 20), "python")
        for i in range(20)
    ]
    return files


CHAINS = [(f"app/entry{i}.py", "app/hub.py") for i in range(6)]


def _pack(tokenizer, **options):
    settings = {"max_model_len": 7_000, "output_tokens": 300, "probe_reserve_tokens": 64, "map_tokens": 300} | options
    return pack(_files(), repository="r", rules=[RULE], tokenizer=tokenizer, options=PackOptions(**settings),
                chains=CHAINS, keyword_rules=())


def _full(result) -> Counter[str]:
    return Counter(path for window in result.windows for path in {f.path for f in window.files if f.tier == "full"})


def test_a_file_its_keywords_match_on_no_chain_is_not_repeated(tokenizer):
    result = _pack(tokenizer)
    assert len(result.windows) > 1
    full = _full(result)
    keyword_files = {f"app/keyword{i}.py" for i in range(20)}
    assert all(full[path] <= 1 for path in keyword_files)
    placed = {f.reason for window in result.windows for f in window.files if f.path in keyword_files}
    assert placed <= FILLER_REASONS
    assert not set(result.candidates) & keyword_files
    # Only the hub, which several chains need whole, repeats.
    assert {path for path, count in full.items() if count > 1} <= {"app/hub.py"}
    reasons = {o.path: o.reason for o in result.omitted}
    left_out = keyword_files - set(full) - {f.path for window in result.windows for f in window.files}
    assert left_out and all("no call chain" in reasons[path] for path in left_out)


def test_every_chain_sits_whole_in_one_window_and_keywords_open_no_window(tokenizer):
    result = _pack(tokenizer)
    assert result.chains_whole() == len(CHAINS)
    chain_reasons = {f.reason for window in result.windows for f in window.files if f.path.startswith(("app/entry", "app/hub"))}
    assert chain_reasons == {PackReason.CHAIN}
    # Every window holds a chain: the keyword files only fill the room the chains leave.
    assert all(any(f.reason is PackReason.CHAIN for f in window.files) for window in result.windows)


def test_the_keyword_rules_default_keeps_keyword_candidates(tokenizer):
    settings = {"max_model_len": 7_000, "output_tokens": 300, "probe_reserve_tokens": 64, "map_tokens": 300}
    result = pack(_files(), repository="r", rules=[RULE], tokenizer=tokenizer, options=PackOptions(**settings), chains=CHAINS)
    assert {f"app/keyword{i}.py" for i in range(20)} <= set(result.candidates)


def test_a_scan_plans_its_static_chains_not_its_keyword_files(tmp_path: Path, tiny_tokenizer_dir: Path, monkeypatch):
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "shop"
    write_source(root, "shop/views.py", (
        "from django.views import View\n\nfrom shop.services import pay\n\n\n"
        "class Pay(View):\n    def post(self, request):\n        return pay(request)\n"
    ))
    write_source(root, "shop/services.py", (
        "def pay(request):\n    order = Order.objects.create(total=1)\n    Payment.objects.create(order=order)\n    return order\n"
    ))
    # Matches the rule's patterns, reached by no entry point.
    write_source(root, "shop/unused.py", "def tidy(order):\n" + "    order.save()\n    Order.objects.filter(id=1).delete()\n" * 30)
    config = ScanConfig(
        root=root, rules=("tx-outside-transaction",), tokenizer=str(tiny_tokenizer_dir), probes=0, use_cache=False,
        engine_settings=EngineSettings(max_model_len=8_000), window=WindowOptions(output_tokens=300),
    )
    plan = plan_windows(config, load_tokenizer(config.tokenizer_request))
    placed = {f.path: f.reason for window in plan.packed.windows for f in window.files}
    assert placed["shop/views.py"] is PackReason.CHAIN and placed["shop/services.py"] is PackReason.CHAIN
    assert placed.get("shop/unused.py", PackReason.CONTEXT) in FILLER_REASONS
    assert "shop/unused.py" not in plan.packed.candidates
    assert plan.packed.chains_whole() == len(plan.packed.chains) == 1


def test_a_file_in_none_of_the_rules_languages_is_not_filler(tokenizer):
    component = PackInput("web/Orders.svelte", "<script>\n  order.save();\n  order.delete();\n</script>\n" * 5, None)
    settings = {"max_model_len": 7_000, "output_tokens": 300, "probe_reserve_tokens": 64, "map_tokens": 1_500}
    result = pack([*_files(), component], repository="r", rules=[RULE], tokenizer=tokenizer,
                  options=PackOptions(**settings), chains=CHAINS, keyword_rules=())
    assert all(f.path != component.path for window in result.windows for f in window.files)
    assert "none of the rules' languages" in {o.path: o.reason for o in result.omitted}[component.path]
    assert component.path in result.repo_map
