"""Shared fixtures: a tiny Nemotron-shaped tokenizer built at test time (never downloaded)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never reach the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"

# vllm.LLM keyword arguments auditor may pass (FACTS.md, vLLM 0.33.0 offline API).
VLLM_LLM_KWARGS = {
    "model",
    "trust_remote_code",
    "max_model_len",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "kv_cache_dtype",
    "mamba_ssm_cache_dtype",
    "enable_prefix_caching",
    "gpu_memory_utilization",
    "max_num_seqs",
    "tensor_parallel_size",
    "seed",
    "reasoning_parser",
    "structured_outputs_config",
}

# Nemotron 3 Nano's special-token layout: ids 0-13 as in the real vocabulary.
SPECIAL_TOKENS = [
    "<unk>", "<s>", "</s>", "<SPECIAL_3>", "<SPECIAL_4>", "<SPECIAL_5>", "<SPECIAL_6>", "<SPECIAL_7>",
    "<SPECIAL_8>", "[TOOL_CALLS]", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
]

# Same turn format as the upstream template: a system turn always, and the thinking switch
# in the generation prompt.
CHAT_TEMPLATE = (
    "{%- set enable_thinking = enable_thinking if enable_thinking is defined else True %}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system = messages[0]['content'] %}"
    "{%- set rest = messages[1:] %}{%- else %}{%- set system = '' %}{%- set rest = messages %}{%- endif %}"
    "{{- '<|im_start|>system\\n' ~ system ~ '<|im_end|>\\n' }}"
    "{%- for m in rest %}{{- '<|im_start|>' ~ m['role'] ~ '\\n' ~ m['content'] ~ '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{%- if enable_thinking %}{{- '<|im_start|>assistant\\n<think>\\n' }}"
    "{%- else %}{{- '<|im_start|>assistant\\n<think></think>' }}{%- endif %}{%- endif %}"
)

TRAINING_TEXT = [
    "def save_order(order):\n    order.save()\n    return order\n",
    "from django.db import transaction\n\n@transaction.atomic\ndef checkout(request):\n    pass\n",
    "class OrderService:\n    def create(self, session, item):\n        session.add(item)\n        session.commit()\n",
    "function handler(req, res) { return db.query('INSERT INTO t VALUES (1)'); }\n",
    "func main() { db.Exec(\"UPDATE accounts SET balance = 0\") }\n",
    "public class A { @Transactional public void run() { repo.save(x); } }\n",
    "<<<FILE path=\"app/views.py\" view=full lines=1-10/10>>>\n1|import os\n2|\n<<<END FILE \"app/views.py\">>>\n",
    "You are auditor. Report only what you can trace. Repository map, findings, chain, sink.\n",
] * 20


def build_tiny_tokenizer(directory: Path) -> Path:
    """Train a byte-level BPE with Nemotron's special tokens and save it as an HF tokenizer dir."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="<|im_end|>", unk_token="<unk>", pad_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    directory.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(directory))
    return directory


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """Caches written by the code under test go to a session directory, never the user's ~/.cache."""
    previous = os.environ.get("AUDITOR_CACHE_DIR")
    os.environ["AUDITOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("auditor-cache"))
    yield
    if previous is None:
        os.environ.pop("AUDITOR_CACHE_DIR", None)
    else:
        os.environ["AUDITOR_CACHE_DIR"] = previous


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer directory loadable with AutoTokenizer.from_pretrained, built once per session."""
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tiny-tokenizer"))


@pytest.fixture(scope="session")
def standin_tokenizer_dir() -> Path:
    """The 131,072-id stand-in from ../shared (skips when absent)."""
    directory = SHARED / "nemotron" / "standin-tokenizer"
    if not (directory / "tokenizer.json").is_file():
        pytest.skip("../shared/nemotron/standin-tokenizer is not present")
    return directory
