"""Time: how long one request takes on a device, from shipped measurements.

Input: a device profile (``device_profiles.json`` next to this module: measured TTFT,
decode rate and end-to-end times of one model on one device at one weight precision, with
their source; or such a profile scaled to another device or precision by datasheet ratios,
marked as an estimate), a prompt length and an output length. Output: a ``TimeEstimate`` (seconds to first token, of
decoding, and their sum). The curves and their extrapolation are documented in docs/plan.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

from auditor import defaults
from auditor.errors import UsageError
from auditor.planning.checkpoint import PlanError



@dataclass(frozen=True)
class CurvePoint:
    """One measured value at a prompt length."""

    prompt_tokens: int
    value: float


@dataclass(frozen=True)
class EndToEndPoint:
    """One measured end-to-end request time; ``output_tokens`` None when not recorded."""

    prompt_tokens: int
    output_tokens: int | None
    seconds: float


@dataclass(frozen=True)
class DeviceProfile:
    """Measured single-request speed of one model on one device, with its source."""

    name: str
    device: str
    model: str
    engine: str
    source: str
    ttft: tuple[CurvePoint, ...]
    decode: tuple[CurvePoint, ...]
    end_to_end: tuple[EndToEndPoint, ...]
    reported_prefill_tokens_per_s: tuple[CurvePoint, ...]
    precision: str  # the weight precision measured (or estimated) at: "fp8" or "bf16"
    scaled_from: str | None = None  # the measured profile an estimate was scaled from

    @property
    def measured(self) -> bool:
        """Whether the numbers were measured on this device (else scaled: an estimate)."""
        return self.scaled_from is None


@dataclass(frozen=True)
class TimeEstimate:
    """Seconds to first token, seconds of decoding, and their sum, for one request."""

    ttft_s: float
    decode_s: float
    total_s: float
    profile: str


def load_device_profiles() -> dict[str, DeviceProfile]:
    """The shipped device profiles (auditor/data/device_profiles.json), by name, sorted."""
    text = resources.files("auditor.planning").joinpath("device_profiles.json").read_text(encoding="utf-8")
    data = json.loads(text)
    profiles: dict[str, DeviceProfile] = {}
    entries = data["profiles"]
    for entry in (item for item in entries if "scaled_from" not in item):
        profiles[entry["name"]] = DeviceProfile(
            name=entry["name"],
            device=entry["device"],
            model=entry["model"],
            engine=entry["engine"],
            source=entry["source"],
            ttft=_curve(entry["ttft"], "seconds"),
            decode=_curve(entry["decode"], "tokens_per_s"),
            end_to_end=tuple(
                EndToEndPoint(int(item["prompt_tokens"]), item["output_tokens"], float(item["seconds"]))
                for item in entry.get("end_to_end", [])
            ),
            reported_prefill_tokens_per_s=_curve(entry.get("reported_prefill_tokens_per_s", []), "tokens_per_s"),
            precision=entry["precision"],
        )
    for entry in (item for item in entries if "scaled_from" in item):
        profiles[entry["name"]] = _scaled(profiles[entry["scaled_from"]], entry)
    return dict(sorted(profiles.items()))


def _scaled(base: DeviceProfile, entry: dict[str, Any]) -> DeviceProfile:
    """``base`` scaled to another device or precision: prefill ``prefill_scale`` times as
    fast (TTFT and end-to-end times divided by it), decode ``decode_scale`` times as fast."""
    prefill, decode = float(entry["prefill_scale"]), float(entry["decode_scale"])
    if prefill <= 0 or decode <= 0:
        raise PlanError(f"device profile {entry['name']!r} needs positive scales")
    return DeviceProfile(
        name=entry["name"],
        device=entry["device"],
        model=entry["model"],
        engine=entry["engine"],
        source=entry["source"],
        ttft=tuple(CurvePoint(point.prompt_tokens, point.value / prefill) for point in base.ttft),
        decode=tuple(CurvePoint(point.prompt_tokens, point.value * decode) for point in base.decode),
        end_to_end=tuple(
            EndToEndPoint(point.prompt_tokens, point.output_tokens, point.seconds / prefill) for point in base.end_to_end
        ),
        reported_prefill_tokens_per_s=tuple(
            CurvePoint(point.prompt_tokens, point.value * prefill) for point in base.reported_prefill_tokens_per_s
        ),
        precision=entry["precision"],
        scaled_from=base.name,
    )


def _curve(items: list[dict[str, Any]], key: str) -> tuple[CurvePoint, ...]:
    points = tuple(
        sorted(
            (CurvePoint(int(item["prompt_tokens"]), float(item[key])) for item in items), key=lambda p: p.prompt_tokens
        )
    )
    lengths = [point.prompt_tokens for point in points]
    if len(set(lengths)) != len(lengths) or any(point.value <= 0 or point.prompt_tokens <= 0 for point in points):
        raise PlanError(f"device profile curve {key!r} needs distinct positive lengths and positive values")
    return points


def load_device_profile(name: str, precision: str | None = None) -> DeviceProfile:
    """One shipped device profile. A device name (``h200``) takes the profile at
    ``precision`` (``h200-fp8`` for "fp8"), else the name itself (``dgx-spark``, measured at
    FP8), else its FP8 profile; the caller compares ``DeviceProfile.precision`` with its own.
    A usage error (exit 64) lists the known names when there is none."""
    profiles = load_device_profiles()
    for candidate in ((f"{name}-{precision}",) if precision else ()) + (name, f"{name}-fp8"):
        profile = profiles.get(candidate)
        if profile is not None:
            return profile
    devices = sorted({known.rsplit("-", 1)[0] if known.endswith(("-fp8", "-bf16")) else known for known in profiles})
    raise UsageError(f"unknown device profile {name!r}; known devices: {', '.join(devices)} (or a full name: {', '.join(profiles)})")


def _log_log(points: tuple[CurvePoint, ...], length: int) -> float:
    """Piecewise power law through ``points`` (linear on log-log axes), exact at each point;
    beyond the last point the last segment's exponent continues; below the first point the
    first value is kept."""
    if len(points) == 1 or length <= points[0].prompt_tokens:
        return points[0].value
    index = 1
    while index < len(points) - 1 and length > points[index].prompt_tokens:
        index += 1
    low, high = points[index - 1], points[index]
    exponent = math.log(high.value / low.value) / math.log(high.prompt_tokens / low.prompt_tokens)
    return low.value * (length / low.prompt_tokens) ** exponent


def _ttft(points: tuple[CurvePoint, ...], length: int) -> float:
    """TTFT at ``length``: the power law of ``_log_log`` within the measured range; beyond the
    longest measurement, b*n + c*n^2 through the last two points (prefill cost per token
    grows linearly with length as attention's share grows), when b and c come out >= 0."""
    if len(points) >= 2 and length > points[-1].prompt_tokens:
        (n1, t1), (n2, t2) = ((point.prompt_tokens, point.value) for point in points[-2:])
        quadratic = (t2 / n2 - t1 / n1) / (n2 - n1)
        linear = t1 / n1 - quadratic * n1
        if quadratic >= 0 and linear >= 0:
            return linear * length + quadratic * length * length
    return _log_log(points, length)


def decode_tokens_per_s(prompt_tokens: int, profile: DeviceProfile) -> float:
    """Single-stream decode rate after a prompt of this length."""
    return _log_log(profile.decode, prompt_tokens)


def ttft_curve(profile: DeviceProfile) -> tuple[CurvePoint, ...]:
    """The profile's TTFT points plus one per end-to-end point (its time less the decode of
    its recorded output; an unrecorded output counts as none, so the point bounds TTFT
    from above and estimates err slow)."""
    points = {point.prompt_tokens: point for point in profile.ttft}
    for point in profile.end_to_end:
        if point.prompt_tokens in points:
            continue
        decode = (point.output_tokens or 0) / decode_tokens_per_s(point.prompt_tokens, profile)
        points[point.prompt_tokens] = CurvePoint(point.prompt_tokens, point.seconds - decode)
    return tuple(points[length] for length in sorted(points))


def estimate_time(
    prompt_tokens: int, output_tokens: int, profile: DeviceProfile | str = defaults.DEVICE_PROFILE
) -> TimeEstimate:
    """TTFT, decode and end-to-end seconds for one request on ``profile``.

    TTFT follows a piecewise power law through the measured TTFT points (and the end-to-end
    points, see ``ttft_curve``), so it reproduces each measurement at its own length; below
    the shortest measurement the shortest one's TTFT is used (fixed per-request cost
    dominates); beyond the longest it grows as b*n + c*n^2 (see ``_ttft``). Decode takes ``output_tokens`` at the measured rate for this prompt length."""
    if isinstance(profile, str):
        profile = load_device_profile(profile)
    if prompt_tokens < 1 or output_tokens < 0:
        raise UsageError("prompt_tokens must be at least 1 and output_tokens at least 0")
    ttft = _ttft(ttft_curve(profile), prompt_tokens)
    decode = output_tokens / decode_tokens_per_s(prompt_tokens, profile) if output_tokens else 0.0
    return TimeEstimate(ttft_s=ttft, decode_s=decode, total_s=ttft + decode, profile=profile.name)
