"""Tiny random-weight checkpoints built at test time (never downloaded).

The weights are random except the output head, which gives every token the same logit but
two ordinary ones (``a`` and ``b``, one above and one below the rest, by the sign of the
last hidden state). So greedy decoding is deterministic where it matters: free text (a
reasoning trace) is a run of ``a``/``b``, and under a JSON schema, where neither token is
allowed, every token ties and the lowest allowed id wins, which spells the smallest valid
answer (``{"findings":[],"probes":[]}``) one character at a time and then stops. Without
this, random weights fill any JSON string until the budget runs out.

``build_tiny_nemotron_h``: NemotronH with a dense layer pattern (``M*M-``: Mamba-2,
attention, Mamba-2, MLP; vLLM's CPU backend has no MoE kernel for ``E``), Nemotron's
special-token layout (``<think>`` 12, ``</think>`` 13) and the Nemotron-shaped chat template
from tests/support.py. ``build_tiny_qwen2``: a tiny Qwen2 (attention only) for
prefix-cache accounting, which NemotronH cannot have on the CPU backend.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import build_tiny_tokenizer

MAX_POSITION_EMBEDDINGS = 8192


STEERED_TOKENS = ("a", "b")


def _save(model_config: object, directory: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(model_config)
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    head = model.get_output_embeddings().weight
    with torch.no_grad():
        head.zero_()
        up, down = (tokenizer.convert_tokens_to_ids(token) for token in STEERED_TOKENS)
        head[up] = 1.0
        head[down] = -1.0
    model.to(torch.float32).save_pretrained(str(directory))
    return directory


def build_tiny_nemotron_h(directory: Path) -> Path:
    """A NemotronH checkpoint directory (config, safetensors, tokenizer, chat template)."""
    from transformers import AutoTokenizer, NemotronHConfig

    build_tiny_tokenizer(directory)
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    config = NemotronHConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        hybrid_override_pattern="M*M-",
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=256,
        mamba_num_heads=8,
        mamba_head_dim=16,
        ssm_state_size=16,
        n_groups=2,
        conv_kernel=4,
        chunk_size=128,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS,
        bos_token_id=1,
        eos_token_id=11,
        pad_token_id=0,
        tie_word_embeddings=False,
        dtype="float32",
    )
    config.architectures = ["NemotronHForCausalLM"]
    return _save(config, directory)


def build_tiny_qwen2(directory: Path) -> Path:
    """A tiny Qwen2 checkpoint directory with the same tokenizer and template."""
    from transformers import AutoTokenizer, Qwen2Config

    build_tiny_tokenizer(directory)
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS,
        bos_token_id=1,
        eos_token_id=11,
        tie_word_embeddings=False,
        dtype="float32",
    )
    config.architectures = ["Qwen2ForCausalLM"]
    return _save(config, directory)
