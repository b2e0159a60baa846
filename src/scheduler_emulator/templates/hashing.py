"""``uniqueString()`` and ``guid()`` exactly as ARM computes them.

uniqueString: the arguments joined with ``-``, UTF-8, hashed with the 64-bit Murmur variant of ARM's
expression engine (two 32-bit lanes, seed 0, the constants below), the 64 bits written as 13 base32
characters (``a-z2-7``), most significant first. guid: an RFC 4122 version-5 UUID of the arguments joined
with ``-`` in the namespace ``11fb06fb-712d-4ddd-98c7-e71bbd588830``. Known input→output pairs are in
tests/templates/test_functions.py with their sources."""

from __future__ import annotations

import uuid

ARM_GUID_NAMESPACE = uuid.UUID("11fb06fb-712d-4ddd-98c7-e71bbd588830")
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
_MASK = 0xFFFFFFFF
_C1, _C2 = 0xAB0E9789, 0x239B961B  # 2869860233, 597399067
_F1, _F2 = 0x85EBCA6B, 0xC2B2AE35


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def _word(data: bytes, start: int, count: int) -> int:
    return int.from_bytes(data[start : start + count], "little")


def _mix(value: int) -> int:
    value ^= value >> 16
    value = (value * _F1) & _MASK
    value ^= value >> 13
    value = (value * _F2) & _MASK
    return value ^ (value >> 16)


def murmur64(data: bytes) -> int:
    """ARM's 64-bit Murmur variant of ``data`` (seed 0)."""
    length = len(data)
    h1 = h2 = 0
    index = 0
    while index + 7 < length:
        k1 = (_rotl((_word(data, index, 4) * _C2) & _MASK, 15) * _C1) & _MASK
        k2 = (_rotl((_word(data, index + 4, 4) * _C1) & _MASK, 17) * _C2) & _MASK
        h1 = (_rotl(h1 ^ k1, 19) + h2) & _MASK
        h1 = (h1 * 5 + 0x561CCD1B) & _MASK
        h2 = (_rotl(h2 ^ k2, 13) + h1) & _MASK
        h2 = (h2 * 5 + 0x0BCAA747) & _MASK
        index += 8
    tail = length - index
    if tail > 0:
        k1 = (_rotl((_word(data, index, min(tail, 4)) * _C2) & _MASK, 15) * _C1) & _MASK
        h1 ^= k1
        if tail > 4:
            k2 = (_rotl((_word(data, index + 4, tail - 4) * _C1) & _MASK, 17) * _C2) & _MASK
            h2 ^= k2
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1, h2 = _mix(h1), _mix(h2)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    return (h2 << 32) | h1


def unique_string(*values: str) -> str:
    """ARM's ``uniqueString(values...)``: 13 characters of ``a-z2-7``."""
    value = murmur64("-".join(values).encode("utf-8"))
    # 13 × 5 = 65 bits: the last character takes the low 4 bits and a 0.
    return "".join(_BASE32[((value << (5 * i)) & 0xFFFFFFFFFFFFFFFF) >> 59] for i in range(13))


def arm_guid(*values: str) -> str:
    """ARM's ``guid(values...)``."""
    return str(uuid.uuid5(ARM_GUID_NAMESPACE, "-".join(values)))
