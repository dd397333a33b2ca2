"""Checkpoints: what the planner reads from one, and how its weights are stored.

Input: a checkpoint directory, an id in the local Hugging Face cache (never downloaded), or
a bare config.json. Output: a frozen ``Checkpoint`` (its config.json, the text model's part
for multimodal configs, the safetensors total size and ModelOpt's hf_quant_config.json when
present), the weight ``Precision`` detected from them, and the KV cache dtype that goes with
it. ``PlanError`` is every planning stage's error for a config it cannot plan from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from auditor.errors import AuditorError, UsageError

_NESTED_TEXT_CONFIGS = ("text_config", "llm_config", "language_config")
_PRECISION_SUFFIX = re.compile(r"-(BF16|FP8|NVFP4)$", re.IGNORECASE)


class PlanError(AuditorError):
    """A config, checkpoint or device profile cannot be planned from (missing or bad fields)."""


class Precision(StrEnum):
    """How the checkpoint stores its weights."""

    BF16 = "bf16"
    FP8 = "fp8"
    NVFP4 = "nvfp4"


@dataclass(frozen=True)
class PrecisionDetection:
    """A detected precision (None when unknown) and where it was read from."""

    precision: Precision | None
    source: str


@dataclass(frozen=True)
class Checkpoint:
    """What the plan reads from a checkpoint: its config.json (the text model's part for
    multimodal configs), where it came from, and the optional weight-size sources."""

    label: str
    config: Mapping[str, Any]
    config_path: Path
    directory: Path | None
    model_id: str | None
    safetensors_total_size: int | None
    quant_config: Mapping[str, Any] | None

    @property
    def name(self) -> str:
        """The model id, else the checkpoint directory's name (where a -FP8 suffix would be)."""
        if self.model_id:
            return self.model_id
        return (self.directory or self.config_path.parent).resolve().name


# --- checkpoint loading ---------------------------------------------------------------


def resolve_model_dir(model: str, *, cache_dir: Path | None = None) -> tuple[Path, str | None]:
    """Return (directory, model id) for ``model``: an existing directory (id None), or a
    Hugging Face id found in the local cache (never downloads). Raises UsageError otherwise."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path, None
    if path.exists():
        raise UsageError(f"{model}: not a checkpoint directory (pass a config.json with --config)")
    if model.startswith(("/", ".", "~")) or model.count("/") > 1:
        raise UsageError(f"{model}: no such checkpoint directory")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        snapshot = snapshot_download(
            model,
            local_files_only=True,
            allow_patterns=["config.json", "*.json", "*.jinja"],
            cache_dir=cache_dir,
        )
    except (LocalEntryNotFoundError, HFValidationError, FileNotFoundError) as exc:
        raise UsageError(
            f"{model}: not a directory and not in the local Hugging Face cache; plan and doctor "
            f"never download (fetch it first with `hf download {model}`)"
        ) from exc
    return Path(str(snapshot)), model


def load_checkpoint(model: str, *, cache_dir: Path | None = None) -> Checkpoint:
    """Load the checkpoint named by ``model`` (directory or locally cached HF id)."""
    directory, model_id = resolve_model_dir(model, cache_dir=cache_dir)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise UsageError(f"{model}: no config.json in {directory}")
    return _checkpoint_from(config_path, label=model, directory=directory, model_id=model_id)


def load_config_file(config_path: Path) -> Checkpoint:
    """Load a bare config.json; a safetensors index or hf_quant_config.json next to it is used."""
    if not config_path.is_file():
        raise UsageError(f"{config_path}: no such config file")
    return _checkpoint_from(config_path, label=str(config_path), directory=config_path.parent, model_id=None)


def _checkpoint_from(config_path: Path, *, label: str, directory: Path, model_id: str | None) -> Checkpoint:
    config = _read_json(config_path)
    index = directory / "model.safetensors.index.json"
    total_size: int | None = None
    if index.is_file():
        metadata = _read_json(index).get("metadata")
        size = metadata.get("total_size") if isinstance(metadata, dict) else None
        total_size = int(size) if isinstance(size, (int, float)) and size > 0 else None
    quant_path = directory / "hf_quant_config.json"
    quant_config = _read_json(quant_path) if quant_path.is_file() else None
    return Checkpoint(
        label=label,
        config=config,
        config_path=config_path,
        directory=directory,
        model_id=model_id,
        safetensors_total_size=total_size,
        quant_config=quant_config,
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(f"{path}: cannot read JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a JSON object")
    return data


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The text model's config: ``config`` itself, or its nested text/LLM config for
    multimodal wrappers that keep ``hidden_size`` there."""
    if "hidden_size" in config:
        return config
    for key in _NESTED_TEXT_CONFIGS:
        nested = config.get(key)
        if isinstance(nested, dict) and "hidden_size" in nested:
            return nested
    return config


# --- precision ------------------------------------------------------------------------


def detect_precision(
    config: Mapping[str, Any],
    *,
    model_name: str | None = None,
    quant_config: Mapping[str, Any] | None = None,
) -> PrecisionDetection:
    """Detect weight precision from config.json ``quantization_config``, then ModelOpt's
    hf_quant_config.json, then a -BF16/-FP8/-NVFP4 model-name suffix, then ``torch_dtype``."""
    quantization = config.get("quantization_config")
    if isinstance(quantization, dict):
        found = _precision_from_quantization(quantization)
        if found is not None:
            return PrecisionDetection(found, "config.json quantization_config")
    if isinstance(quant_config, dict) and isinstance(quant_config.get("quantization"), dict):
        found = _precision_from_quantization(quant_config["quantization"])
        if found is not None:
            return PrecisionDetection(found, "hf_quant_config.json")
    if model_name:
        match = _PRECISION_SUFFIX.search(model_name.rstrip("/").split("/")[-1])
        if match:
            return PrecisionDetection(Precision(match.group(1).lower()), f"model name suffix -{match.group(1).upper()}")
    if isinstance(quantization, dict):
        method = quantization.get("quant_method", "unknown")
        return PrecisionDetection(None, f"unrecognised quantization_config (quant_method {method!r})")
    dtype = config.get("torch_dtype") or config.get("dtype")
    if dtype in ("bfloat16", "float16", "float32"):
        return PrecisionDetection(Precision.BF16, f"torch_dtype {dtype}")
    return PrecisionDetection(Precision.BF16, "default (no quantization_config)")


def _precision_from_quantization(quantization: Mapping[str, Any]) -> Precision | None:
    words = [str(quantization.get(key, "")).lower() for key in ("quant_algo", "quant_method", "format")]
    layers = quantization.get("quantized_layers")
    if isinstance(layers, dict):
        words += [str(entry.get("quant_algo", "")).lower() for entry in layers.values() if isinstance(entry, dict)]
    groups = quantization.get("config_groups")
    if isinstance(groups, dict):
        words += [str(group.get("format", "")).lower() for group in groups.values() if isinstance(group, dict)]
    if any("fp4" in word for word in words):
        return Precision.NVFP4
    if any("fp8" in word or word == "float-quantized" for word in words):
        return Precision.FP8
    return None


def default_kv_cache_dtype(precision: Precision) -> str:
    """ "fp8" for FP8/NVFP4 checkpoints (halves the KV cache), "auto" (model dtype) for BF16."""
    return "auto" if precision is Precision.BF16 else "fp8"
