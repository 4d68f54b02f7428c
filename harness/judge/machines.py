"""Runs' machines as their fingerprints (`device.*`, harness.run.provenance)
describe them: a short label for a run's devices, and whether two runs ran
on the same machine as far as speed goes, or what differs."""

from __future__ import annotations

# Fingerprint keys that decide how fast a run goes: two runs that agree on
# all of them ran on the same machine, for speed. The host name does not
# decide it; the CPU model and its instruction set do (two hosts that both
# call themselves "AMD EPYC" can be generations apart).
SPEED_FINGERPRINT = ("platform", "device_kind", "device_count", "cpu_model", "cpu_isa")
# The widest vector extensions, widest first: what an instruction set is
# summed up as (x86 flags, then ARM features).
SIMD_LEVELS = ("avx512", "avx2", "avx", "sse4_2", "sse4_1", "ssse3", "sse3", "sse2", "sve2", "sve", "asimd")
# At most this many flags are named where two instruction sets differ in flags alone.
MOST_FLAGS = 3


def device_label(fingerprint: dict[str, str]) -> str:
    """`1x cpu (AMD EPYC, avx2) on vm`, `8x TPU v4 on host`: a CPU named by
    its model and widest vector extension, where the fingerprint has them
    (two chips that both call themselves "AMD EPYC" can be generations apart)."""
    count = fingerprint.get("device_count", "?")
    kind = fingerprint.get("device_kind", "?")
    if fingerprint.get("platform") == "cpu":
        kind = f"cpu ({cpu_name(fingerprint)})"
    return f"{count}x {kind} on {fingerprint.get('host', '?')}"


def cpu_name(fingerprint: dict[str, str]) -> str:
    """`AMD EPYC, avx2`: a CPU's model and widest vector extension, the model
    alone where the instruction set is not recorded."""
    model = fingerprint.get("cpu_model") or fingerprint.get("cpu", "?")
    level = simd_level(fingerprint.get("cpu_isa", ""))
    return model if level == "?" else f"{model}, {level}"


def same_machine(reference: dict[str, str], reproduction: dict[str, str]) -> str:
    """`same machine` where two fingerprints agree on every key of
    `SPEED_FINGERPRINT`, else `another machine: ` and what differs, e.g.
    `another machine: cpu_isa avx2 -> avx512`. A key either lacks is a
    difference: nothing says the machines agree on it."""
    differences = machine_differences(reference, reproduction)
    return "same machine" if not differences else f"another machine: {', '.join(differences)}"


def machine_differences(reference: dict[str, str], reproduction: dict[str, str]) -> list[str]:
    """`key old -> new` for each key of `SPEED_FINGERPRINT` the two
    fingerprints do not agree on; the platform only where the device kind
    says nothing more, the instruction set only where the CPU model agrees."""
    differences = []
    for key in SPEED_FINGERPRINT:
        ref, new = reference.get(key), reproduction.get(key)
        if ref is not None and ref == new:
            continue
        if key == "platform" and reference.get("device_kind") != reproduction.get("device_kind"):
            continue
        if key == "cpu_isa" and reference.get("cpu_model") != reproduction.get("cpu_model"):
            continue
        if ref is None and new is None:
            differences.append(f"{key} not recorded")
        elif key == "cpu_isa" and ref is not None and new is not None:
            differences.append(f"{key} {isa_change(ref, new)}")
        elif key == "cpu_isa":
            differences.append(f"{key} {simd_level(ref or '')} -> {simd_level(new or '')}")
        else:
            differences.append(f"{key} {ref or '?'} -> {new or '?'}")
    return differences


def isa_change(reference: str, reproduction: str) -> str:
    """Two different instruction sets (provenance.cpu_isa: `AuthenticAMD
    family 25 model 1: avx avx2 ...`) in few words: their widest vector
    extensions where those differ (`avx2 -> avx512`), else the chips
    (`family 25 model 1 -> family 25 model 17`), else the flags one has and
    the other lacks (`+vaes -sha_ni`)."""
    ref_level, new_level = simd_level(reference), simd_level(reproduction)
    if ref_level != new_level:
        return f"{ref_level} -> {new_level}"
    ref_chip, _, ref_flags = reference.partition(":")
    new_chip, _, new_flags = reproduction.partition(":")
    if ref_chip != new_chip:
        return f"{_chip(ref_chip)} -> {_chip(new_chip)}"
    old, new = set(ref_flags.split()), set(new_flags.split())
    changes = [f"+{flag}" for flag in sorted(new - old)] + [f"-{flag}" for flag in sorted(old - new)]
    if not changes:
        return "differs"
    return " ".join(changes[:MOST_FLAGS]) + (" ..." if len(changes) > MOST_FLAGS else "")


def simd_level(isa: str) -> str:
    """The widest vector extension of an instruction set, or `?`."""
    flags = set(isa.partition(":")[2].split())
    for level in SIMD_LEVELS:
        if level in flags or (level == "avx512" and any(flag.startswith(level) for flag in flags)):
            return level
    return "?"


def _chip(chip: str) -> str:
    """`AuthenticAMD family 25 model 1` without the vendor's name."""
    words = chip.split()
    return " ".join(words[1:]) if len(words) > 1 and words[1] == "family" else chip.strip()
