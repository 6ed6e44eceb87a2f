"""Server-sent events framing: bytes as they arrive -> complete ``data`` payloads. Pure.

Generic: what a payload means is the provider's business (``Provider.new_stream``).
Blank lines end events and ``:`` lines are comments (pings); other fields are ignored
unless the caller names them (``fields``), for servers that send payloads under their own.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

NO_FIELDS: Mapping[str, Callable[[str], str]] = MappingProxyType({})


def iter_sse_data(buffer: bytearray, chunk: bytes, fields: Mapping[str, Callable[[str], str]] = NO_FIELDS) -> list[str]:
    """Append ``chunk`` and return the complete ``data:`` payloads; leftovers stay buffered.

    ``fields`` maps a non-standard field name to how its value becomes a payload, so a
    server's own way of saying something (llama.cpp's ``error:``) is not silently lost.
    """
    buffer.extend(chunk)
    out: list[str] = []
    while True:
        nl = buffer.find(b"\n")
        if nl < 0:
            return out
        raw = bytes(buffer[:nl]).rstrip(b"\r")
        del buffer[: nl + 1]
        payload = _payload(raw, fields)
        if payload is not None:
            out.append(payload)


def _payload(raw: bytes, fields: Mapping[str, Callable[[str], str]]) -> str | None:
    if raw.startswith(b"data:"):
        return raw[5:].lstrip(b" ").decode("utf-8", "replace")
    name, colon, value = raw.partition(b":")
    translate = fields.get(name.decode("utf-8", "replace")) if colon and name else None
    return translate(value.strip().decode("utf-8", "replace")) if translate else None


def flush_sse(buffer: bytearray) -> list[str]:
    """A last ``data:`` line with no trailing newline (some servers end ``[DONE]`` that way)."""
    raw = bytes(buffer).strip()
    buffer.clear()
    return [raw[5:].lstrip(b" ").decode("utf-8", "replace")] if raw.startswith(b"data:") else []
