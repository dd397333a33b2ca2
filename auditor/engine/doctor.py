"""Doctor: what this machine has for running an audit, and what auditor would do with it.

Inputs: an optional checkpoint (directory or an id in the local Hugging Face cache), an
optional server URL, the environment (PATH for nvidia-smi, AUDITOR_BASE_URL, AUDITOR_API_KEY).
Outputs: a frozen ``DoctorReport``: Python, auditor, vllm and torch/CUDA versions, GPUs and
their memory, the checkpoint (precision, tokenizer, chat template, reasoning parser),
whether its weights are there (a directory holding only ``config.json`` can be planned but
not served), which engine ``auto`` would pick and why, what the server at the base URL
serves (reachable, the model, its ``max_model_len``: auditor.engine.server_probe), the
memory plan and the exact ``vllm.LLM`` keyword arguments. Nothing here downloads, and vllm/torch are imported only when
installed and only when ``run_doctor`` runs.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from auditor import defaults
from auditor.errors import AuditorError
from auditor.planning.checkpoint import Checkpoint, detect_precision, load_checkpoint
from auditor.planning.plan import (
    GIB,
    REASONING_PARSER,
    MemoryPlan,
    PlanRequest,
    engine_args_for_plan,
    plan_memory,
    plan_to_dict,
)

KNOWN_MODEL_IDS = (
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
)
"""Checkpoints doctor looks for in the local Hugging Face cache when no --model is given."""

TOKENIZER_FILES = ("special_tokens_map.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
"""File endings of model weights (safetensors shards, PyTorch pickles, GGUF)."""
from auditor.engine.opening import BASE_URL_ENV as BASE_URL_VARIABLE  # noqa: E402
from auditor.engine.openai_engine import API_KEY_ENV  # noqa: E402
from auditor.engine.server_probe import ServerStatus, probe_server  # noqa: E402

_NVIDIA_SMI_TIMEOUT_S = 20
_WINDOW_ROUNDING = 1024


@dataclass(frozen=True)
class PackageStatus:
    """An optional package: its version (None when not installed) and a plain sentence."""

    name: str
    version: str | None
    importable: bool
    detail: str


@dataclass(frozen=True)
class TorchStatus:
    """torch's version, the CUDA it was built with, and whether CUDA is usable here."""

    version: str | None
    cuda_version: str | None
    cuda_available: bool
    detail: str


@dataclass(frozen=True)
class GpuInfo:
    """One GPU; ``memory_total_bytes`` is None when the driver does not report it."""

    index: int
    name: str
    memory_total_bytes: int | None


@dataclass(frozen=True)
class CheckpointStatus:
    """The checkpoint doctor found and what it carries."""

    path: str
    model_id: str | None
    precision: str | None
    precision_source: str
    tokenizer_files: tuple[str, ...]
    tokenizer_source: str
    tokenizer_exact: bool
    chat_template: str | None
    reasoning_parser: str
    reasoning_parser_available: bool
    weight_files: int = 0  # files of weights in the directory (0: config only, nothing to serve)


@dataclass(frozen=True)
class EngineChoice:
    """The engine ``--engine auto`` would use and why."""

    engine: str
    reason: str


@dataclass(frozen=True)
class DoctorReport:
    """Everything doctor found. ``engine_args`` holds exactly the ``vllm.LLM`` keyword
    arguments auditor would pass (None without a checkpoint to plan for)."""

    python_version: str
    platform: str
    auditor_version: str | None
    vllm: PackageStatus
    torch: TorchStatus
    gpus: tuple[GpuInfo, ...]
    gpu_source: str
    checkpoint: CheckpointStatus | None
    checkpoint_detail: str
    engine: EngineChoice
    plan: MemoryPlan | None
    engine_args: dict[str, object] | None
    notes: tuple[str, ...]
    server: ServerStatus | None = None  # what the server at the base URL serves; None without one


def run_doctor(
    model: str | None = None,
    *,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
) -> DoctorReport:
    """Inspect this machine, ``model`` (or the known Nemotron ids in the local HF cache) and
    the server at ``base_url`` (default: ``AUDITOR_BASE_URL``). Never raises for a missing
    GPU, package, checkpoint or server: each is reported in plain words."""
    environ = os.environ if environ is None else environ
    base_url = base_url or environ.get(BASE_URL_VARIABLE) or None
    notes: list[str] = []
    vllm_status = probe_vllm()
    torch_status = probe_torch()
    gpus, gpu_source = probe_gpus(environ)
    if not gpus:
        notes.append("No GPU found: the vllm engine cannot run here.")
    if vllm_status.version is None:
        notes.append("vllm is not installed: install auditor[vllm] on the GPU machine to use the vllm engine.")
    cpu_build = _is_cpu_build(vllm_status)
    if cpu_build:
        notes.append(
            f"vllm is a CPU build ({vllm_status.name} {vllm_status.version}): --engine vllm runs on the CPU "
            "for testing only, and --engine auto never picks it."
        )
    engine = choose_engine(
        vllm_importable=vllm_status.importable,
        cuda_available=torch_status.cuda_available,
        base_url=base_url,
        vllm_cpu_build=cpu_build,
    )
    server = None if base_url is None else probe_server(base_url, environ.get(API_KEY_ENV) or None)
    notes.extend(_server_notes(server))
    checkpoint, checkpoint_detail = _find_checkpoint(model, cache_dir)
    if cpu_build and checkpoint is not None and _is_mamba_hybrid(checkpoint.config):
        notes.append(
            "prefix caching with a Mamba hybrid (NemotronH) on vLLM's CPU backend is broken: it kills the "
            "engine on the first prefill over 128 tokens. Run with --no-prefix-caching."
        )
    status = None if checkpoint is None else checkpoint_status(checkpoint, vllm_status)
    if status is not None and not status.weight_files:
        notes.append(
            f"{status.path} holds config.json but no weights ({', '.join(WEIGHT_SUFFIXES)} files): the memory plan "
            "below reads the config only, and vLLM cannot serve it; download the full checkpoint"
        )
    plan, engine_args = None, None
    if checkpoint is not None:
        gpu_memory = next((gpu.memory_total_bytes for gpu in gpus if gpu.memory_total_bytes), None)
        try:
            plan = _plan_for_machine(checkpoint, gpu_memory, notes)
            engine_args = engine_args_for_plan(
                plan,
                model=str(checkpoint.directory or checkpoint.config_path.parent),
                gpu_memory_utilization=defaults.GPU_MEMORY_UTILIZATION,
            )
        except AuditorError as exc:
            notes.append(f"cannot plan for this checkpoint: {exc}")
    return DoctorReport(
        python_version=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        auditor_version=_version("auditor"),
        vllm=vllm_status,
        torch=torch_status,
        gpus=gpus,
        gpu_source=gpu_source,
        checkpoint=status,
        checkpoint_detail=checkpoint_detail,
        engine=engine,
        plan=plan,
        engine_args=engine_args,
        notes=tuple(notes),
        server=server,
    )


def _server_notes(server: ServerStatus | None) -> list[str]:
    """What doctor says about the server: unreachable, or listing no model."""
    if server is None:
        return []
    if not server.reachable:
        return [f"the server at {server.base_url} is not usable: {server.detail}"]
    if not server.models:
        return [f"the server at {server.base_url} lists no model: pass --model with the served name"]
    return []


def choose_engine(
    *, vllm_importable: bool, cuda_available: bool, base_url: str | None, vllm_cpu_build: bool = False
) -> EngineChoice:
    """What ``--engine auto`` picks on this machine: the engine stage's own rule
    (``auditor.engine.opening.auto_rule``), asked with what doctor found. A CPU build of
    vLLM (``vllm-cpu``) is never chosen: it is for testing."""
    from auditor.engine.opening import auto_rule

    problem = None
    if not vllm_importable:
        problem = "vllm is not importable"
    elif vllm_cpu_build:
        problem = "vllm is a CPU build (for testing with --engine vllm only)"
    elif not cuda_available:
        problem = "no CUDA GPU is available"
    engine, reason = auto_rule(vllm_problem=problem, base_url=base_url)
    return EngineChoice(engine, reason)


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")
"""The distributions that install the ``vllm`` package: the CUDA build and the CPU build."""


def probe_vllm() -> PackageStatus:
    """vllm's distribution, version and whether it imports (only attempted when it is installed).

    The CPU build's distribution is ``vllm-cpu``, so ``importlib.metadata.version("vllm")``
    fails for it: both names are tried, then ``vllm.__version__``. ``name`` is the
    distribution found ("vllm" when none is).
    """
    name, version = "vllm", None
    for distribution in VLLM_DISTRIBUTIONS:
        version = _version(distribution)
        if version is not None:
            name = distribution
            break
    if importlib.util.find_spec("vllm") is None:
        return PackageStatus(name, version, False, "vllm is not installed")
    try:
        import vllm
    except Exception as exc:  # noqa: BLE001 - a broken install fails in many ways; report any of them
        return PackageStatus(name, version, False, f"{name} {version} is installed but does not import: {exc}")
    if version is None:
        found = getattr(vllm, "__version__", None)
        version = found if isinstance(found, str) and found else None
    return PackageStatus(name, version, True, f"{name} {version} imports")


def _is_cpu_build(status: PackageStatus) -> bool:
    """Whether the vllm found is a CPU build (the ``vllm-cpu`` distribution or a ``+cpu`` version)."""
    if status.version is None and status.name == "vllm":
        return False
    return status.name == "vllm-cpu" or "+cpu" in (status.version or "")


def _is_mamba_hybrid(config: Mapping[str, Any]) -> bool:
    """Whether a checkpoint config declares a Mamba hybrid (NemotronH: ``M`` layers)."""
    pattern = config.get("hybrid_override_pattern")
    return config.get("model_type") == "nemotron_h" or (isinstance(pattern, str) and "M" in pattern)


def probe_torch() -> TorchStatus:
    """torch's version, its CUDA build, and whether ``torch.cuda.is_available()``."""
    if importlib.util.find_spec("torch") is None:
        return TorchStatus(None, None, False, "torch is not installed")
    try:
        import torch

        available = bool(torch.cuda.is_available())
        cuda = torch.version.cuda
    except Exception as exc:  # noqa: BLE001 - a broken torch/driver is reported, not raised
        return TorchStatus(_version("torch"), None, False, f"torch does not import: {exc}")
    detail = f"CUDA {cuda} available" if available else f"CUDA not available (torch built for CUDA {cuda})"
    return TorchStatus(str(torch.__version__), cuda, available, detail)


def probe_gpus(environ: Mapping[str, str]) -> tuple[tuple[GpuInfo, ...], str]:
    """GPUs from nvidia-smi on ``environ``'s PATH, else from torch.cuda; memory a driver
    reports as N/A (unified memory, e.g. DGX Spark) is taken from torch when it can."""
    executable = shutil.which("nvidia-smi", path=environ.get("PATH"))
    gpus: tuple[GpuInfo, ...] = ()
    source = "nvidia-smi not found"
    if executable:
        try:
            result = subprocess.run(
                [executable, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=_NVIDIA_SMI_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            source = f"nvidia-smi failed: {exc}"
        else:
            if result.returncode == 0:
                gpus, source = parse_nvidia_smi(result.stdout), "nvidia-smi"
            else:
                source = f"nvidia-smi failed: {(result.stderr or result.stdout).strip()[:200]}"
    torch_gpus = _torch_gpus() if not gpus or any(gpu.memory_total_bytes is None for gpu in gpus) else ()
    if not gpus and torch_gpus:
        return torch_gpus, "torch.cuda"
    if torch_gpus:
        by_index = {gpu.index: gpu for gpu in torch_gpus}
        gpus = tuple(
            replace(gpu, memory_total_bytes=by_index[gpu.index].memory_total_bytes)
            if gpu.memory_total_bytes is None and gpu.index in by_index
            else gpu
            for gpu in gpus
        )
        source += " + torch.cuda"
    return gpus, source


def parse_nvidia_smi(text: str) -> tuple[GpuInfo, ...]:
    """Parse ``--query-gpu=index,name,memory.total --format=csv,noheader,nounits`` output
    (memory in MiB; "[N/A]" or "Not Supported" becomes None)."""
    gpus = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        index, name, memory = int(fields[0]), ",".join(fields[1:-1]), fields[-1]
        memory_bytes = int(float(memory) * 1024**2) if memory.replace(".", "", 1).isdigit() else None
        gpus.append(GpuInfo(index=index, name=name, memory_total_bytes=memory_bytes))
    return tuple(sorted(gpus, key=lambda gpu: gpu.index))


def _torch_gpus() -> tuple[GpuInfo, ...]:
    if importlib.util.find_spec("torch") is None:
        return ()
    try:
        import torch

        if not torch.cuda.is_available():
            return ()
        return tuple(
            GpuInfo(index, torch.cuda.get_device_name(index), int(torch.cuda.get_device_properties(index).total_memory))
            for index in range(torch.cuda.device_count())
        )
    except Exception:  # noqa: BLE001 - torch without a working driver: report no GPU rather than fail
        return ()


def _find_checkpoint(model: str | None, cache_dir: Path | None) -> tuple[Checkpoint | None, str]:
    if model is not None:
        try:
            checkpoint = load_checkpoint(model, cache_dir=cache_dir)
        except AuditorError as exc:
            return None, str(exc)
        return checkpoint, f"{model} found"
    for model_id in KNOWN_MODEL_IDS:
        try:
            checkpoint = load_checkpoint(model_id, cache_dir=cache_dir)
        except AuditorError:
            continue
        return checkpoint, f"{model_id} found in the local Hugging Face cache"
    return None, f"no --model given and none of {', '.join(KNOWN_MODEL_IDS)} is in the local Hugging Face cache"


def checkpoint_status(checkpoint: Checkpoint, vllm_status: PackageStatus) -> CheckpointStatus:
    """What the checkpoint carries: precision, tokenizer files, chat template, and whether
    the reasoning parser auditor asks vllm for is registered."""
    directory = checkpoint.directory or checkpoint.config_path.parent
    detected = detect_precision(checkpoint.config, model_name=checkpoint.name, quant_config=checkpoint.quant_config)
    files = tuple(name for name in TOKENIZER_FILES if (directory / name).is_file())
    exact = "tokenizer.json" in files
    tokenizer_source = (
        f"{directory / 'tokenizer.json'} (exact token counts)"
        if exact
        else "no tokenizer.json in the checkpoint: token counts would be estimates"
    )
    available, parser_detail = reasoning_parser_status(vllm_status)
    return CheckpointStatus(
        path=str(directory),
        model_id=checkpoint.model_id,
        precision=None if detected.precision is None else detected.precision.value,
        precision_source=detected.source,
        tokenizer_files=files,
        tokenizer_source=tokenizer_source,
        tokenizer_exact=exact,
        chat_template=_chat_template(directory),
        reasoning_parser=parser_detail,
        reasoning_parser_available=available,
        weight_files=_weight_files(directory),
    )


def _weight_files(directory: Path) -> int:
    """How many weight files (``WEIGHT_SUFFIXES``) ``directory`` holds at its top."""
    try:
        return sum(1 for entry in directory.iterdir() if entry.name.endswith(WEIGHT_SUFFIXES) and entry.is_file())
    except OSError:
        return 0


def _chat_template(directory: Path) -> str | None:
    if (directory / "chat_template.jinja").is_file():
        return "chat_template.jinja"
    config_path = directory / "tokenizer_config.json"
    if config_path.is_file():
        try:
            if json.loads(config_path.read_text(encoding="utf-8")).get("chat_template"):
                return "tokenizer_config.json chat_template"
        except (OSError, ValueError, AttributeError):
            return None
    return None


def reasoning_parser_status(vllm_status: PackageStatus) -> tuple[bool, str]:
    """Whether vllm has the ``nemotron_v3`` reasoning parser registered, in words."""
    if not vllm_status.importable:
        return False, f"{REASONING_PARSER}: unavailable ({vllm_status.detail})"
    try:
        from vllm.reasoning import ReasoningParserManager

        names = set(getattr(ReasoningParserManager, "reasoning_parsers", {}))
        names |= set(getattr(ReasoningParserManager, "lazy_parsers", {}))
    except Exception as exc:  # noqa: BLE001 - any vllm-internal failure means "not available"
        return False, f"{REASONING_PARSER}: cannot read vllm's reasoning parsers ({exc})"
    if REASONING_PARSER in names:
        return True, f"{REASONING_PARSER}: registered in vllm {vllm_status.version}"
    return False, f"{REASONING_PARSER}: not registered in vllm {vllm_status.version}"


def _plan_for_machine(checkpoint: Checkpoint, gpu_memory_bytes: int | None, notes: list[str]) -> MemoryPlan:
    """Plan the checkpoint's default window on the first GPU; when it does not fit, plan the
    largest window that does (rounded down to a multiple of 1024)."""
    gpu_memory_gib = None if gpu_memory_bytes is None else gpu_memory_bytes / GIB
    plan = plan_memory(checkpoint, PlanRequest(gpu_memory_gib=gpu_memory_gib))
    if plan.fit is not None and not plan.fit.fits and plan.fit.max_model_len >= _WINDOW_ROUNDING:
        window = plan.fit.max_model_len // _WINDOW_ROUNDING * _WINDOW_ROUNDING
        notes.append(f"the default window does not fit this GPU; planned max_model_len {window} instead")
        plan = plan_memory(checkpoint, PlanRequest(gpu_memory_gib=gpu_memory_gib, max_model_len=window))
    return plan


def report_to_dict(report: DoctorReport) -> dict[str, Any]:
    """The report as plain JSON-ready data; ``engine_args`` is exactly the vllm.LLM kwargs."""
    data = asdict(report)
    data["plan"] = None if report.plan is None else plan_to_dict(report.plan)
    data["notes"] = list(report.notes)
    return data
