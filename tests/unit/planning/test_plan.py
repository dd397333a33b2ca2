"""Memory and time planning: layer counts, cache sizes, weights, fit, time curve, engine args."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditor.cli.doctor import doctor_command
from auditor.cli.plan import plan_command
from auditor.errors import ExitCode, UsageError
from auditor.planning.checkpoint import (
    PlanError,
    Precision,
    detect_precision,
    load_checkpoint,
    load_config_file,
)
from auditor.planning.plan import (
    ACTIVATION_RESERVE_BYTES,
    GIB,
    PlanRequest,
    count_layers,
    count_parameters,
    kv_bytes_per_token,
    mamba_state_bytes_per_sequence,
    plan_memory,
    recommended_engine_args,
    weight_bytes,
)
from auditor.planning.timing import estimate_time, load_device_profile
from tests.support import SHARED, TEST_DATA, VLLM_LLM_KWARGS

CONFIGS = TEST_DATA / "configs"
NEMOTRON = CONFIGS / "nemotron-3-nano-30b-a3b.json"
LLAMA = CONFIGS / "llama-3.1-8b.json"
FACTS = SHARED / "FACTS.md"



def nemotron_config() -> dict:
    return json.loads(NEMOTRON.read_text())


def checkpoint_dir(tmp_path: Path, config: dict, name: str = "model") -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def app() -> typer.Typer:
    application = typer.Typer()
    application.command("plan")(plan_command)
    application.command("doctor")(doctor_command)
    return application


# --- layers and caches ----------------------------------------------------------------


def test_nemotron_layer_counts_come_from_the_hybrid_pattern():
    layers = count_layers(nemotron_config())
    assert (layers.total, layers.attention, layers.mamba, layers.moe, layers.mlp) == (52, 6, 23, 23, 0)


def test_nemotron_kv_bytes_per_token_bf16_and_fp8():
    config = nemotron_config()
    assert kv_bytes_per_token(config, "auto") == 6 * 2 * 2 * 128 * 2 == 6144
    assert kv_bytes_per_token(config, "fp8") == 3072


def test_nemotron_mamba_state_per_sequence_follows_the_formula():
    ssm, conv = mamba_state_bytes_per_sequence(nemotron_config())
    assert ssm == 23 * 64 * 64 * 128 * 4  # float32 SSM state
    conv_dim = 64 * 64 + 2 * 8 * 128
    assert conv == 23 * conv_dim * (4 - 1) * 2  # conv state in the model dtype


def test_dense_config_has_every_layer_attention_and_no_mamba_state():
    config = json.loads(LLAMA.read_text())
    layers = count_layers(config)
    assert layers.attention == layers.total == config["num_hidden_layers"] == 32
    assert (layers.mamba, layers.moe) == (0, 0)
    assert kv_bytes_per_token(config, "auto") == 32 * 2 * 8 * 128 * 2
    assert mamba_state_bytes_per_sequence(config) == (0, 0)


def test_dense_context_costs_far_more_than_hybrid_context():
    assert kv_bytes_per_token(json.loads(LLAMA.read_text()), "auto") > 20 * kv_bytes_per_token(
        nemotron_config(), "auto"
    )


def test_layers_block_type_list_is_read_like_the_pattern():
    config = nemotron_config()
    kinds = {"M": "mamba", "E": "moe", "*": "attention"}
    config["layers_block_type"] = [kinds[char] for char in config.pop("hybrid_override_pattern")]
    assert count_layers(config).attention == 6
    assert count_layers(config).mamba == 23


def test_pattern_that_disagrees_with_num_hidden_layers_is_an_error():
    config = nemotron_config()
    config["num_hidden_layers"] = 50
    with pytest.raises(PlanError, match="num_hidden_layers"):
        count_layers(config)


def test_test_config_matches_the_verified_facts():
    if not FACTS.is_file():
        pytest.skip("shared FACTS.md not present")
    facts = FACTS.read_text()
    config = nemotron_config()
    assert f'`hybrid_override_pattern`\n  "{config["hybrid_override_pattern"]}"' in facts
    for field in ("hidden_size", "num_key_value_heads", "head_dim", "mamba_num_heads", "ssm_state_size", "n_groups"):
        assert f"`{field}` {config[field]}" in facts


# --- parameters and weights -----------------------------------------------------------


def test_nemotron_parameter_count_lands_near_31_6_billion():
    parameters = count_parameters(nemotron_config())
    assert abs(parameters.total - 31.6e9) / 31.6e9 < 0.01
    assert parameters.lm_head == parameters.embedding == 131072 * 2688
    assert parameters.moe_routed_experts == 23 * 128 * 2 * 2688 * 1856  # relu2 experts: up + down


def test_dense_llama_parameter_count_is_its_published_size():
    assert abs(count_parameters(json.loads(LLAMA.read_text())).total - 8.03e9) / 8.03e9 < 0.005


def test_weight_bytes_by_precision():
    parameters = count_parameters(nemotron_config())
    kept = parameters.total - parameters.quantisable
    assert weight_bytes(parameters, Precision.BF16) == 2 * parameters.total
    assert weight_bytes(parameters, Precision.FP8) == parameters.quantisable + 2 * kept
    nvfp4 = weight_bytes(parameters, Precision.NVFP4)
    assert nvfp4 == math.ceil(parameters.quantisable * (0.5 + 1 / 16)) + 2 * kept
    assert 16 * GIB < nvfp4 < 20 * GIB  # the NVFP4 checkpoint is ~18-19 GB
    assert weight_bytes(int(31.6e9), Precision.FP8) == int(31.6e9)


def test_missing_field_says_not_derivable_and_params_override_fills_in(tmp_path):
    config = nemotron_config()
    del config["moe_intermediate_size"]
    checkpoint = load_config_file(checkpoint_dir(tmp_path, config) / "config.json")
    plan = plan_memory(checkpoint, PlanRequest())
    assert plan.parameter_count is None and plan.weight_bytes is None and plan.total_bytes is None
    assert any("parameter count: not derivable" in note and "pass --params" in note for note in plan.notes)
    overridden = plan_memory(checkpoint, PlanRequest(params=31.6e9, precision=Precision.BF16))
    assert overridden.parameter_count == int(31.6e9)
    assert overridden.weight_bytes == 2 * int(31.6e9)


def test_safetensors_index_total_size_is_preferred(tmp_path):
    directory = checkpoint_dir(tmp_path, nemotron_config())
    index = {"metadata": {"total_size": 63_000_000_000}, "weight_map": {}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    checkpoint = load_config_file(directory / "config.json")
    plan = plan_memory(checkpoint, PlanRequest())
    assert plan.weight_bytes == 63_000_000_000
    assert "safetensors" in plan.weight_source
    # Planning another precision than the checkpoint's cannot use the checkpoint's own size.
    assert plan_memory(checkpoint, PlanRequest(precision=Precision.NVFP4)).weight_bytes < 20 * GIB


# --- precision ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quantization", "expected"),
    [
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, Precision.FP8),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, Precision.NVFP4),
        ({"quant_method": "fp8"}, Precision.FP8),
        ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}, Precision.NVFP4),
        ({"quant_algo": "MIXED_PRECISION", "quantized_layers": {"a": {"quant_algo": "NVFP4"}}}, Precision.NVFP4),
    ],
)
def test_precision_from_quantization_config(quantization, expected):
    config = {**nemotron_config(), "quantization_config": quantization}
    assert detect_precision(config).precision is expected


def test_precision_from_hf_quant_config_name_suffix_and_dtype():
    config = nemotron_config()
    assert detect_precision(config, quant_config={"quantization": {"quant_algo": "FP8"}}).precision is Precision.FP8
    assert (
        detect_precision(config, model_name="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4").precision is Precision.NVFP4
    )
    assert detect_precision(config, model_name="x/y-fp8").precision is Precision.FP8
    assert detect_precision(config).precision is Precision.BF16


def test_unrecognised_quantization_needs_precision_flag(tmp_path):
    config = {**nemotron_config(), "quantization_config": {"quant_method": "awq", "bits": 4}}
    checkpoint = load_config_file(checkpoint_dir(tmp_path, config) / "config.json")
    with pytest.raises(PlanError, match="--precision"):
        plan_memory(checkpoint, PlanRequest())
    assert plan_memory(checkpoint, PlanRequest(precision=Precision.BF16)).precision is Precision.BF16


# --- totals and fit -------------------------------------------------------------------


def test_totals_for_window_and_concurrency():
    checkpoint = load_config_file(NEMOTRON)
    plan = plan_memory(checkpoint, PlanRequest(precision=Precision.FP8, max_model_len=100_000, max_num_seqs=3))
    assert plan.kv_cache_dtype == "fp8"
    assert plan.kv_cache_bytes == 3072 * 100_000 * 3
    assert plan.mamba_state_bytes == plan.mamba_state_bytes_per_sequence * 3
    assert (
        plan.total_bytes == plan.weight_bytes + plan.kv_cache_bytes + plan.mamba_state_bytes + ACTIVATION_RESERVE_BYTES
    )


def test_default_window_is_the_models_up_to_262144():
    assert plan_memory(load_config_file(NEMOTRON), PlanRequest()).max_model_len == 262144
    assert plan_memory(load_config_file(LLAMA), PlanRequest()).max_model_len == 131072


def test_long_window_notes_the_environment_variable():
    plan = plan_memory(load_config_file(NEMOTRON), PlanRequest(max_model_len=1_048_576, precision=Precision.FP8))
    assert any("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in note for note in plan.notes)
    assert any("max_position_embeddings" in note for note in plan.notes)


def test_largest_window_fits_and_one_more_token_does_not():
    checkpoint = load_config_file(LLAMA)
    request = PlanRequest(gpu_memory_gib=40, max_num_seqs=2)
    fit = plan_memory(checkpoint, request).fit
    assert fit is not None and fit.max_model_len_by_memory is not None
    best = fit.max_model_len_by_memory
    assert plan_memory(checkpoint, PlanRequest(gpu_memory_gib=40, max_num_seqs=2, max_model_len=best)).fit.fits
    assert not plan_memory(checkpoint, PlanRequest(gpu_memory_gib=40, max_num_seqs=2, max_model_len=best + 1)).fit.fits


def test_largest_concurrency_fits_and_one_more_does_not():
    checkpoint = load_config_file(NEMOTRON)
    fit = plan_memory(checkpoint, PlanRequest(gpu_memory_gib=80, precision=Precision.FP8)).fit
    seqs = fit.max_num_seqs
    assert plan_memory(checkpoint, PlanRequest(gpu_memory_gib=80, precision=Precision.FP8, max_num_seqs=seqs)).fit.fits
    assert not plan_memory(
        checkpoint, PlanRequest(gpu_memory_gib=80, precision=Precision.FP8, max_num_seqs=seqs + 1)
    ).fit.fits


def test_hybrid_window_is_capped_by_position_embeddings_not_memory():
    fit = plan_memory(load_config_file(NEMOTRON), PlanRequest(gpu_memory_gib=128, precision=Precision.FP8)).fit
    assert fit.fits
    assert fit.max_model_len == 262144 < fit.max_model_len_by_memory


def test_model_too_big_for_gpu_does_not_fit():
    plan = plan_memory(load_config_file(NEMOTRON), PlanRequest(gpu_memory_gib=24, precision=Precision.BF16))
    assert not plan.fit.fits
    assert plan.fit.max_model_len == 0 and plan.fit.max_num_seqs == 0
    assert any("does not fit" in note for note in plan.notes)


# --- time -----------------------------------------------------------------------------

SPARK_TTFT = {512: 0.123, 2048: 0.242, 8192: 0.902, 32768: 3.96, 131072: 25.9}
SPARK_DECODE = {512: 61.3, 2048: 61.2, 8192: 60.8, 32768: 59.8, 131072: 56.0}


@pytest.mark.parametrize(("prompt_tokens", "ttft"), sorted(SPARK_TTFT.items()))
def test_time_estimate_reproduces_spark_ttft(prompt_tokens, ttft):
    estimate = estimate_time(prompt_tokens, 0, "dgx-spark")
    assert estimate.ttft_s == pytest.approx(ttft, rel=1e-9)
    assert estimate.total_s == estimate.ttft_s


@pytest.mark.parametrize(("prompt_tokens", "rate"), sorted(SPARK_DECODE.items()))
def test_time_estimate_reproduces_spark_decode_rate(prompt_tokens, rate):
    estimate = estimate_time(prompt_tokens, 1000, load_device_profile("dgx-spark"))
    assert estimate.decode_s == pytest.approx(1000 / rate, rel=1e-9)
    assert estimate.total_s == pytest.approx(SPARK_TTFT[prompt_tokens] + 1000 / rate, rel=1e-9)


def test_time_estimate_reproduces_the_end_to_end_request():
    # Its output length was not recorded: with no output tokens the estimate is the measurement.
    assert estimate_time(260_025, 0).total_s == pytest.approx(74.8, rel=1e-9)


def test_shipped_measurements_agree_with_the_reported_prefill_rates():
    profile = load_device_profile("dgx-spark")
    for point in profile.reported_prefill_tokens_per_s:
        rate = point.prompt_tokens / estimate_time(point.prompt_tokens, 0, profile).ttft_s
        assert rate == pytest.approx(point.value, rel=0.01)


def test_ttft_grows_with_prompt_length_and_continues_past_the_data():
    lengths = [1, 512, 1000, 5000, 20_000, 100_000, 131_072, 200_000, 260_025, 260_026, 500_000, 1_000_000]
    ttfts = [estimate_time(length, 0).ttft_s for length in lengths]
    assert ttfts == sorted(ttfts)
    assert estimate_time(260_026, 0).ttft_s == pytest.approx(74.8, rel=1e-4)
    # Past the data prefill cost per token keeps rising (attention), so at least linear growth.
    assert estimate_time(1_000_000, 0).ttft_s > 74.8 * 1_000_000 / 260_025


def test_unknown_profile_lists_known_ones():
    with pytest.raises(UsageError, match="dgx-spark"):
        estimate_time(1000, 0, "no-such-device")


# --- engine arguments -----------------------------------------------------------------


def engine_args(precision: Precision, **overrides) -> dict[str, object]:
    inputs: dict[str, object] = {
        "model": "/models/nemotron",
        "precision": precision,
        "max_model_len": 262144,
        "max_num_batched_tokens": 8192,
        "gpu_memory_utilization": 0.9,
        "max_num_seqs": 4,
    }
    return recommended_engine_args(**{**inputs, **overrides})


def test_engine_args_are_exactly_valid_vllm_llm_kwargs():
    args = engine_args(Precision.FP8)
    assert set(args) == VLLM_LLM_KWARGS
    assert list(args) == sorted(args)
    assert args["trust_remote_code"] is True and args["enable_chunked_prefill"] is True
    assert args["mamba_ssm_cache_dtype"] == "float32" and args["reasoning_parser"] == "nemotron_v3"
    assert (args["tensor_parallel_size"], args["seed"], args["enable_prefix_caching"]) == (1, 0, True)


def test_engine_args_kv_cache_dtype_follows_precision_unless_overridden():
    assert engine_args(Precision.FP8)["kv_cache_dtype"] == "fp8"
    assert engine_args(Precision.NVFP4)["kv_cache_dtype"] == "fp8"
    assert engine_args(Precision.BF16)["kv_cache_dtype"] == "auto"
    assert engine_args(Precision.BF16, kv_cache_dtype="fp8")["kv_cache_dtype"] == "fp8"


def test_engine_args_are_a_pure_function_of_their_inputs():
    assert engine_args(Precision.FP8, seed=7) == engine_args(Precision.FP8, seed=7)
    assert engine_args(Precision.FP8, seed=7)["seed"] == 7


def test_engine_args_reject_impossible_values():
    with pytest.raises(UsageError):
        engine_args(Precision.FP8, max_num_batched_tokens=2, max_num_seqs=4)
    with pytest.raises(PlanError):
        engine_args(Precision.FP8, kv_cache_dtype="int3")


# --- model resolution -----------------------------------------------------------------


def fake_hf_cache(tmp_path: Path, repo_id: str, config: dict) -> Path:
    cache = tmp_path / "hub"
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    (snapshot / "config.json").write_text(json.dumps(config))
    return cache


def test_hf_id_is_found_in_the_local_cache(tmp_path):
    repo_id = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
    cache = fake_hf_cache(tmp_path, repo_id, nemotron_config())
    checkpoint = load_checkpoint(repo_id, cache_dir=cache)
    assert checkpoint.model_id == repo_id
    assert plan_memory(checkpoint, PlanRequest()).precision is Precision.NVFP4


def test_hf_id_missing_from_cache_is_a_usage_error_without_download(tmp_path):
    with pytest.raises(UsageError, match="never download"):
        load_checkpoint("nvidia/not-cached", cache_dir=tmp_path / "empty")


# --- command --------------------------------------------------------------------------


def test_plan_command_json_is_sorted_and_carries_engine_args(tmp_path):
    directory = checkpoint_dir(tmp_path, nemotron_config(), name="NVIDIA-Nemotron-3-Nano-30B-A3B-FP8")
    result = CliRunner().invoke(app(), ["plan", "--model", str(directory), "--gpu-memory", "128", "--format", "json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert result.output == json.dumps(payload, indent=2, sort_keys=True) + "\n"
    assert payload["plan"]["kv_bytes_per_token"] == 3072
    assert payload["plan"]["layers"]["attention"] == 6
    assert set(payload["engine_args"]) == VLLM_LLM_KWARGS
    assert payload["engine_args"]["model"] == str(directory)
    assert payload["time_estimate"]["ttft_s"] > 0


def test_plan_command_text_shows_tables(tmp_path):
    result = CliRunner().invoke(app(), ["plan", "--config", str(LLAMA), "--gpu-memory", "80"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "131,072 bytes" in result.output  # KV per token of the dense model
    assert "32 attention" in result.output
    assert "vllm.LLM arguments" in result.output


def test_plan_command_needs_exactly_one_source():
    result = CliRunner().invoke(app(), ["plan"])
    assert result.exit_code == ExitCode.USAGE
    both = CliRunner().invoke(app(), ["plan", "--model", "x", "--config", str(LLAMA)])
    assert both.exit_code == ExitCode.USAGE


def test_plan_command_reports_a_missing_model_plainly(tmp_path):
    result = CliRunner().invoke(app(), ["plan", "--model", str(tmp_path / "nowhere" / "model")])
    assert result.exit_code == ExitCode.USAGE
    assert "no such checkpoint directory" in result.output
    uncached = CliRunner().invoke(app(), ["plan", "--model", "nvidia/surely-not-cached-here"])
    assert uncached.exit_code == ExitCode.USAGE
    assert "never download" in uncached.output


def test_config_file_precision_comes_from_its_directory_name(tmp_path):
    directory = checkpoint_dir(tmp_path, nemotron_config(), name="NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")
    plan = plan_memory(load_config_file(directory / "config.json"), PlanRequest())
    assert plan.precision is Precision.NVFP4
    assert plan.kv_cache_dtype == "fp8"


def test_device_profiles_cover_datacenter_gpus_and_differ_by_precision():
    from auditor.planning.timing import load_device_profiles

    profiles = load_device_profiles()
    assert profiles["dgx-spark"].measured and profiles["dgx-spark"].precision == "fp8"
    for device in ("h100", "h200", "b200", "dgx-spark"):
        fp8 = load_device_profile(device, "fp8")
        bf16 = load_device_profile(device, "bf16")
        assert bf16.precision == "bf16" and not bf16.measured and "ESTIMATE" in bf16.source
        assert fp8.precision == "fp8" and (fp8.measured or "ESTIMATE" in fp8.source)
        fast, slow = estimate_time(131072, 4096, fp8), estimate_time(131072, 4096, bf16)
        assert slow.ttft_s > fast.ttft_s and slow.decode_s > fast.decode_s, device
    # More memory bandwidth, faster decode; the measured Spark is the slowest.
    decode = {device: estimate_time(8192, 4096, load_device_profile(device, "fp8")).decode_s for device in ("dgx-spark", "h100", "h200", "b200")}
    assert decode["dgx-spark"] > decode["h100"] > decode["h200"] > decode["b200"]


def test_plan_command_takes_a_gpu_profile_and_says_its_numbers_are_scaled(tmp_path):
    directory = checkpoint_dir(tmp_path, nemotron_config(), name="NVIDIA-Nemotron-3-Nano-30B-A3B-FP8")
    result = CliRunner().invoke(app(), ["plan", "--model", str(directory), "--gpu-memory", "141", "--profile", "h200", "--format", "json"])
    assert result.exit_code == 0, result.output
    estimate = json.loads(result.output)["time_estimate"]
    assert (estimate["profile"], estimate["precision"], estimate["measured"], estimate["scaled_from"]) == ("h200-fp8", "fp8", False, "dgx-spark")
    bf16 = CliRunner().invoke(app(), ["plan", "--model", str(directory), "--gpu-memory", "141", "--profile", "h200",
                                      "--precision", "bf16", "--format", "json"])
    assert json.loads(bf16.output)["time_estimate"]["profile"] == "h200-bf16"
    text = CliRunner().invoke(app(), ["plan", "--model", str(directory), "--gpu-memory", "141", "--profile", "h200"], env={"COLUMNS": "160"})
    assert "ESTIMATE at FP8, scaled from dgx-spark" in text.output
    unknown = CliRunner().invoke(app(), ["plan", "--model", str(directory), "--profile", "tpu"])
    assert unknown.exit_code != 0 and "h200" in unknown.output


def test_an_unknown_device_profile_is_a_usage_error_naming_the_known_ones():
    from typer.testing import CliRunner

    from auditor.cli.app import app

    config = TEST_DATA / "configs" / "nemotron-3-nano-30b-a3b.json"
    result = CliRunner().invoke(app, ["plan", "--config", str(config), "--profile", "bogus"])
    assert result.exit_code == 64
    assert "unknown device profile 'bogus'" in result.output and "dgx-spark" in result.output
